"""The RouteConfiguration decoder as it was before it was made lean, kept as the
reference tests/resources/test_route_differential.py compares `xdsclient.resources._route`
against. Only ``RouteConfigurationView.from_proto`` and ``route_fields`` are used; the value
classes are its own copies, compared field by field. Do not "improve" it: it is the
specification by example. It grew the parts Envoy's HTTP router reads (a route's name,
redirect, direct response and request headers, query parameter matchers kept for
`VirtualHost.http_routes`, rewrites, timeouts, HTTP retry conditions and hash policies): the
decoders of those parts are shared (`xdsclient.resources._route_http`), what is compared is
where and in which order each decoder reads them, and which routes it keeps.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
from envoy.config.route.v3 import route_components_pb2, route_pb2

from xdsclient import ResourceDecodeError
from xdsclient.resources._filters import check_duration, validate_override
from xdsclient.resources._plugins import cluster_specifier_plugins
from xdsclient.resources._regex import Regex, RegexError, compile_regex
from xdsclient.resources._route_http import (
    action_http_fields,
    direct_response,
    headers_to_add,
    query_parameter_matcher,
    redirect_action,
    retry_http_fields,
)
from xdsclient.resources._route_values import (
    DirectResponse,
    HeaderToAdd,
    QueryParameterMatcher,
    RedirectAction,
    RegexRewrite,
)
from xdsclient.resources._view import View, invalid, parse, unpack

__all__ = [
    "ClusterWeight",
    "HashPolicy",
    "HeaderMatcher",
    "PathMatch",
    "RetryPolicy",
    "Route",
    "RouteAction",
    "RouteActionType",
    "RouteConfigurationView",
    "RouteMatch",
    "VirtualHost",
    "decode_route_configuration",
    "match_route",
    "select_virtual_host",
]

_UINT32_MAX = 2**32 - 1
_RETRY_CODES = frozenset(
    {"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}
)
_FILTER_CONFIG = "type.googleapis.com/envoy.config.route.v3.FilterConfig"
_PPM_PER_UNIT = {0: 10_000, 1: 100, 2: 1}


class PathMatch(enum.Enum):
    PREFIX = "prefix"
    PATH = "path"
    SAFE_REGEX = "safe_regex"


class HeaderMatchKind(enum.StrEnum):
    # The reference decoder names kinds by string: its copy of the enum takes them (converter)
    # and, a StrEnum, still equals them, so only the views' field type changed.
    EXACT = "exact"
    SAFE_REGEX = "safe_regex"
    RANGE = "range"
    PRESENT = "present"
    PREFIX = "prefix"
    SUFFIX = "suffix"
    CONTAINS = "contains"


@attrs.frozen(kw_only=True)
class HeaderMatcher:
    """One header condition. ``kind`` is exact, safe_regex, range, present, prefix, suffix or
    contains; ``invert`` flips the result."""

    name: str
    kind: HeaderMatchKind = attrs.field(converter=HeaderMatchKind)
    value: str = ""
    range: tuple[int, int] | None = None
    present: bool = True
    invert: bool = False
    ignore_case: bool = False
    regex: Regex | None = attrs.field(default=None, eq=False, repr=False)

    def matches(self, headers: Mapping[str, str]) -> bool:
        value = headers.get(self.name)
        if self.kind == "present":
            result = (value is not None) == self.present
        elif value is None:
            return False  # a missing header never matches, inverted or not (gRFC A28)
        else:
            result = self._matches_value(value)
        return result != self.invert

    def _matches_value(self, value: str) -> bool:
        if self.kind == "range":
            assert self.range is not None
            try:
                number = int(value)
            except ValueError:
                return False
            return self.range[0] <= number < self.range[1]
        if self.kind == "safe_regex":
            assert self.regex is not None
            return self.regex.fullmatch(value) is not None
        subject, pattern = (
            (value.lower(), self.value.lower()) if self.ignore_case else (value, self.value)
        )
        if self.kind == "exact":
            return subject == pattern
        if self.kind == "prefix":
            return subject.startswith(pattern)
        if self.kind == "suffix":
            return subject.endswith(pattern)
        return pattern in subject  # contains


@attrs.frozen(kw_only=True)
class RouteMatch:
    """What a request must look like for a route to apply."""

    path_match: PathMatch
    path: str
    case_sensitive: bool = True
    headers: tuple[HeaderMatcher, ...] = ()
    #: Share of requests that match, parts per million (None: all of them).
    runtime_fraction_ppm: int | None = None
    regex: Regex | None = attrs.field(default=None, eq=False, repr=False)
    query_parameters: tuple[QueryParameterMatcher, ...] = ()

    def matches(self, path: str, headers: Mapping[str, str], roll_ppm: int | None = None) -> bool:
        """Whether a request for ``path`` with ``headers`` matches (``roll_ppm`` in [0, 1e6)
        decides the runtime fraction; random when None)."""
        if self.query_parameters or not self._path_matches(path):
            return False
        if not all(header.matches(headers) for header in self.headers):
            return False
        if self.runtime_fraction_ppm is not None:
            roll = random.randrange(1_000_000) if roll_ppm is None else roll_ppm
            return roll < self.runtime_fraction_ppm
        return True

    def _path_matches(self, path: str) -> bool:
        if self.path_match is PathMatch.SAFE_REGEX:
            assert self.regex is not None
            return self.regex.fullmatch(path) is not None
        subject, pattern = (
            (path, self.path) if self.case_sensitive else (path.lower(), self.path.lower())
        )
        if self.path_match is PathMatch.PREFIX:
            return subject.startswith(pattern)
        return subject == pattern  # PATH


@attrs.frozen(kw_only=True)
class ClusterWeight:
    name: str
    weight: int
    typed_per_filter_config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """gRFC A44: which status codes to retry, how often, with what backoff (seconds)."""

    retry_on: frozenset[str]
    num_retries: int = 1
    base_interval: float = 0.025
    max_interval: float = 0.25
    http_retry_on: frozenset[str] = frozenset()
    retriable_status_codes: tuple[int, ...] = ()
    retriable_headers: tuple[HeaderMatcher, ...] = ()
    per_try_timeout: float | None = None
    retry_host_predicates: tuple[str, ...] = ()
    host_selection_retry_max_attempts: int = 1


class HashPolicyKind(enum.StrEnum):
    HEADER = "header"
    CHANNEL_ID = "channel_id"


@attrs.frozen(kw_only=True)
class HashPolicy:
    """gRFC A42: hash on a header (optionally rewritten) or on the channel id."""

    kind: HashPolicyKind = attrs.field(converter=HashPolicyKind)
    header_name: str = ""
    regex: Regex | None = attrs.field(default=None, eq=False)
    substitution: str = ""
    terminal: bool = False
    name: str = ""
    cookie_ttl: float | None = None
    cookie_path: str = ""


class RouteActionType(enum.Enum):
    ROUTE = "route"  #: forward to a cluster
    NON_FORWARDING = "non_forwarding"  #: server side: handled locally
    UNSUPPORTED = "unsupported"  #: redirect, direct response...: RPCs matching it fail


@attrs.frozen(kw_only=True)
class RouteAction:
    """Where a matched request goes and how."""

    cluster: str = ""
    weighted_clusters: tuple[ClusterWeight, ...] = ()
    cluster_specifier_plugin: str = ""
    #: max_stream_duration.grpc_timeout_header_max, else max_stream_duration (seconds)
    max_stream_duration: float | None = None
    retry_policy: RetryPolicy | None = None
    hash_policies: tuple[HashPolicy, ...] = ()
    prefix_rewrite: str = ""
    regex_rewrite: RegexRewrite | None = None
    host_rewrite_literal: str = ""
    timeout: float | None = None
    http_hash_policies: tuple[HashPolicy, ...] = ()
    cluster_header: str = ""

    @property
    def clusters(self) -> tuple[str, ...]:
        """Every cluster this action can send to."""
        if self.cluster:
            return (self.cluster,)
        return tuple(w.name for w in self.weighted_clusters)


@attrs.frozen(kw_only=True)
class Route:
    match: RouteMatch
    action_type: RouteActionType
    action: RouteAction | None = None
    typed_per_filter_config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    name: str = ""
    redirect: RedirectAction | None = None
    direct_response: DirectResponse | None = None
    request_headers_to_add: tuple[HeaderToAdd, ...] = ()
    request_headers_to_remove: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class VirtualHost:
    name: str
    domains: tuple[str, ...]
    routes: tuple[Route, ...]
    retry_policy: RetryPolicy | None = None
    typed_per_filter_config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    http_routes: tuple[Route, ...] = ()
    request_headers_to_add: tuple[HeaderToAdd, ...] = ()
    request_headers_to_remove: tuple[str, ...] = ()


@attrs.frozen(kw_only=True, eq=False)
class RouteConfigurationView(View):
    """A validated RouteConfiguration."""

    _message_class: ClassVar[Any] = route_pb2.RouteConfiguration

    name: str
    virtual_hosts: tuple[VirtualHost, ...]
    #: cluster specifier plugins by name: (type URL, serialized config)
    cluster_specifier_plugins: Mapping[str, tuple[str, bytes]] = attrs.field(
        factory=dict, hash=False
    )
    raw: bytes = attrs.field(repr=False)
    ignore_port_in_host_matching: bool = False
    request_headers_to_add: tuple[HeaderToAdd, ...] = ()
    request_headers_to_remove: tuple[str, ...] = ()

    @property
    def clusters(self) -> frozenset[str]:
        """Every cluster some route can send to."""
        return frozenset(
            name
            for vhost in self.virtual_hosts
            for route in vhost.routes
            if route.action is not None
            for name in route.action.clusters
        )

    def virtual_host_for(self, authority: str) -> VirtualHost | None:
        """`select_virtual_host` over this configuration's virtual hosts."""
        return select_virtual_host(self.virtual_hosts, authority)

    @classmethod
    def from_proto(cls, message: Any, raw: bytes | None = None) -> RouteConfigurationView:
        """Validate ``message``; raises `ResourceDecodeError` naming the field at fault."""
        return cls(
            name=message.name,
            raw=message.SerializeToString() if raw is None else raw,
            **route_fields(message.name, "", message),
        )


