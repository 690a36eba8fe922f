"""RouteConfiguration, validated as gRPC's xDS clients validate RDS (gRFCs A28, A31, A42, A44).

The decoder: protobuf in, the values of `_route_values` out, or a `ResourceDecodeError` naming
the field at fault. Routing a request over the result is `_routing`.

Rules (checked against grpcio's C-core by tests/differential): a path matcher is prefix, path
or safe_regex (RE2); routes with query-parameter matchers are skipped, as gRPC does; header
ranges must not be inverted and regexes must be RE2; weighted clusters need names and a
positive total that fits in 32 bits; a route whose action has no cluster specifier gRPC
supports (none, or ``cluster_header``) is ignored once the rest of its action is valid; a
cluster specifier plugin must be named and defined in the route configuration, and a route
naming an optional plugin of a type gRPC lacks is ignored (plugin types: `_plugins`); retry
policies need num_retries >= 1 and valid durations; durations are non-negative and in range;
per-route filter configs must be of a type gRPC can override (`_filters`); virtual hosts need
at least one domain, classified as C-core does (``*``, ``*suffix``, ``prefix*``, exact).

What Envoy's HTTP router reads besides (`_route_values`' module docstring) is decoded by
`_route_http` when present. A route gRPC skips for its query parameter matchers is decoded for
`VirtualHost.http_routes` only, and left out of them when any part of it is invalid: gRPC never
reads it, so it cannot change gRPC's verdict.

Decoding is lean: a configuration of thousands of routes is decoded on every update,
so the common route (a prefix or path to one cluster, nothing else) is told by its encoded size
and built as three slot-set values in one call (`_common_route`; tests/resources/test_route.py
holds it to the full reading), and a field path is only formatted for an error or a part most
routes lack (see the comment above `route_fields`). One
verdict: tests/resources/reference_route.py keeps the decoder before it, and
tests/resources/test_route_differential.py holds this one to its verdicts and messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any, ClassVar

import attrs
from envoy.config.route.v3 import route_components_pb2, route_pb2

from .._errors import ResourceDecodeError
from .._slots import slot_setters
from . import _route_wire
from ._filters import check_duration, validate_override
from ._http_routing import select_http_virtual_host
from ._plugins import Plugins, cluster_specifier_plugins
from ._regex import Regex, RegexError, compile_regex
from ._route_http import (
    action_http_fields,
    direct_response,
    headers_to_add,
    query_parameter_matcher,
    redirect_action,
    retry_http_fields,
)
from ._route_values import (
    ClusterWeight,
    DirectResponse,
    HashPolicy,
    HashPolicyKind,
    HeaderMatcher,
    HeaderMatchKind,
    HeaderToAdd,
    PathMatch,
    QueryParameterMatcher,
    RedirectAction,
    RetryPolicy,
    Route,
    RouteAction,
    RouteActionType,
    RouteMatch,
    VirtualHost,
)
from ._routing import select_virtual_host
from ._view import View, invalid, parse, unpack

__all__ = [
    "RouteConfigurationView",
    "decode_route_configuration",
    "route_fields",
    "virtual_host_of",
]

_UINT32_MAX = 2**32 - 1
_RETRY_CODES = frozenset(
    {"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}
)
_FILTER_CONFIG = "type.googleapis.com/envoy.config.route.v3.FilterConfig"
_PPM_PER_UNIT = {0: 10_000, 1: 100, 2: 1}
#: The header_match_specifier fields that test the value as a string, by kind.
_STRING_MATCHES = {
    "exact_match": HeaderMatchKind.EXACT,
    "prefix_match": HeaderMatchKind.PREFIX,
    "suffix_match": HeaderMatchKind.SUFFIX,
    "contains_match": HeaderMatchKind.CONTAINS,
}
#: The StringMatcher patterns other than safe_regex, by kind.
_STRING_PATTERNS = {
    "exact": HeaderMatchKind.EXACT,
    "prefix": HeaderMatchKind.PREFIX,
    "suffix": HeaderMatchKind.SUFFIX,
    "contains": HeaderMatchKind.CONTAINS,
}


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
    #: Envoy's: match virtual hosts on the authority without its port.
    ignore_port_in_host_matching: bool = False
    #: Envoy's: request headers every route of this configuration adds and removes (after the
    #: route's and the virtual host's).
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

    def http_virtual_host_for(self, authority: str) -> VirtualHost | None:
        """`select_http_virtual_host` (Envoy's rules) over this configuration's virtual hosts,
        ignoring the port when the configuration says so."""
        return select_http_virtual_host(
            self.virtual_hosts, authority, ignore_port=self.ignore_port_in_host_matching
        )

    @property
    def vhds(self) -> bool:
        """Whether virtual hosts also come from VHDS (``vhds`` is set): those for hosts none
        of ``virtual_hosts`` matches are asked for on demand as ``<name>/<host>``. Read from
        ``raw`` at each access (only the walk's "no virtual host matched" path asks)."""
        return bool(self.proto.HasField("vhds"))

    @classmethod
    def from_proto(cls, message: Any, raw: bytes | None = None) -> RouteConfigurationView:
        """Validate ``message``; raises `ResourceDecodeError` naming the field at fault."""
        return cls(
            name=message.name,
            raw=message.SerializeToString() if raw is None else raw,
            **route_fields(message.name, "", message),
        )


# The decoder's hot path (thousands of routes an update): a route that is a prefix and a
# cluster builds no field path (paths are formatted only for an error or a part most routes
# lack), calls nothing for an empty map or list, and shares one read-only empty mapping for
# every empty typed_per_filter_config. Verdicts and messages are those of the decoder before
# it, kept in tests/resources/reference_route.py and compared by
# tests/resources/test_route_differential.py.
_NO_CONFIGS: Mapping[str, Any] = MappingProxyType({})
_PREFIX = PathMatch.PREFIX
_PATH = PathMatch.PATH
_ROUTE = RouteActionType.ROUTE
_NON_FORWARDING = RouteActionType.NON_FORWARDING
_UNSUPPORTED = RouteActionType.UNSUPPORTED
# Compared by identity with what ListFields() returns (upb hands out one object per field while
# it is referenced); were they ever other objects, the general path would take the route.
_PREFIX_FIELD = route_components_pb2.RouteMatch.DESCRIPTOR.fields_by_name["prefix"]
_PATH_FIELD = route_components_pb2.RouteMatch.DESCRIPTOR.fields_by_name["path"]
_CLUSTER_FIELD = route_components_pb2.RouteAction.DESCRIPTOR.fields_by_name["cluster"]
_ROUTE_FIELDS = route_components_pb2.Route.DESCRIPTOR.fields_by_name
_R_MATCH_FIELD, _R_ROUTE_FIELD, _R_NAME_FIELD = (
    _ROUTE_FIELDS["match"],
    _ROUTE_FIELDS["route"],
    _ROUTE_FIELDS["name"],
)

# Three values per route: attrs' __init__ costs more than reading the route, so these builders
# set the slots (`.._slots`); tests/resources/test_route.py holds them to the classes.
_new = object.__new__
_m_kind, _m_path, _m_case, _m_headers, _m_fraction, _m_regex, _m_query = slot_setters(RouteMatch)
(
    _a_cluster,
    _a_weighted,
    _a_plugin,
    _a_duration,
    _a_retry,
    _a_hashes,
    _a_prefix_rewrite,
    _a_regex_rewrite,
    _a_host_rewrite,
    _a_timeout,
    _a_http_hashes,
    _a_cluster_header,
) = slot_setters(RouteAction)
(
    _r_match,
    _r_type,
    _r_action,
    _r_configs,
    _r_name,
    _r_redirect,
    _r_direct,
    _r_add,
    _r_remove,
) = slot_setters(Route)
_NO_HTTP_ACTION: dict[str, Any] = {
    "prefix_rewrite": "",
    "regex_rewrite": None,
    "host_rewrite_literal": "",
    "timeout": None,
    "http_hash_policies": (),
}


def _new_route_match(
    path_match: PathMatch,
    path: str,
    case_sensitive: bool,
    headers: tuple[HeaderMatcher, ...],
    runtime_fraction_ppm: int | None,
    regex: Regex | None,
    query_parameters: tuple[QueryParameterMatcher, ...] = (),
) -> RouteMatch:
    match: RouteMatch = _new(RouteMatch)
    _m_kind(match, path_match)
    _m_path(match, path)
    _m_case(match, case_sensitive)
    _m_headers(match, headers)
    _m_fraction(match, runtime_fraction_ppm)
    _m_regex(match, regex)
    _m_query(match, query_parameters)
    return match


def _new_route_action(
    cluster: str,
    weighted_clusters: tuple[ClusterWeight, ...],
    cluster_specifier_plugin: str,
    max_stream_duration: float | None,
    retry_policy: RetryPolicy | None,
    hash_policies: tuple[HashPolicy, ...],
    http: Mapping[str, Any] = _NO_HTTP_ACTION,
) -> RouteAction:
    """A RouteAction; ``http``: `action_http_fields`' keyword arguments."""
    action: RouteAction = _new(RouteAction)
    _a_cluster(action, cluster)
    _a_weighted(action, weighted_clusters)
    _a_plugin(action, cluster_specifier_plugin)
    _a_duration(action, max_stream_duration)
    _a_retry(action, retry_policy)
    _a_hashes(action, hash_policies)
    if http is _NO_HTTP_ACTION:  # the common action: no dictionary lookups
        _a_prefix_rewrite(action, "")
        _a_regex_rewrite(action, None)
        _a_host_rewrite(action, "")
        _a_timeout(action, None)
        _a_http_hashes(action, ())
        _a_cluster_header(action, "")
    else:
        _a_prefix_rewrite(action, http["prefix_rewrite"])
        _a_regex_rewrite(action, http["regex_rewrite"])
        _a_host_rewrite(action, http["host_rewrite_literal"])
        _a_timeout(action, http["timeout"])
        _a_http_hashes(action, http["http_hash_policies"])
        _a_cluster_header(action, http.get("cluster_header", ""))
    return action


def _new_route(
    match: RouteMatch,
    action_type: RouteActionType,
    action: RouteAction | None,
    typed_per_filter_config: Mapping[str, Any],
    name: str = "",
    redirect: RedirectAction | None = None,
    direct: DirectResponse | None = None,
    to_add: tuple[HeaderToAdd, ...] = (),
    to_remove: tuple[str, ...] = (),
) -> Route:
    route: Route = _new(Route)
    _r_match(route, match)
    _r_type(route, action_type)
    _r_action(route, action)
    _r_configs(route, typed_per_filter_config)
    _r_name(route, name)
    _r_redirect(route, redirect)
    _r_direct(route, direct)
    _r_add(route, to_add)
    _r_remove(route, to_remove)
    return route


def route_fields(name: str, prefix: str, message: Any) -> dict[str, Any]:
    """The validated contents of a RouteConfiguration (also used for one inline in a Listener)."""
    plugins = cluster_specifier_plugins(name, prefix, message)
    vhosts = tuple(
        _virtual_host(name, f"{prefix}virtual_hosts[{i}]", vhost, plugins)
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


def _virtual_host(name: str, path: str, vhost: Any, plugins: Plugins) -> VirtualHost:
    domains = vhost.domains
    if not domains:
        raise invalid(name, f"{path}.domains", "must not be empty")
    for j, domain in enumerate(domains):
        if not _valid_domain(domain):
            raise invalid(name, f"{path}.domains[{j}]", f"invalid pattern {domain!r}")
    routes: list[Route] = []
    keep = routes.append
    http_routes: list[Route] | None = None  # built once a route is gRPC-skipped
    common = _common_route
    for j, route in enumerate(vhost.routes):
        parsed = common(route)
        if parsed is None:
            parsed = _route(name, path, j, route, plugins)
        if parsed is not None:
            keep(parsed)
            if http_routes is not None:
                http_routes.append(parsed)
        elif route.match.query_parameters or _names_cluster_header(route):
            extra = _http_only_route(name, path, j, route, plugins)
            if extra is not None:
                if http_routes is None:
                    http_routes = list(routes)
                http_routes.append(extra)
    retry = (
        _retry_policy(name, f"{path}.retry_policy", vhost.retry_policy)
        if vhost.HasField("retry_policy")
        else None
    )
    configs = vhost.typed_per_filter_config
    kept = tuple(routes)
    return VirtualHost(
        name=vhost.name,
        domains=tuple(domains),
        routes=kept,
        retry_policy=retry,
        typed_per_filter_config=_filter_configs(name, f"{path}.typed_per_filter_config", configs)
        if configs
        else _NO_CONFIGS,
        http_routes=kept if http_routes is None else tuple(http_routes),
        request_headers_to_add=headers_to_add(vhost.request_headers_to_add),
        request_headers_to_remove=tuple(h.lower() for h in vhost.request_headers_to_remove),
    )


def _common_route(route: Any) -> Route | None:
    """The common route (a non-empty prefix or path alone, forwarding to one named cluster,
    perhaps named, nothing else), built in one call; None for any other route, which `_route`
    then reads in full (and rejects, if it is invalid).

    The shape is told by the route's encoded size, one call for the whole route where
    ListFields() takes one per message at three times the cost. Encoded with nothing else,
    each of these values takes a one-byte tag, a length and its UTF-8 bytes, and each message
    a tag and a length before it: at least two bytes plus its length in characters each, and
    exactly that when every length fits in one byte and the text is ASCII. Any other field
    that is present (an unknown one too) adds at least its tag. So the size is the least these
    values can take only for a short ASCII route of exactly this shape."""
    match, action = route.match, route.route
    path, cluster, route_name = match.prefix, action.cluster, route.name
    kind = _PREFIX
    if not path:
        path, kind = match.path, _PATH
    if not (path and cluster):
        return None
    least = len(path) + len(cluster) + (len(route_name) + 10 if route_name else 8)
    if route.ByteSize() != least:
        return None
    new_match: RouteMatch = _new(RouteMatch)
    _m_kind(new_match, kind)
    _m_path(new_match, path)
    _m_case(new_match, True)
    _m_headers(new_match, ())
    _m_fraction(new_match, None)
    _m_regex(new_match, None)
    _m_query(new_match, ())
    new_action: RouteAction = _new(RouteAction)
    _a_cluster(new_action, cluster)
    _a_weighted(new_action, ())
    _a_plugin(new_action, "")
    _a_duration(new_action, None)
    _a_retry(new_action, None)
    _a_hashes(new_action, ())
    _a_prefix_rewrite(new_action, "")
    _a_regex_rewrite(new_action, None)
    _a_host_rewrite(new_action, "")
    _a_timeout(new_action, None)
    _a_http_hashes(new_action, ())
    _a_cluster_header(new_action, "")
    new_route: Route = _new(Route)
    _r_match(new_route, new_match)
    _r_type(new_route, _ROUTE)
    _r_action(new_route, new_action)
    _r_configs(new_route, _NO_CONFIGS)
    _r_name(new_route, route_name)
    _r_redirect(new_route, None)
    _r_direct(new_route, None)
    _r_add(new_route, ())
    _r_remove(new_route, ())
    return new_route


def _names_cluster_header(route: Any) -> bool:
    """Whether ``route`` forwards to the cluster a request header names (gRPC ignores it)."""
    return bool(
        route.WhichOneof("action") == "route"
        and route.route.WhichOneof("cluster_specifier") == "cluster_header"
    )


def virtual_host_of(name: str, vhost: Any) -> VirtualHost:
    """One VirtualHost message validated alone (VHDS's resource), with no cluster specifier
    plugins defined; errors name ``name``."""
    return _virtual_host(name, "virtual_host", vhost, {})


def _valid_domain(domain: str) -> bool:
    """As C-core classifies a domain: ``*``, a suffix (``*...``: whatever follows, even another
    ``*``), a prefix (``...*``), or exact without ``*``; empty or ``*`` inside is invalid."""
    return bool(domain) and (domain[0] == "*" or domain[-1] == "*" or "*" not in domain)


def _at(vhost_path: str, j: int) -> str:
    """The path of route ``j`` of a virtual host: built only for an error or a rare part."""
    return f"{vhost_path}.routes[{j}]"


def _route(
    name: str, vhost_path: str, j: int, route: Any, plugins: Plugins, with_query: bool = False
) -> Route | None:
    """The route, or None when gRPC ignores it. One ListFields() call finds the common shape:
    a match and a forwarding action, perhaps a name, and nothing else."""
    present = route.ListFields()
    if 2 <= len(present) <= 3:
        match = action = None
        route_name = ""
        for field, value in present:
            if field is _R_MATCH_FIELD:
                match = value
            elif field is _R_ROUTE_FIELD:
                action = value
            elif field is _R_NAME_FIELD:
                route_name = value
            else:
                break
        else:
            if match is not None and action is not None:
                return _forwarding_route(
                    name, vhost_path, j, match, action, route_name, plugins, with_query
                )
    return _any_route(name, vhost_path, j, route, plugins, with_query)


def _forwarding_route(
    name: str,
    vhost_path: str,
    j: int,
    match: Any,
    action: Any,
    route_name: str,
    plugins: Plugins,
    with_query: bool,
) -> Route | None:
    """A route of the common shape (`_route`), validated in `_any_route`'s order."""
    parsed_match = _route_match(name, vhost_path, j, match, with_query)
    if parsed_match is None:
        return None
    parsed_action = _route_action(name, vhost_path, j, action, plugins, with_query)
    if parsed_action is None:
        return None
    return _new_route(
        parsed_match, _ROUTE, parsed_action, _NO_CONFIGS, route_name, None, None, (), ()
    )


def _any_route(
    name: str, vhost_path: str, j: int, route: Any, plugins: Plugins, with_query: bool
) -> Route | None:
    parsed_match = _route_match(name, vhost_path, j, route.match, with_query)
    if parsed_match is None:
        return None
    kind = route.WhichOneof("action")
    action = redirect = direct = None
    if kind == "route":
        action = _route_action(name, vhost_path, j, route.route, plugins, with_query)
        if action is None:
            return None  # ignored before its typed_per_filter_config is read, as in C-core
        action_type = _ROUTE
    elif kind == "non_forwarding_action":
        action_type = _NON_FORWARDING
    else:
        action_type = _UNSUPPORTED
        if kind == "redirect":
            redirect = redirect_action(name, _at(vhost_path, j), route.redirect)
        elif kind == "direct_response":
            direct = direct_response(name, _at(vhost_path, j), route.direct_response)
    configs = route.typed_per_filter_config
    if configs:
        where = f"{_at(vhost_path, j)}.typed_per_filter_config"
        configs = _filter_configs(name, where, configs)
    else:
        configs = _NO_CONFIGS
    to_add = route.request_headers_to_add
    to_remove = route.request_headers_to_remove
    return _new_route(
        parsed_match,
        action_type,
        action,
        configs,
        route.name,
        redirect,
        direct,
        headers_to_add(to_add) if to_add else (),
        tuple(h.lower() for h in to_remove) if to_remove else (),
    )


def _http_only_route(
    name: str, vhost_path: str, j: int, route: Any, plugins: Plugins
) -> Route | None:
    """A route gRPC skips for its query parameter matchers, for `VirtualHost.http_routes`; None
    when any part of it is invalid (gRPC never reads it, so it cannot reject the resource)."""
    try:
        return _route(name, vhost_path, j, route, plugins, with_query=True)
    except ResourceDecodeError:
        return None


def _route_match(
    name: str, vhost_path: str, j: int, match: Any, with_query: bool = False
) -> RouteMatch | None:
    """The route's match, or None when gRPC ignores the route (query parameter matchers, unless
    ``with_query``: decoding it for HTTP)."""
    present = match.ListFields()  # one call finds the common shape: a prefix or path alone
    if len(present) == 1:
        field, value = present[0]
        if field is _PREFIX_FIELD:
            return _new_route_match(_PREFIX, value, True, (), None, None)
        if field is _PATH_FIELD:
            return _new_route_match(PathMatch.PATH, value, True, (), None, None)
    queries: tuple[QueryParameterMatcher, ...] = ()
    if match.query_parameters:
        if not with_query:
            return None
        where = f"{_at(vhost_path, j)}.match.query_parameters"
        queries = tuple(
            query_parameter_matcher(name, f"{where}[{i}]", q)
            for i, q in enumerate(match.query_parameters)
        )
    kind = match.WhichOneof("path_specifier")
    regex = None
    if kind == "prefix":
        path_match, value = _PREFIX, match.prefix
    elif kind == "path":
        path_match, value = PathMatch.PATH, match.path
    elif kind == "safe_regex":
        path_match, value = PathMatch.SAFE_REGEX, match.safe_regex.regex
        regex = _compile(name, f"{_at(vhost_path, j)}.match.safe_regex.regex", value)
    else:
        raise invalid(
            name, f"{_at(vhost_path, j)}.match", f"unsupported path specifier {kind or '(none)'}"
        )
    headers = match.headers
    if headers:
        where = f"{_at(vhost_path, j)}.match.headers"
        headers = tuple(_header_matcher(name, f"{where}[{i}]", h) for i, h in enumerate(headers))
    else:
        headers = ()
    fraction = None
    if match.HasField("runtime_fraction"):
        default = match.runtime_fraction.default_value
        if default.denominator not in _PPM_PER_UNIT:
            where = f"{_at(vhost_path, j)}.match.runtime_fraction.default_value.denominator"
            raise invalid(name, where, "unknown denominator")
        fraction = min(default.numerator * _PPM_PER_UNIT[default.denominator], 1_000_000)
    case_sensitive = match.case_sensitive.value if match.HasField("case_sensitive") else True
    if regex is not None and not case_sensitive:
        regex = compile_regex(regex.pattern, ignore_case=True)
    return _new_route_match(path_match, value, case_sensitive, headers, fraction, regex, queries)


def _header_matcher(name: str, path: str, header: Any) -> HeaderMatcher:
    kind = header.WhichOneof("header_match_specifier")
    common = {"name": header.name.lower(), "invert": header.invert_match}
    if kind in _STRING_MATCHES:
        return HeaderMatcher(kind=_STRING_MATCHES[kind], value=getattr(header, kind), **common)
    if kind == "safe_regex_match":
        regex = _compile(name, f"{path}.safe_regex_match.regex", header.safe_regex_match.regex)
        return HeaderMatcher(
            kind=HeaderMatchKind.SAFE_REGEX, value=regex.pattern, regex=regex, **common
        )
    if kind == "range_match":
        start, end = header.range_match.start, header.range_match.end
        if start > end:
            raise invalid(name, f"{path}.range_match", "start must not be above end")
        return HeaderMatcher(kind=HeaderMatchKind.RANGE, range=(start, end), **common)
    if kind == "present_match":
        return HeaderMatcher(kind=HeaderMatchKind.PRESENT, present=header.present_match, **common)
    if kind == "string_match":
        matcher = header.string_match
        which = matcher.WhichOneof("match_pattern")
        if which == "safe_regex":
            regex = _compile(
                name, f"{path}.string_match.safe_regex.regex", matcher.safe_regex.regex
            )
            return HeaderMatcher(
                kind=HeaderMatchKind.SAFE_REGEX, value=regex.pattern, regex=regex, **common
            )
        if which in _STRING_PATTERNS:
            return HeaderMatcher(
                kind=_STRING_PATTERNS[which],
                value=getattr(matcher, which),
                ignore_case=matcher.ignore_case,
                **common,
            )
        raise invalid(name, f"{path}.string_match", f"unsupported pattern {which or '(none)'}")
    raise invalid(name, path, f"unsupported header matcher {kind or '(none)'}")


def _route_action(
    name: str, vhost_path: str, j: int, action: Any, plugins: Plugins, http_only: bool = False
) -> RouteAction | None:
    """The action, or None when gRPC ignores the route (``http_only``: decoding a route gRPC
    skips for `VirtualHost.http_routes`, where a ``cluster_header`` action is kept)."""
    present = action.ListFields()  # one call finds the common shape: a cluster alone
    if len(present) == 1:
        field, cluster = present[0]
        if field is _CLUSTER_FIELD and cluster:
            return _new_route_action(cluster, (), "", None, None, ())
    cluster, plugin, header = "", "", ""
    weighted: tuple[ClusterWeight, ...] = ()
    ignored = False  # gRPC ignores the route, once the rest of its action is valid
    kind = action.WhichOneof("cluster_specifier")
    if kind == "cluster":
        cluster = action.cluster
        if not cluster:
            raise invalid(name, f"{_at(vhost_path, j)}.route.cluster", "must not be empty")
    elif kind == "weighted_clusters":
        where = f"{_at(vhost_path, j)}.route.weighted_clusters"
        weighted = _weighted_clusters(name, where, action.weighted_clusters)
    elif kind == "cluster_specifier_plugin":
        plugin = action.cluster_specifier_plugin
        where = f"{_at(vhost_path, j)}.route.cluster_specifier_plugin"
        if not plugin:
            raise invalid(name, where, "must not be empty")
        if plugin not in plugins:
            raise invalid(name, where, f"no plugin named {plugin!r}")
        ignored = plugins[plugin] is None  # optional, of a type gRPC lacks
    elif kind == "cluster_header" and http_only and action.cluster_header:
        header = action.cluster_header.lower()
    else:
        ignored = True  # none, or cluster_header: no cluster specifier gRPC supports
    max_duration = (
        _max_stream_duration(name, f"{_at(vhost_path, j)}.route", action.max_stream_duration)
        if action.HasField("max_stream_duration")
        else None
    )
    retry = (
        _retry_policy(name, f"{_at(vhost_path, j)}.route.retry_policy", action.retry_policy)
        if action.HasField("retry_policy")
        else None
    )
    policies = action.hash_policy
    hashes = _hash_policies(name, f"{_at(vhost_path, j)}.route", policies) if policies else ()
    http = action_http_fields(name, f"{_at(vhost_path, j)}.route", action)
    if header:
        http["cluster_header"] = header
    if ignored:
        return None
    return _new_route_action(cluster, weighted, plugin, max_duration, retry, hashes, http)


def _max_stream_duration(name: str, path: str, durations: Any) -> float | None:
    """grpc_timeout_header_max, else max_stream_duration, else None (``path``: the action)."""
    where = f"{path}.max_stream_duration"
    if durations.HasField("grpc_timeout_header_max"):
        return check_duration(
            name, f"{where}.grpc_timeout_header_max", durations.grpc_timeout_header_max
        )
    if durations.HasField("max_stream_duration"):
        return check_duration(name, f"{where}.max_stream_duration", durations.max_stream_duration)
    return None


def _hash_policies(name: str, path: str, policies: Any) -> tuple[HashPolicy, ...]:
    """Header and channel-id policies in order; other kinds are left out (``path``: the
    action)."""
    hashes = []
    for i, policy in enumerate(policies):
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
                    kind=HashPolicyKind.HEADER,
                    header_name=header.header_name.lower(),
                    regex=regex,
                    substitution=header.regex_rewrite.substitution,
                    terminal=policy.terminal,
                )
            )
        elif which == "filter_state" and policy.filter_state.key == "io.grpc.channel_id":
            hashes.append(HashPolicy(kind=HashPolicyKind.CHANNEL_ID, terminal=policy.terminal))
    return tuple(hashes)


def _weighted_clusters(name: str, path: str, weighted: Any) -> tuple[ClusterWeight, ...]:
    clusters = []
    total = 0
    for i, entry in enumerate(weighted.clusters):
        if not entry.name:
            raise invalid(name, f"{path}.clusters[{i}].name", "must not be empty")
        weight = entry.weight.value if entry.HasField("weight") else 0
        total += weight
        if weight:
            configs = entry.typed_per_filter_config
            configs = (
                _filter_configs(name, f"{path}.clusters[{i}].typed_per_filter_config", configs)
                if configs
                else _NO_CONFIGS
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


def _filter_configs(name: str, path: str, configs: Any) -> Mapping[str, tuple[str, bytes, bool]]:
    """typed_per_filter_config: filter name -> (type URL, serialized config, optional); the
    shared empty mapping when every entry is dropped."""
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
    return result or _NO_CONFIGS


def _compile(name: str, path: str, pattern: str, *, ignore_case: bool = False) -> Regex:
    try:
        return compile_regex(pattern, ignore_case=ignore_case)
    except RegexError as exc:
        raise invalid(name, path, f"invalid regex {pattern!r}: {exc}") from None


def _decode_upb(data: bytes) -> tuple[str, RouteConfigurationView]:
    """bytes -> (name, view) through upb and `RouteConfigurationView.from_proto`: the decoder of
    the pure-Python build, and of every configuration the compiled wire reader leaves to upb."""
    message = parse(route_pb2.RouteConfiguration, data)
    return message.name, RouteConfigurationView.from_proto(message, data)


def _wire_decoder(
    fallback: Callable[[bytes], tuple[str, RouteConfigurationView]],
) -> Callable[[bytes], tuple[str, RouteConfigurationView]]:
    """The compiled wire reader in front of ``fallback`` when it runs compiled (see
    `_route_wire`: `xdsclient._compiled` decides whether it does), else ``fallback`` alone:
    interpreted, the reader is slower than upb and the short path."""
    if not _route_wire.COMPILED:
        return fallback
    return partial(_route_wire.decode, fallback)


def _bind_wire_reader() -> None:
    """Lend the wire reader the classes, their slot setters and the shared values."""
    _route_wire.bind_views(
        (RouteConfigurationView, VirtualHost, RouteMatch, RouteAction, Route),
        (slot_setters(RouteMatch), slot_setters(RouteAction), slot_setters(Route)),
        (_PREFIX, _PATH, _ROUTE, _NO_CONFIGS),
    )


_bind_wire_reader()
_DECODE: Callable[[bytes], tuple[str, RouteConfigurationView]] = _wire_decoder(_decode_upb)


def decode_route_configuration(data: bytes) -> tuple[str, RouteConfigurationView]:
    """The ROUTE_CONFIGURATION type's decoder: bytes -> (name, view)."""
    return _DECODE(data)
