"""A cluster's ``UpstreamTlsContext`` as a policy both front ends follow, and the certificates of
the bootstrap's certificate providers (gRFC A29; Envoy's upstream TLS).

Why shared: the gRPC channel and the httpx transport read a cluster the same way (which provider
instances, which subject alt names, which SNI) and take certificates from the same providers, so
they hold one `TlsPolicy` per cluster and one `CertificateStore` per client. What differs is what
each can enforce: grpcio verifies one exact name, Python's ``ssl`` hands over the peer
certificate so every matcher can be checked. Each front end gives `ClusterSecurity` a ``check``
naming what it cannot enforce; such a cluster is refused, never left unchecked.

The policy is decided once per cluster resource; the certificates (`Certificates`, PEM bytes)
change when the provider's files are rotated. `CertificateStore` takes ``now`` and never reads a
clock: an instance's files are read again once its refresh interval has passed, and a failed
read keeps the last good certificates, as gRPC's file watcher does.

Subject alt names follow Envoy (``CertificateValidationContext``): when
``match_typed_subject_alt_names`` has entries they alone are used, each against its SAN type;
otherwise each ``match_subject_alt_names`` entry is tried against the DNS, URI, email and IP
SANs. An ``exact`` matcher against a DNS SAN follows DNS rules (case-insensitive, a wildcard in
the certificate's left-most label).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from .. import ClusterConfig, XdsError
from .._settings._certificates import CertificateProviderConfig
from ..resources import ClusterView
from ..resources._regex import Regex, RegexError, compile_regex

__all__ = [
    "SAN_TYPES",
    "CertificateStore",
    "Certificates",
    "ClusterSecurity",
    "SanMatcher",
    "TlsError",
    "TlsPolicy",
    "dns_name_match",
    "tls_policy",
]

logger = logging.getLogger("xdsclient.tls")

#: the SAN types an untyped ``match_subject_alt_names`` entry is tried against (Envoy's list)
SAN_TYPES = ("DNS", "URI", "EMAIL", "IP_ADDRESS")
_HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


class TlsError(XdsError):
    """A cluster's TLS cannot be set up as it asks, or a server failed its checks; the message
    says why."""


@attrs.frozen(kw_only=True)
class SanMatcher:
    """One subject-alt-name matcher: its kind (exact, prefix, suffix, contains, safe_regex), its
    string, ``ignore_case``, and for a typed matcher its SAN type (DNS, URI, EMAIL, IP_ADDRESS,
    OTHER_NAME; "" for an untyped one) and OID."""

    kind: str
    value: str
    ignore_case: bool = False
    san_type: str = ""
    oid: str = ""

    def __str__(self) -> str:
        where = f"{self.san_type} " if self.san_type else ""
        case = " ignore_case" if self.ignore_case else ""
        return f"{where}{self.kind}{case} {self.value!r}"

    def matches(self, san_type: str, value: str) -> bool:
        """Whether the SAN ``value`` of type ``san_type`` (one of `SAN_TYPES`) satisfies this
        matcher, by Envoy's rules."""
        if san_type != self.san_type and (self.san_type or san_type not in SAN_TYPES):
            return False
        if san_type == "DNS" and self.kind == "exact":
            return dns_name_match(self.value, value)
        if self.kind == "safe_regex":
            return _regex(self.value).fullmatch(value) is not None
        want, have = self.value, value
        if self.ignore_case:
            want, have = want.lower(), have.lower()
        if self.kind == "exact":
            return have == want
        if self.kind == "prefix":
            return have.startswith(want)
        if self.kind == "suffix":
            return have.endswith(want)
        if self.kind == "contains":
            return want in have
        return False

    def why_invalid(self) -> str | None:
        """Why this matcher cannot be used at all (an unknown kind, a pattern RE2 rejects)."""
        if self.kind not in ("exact", "prefix", "suffix", "contains", "safe_regex"):
            return f"subject alt name matcher without a pattern: {self}"
        if self.kind == "safe_regex":
            try:
                _regex(self.value)
            except RegexError as error:
                return f"subject alt name matcher {self}: {error}"
        return None


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> Regex:
    return compile_regex(pattern)


