"""A cluster's TLS policy -> the credentials of its endpoints' grpc.aio channels (gRFC A29).

The policy, the certificate providers and the per-snapshot bookkeeping are the data plane's
(`xdsclient._plane._tls_policy`, shared with the httpx transport); this module holds what is
grpcio's own: `Security` (credentials and channel options from one generation of certificates)
and what grpcio can check. A connection is keyed by the policy and made with the certificates
current when it opens: a rotation reaches every connection opened after the provider's refresh
interval has passed, and leaves open ones alone (their handshake is done), as in gRPC.

What grpcio's Python API can check, and so what is checked (the rest is refused, never
skipped): the server's chain against the CA provider's roots (or the system roots), and the
server's name. grpcio's ``ssl_channel_credentials`` always verifies a name, and takes one: the
name to verify is the cluster's single ``exact`` subject-alt-name matcher when it has one
(through ``grpc.ssl_target_name_override``; grpcio matches it against the DNS and IP SANs,
then the common name), else the endpoint's address. Matchers grpcio cannot enforce (several,
``prefix``, ``suffix``, ``contains``, ``safe_regex``, ``ignore_case``, a URI such as a SPIFFE
ID) make the cluster's calls fail UNAVAILABLE naming the matcher: a TLS policy that would
silently not be checked is refused. As C-core, only ``match_subject_alt_names`` is read.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

import attrs
import grpc

from .._plane import _tls_policy
from .._plane._tls_policy import SanMatcher, TlsError, TlsPolicy, tls_policy
from .._settings._certificates import CertificateProviderConfig

__all__ = [
    "CertificateStore",
    "ClusterSecurity",
    "SanMatcher",
    "Security",
    "TlsError",
    "TlsPolicy",
    "target_name",
    "tls_policy",
]

#: a DNS name grpcio can verify as a SAN (letters, digits, hyphens, dots, one leading ``*.``)
_DNS_NAME = re.compile(
    r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$"
)


def target_name(policy: TlsPolicy) -> str | None:
    """The one name grpcio verifies the server's certificate against instead of the endpoint's
    address, or None (no matchers); `TlsError` when the matchers ask for more than grpcio can
    check."""
    if not policy.san_matchers:
        return None
    if len(policy.san_matchers) > 1:
        raise TlsError(
            f"{len(policy.san_matchers)} match_subject_alt_names cannot be checked: grpcio "
            "verifies one name"
        )
    (matcher,) = policy.san_matchers
    if matcher.kind != "exact" or matcher.ignore_case:
        kind = matcher.kind + (" with ignore_case" if matcher.ignore_case else "")
        raise TlsError(
            f"match_subject_alt_names {kind} {matcher.value!r} cannot be checked: grpcio "
            "verifies one exact name"
        )
    if not _verifiable(matcher.value):
        raise TlsError(
            f"match_subject_alt_names exact {matcher.value!r} cannot be checked: grpcio "
            "verifies DNS names and IP addresses only"
        )
    return matcher.value


def _verifiable(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return bool(_DNS_NAME.match(name))
    return True


def _check(policy: TlsPolicy) -> str | None:
    try:
        target_name(policy)
    except TlsError as error:
        return str(error)
    return None


@attrs.frozen(kw_only=True)
class Security:
    """The credentials of one channel: PEM roots (None: the system's), the identity's key and
    chain (None: no client certificate) and the name to verify (None: the address)."""

    root: bytes | None = attrs.field(default=None, repr=False)
    key: bytes | None = attrs.field(default=None, repr=False)
    chain: bytes | None = attrs.field(default=None, repr=False)
    target_name: str | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        """grpcio's TLS credentials for a channel (mTLS when an identity is set)."""
        return grpc.ssl_channel_credentials(self.root, self.key, self.chain)

    def options(self) -> tuple[tuple[str, str], ...]:
        """The channel options the name check needs."""
        if self.target_name is None:
            return ()
        return (("grpc.ssl_target_name_override", self.target_name),)


class CertificateStore(_tls_policy.CertificateStore):
    """The bootstrap's provider instances and their current certificates, as grpcio
    credentials (`security`)."""

    def security(self, policy: TlsPolicy, now: float) -> Security:
        """The credentials a new channel for ``policy`` uses at ``now``; `TlsError` when the
        policy names an instance the bootstrap lacks, an instance without what it is used for,
        or SAN matchers grpcio cannot check."""
        target = target_name(policy)
        certificates = self.certificates(policy, now)
        return Security(
            root=certificates.root,
            key=certificates.key,
            chain=certificates.chain,
            target_name=target,
        )


class ClusterSecurity(_tls_policy.ClusterSecurity):
    """The data plane's `ClusterSecurity` with grpcio's refusals and credentials."""

    store: CertificateStore

    def __init__(self, providers: Mapping[str, CertificateProviderConfig]) -> None:
        super().__init__(providers, check=_check, store=CertificateStore(providers))