def route_fields(name: str, prefix: str, message: Any) -> dict[str, Any]:
    """The validated contents of a RouteConfiguration (also used for one inline in a Listener)."""
    # As C-core: plugin types as gRPC's registry sees them (None: optional, of an unknown type)
    plugins = cluster_specifier_plugins(name, prefix, message)
    optional_plugins = {key for key, value in plugins.items() if value is None}
    vhosts = tuple(
        _virtual_host(name, f"{prefix}virtual_hosts[{i}]", vhost, plugins, optional_plugins)
        for i, vhost in enumerate(message.virtual_hosts)
    )
    known = {key: value for key, value in plugins.items() if value is not None}
    return {
        "virtual_hosts": vhosts,
        "cluster_specifier_plugins": known,
        "ignore_port_in_host_matching": message.ignore_port_in_host_matching,
        "request_headers_to_add": headers_to_add(message.request_headers_to_add),
        "request_headers_to_remove": tuple(h.lower() for h in message.request_headers_to_remove),
    }


def _virtual_host(
    name: str, path: str, vhost: Any, plugins: Mapping[str, Any], optional: set[str]
) -> VirtualHost:
    if not vhost.domains:
        raise invalid(name, f"{path}.domains", "must not be empty")
    for j, domain in enumerate(vhost.domains):
        if not _valid_domain(domain):
            raise invalid(name, f"{path}.domains[{j}]", f"invalid pattern {domain!r}")
    routes = []
    http_routes = []
    for j, route in enumerate(vhost.routes):
        parsed = _route(name, f"{path}.routes[{j}]", route, plugins, optional)
        if parsed is not None:
            routes.append(parsed)
            http_routes.append(parsed)
        elif route.match.query_parameters or (
            route.WhichOneof("action") == "route"
            and route.route.WhichOneof("cluster_specifier") == "cluster_header"
        ):
            try:  # gRPC skips it; HTTP keeps it when every part of it is valid
                http = _route(name, f"{path}.routes[{j}]", route, plugins, optional, True)
            except ResourceDecodeError:
                http = None
            if http is not None:
                http_routes.append(http)
    return VirtualHost(
        name=vhost.name,
        domains=tuple(vhost.domains),
        routes=tuple(routes),
        retry_policy=_retry_policy(name, f"{path}.retry_policy", vhost.retry_policy)
        if vhost.HasField("retry_policy")
        else None,
        typed_per_filter_config=_filter_configs(
            name, f"{path}.typed_per_filter_config", vhost.typed_per_filter_config
        ),
        http_routes=tuple(http_routes),
        request_headers_to_add=headers_to_add(vhost.request_headers_to_add),
        request_headers_to_remove=tuple(h.lower() for h in vhost.request_headers_to_remove),
    )


