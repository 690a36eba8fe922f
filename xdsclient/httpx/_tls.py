"""A cluster's TLS policy as Python ``ssl`` contexts, and its subject-alt-name check after the
handshake (the HTTP front end's half of gRFC A29, following Envoy's upstream TLS).

Why our own contexts rather than httpx's ``verify``: the cluster, not the URL, says what to
trust and what to present. A context trusts the CA provider's roots (or the system's), presents
the identity provider's certificate and key (mTLS), speaks TLS 1.2 or later (the policy's
``tls_params`` may narrow it) and offers the ALPN protocols asked for. ``ssl`` checks the chain
but not the host name (``check_hostname`` off): as in Envoy, the cluster's matchers decide, and
they are checked fully once the handshake is done (`check_peer`), since ``ssl`` hands over the
peer certificate: every matcher kind, ``ignore_case``, DNS, URI (SPIFFE IDs), email and IP SANs.
With no matcher any certificate the roots sign is accepted, as Envoy does.

SNI is not part of a context: the handshake sends the policy's ``sni`` and nothing when it is
empty (Envoy sends no SNI unless configured; the endpoint's address never is).

Contexts are cached per (policy, certificates, ALPN): a rotation of the provider's files gives
connections opened after it a new context, and open ones keep theirs.
"""

from __future__ import annotations

import ipaddress
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._plane._tls_policy import (
    Certificates,
    CertificateStore,
    ClusterSecurity,
    TlsError,
    TlsPolicy,
    dns_name_match,
)
from .._settings._certificates import CertificateProviderConfig

__all__ = [
    "TlsContexts",
    "build_context",
    "check_peer",
    "cluster_security",
    "http_check",
    "peer_sans",
]

_VERSIONS = {
    "TLSv1_0": ssl.TLSVersion.TLSv1,
    "TLSv1_1": ssl.TLSVersion.TLSv1_1,
    "TLSv1_2": ssl.TLSVersion.TLSv1_2,
    "TLSv1_3": ssl.TLSVersion.TLSv1_3,
}
#: Python's names of SAN types (``getpeercert``) -> Envoy's
_SAN_TYPES = {
    "DNS": "DNS",
    "URI": "URI",
    "email": "EMAIL",
    "IP Address": "IP_ADDRESS",
    "othername": "OTHER_NAME",
}


def http_check(policy: TlsPolicy) -> str | None:
    """Why the HTTP front end cannot enforce ``policy`` (a matcher it cannot evaluate), or
    None: the ``check`` of its `ClusterSecurity`."""
    for matcher in policy.matchers():
        if matcher.san_type == "OTHER_NAME":
            return (
                f"subject alt name matcher {matcher} cannot be checked: Python's ssl does not "
                "expose otherName SANs"
            )
        why = matcher.why_invalid()
        if why is not None:
            return why
    return None


def cluster_security(providers: Mapping[str, CertificateProviderConfig]) -> ClusterSecurity:
    """The HTTP front end's `ClusterSecurity`: each snapshot's policies, refusing what
    `http_check` refuses; its ``store`` is what `TlsContexts` takes."""
    return ClusterSecurity(providers, check=http_check)


class TlsContexts:
    """The ``ssl`` contexts of every policy, each made with the certificates current at
    ``clock()`` (the provider's refresh interval decides when rotated files are read)."""

    def __init__(
        self, store: CertificateStore, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.clock = clock
        self._contexts: dict[tuple[TlsPolicy, tuple[str, ...]], tuple[Certificates, Any]] = {}

    def context(self, policy: TlsPolicy, alpn: tuple[str, ...] = ()) -> ssl.SSLContext:
        """The context a new connection under ``policy`` uses now (``alpn``: the protocols
        the front end speaks, unless the policy names its own); `TlsError` when the
        certificates cannot be had."""
        certificates = self.store.certificates(policy, self.clock())
        key = (policy, policy.alpn_protocols or alpn)
        cached = self._contexts.get(key)
        if cached is not None and cached[0] == certificates:
            context: ssl.SSLContext = cached[1]
            return context
        context = build_context(policy, certificates, key[1])
        self._contexts[key] = (certificates, context)
        return context


def build_context(
    policy: TlsPolicy, certificates: Certificates, alpn: tuple[str, ...]
) -> ssl.SSLContext:
    """A client context for ``policy`` with ``certificates`` (see the module's docstring)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # the SAN matchers decide (`check_peer`)
    context.verify_mode = ssl.CERT_REQUIRED
    context.minimum_version = _VERSIONS.get(policy.min_version, ssl.TLSVersion.TLSv1_2)
    if policy.max_version:
        context.maximum_version = _VERSIONS[policy.max_version]
    try:
        if certificates.root is None:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        else:
            context.load_verify_locations(cadata=certificates.root.decode("ascii"))
        if certificates.chain is not None and certificates.key is not None:
            _load_identity(context, certificates.chain, certificates.key)
    except (ssl.SSLError, ValueError) as error:
        raise TlsError(f"the provider's certificates cannot be used: {error}") from None
    if alpn:
        context.set_alpn_protocols(list(alpn))
    return context


def _load_identity(context: ssl.SSLContext, chain: bytes, key: bytes) -> None:
    """``ssl`` loads a certificate and key from files only: write them to a directory only we
    can read, for the time of the load."""
    with tempfile.TemporaryDirectory(prefix="xdsclient-tls-") as directory:
        chain_file, key_file = Path(directory, "chain.pem"), Path(directory, "key.pem")
        chain_file.write_bytes(chain)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key)
        context.load_cert_chain(chain_file, key_file)


def peer_sans(certificate: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The subject alt names of a peer certificate as ``getpeercert()`` gives it, as
    (Envoy's SAN type, value) pairs; IP addresses in their canonical text form."""
    sans = []
    for kind, value in certificate.get("subjectAltName", ()):
        san_type = _SAN_TYPES.get(kind)
        if san_type is None:
            continue
        if san_type == "IP_ADDRESS":
            try:
                value = ipaddress.ip_address(value.strip()).compressed
            except ValueError:
                continue
        sans.append((san_type, value))
    return tuple(sans)


def check_peer(policy: TlsPolicy, ssl_object: Any) -> None:
    """Check the server's certificate (the handshake verified its chain) against the policy's
    subject-alt-name matchers, or against the request's host under ``auto_san_validation``;
    `TlsError` naming the matchers and the SANs seen when none matches."""
    if policy.verify_host:
        wanted = f"the request's host {policy.verify_host!r} (auto_san_validation)"
    elif policy.matchers():
        wanted = "the subject alt name matchers [" + ", ".join(map(str, policy.matchers())) + "]"
    else:
        return
    certificate = ssl_object.getpeercert() if ssl_object is not None else None
    sans = peer_sans(certificate or {})
    if any(_accepts(policy, san_type, value) for san_type, value in sans):
        return
    seen = ", ".join(f"{san_type}:{value}" for san_type, value in sans) or "none"
    raise TlsError(f"the server's certificate matches none of {wanted}; its SANs: {seen}")


def _accepts(policy: TlsPolicy, san_type: str, value: str) -> bool:
    if policy.verify_host:
        if san_type == "DNS":
            return dns_name_match(policy.verify_host, value)
        return value == policy.verify_host
    return any(matcher.matches(san_type, value) for matcher in policy.matchers())
