"""Certificates for the HTTP TLS tests, made in the test: a CA, and certificates it signs with
the subject alt names a test needs (DNS, URI such as a SPIFFE ID, IP, email)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@attrs.frozen
class Issued:
    """A certificate's and its key's PEM files."""

    cert: Path
    key: Path


@attrs.frozen
class Authority:
    """A CA: its certificate file, and what signs."""

    cert: Path
    name: x509.Name
    key: ec.EllipticCurvePrivateKey = attrs.field(repr=False)

    def issue(self, directory: Path, label: str, sans: list[x509.GeneralName]) -> Issued:
        """A leaf certificate with ``sans`` (none: no SAN extension), written as
        ``label.pem``/``label.key``."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _builder(_name(f"xdsclient {label}"), self.name, key)
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        issued = Issued(directory / f"{label}.pem", directory / f"{label}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return issued


def authority(directory: Path, label: str = "ca") -> Authority:
    """A new CA, its certificate written as ``label.pem``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(f"xdsclient test {label}")
    cert = (
        _builder(name, name, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"{label}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Authority(path, name, key)


def dns(name: str) -> x509.GeneralName:
    return x509.DNSName(name)


def uri(value: str) -> x509.GeneralName:
    return x509.UniformResourceIdentifier(value)


def ip(value: str) -> x509.GeneralName:
    return x509.IPAddress(ipaddress.ip_address(value))


def email(value: str) -> x509.GeneralName:
    return x509.RFC822Name(value)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
    )