def _valid_domain(domain: str) -> bool:
    """As C-core classifies a domain: ``*``, a suffix (``*...``: whatever follows, even another
    ``*``), a prefix (``...*``), or exact without ``*``; empty or ``*`` inside is invalid."""
    return bool(domain) and (domain[0] == "*" or domain[-1] == "*" or "*" not in domain)


def _route(
    name: str,
    path: str,
    route: Any,
    plugins: Mapping[str, Any],
    optional: set[str],
    with_query: bool = False,
) -> Route | None:
    match = route.match
    if match.query_parameters and not with_query:
        return None  # gRPC ignores routes with query parameter matchers
    parsed_match = _route_match(name, f"{path}.match", match)
    kind = route.WhichOneof("action")
    # As C-core: an ignored action ignores the route before its typed_per_filter_config is read
    if kind == "route":
        action = _route_action(name, f"{path}.route", route.route, plugins, optional, with_query)
        if action is None:
            return None
    http: dict[str, Any] = {
        "name": route.name,
        "request_headers_to_add": headers_to_add(route.request_headers_to_add),
        "request_headers_to_remove": tuple(h.lower() for h in route.request_headers_to_remove),
    }
    if kind == "redirect":
        http["redirect"] = redirect_action(name, path, route.redirect)
    elif kind == "direct_response":
        http["direct_response"] = direct_response(name, path, route.direct_response)
    configs = _filter_configs(
        name, f"{path}.typed_per_filter_config", route.typed_per_filter_config
    )
    if kind == "non_forwarding_action":
        return Route(
            match=parsed_match,
            action_type=RouteActionType.NON_FORWARDING,
            typed_per_filter_config=configs,
            **http,
        )
    if kind != "route":
        return Route(
            match=parsed_match,
            action_type=RouteActionType.UNSUPPORTED,
            typed_per_filter_config=configs,
            **http,
        )
    return Route(
        match=parsed_match,
        action_type=RouteActionType.ROUTE,
        action=action,
        typed_per_filter_config=configs,
        **http,
    )


