"""Certificates made on the fly for TLS tests: a CA, a server cert for 127.0.0.1, a client cert."""

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
class Pem:
    cert: bytes
    key: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _builder(subject: str, issuer: str, public_key: object) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(public_key)  # type: ignore[arg-type]
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
    )


def make_pki(directory: Path) -> dict[str, Path]:
    """Write ca.pem, server.pem/server.key (127.0.0.1, localhost), client.pem/client.key."""
    ca_key = _key()
    ca_cert = (
        _builder("xdsclient test CA", "xdsclient test CA", ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    files = {"ca": directory / "ca.pem"}
    files["ca"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    for role in ("server", "client"):
        key = _key()
        builder = _builder(f"xdsclient test {role}", "xdsclient test CA", key.public_key())
        if role == "server":
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        cert = builder.sign(ca_key, hashes.SHA256())
        files[role] = directory / f"{role}.pem"
        files[f"{role}_key"] = directory / f"{role}.key"
        files[role].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files[f"{role}_key"].write_bytes(_pem_key(key))
    return files