def dns_name_match(name: str, pattern: str) -> bool:
    """Whether the DNS ``name`` a matcher wants is the certificate's DNS SAN ``pattern``: equal
    ignoring case, or ``pattern``'s left-most label (not an A-label) holds one ``*`` standing
    for part of ``name``'s first label, the rest equal (Envoy's ``dnsNameMatch``)."""
    name, pattern = name.lower(), pattern.lower()
    if name == pattern:
        return True
    name_label, _, name_rest = name.partition(".")
    label, _, rest = pattern.partition(".")
    if not name_rest or not rest or "*" not in label or "*" in rest or label.startswith("xn--"):
        return False
    if name_rest != rest:
        return False
    if label == "*":
        return True
    if label.count("*") != 1:
        return False
    head, tail = label.split("*")
    return (
        len(label) <= len(name_label) + 1
        and name_label.startswith(head)
        and (name_label.endswith(tail))
    )


@attrs.frozen(kw_only=True)
class TlsPolicy:
    """What a cluster's ``UpstreamTlsContext`` asks for: the CA provider instance (or the
    system roots), the identity provider instance ("" for none: TLS, not mTLS), the SAN
    matchers, SNI and ALPN."""

    ca_instance: str = ""
    system_roots: bool = False
    identity_instance: str = ""
    #: ``match_subject_alt_names`` (untyped: each is tried against every type of `SAN_TYPES`)
    san_matchers: tuple[SanMatcher, ...] = ()
    #: ``match_typed_subject_alt_names``: when there are any, the untyped ones are ignored
    typed_san_matchers: tuple[SanMatcher, ...] = ()
    #: the server name sent in the handshake ("" for none)
    sni: str = ""
    #: Envoy's ``auto_sni``/``auto_host_sni``: the request's host is the SNI (`for_host`)
    auto_sni: bool = False
    #: Envoy's ``auto_san_validation``: the certificate must carry the request's host
    auto_san_validation: bool = False
    #: set by `for_host`: the DNS name the certificate must carry instead of the matchers
    verify_host: str = ""
    #: ``common_tls_context.alpn_protocols`` (empty: what the front end speaks)
    alpn_protocols: tuple[str, ...] = ()
    #: ``tls_params``: "TLSv1_0" ... "TLSv1_3", "" for the default
    min_version: str = ""
    max_version: str = ""

    def matchers(self) -> tuple[SanMatcher, ...]:
        """The matchers Envoy checks: the typed ones when there are any, else the untyped."""
        return self.typed_san_matchers or self.san_matchers

    def for_host(self, host: str) -> TlsPolicy:
        """The policy of a request to ``host`` (no port): its SNI under ``auto_sni``, the name
        to verify under ``auto_san_validation``; the policy itself otherwise."""
        if not (self.auto_sni or self.auto_san_validation) or not host:
            return self
        return attrs.evolve(
            self,
            sni=host if self.auto_sni else self.sni,
            verify_host=host if self.auto_san_validation else self.verify_host,
        )


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
    auto_sni, auto_san = _auto_sni(message)
    params = common.tls_params
    return TlsPolicy(
        ca_instance=ca,
        system_roots=not ca and validation.HasField("system_root_certs"),
        identity_instance=identity,
        san_matchers=tuple(_matcher(m) for m in validation.match_subject_alt_names),
        typed_san_matchers=tuple(_typed(m) for m in validation.match_typed_subject_alt_names),
        sni=context.sni,
        auto_sni=context.auto_host_sni or auto_sni,
        auto_san_validation=context.auto_sni_san_validation or auto_san,
        alpn_protocols=tuple(common.alpn_protocols),
        min_version=_version(params.tls_minimum_protocol_version),
        max_version=_version(params.tls_maximum_protocol_version),
    )