def _route_match(name: str, path: str, match: Any) -> RouteMatch:
    queries = tuple(
        query_parameter_matcher(name, f"{path}.query_parameters[{i}]", q)
        for i, q in enumerate(match.query_parameters)
    )
    kind = match.WhichOneof("path_specifier")
    regex = None
    if kind == "prefix":
        path_match, value = PathMatch.PREFIX, match.prefix
    elif kind == "path":
        path_match, value = PathMatch.PATH, match.path
    elif kind == "safe_regex":
        path_match, value = PathMatch.SAFE_REGEX, match.safe_regex.regex
        regex = _compile(name, f"{path}.safe_regex.regex", value)
    else:
        raise invalid(name, path, f"unsupported path specifier {kind or '(none)'}")
    headers = tuple(
        _header_matcher(name, f"{path}.headers[{i}]", h) for i, h in enumerate(match.headers)
    )
    fraction = None
    if match.HasField("runtime_fraction"):
        default = match.runtime_fraction.default_value
        if default.denominator not in _PPM_PER_UNIT:
            raise invalid(
                name, f"{path}.runtime_fraction.default_value.denominator", "unknown denominator"
            )
        fraction = min(default.numerator * _PPM_PER_UNIT[default.denominator], 1_000_000)
    case_sensitive = match.case_sensitive.value if match.HasField("case_sensitive") else True
    if regex is not None and not case_sensitive:
        regex = compile_regex(regex.pattern, ignore_case=True)
    return RouteMatch(
        path_match=path_match,
        path=value,
        case_sensitive=case_sensitive,
        headers=headers,
        runtime_fraction_ppm=fraction,
        regex=regex,
        query_parameters=queries,
    )


def _header_matcher(name: str, path: str, header: Any) -> HeaderMatcher:
    kind = header.WhichOneof("header_match_specifier")
    common = {"name": header.name.lower(), "invert": header.invert_match}
    if kind == "exact_match":
        return HeaderMatcher(kind="exact", value=header.exact_match, **common)
    if kind in ("prefix_match", "suffix_match", "contains_match"):
        return HeaderMatcher(
            kind=kind.removesuffix("_match"), value=getattr(header, kind), **common
        )
    if kind == "safe_regex_match":
        regex = _compile(name, f"{path}.safe_regex_match.regex", header.safe_regex_match.regex)
        return HeaderMatcher(kind="safe_regex", value=regex.pattern, regex=regex, **common)
    if kind == "range_match":
        start, end = header.range_match.start, header.range_match.end
        if start > end:
            raise invalid(name, f"{path}.range_match", "start must not be above end")
        return HeaderMatcher(kind="range", range=(start, end), **common)
    if kind == "present_match":
        return HeaderMatcher(kind="present", present=header.present_match, **common)
    if kind == "string_match":
        matcher = header.string_match
        which = matcher.WhichOneof("match_pattern")
        if which == "safe_regex":
            regex = _compile(
                name, f"{path}.string_match.safe_regex.regex", matcher.safe_regex.regex
            )
            return HeaderMatcher(kind="safe_regex", value=regex.pattern, regex=regex, **common)
        if which in ("exact", "prefix", "suffix", "contains"):
            return HeaderMatcher(
                kind=which, value=getattr(matcher, which), ignore_case=matcher.ignore_case, **common
            )
        raise invalid(name, f"{path}.string_match", f"unsupported pattern {which or '(none)'}")
    raise invalid(name, path, f"unsupported header matcher {kind or '(none)'}")


