"""A cluster's ``UpstreamTlsContext`` -> the credentials of its endpoints' channels (gRFC A29).

Why apart from the connections: what a cluster asks for (`TlsPolicy`: which certificate
provider instances, which subject alt names) is decided once per cluster resource, while the
certificates themselves (`Security`: PEM bytes) change when the provider's files are rotated.
A connection is keyed by the policy, and made with the certificates current when it opens: a
rotation reaches every connection opened after the provider's refresh interval has passed, and
leaves open ones alone (their handshake is done), as in gRPC.

What grpcio's Python API can check, and so what is checked (the rest is refused, never
skipped): the server's chain against the CA provider's roots (or the system roots), and the
server's name. grpcio's ``ssl_channel_credentials`` always verifies a name, and takes one: the
name to verify is the cluster's single ``exact`` subject-alt-name matcher when it has one
(through ``grpc.ssl_target_name_override``; grpcio matches it against the DNS and IP SANs,
then the common name), else the endpoint's address. Matchers grpcio cannot enforce (several,
``prefix``, ``suffix``, ``contains``, ``safe_regex``, ``ignore_case``, a URI such as a SPIFFE
ID) make the cluster's calls fail UNAVAILABLE naming the matcher: a TLS policy that would
silently not be checked is refused.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import grpc
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from .. import ClusterConfig
from .._settings._certificates import CertificateProviderConfig
from ..resources import ClusterView

__all__ = ["CertificateStore", "ClusterSecurity", "Security", "TlsError", "TlsPolicy", "tls_policy"]

logger = logging.getLogger("xdsclient.grpc")

#: a DNS name grpcio can verify as a SAN (letters, digits, hyphens, dots, one leading ``*.``)
_DNS_NAME = re.compile(
    r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$"
)


class TlsError(Exception):
    """A cluster's TLS cannot be set up as it asks; the message says why (the call's details)."""


@attrs.frozen(kw_only=True)
class SanMatcher:
    """One ``match_subject_alt_names`` entry: its kind (exact, prefix, suffix, contains,
    safe_regex), its string and ``ignore_case``."""

    kind: str
    value: str
    ignore_case: bool = False


@attrs.frozen(kw_only=True)
class TlsPolicy:
    """What a cluster's ``UpstreamTlsContext`` asks for: the CA provider instance (or the
    system roots), the identity provider instance ("" for none: TLS, not mTLS) and the SAN
    matchers."""

    ca_instance: str = ""
    system_roots: bool = False
    identity_instance: str = ""
    san_matchers: tuple[SanMatcher, ...] = ()

    def target_name(self) -> str | None:
        """The one name grpcio verifies the server's certificate against instead of the
        endpoint's address, or None (no matchers); `TlsError` when the matchers ask for more
        than grpcio can check."""
        if not self.san_matchers:
            return None
        if len(self.san_matchers) > 1:
            raise TlsError(
                f"{len(self.san_matchers)} match_subject_alt_names cannot be checked: grpcio "
                "verifies one name"
            )
        (matcher,) = self.san_matchers
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


def tls_policy(view: ClusterView) -> TlsPolicy | None:
    """The cluster's TLS policy (None: plaintext), read from its ``transport_socket`` with the
    deprecated ``..._certificate_provider_instance`` fields gRPC still reads."""
    if view.upstream_tls is None:
        return None
    from envoy.config.cluster.v3 import cluster_pb2

    message = cluster_pb2.Cluster.FromString(view.raw)
    context = tls_pb2.UpstreamTlsContext()
    message.transport_socket.typed_config.Unpack(context)
    common = context.common_tls_context
    if common.HasField("combined_validation_context"):
        combined = common.combined_validation_context
        validation = combined.default_validation_context
        ca = validation.ca_certificate_provider_instance.instance_name
        if not validation.HasField("ca_certificate_provider_instance"):
            ca = combined.validation_context_certificate_provider_instance.instance_name
    else:
        validation = common.validation_context
        ca = validation.ca_certificate_provider_instance.instance_name
    if common.HasField("tls_certificate_provider_instance"):
        identity = common.tls_certificate_provider_instance.instance_name
    else:
        identity = common.tls_certificate_certificate_provider_instance.instance_name
    return TlsPolicy(
        ca_instance=ca,
        system_roots=not ca and validation.HasField("system_root_certs"),
        identity_instance=identity,
        san_matchers=tuple(_matcher(m) for m in validation.match_subject_alt_names),
    )


def _matcher(message: Any) -> SanMatcher:
    kind: str = message.WhichOneof("match_pattern") or ""
    pattern: Any = getattr(message, kind) if kind else ""
    value: str = pattern.regex if kind == "safe_regex" else pattern
    return SanMatcher(kind=kind, value=value, ignore_case=message.ignore_case)


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


@attrs.define
class _Files:
    """One provider instance's last good read and when it is read next."""

    next_read: float
    ca: bytes | None = None
    chain: bytes | None = None
    key: bytes | None = None
    loaded: bool = False