def _auto_sni(cluster: Any) -> tuple[bool, bool]:
    """``auto_sni`` and ``auto_san_validation`` of the cluster's upstream HTTP protocol
    options (the typed extension, else the deprecated field)."""
    options = cluster.upstream_http_protocol_options
    typed = cluster.typed_extension_protocol_options
    if _HTTP_OPTIONS in typed:
        from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2

        extension = http_protocol_options_pb2.HttpProtocolOptions()
        if typed[_HTTP_OPTIONS].Unpack(extension):
            options = extension.upstream_http_protocol_options
    return options.auto_sni, options.auto_san_validation


def _version(value: int) -> str:
    from envoy.extensions.transport_sockets.tls.v3 import common_pb2

    name: str = common_pb2.TlsParameters.TlsProtocol.Name(value)
    return "" if name == "TLS_AUTO" else name


def _matcher(message: Any, **typed: str) -> SanMatcher:
    kind: str = message.WhichOneof("match_pattern") or ""
    pattern: Any = getattr(message, kind) if kind else ""
    value: str = pattern.regex if kind == "safe_regex" else pattern
    return SanMatcher(kind=kind, value=value, ignore_case=message.ignore_case, **typed)


def _typed(message: Any) -> SanMatcher:
    from envoy.extensions.transport_sockets.tls.v3 import common_pb2

    san_type = common_pb2.SubjectAltNameMatcher.SanType.Name(message.san_type)
    return _matcher(message.matcher, san_type=san_type, oid=message.oid)


@attrs.frozen(kw_only=True)
class Certificates:
    """One generation of the certificates a policy uses: PEM roots (None: the system's), the
    identity's key and chain (None: no client certificate)."""

    root: bytes | None = attrs.field(default=None, repr=False)
    key: bytes | None = attrs.field(default=None, repr=False)
    chain: bytes | None = attrs.field(default=None, repr=False)


@attrs.define
class _Files:
    """One provider instance's last good read and when it is read next."""

    next_read: float
    ca: bytes | None = None
    chain: bytes | None = None
    key: bytes | None = None
    loaded: bool = False


class CertificateStore:
    """The bootstrap's provider instances and their current certificates (time passed in; see
    the module's docstring)."""

    def __init__(
        self,
        providers: Mapping[str, CertificateProviderConfig],
        read: Callable[[str], bytes] = lambda path: Path(path).read_bytes(),
    ) -> None:
        self._providers = dict(providers)
        self._read = read
        self._files: dict[str, _Files] = {}

    def certificates(self, policy: TlsPolicy, now: float) -> Certificates:
        """The certificates a new connection for ``policy`` uses at ``now``; `TlsError` when
        the policy names an instance the bootstrap lacks or one without what it is used for."""
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
        return Certificates(root=root, key=key, chain=chain)

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


#: a front end's refusal of a policy it cannot enforce: why, or None when it can
Check = Callable[[TlsPolicy], "str | None"]


class ClusterSecurity:
    """The TLS policies of one snapshot's clusters, and the certificates they use.

    Decided once per snapshot (`update`): each cluster's `TlsPolicy`, each endpoint's (the
    first cluster listing it wins for the connections made before a request picks it), and why
    a cluster's TLS cannot be set up at all: an instance the bootstrap lacks (the client NACKs
    such a cluster, as gRPC does; this guards clusters from a CLUSTER decoder of the user's own,
    whose calls fail with C-core's words for a NACKed cluster), no CA, or what the front end's
    ``check`` refuses.
    """

    def __init__(
        self,
        providers: Mapping[str, CertificateProviderConfig],
        *,
        check: Check | None = None,
        store: CertificateStore | None = None,
    ) -> None:
        self.store = CertificateStore(providers) if store is None else store
        self._providers = providers
        self._check = check
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
        return None if self._check is None else self._check(policy)

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