def _route_action(
    name: str,
    path: str,
    action: Any,
    plugins: Mapping[str, Any],
    optional: set[str],
    http_only: bool = False,
) -> RouteAction | None:
    fields: dict[str, Any] = {}
    kind = action.WhichOneof("cluster_specifier")
    if kind == "cluster":
        if not action.cluster:
            raise invalid(name, f"{path}.cluster", "must not be empty")
        fields["cluster"] = action.cluster
    elif kind == "weighted_clusters":
        fields["weighted_clusters"] = _weighted_clusters(
            name, f"{path}.weighted_clusters", action.weighted_clusters
        )
    elif kind == "cluster_specifier_plugin":
        plugin = action.cluster_specifier_plugin
        # As C-core: a plugin name must not be empty; an optional unknown plugin ignores the route
        if not plugin:
            raise invalid(name, f"{path}.cluster_specifier_plugin", "must not be empty")
        if plugin not in plugins:
            raise invalid(name, f"{path}.cluster_specifier_plugin", f"no plugin named {plugin!r}")
        fields["cluster_specifier_plugin"] = plugin
    # As C-core: no cluster specifier (or cluster_header) ignores the route, once
    # the rest of the action (durations, retry and hash policies) is valid: see the end
    if action.HasField("max_stream_duration"):
        durations = action.max_stream_duration
        where = f"{path}.max_stream_duration"
        if durations.HasField("grpc_timeout_header_max"):
            fields["max_stream_duration"] = check_duration(
                name, f"{where}.grpc_timeout_header_max", durations.grpc_timeout_header_max
            )
        elif durations.HasField("max_stream_duration"):
            fields["max_stream_duration"] = check_duration(
                name, f"{where}.max_stream_duration", durations.max_stream_duration
            )
    if action.HasField("retry_policy"):
        fields["retry_policy"] = _retry_policy(name, f"{path}.retry_policy", action.retry_policy)
    hashes = []
    for i, policy in enumerate(action.hash_policy):
        which = policy.WhichOneof("policy_specifier")
        if which == "header":
            header = policy.header
            regex = None
            if header.HasField("regex_rewrite"):
                regex = _compile(
                    name,
                    f"{path}.hash_policy[{i}].header.regex_rewrite.pattern.regex",
                    header.regex_rewrite.pattern.regex,
                )
            hashes.append(
                HashPolicy(
                    kind="header",
                    header_name=header.header_name.lower(),
                    regex=regex,
                    substitution=header.regex_rewrite.substitution,
                    terminal=policy.terminal,
                )
            )
        elif which == "filter_state" and policy.filter_state.key == "io.grpc.channel_id":
            hashes.append(HashPolicy(kind="channel_id", terminal=policy.terminal))
    fields["hash_policies"] = tuple(hashes)
    fields.update(action_http_fields(name, path, action))
    if kind == "cluster_header" and http_only and action.cluster_header:
        # HTTP only: Envoy's router reads the cluster from a request header
        return RouteAction(**fields, cluster_header=action.cluster_header.lower())
    if kind not in ("cluster", "weighted_clusters", "cluster_specifier_plugin"):
        return None
    if kind == "cluster_specifier_plugin" and fields["cluster_specifier_plugin"] in optional:
        return None
    return RouteAction(**fields)


def _weighted_clusters(name: str, path: str, weighted: Any) -> tuple[ClusterWeight, ...]:
    clusters = []
    total = 0
    for i, entry in enumerate(weighted.clusters):
        if not entry.name:
            raise invalid(name, f"{path}.clusters[{i}].name", "must not be empty")
        weight = entry.weight.value if entry.HasField("weight") else 0
        total += weight
        if weight:
            configs = _filter_configs(
                name, f"{path}.clusters[{i}].typed_per_filter_config", entry.typed_per_filter_config
            )
            clusters.append(
                ClusterWeight(name=entry.name, weight=weight, typed_per_filter_config=configs)
            )
    if total == 0:
        raise invalid(name, path, "total weight must be greater than 0")
    if total > _UINT32_MAX:
        raise invalid(name, path, "total weight must fit in 32 bits")
    return tuple(clusters)