class CertificateStore:
    """The bootstrap's provider instances and their current certificates.

    Sans-I/O in time: `security` takes ``now`` and re-reads an instance's files when its
    refresh interval has passed since the last read (a failed read keeps the last good
    certificates, as gRPC's file watcher does); it never sleeps or reads a clock.
    """

    def __init__(
        self,
        providers: Mapping[str, CertificateProviderConfig],
        read: Callable[[str], bytes] = lambda path: Path(path).read_bytes(),
    ) -> None:
        self._providers = dict(providers)
        self._read = read
        self._files: dict[str, _Files] = {}

    def security(self, policy: TlsPolicy, now: float) -> Security:
        """The credentials a new channel for ``policy`` uses at ``now``; `TlsError` when the
        policy names an instance the bootstrap lacks, an instance without what it is used for,
        or SAN matchers grpcio cannot check."""
        target = policy.target_name()
        root = None
        if policy.ca_instance:
            root = self._current(policy.ca_instance, now).ca
            if root is None:
                raise TlsError(f"certificate provider {policy.ca_instance!r} has no CA certificate")
        elif not policy.system_roots:
            raise TlsError("no CA certificate provider instance configured")
        key = chain = None
        if policy.identity_instance:
            files = self._current(policy.identity_instance, now)
            if files.chain is None or files.key is None:
                raise TlsError(
                    f"certificate provider {policy.identity_instance!r} has no identity certificate"
                )
            key, chain = files.key, files.chain
        return Security(root=root, key=key, chain=chain, target_name=target)

    def _current(self, name: str, now: float) -> _Files:
        config = self._providers.get(name)
        if config is None:
            raise TlsError(f"unrecognized certificate provider instance name: {name}")
        files = self._files.get(name)
        if files is None:
            files = self._files[name] = _Files(next_read=now)
        if now >= files.next_read:
            files.next_read = now + config.refresh_interval
            self._load(name, config, files)
        if not files.loaded:
            raise TlsError(f"certificate provider {name!r} could not read its files")
        return files

    def _load(self, name: str, config: CertificateProviderConfig, files: _Files) -> None:
        try:
            ca = self._read(config.ca_certificate_file) if config.ca_certificate_file else None
            chain = self._read(config.certificate_file) if config.certificate_file else None
            key = self._read(config.private_key_file) if config.private_key_file else None
        except OSError as exc:
            logger.warning(
                "certificate provider %r: cannot read %s: %s", name, exc.filename, exc.strerror
            )
            return  # the last good certificates stay in use
        files.ca, files.chain, files.key, files.loaded = ca, chain, key, True


class ClusterSecurity:
    """The TLS policies of one snapshot's clusters, and the certificates they use.

    Decided once per snapshot (`update`): each cluster's `TlsPolicy`, each endpoint's (the
    first cluster listing it wins for the connections made before a call picks it), and why a
    cluster's TLS cannot be set up at all: an instance the bootstrap lacks (gRPC NACKs that
    cluster; here its calls fail with C-core's words for a NACKed cluster), no CA, or SAN
    matchers grpcio cannot check.
    """

    def __init__(self, providers: Mapping[str, CertificateProviderConfig]) -> None:
        self.store = CertificateStore(providers)
        self._providers = providers
        self._by_cluster: dict[str, TlsPolicy | None] = {}
        self._by_endpoint: dict[tuple[str, int], TlsPolicy | None] = {}
        self._invalid: dict[str, str] = {}
        #: endpoints only invalid clusters list: never connected (in plaintext or otherwise)
        self._blocked: dict[tuple[str, int], str] = {}

    def update(
        self, clusters: Mapping[str, ClusterConfig]
    ) -> list[tuple[tuple[str, int], TlsPolicy | None]]:
        """Take a snapshot's clusters; the (endpoint, policy) slots it holds."""
        self._by_cluster = {}
        self._by_endpoint = {}
        self._invalid = {}
        self._blocked = {}
        slots = []
        for name, entry in clusters.items():
            if entry.cluster is None:
                continue
            policy = tls_policy(entry.cluster)
            self._by_cluster[name] = policy
            if policy is not None:
                why = self._why_invalid(policy)
                if why is not None:
                    self._invalid[name] = why
            if entry.endpoints is None:
                continue
            for endpoint in entry.endpoints.healthy_endpoints():
                key = (endpoint.address, endpoint.port)
                if name in self._invalid:
                    self._blocked.setdefault(key, f"cluster {name}: {self._invalid[name]}")
                    continue
                self._by_endpoint.setdefault(key, policy)
                slots.append((key, policy))
        return slots

    def _why_invalid(self, policy: TlsPolicy) -> str | None:
        for field, name in (
            ("ca_certificate_provider_instance", policy.ca_instance),
            ("tls_certificate_provider_instance", policy.identity_instance),
        ):
            if name and name not in self._providers:
                return f"{field}: unrecognized certificate provider instance name: {name}"
        if not policy.ca_instance and not policy.system_roots:
            return "no CA certificate provider instance configured"
        try:
            policy.target_name()
        except TlsError as error:
            return str(error)
        return None

    def invalid(self, cluster: str) -> str | None:
        """Why ``cluster``'s TLS cannot be set up, or None."""
        return self._invalid.get(cluster)

    def policy_of_cluster(self, cluster: str) -> TlsPolicy | None:
        """The TLS policy of ``cluster`` (None: plaintext)."""
        return self._by_cluster.get(cluster)

    def policy_of_endpoint(self, key: tuple[str, int]) -> TlsPolicy | None:
        """The TLS policy of the first valid cluster listing ``key`` (None: plaintext);
        `TlsError` when only clusters whose TLS cannot be set up list it."""
        if key not in self._by_endpoint and key in self._blocked:
            raise TlsError(self._blocked[key])
        return self._by_endpoint.get(key)