def _retry_policy(name: str, path: str, policy: Any) -> RetryPolicy:
    codes = frozenset(
        code.strip() for code in policy.retry_on.split(",") if code.strip() in _RETRY_CODES
    )
    retries = policy.num_retries.value if policy.HasField("num_retries") else 1
    if retries < 1:
        raise invalid(name, f"{path}.num_retries", "must be at least 1")
    base, maximum = 0.025, 0.25
    if policy.HasField("retry_back_off"):
        backoff = policy.retry_back_off
        if not backoff.HasField("base_interval"):
            raise invalid(name, f"{path}.retry_back_off.base_interval", "required")
        base = check_duration(name, f"{path}.retry_back_off.base_interval", backoff.base_interval)
        maximum = (
            check_duration(name, f"{path}.retry_back_off.max_interval", backoff.max_interval)
            if backoff.HasField("max_interval")
            else 10 * base
        )
    return RetryPolicy(
        retry_on=codes,
        num_retries=retries,
        base_interval=base,
        max_interval=maximum,
        **retry_http_fields(name, path, policy, _header_matcher),
    )


def _filter_configs(name: str, path: str, configs: Any) -> dict[str, tuple[str, bytes, bool]]:
    """typed_per_filter_config: filter name -> (type URL, serialized config, optional)."""
    result = {}
    for filter_name, packed in configs.items():
        if not filter_name:
            raise invalid(name, path, "filter names must not be empty")
        optional = False
        if packed.type_url == _FILTER_CONFIG:
            wrapper = unpack(
                name, f"{path}[{filter_name!r}]", packed, route_components_pb2.FilterConfig
            )
            if wrapper.disabled:
                continue
            optional = wrapper.is_optional
            packed = wrapper.config
        if not packed.type_url:
            raise invalid(name, f"{path}[{filter_name!r}]", "needs a typed config")
        if validate_override(name, f"{path}[{filter_name!r}]", packed, optional):
            result[filter_name] = (packed.type_url, packed.value, optional)
    return result


def _compile(name: str, path: str, pattern: str, *, ignore_case: bool = False) -> Regex:
    try:
        return compile_regex(pattern, ignore_case=ignore_case)
    except RegexError as exc:
        raise invalid(name, path, f"invalid regex {pattern!r}: {exc}") from None


def _seconds(duration: Any) -> float:
    seconds: float = duration.seconds + duration.nanos / 1e9
    return seconds


def select_virtual_host(
    virtual_hosts: tuple[VirtualHost, ...], authority: str
) -> VirtualHost | None:
    """The virtual host for ``authority`` (gRPC's rules): an exact domain wins, then the longest
    suffix wildcard (``*.example.com``), then the longest prefix wildcard (``example.*``), then
    ``*``. Case-insensitive."""
    host = authority.lower()
    best: tuple[int, int] | None = None  # (kind rank: lower is better, -pattern length)
    chosen = None
    for vhost in virtual_hosts:
        for domain in vhost.domains:
            pattern = domain.lower()
            if pattern == "*":
                rank = (3, 0)
                matched = True
            elif pattern.startswith("*"):
                rank, matched = (1, -len(pattern)), host.endswith(pattern[1:])
            elif pattern.endswith("*"):
                rank, matched = (2, -len(pattern)), host.startswith(pattern[:-1])
            else:
                rank, matched = (0, 0), host == pattern
            if matched and (best is None or rank < best):
                best, chosen = rank, vhost
    return chosen


def match_route(
    virtual_host: VirtualHost,
    path: str,
    headers: Mapping[str, str] | None = None,
    roll_ppm: int | None = None,
) -> Route | None:
    """The first route of ``virtual_host`` matching a request (header names lower-case)."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    for route in virtual_host.routes:
        if route.match.matches(path, lowered, roll_ppm):
            return route
    return None


def decode_route_configuration(data: bytes) -> tuple[str, RouteConfigurationView]:
    """The ROUTE_CONFIGURATION type's decoder: bytes -> (name, view)."""
    message = parse(route_pb2.RouteConfiguration, data)
    return message.name, RouteConfigurationView.from_proto(message, data)
