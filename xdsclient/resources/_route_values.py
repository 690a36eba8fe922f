"""The values of a validated RouteConfiguration: frozen, slotted, keyword-only attrs classes.

Why apart from the decoder (`_route`): these are what a data plane reads, routes and matches
with, and they hold no protobuf; the decoder builds them, with its own slot-setting builders for
the three values every route has (`RouteMatch`, `RouteAction`, `Route`). Each condition knows
whether a request meets it (`HeaderMatcher.matches`, `RouteMatch.matches`); choosing among
virtual hosts and routes is `_routing`.

Envoy's HTTP router reads more than gRPC does; those parts are here too, additive, so gRPC's
rules (`_routing`, `RouteMatch.matches`, the call path) read exactly what they read before and an
HTTP front end (`_http_routing`) finds the rest: a route's ``name``, ``redirect`` and
``direct_response`` (their action type stays UNSUPPORTED, which gRPC fails), request headers to
add and remove, a match's ``query_parameters``, an action's rewrites, ``timeout`` and
``http_hash_policies``, a retry policy's HTTP conditions. gRPC skips a route with query
parameter matchers: such a route is in `VirtualHost.http_routes` (every route an HTTP router
considers, in order) and never in `VirtualHost.routes` (gRPC's), and `RouteMatch.matches`
(gRPC's rule) never matches it.

Invariants, as the decoder builds them: a `RouteMatch` with ``path_match`` SAFE_REGEX, and a
`HeaderMatcher` of kind safe_regex, carry the compiled RE2 ``regex`` (case-insensitive when the
match is); a range matcher carries ``range`` with start <= end; header names are lower-case.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from typing import Any

import attrs

from ._regex import Regex

__all__ = [
    "DEFAULT_ROUTE_TIMEOUT",
    "ClusterWeight",
    "DirectResponse",
    "HashPolicy",
    "HashPolicyKind",
    "HeaderAppendAction",
    "HeaderMatchKind",
    "HeaderMatcher",
    "HeaderToAdd",
    "PathMatch",
    "QueryParameterMatcher",
    "RedirectAction",
    "RegexRewrite",
    "RetryPolicy",
    "Route",
    "RouteAction",
    "RouteActionType",
    "RouteMatch",
    "VirtualHost",
]


class PathMatch(enum.Enum):
    """How a route matches the path: by prefix, the whole path, or a regex (RE2)."""

    PREFIX = "prefix"
    PATH = "path"
    SAFE_REGEX = "safe_regex"
    #: The path (without the query) is the prefix or starts with it and a ``/``. The decoder
    #: rejects it, as gRPC's C-core does; the HTTP matcher (`_http_routing`) knows it.
    PATH_SEPARATED_PREFIX = "path_separated_prefix"


#: Envoy's route timeout when a route action sets none (seconds); 0 disables it.
DEFAULT_ROUTE_TIMEOUT = 15.0


class HeaderMatchKind(enum.Enum):
    """How a header condition tests the header: its whole value, a regex (RE2), a numeric range
    [start, end), its presence, or a prefix, suffix or substring of its value."""

    EXACT = "exact"
    SAFE_REGEX = "safe_regex"
    RANGE = "range"
    PRESENT = "present"
    PREFIX = "prefix"
    SUFFIX = "suffix"
    CONTAINS = "contains"


def _string_matches(
    kind: HeaderMatchKind, value: str, pattern: str, ignore_case: bool, regex: Regex | None
) -> bool:
    """Envoy's ``StringMatcher`` on one value: exact, prefix, suffix, contains (each optionally
    ignoring case) or a full RE2 match; the header and query parameter matchers share it."""
    if kind is HeaderMatchKind.SAFE_REGEX:
        assert regex is not None
        return regex.fullmatch(value) is not None
    if ignore_case:
        value, pattern = value.lower(), pattern.lower()
    if kind is HeaderMatchKind.EXACT:
        return value == pattern
    if kind is HeaderMatchKind.PREFIX:
        return value.startswith(pattern)
    if kind is HeaderMatchKind.SUFFIX:
        return value.endswith(pattern)
    return pattern in value  # CONTAINS


@attrs.frozen(kw_only=True)
class HeaderMatcher:
    """One header condition of the given ``kind``; ``invert`` flips the result."""

    name: str
    kind: HeaderMatchKind
    value: str = ""
    range: tuple[int, int] | None = None
    present: bool = True
    invert: bool = False
    ignore_case: bool = False
    regex: Regex | None = attrs.field(default=None, eq=False, repr=False)

    def matches(self, headers: Mapping[str, str]) -> bool:
        """Whether ``headers`` meet this condition (a missing header never matches, inverted or
        not)."""
        value = headers.get(self.name)
        if self.kind is HeaderMatchKind.PRESENT:
            result = (value is not None) == self.present
        elif value is None:
            return False  # a missing header never matches, inverted or not (gRFC A28)
        else:
            result = self._matches_value(value)
        return result != self.invert

    def _matches_value(self, value: str) -> bool:
        if self.kind is HeaderMatchKind.RANGE:
            assert self.range is not None
            try:
                number = int(value)
            except ValueError:
                return False
            return self.range[0] <= number < self.range[1]
        return _string_matches(self.kind, value, self.value, self.ignore_case, self.regex)


@attrs.frozen(kw_only=True)
class QueryParameterMatcher:
    """One query parameter condition (Envoy's ``QueryParameterMatcher``): the parameter's value
    by a string matcher (``kind`` exact, prefix, suffix, contains or safe_regex), or its
    presence (``kind`` PRESENT: also when neither is given)."""

    name: str
    kind: HeaderMatchKind
    value: str = ""
    ignore_case: bool = False
    regex: Regex | None = attrs.field(default=None, eq=False, repr=False)

    def matches(self, parameters: Mapping[str, str]) -> bool:
        """Whether ``parameters`` (name -> the first value) meet this condition; a missing
        parameter never matches."""
        value = parameters.get(self.name)
        if value is None:
            return False
        if self.kind is HeaderMatchKind.PRESENT:
            return True
        return _string_matches(self.kind, value, self.value, self.ignore_case, self.regex)


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
    #: Query parameter conditions (Envoy's); gRPC skips a route that has any.
    query_parameters: tuple[QueryParameterMatcher, ...] = ()

    def matches(self, path: str, headers: Mapping[str, str], roll_ppm: int | None = None) -> bool:
        """Whether a request for ``path`` with ``headers`` matches by gRPC's rules (``roll_ppm``
        in [0, 1e6) decides the runtime fraction; random when None). A match with query
        parameter conditions never does: gRPC skips such routes."""
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
        if self.path_match is PathMatch.PATH_SEPARATED_PREFIX:
            return subject == pattern or subject.startswith(pattern + "/")
        return subject == pattern  # PATH


@attrs.frozen(kw_only=True)
class ClusterWeight:
    """One cluster of a weighted split: its name, its weight and its per-filter config overrides."""

    name: str
    weight: int
    typed_per_filter_config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """gRFC A44: which status codes to retry, how often, with what backoff (seconds); and what
    Envoy's HTTP router reads besides (``http_*`` and the fields after ``max_interval``)."""

    #: The gRPC status names of ``retry_on`` gRPC knows (cancelled, deadline-exceeded, ...).
    retry_on: frozenset[str]
    num_retries: int = 1
    base_interval: float = 0.025
    max_interval: float = 0.25
    #: The HTTP conditions of ``retry_on`` Envoy's router knows (5xx, gateway-error, reset,
    #: connect-failure, retriable-4xx, refused-stream, retriable-status-codes,
    #: retriable-headers, reset-before-request, envoy-ratelimited, http3-post-connect-failure).
    http_retry_on: frozenset[str] = frozenset()
    #: The statuses ``retriable-status-codes`` retries.
    retriable_status_codes: tuple[int, ...] = ()
    #: Response header conditions ``retriable-headers`` retries on (any one matching).
    retriable_headers: tuple[HeaderMatcher, ...] = ()
    #: Each attempt's own timeout, seconds (None: only the route's timeout).
    per_try_timeout: float | None = None
    #: The type URLs of the retry host predicates, in order (see `avoids_previous_hosts`).
    retry_host_predicates: tuple[str, ...] = ()
    #: How many picks a retry makes to find a host the predicates accept.
    host_selection_retry_max_attempts: int = 1

    @property
    def avoids_previous_hosts(self) -> bool:
        """Whether a retry should avoid the hosts already tried (Envoy's previous_hosts
        predicate)."""
        return _PREVIOUS_HOSTS in self.retry_host_predicates


_PREVIOUS_HOSTS = (
    "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"
)


class HashPolicyKind(enum.Enum):
    """What a ring-hash policy hashes (gRFC A42; the last three only in
    `RouteAction.http_hash_policies`)."""

    HEADER = "header"  #: a request header, optionally rewritten by a regex
    CHANNEL_ID = "channel_id"  #: the channel (filter state ``io.grpc.channel_id``)
    COOKIE = "cookie"  #: a cookie (``name``); Envoy sets it when absent and ``cookie_ttl`` is
    QUERY_PARAMETER = "query_parameter"  #: a query parameter (``name``)
    SOURCE_IP = "source_ip"  #: the client's own address


@attrs.frozen(kw_only=True)
class HashPolicy:
    """gRFC A42: hash on a header (optionally rewritten) or on the channel id; for HTTP also on
    a cookie, a query parameter or the source address."""

    kind: HashPolicyKind
    header_name: str = ""
    regex: Regex | None = attrs.field(default=None, eq=False)
    substitution: str = ""
    terminal: bool = False
    #: The cookie's or query parameter's name.
    name: str = ""
    #: COOKIE: the lifetime of a cookie to generate when absent, seconds (None: never generate).
    cookie_ttl: float | None = None
    #: COOKIE: the generated cookie's path.
    cookie_path: str = ""


class RouteActionType(enum.Enum):
    """What a route does with the requests it matches."""

    ROUTE = "route"  #: forward to a cluster
    NON_FORWARDING = "non_forwarding"  #: server side: handled locally
    UNSUPPORTED = "unsupported"  #: redirect, direct response...: RPCs matching it fail


@attrs.frozen(kw_only=True)
class RegexRewrite:
    """Envoy's ``RegexMatchAndSubstitute``: every match of ``regex`` (RE2) in the path is
    replaced by ``substitution`` (``\\1`` names a capture group)."""

    pattern: str
    substitution: str
    regex: Regex = attrs.field(eq=False, repr=False)


@attrs.frozen(kw_only=True)
class RedirectAction:
    """Envoy's ``RedirectAction``: the response a redirecting route answers with. Empty parts
    keep the request's own; ``path``, ``prefix_rewrite`` and ``regex_rewrite`` are exclusive."""

    scheme: str = ""  #: ``https`` for https_redirect, else scheme_redirect
    host: str = ""
    port: int = 0
    path: str = ""
    prefix_rewrite: str = ""
    regex_rewrite: RegexRewrite | None = None
    response_code: int = 301  #: 301, 302, 303, 307 or 308
    strip_query: bool = False


@attrs.frozen(kw_only=True)
class DirectResponse:
    """Envoy's ``DirectResponseAction``: answer ``status`` with ``body`` (inline bytes or string;
    a body from a file or the environment is not read: empty)."""

    status: int
    body: bytes = b""


class HeaderAppendAction(enum.Enum):
    """Envoy's ``HeaderValueOption.HeaderAppendAction``: how a header to add meets one already
    in the request."""

    APPEND_IF_EXISTS_OR_ADD = "append_if_exists_or_add"
    ADD_IF_ABSENT = "add_if_absent"
    OVERWRITE_IF_EXISTS_OR_ADD = "overwrite_if_exists_or_add"
    OVERWRITE_IF_EXISTS = "overwrite_if_exists"


@attrs.frozen(kw_only=True)
class HeaderToAdd:
    """One request header to add (Envoy's ``HeaderValueOption``; ``name`` lower-case; an empty
    ``value`` is added only with ``keep_empty_value``)."""

    name: str
    value: str
    append_action: HeaderAppendAction = HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD
    keep_empty_value: bool = False


@attrs.frozen(kw_only=True)
class RouteAction:
    """Where a matched request goes and how."""

    cluster: str = ""
    weighted_clusters: tuple[ClusterWeight, ...] = ()
    cluster_specifier_plugin: str = ""
    #: max_stream_duration.grpc_timeout_header_max, else max_stream_duration (seconds)
    max_stream_duration: float | None = None
    retry_policy: RetryPolicy | None = None
    #: gRPC's: header and channel id policies.
    hash_policies: tuple[HashPolicy, ...] = ()
    #: Replaces the matched prefix (the whole path for a path or regex match) when forwarding.
    prefix_rewrite: str = ""
    regex_rewrite: RegexRewrite | None = None
    #: The authority to forward with ("" keeps the request's).
    host_rewrite_literal: str = ""
    #: The route's timeout, seconds; None when unset (Envoy then uses `DEFAULT_ROUTE_TIMEOUT`),
    #: 0 disables it.
    timeout: float | None = None
    #: Envoy's: every policy of a kind Envoy hashes (header, cookie, query parameter, source
    #: IP), in order.
    http_hash_policies: tuple[HashPolicy, ...] = ()
    #: Envoy's: the request header naming the cluster (a route gRPC ignores: only in
    #: `VirtualHost.http_routes`).
    cluster_header: str = ""

    @property
    def clusters(self) -> tuple[str, ...]:
        """Every cluster this action can send to."""
        if self.cluster:
            return (self.cluster,)
        return tuple(w.name for w in self.weighted_clusters)


@attrs.frozen(kw_only=True)
class Route:
    """One route: what it matches, what it does (``action`` when it forwards to clusters), and its
    per-filter config overrides."""

    match: RouteMatch
    action_type: RouteActionType
    action: RouteAction | None = None
    typed_per_filter_config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    name: str = ""
    #: Set when the route redirects (``action_type`` UNSUPPORTED).
    redirect: RedirectAction | None = None
    #: Set when the route answers itself (``action_type`` UNSUPPORTED).
    direct_response: DirectResponse | None = None
    request_headers_to_add: tuple[HeaderToAdd, ...] = ()
    #: Lower-case names.
    request_headers_to_remove: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class VirtualHost:
    """The routes of a set of domains, in order, with the host's retry policy and per-filter
    config overrides. ``routes`` are gRPC's; ``http_routes`` are Envoy's (also the routes
    with query parameter conditions gRPC skips, in their place; the same tuple when none)."""

    name: str
    domains: tuple[str, ...]
    routes: tuple[Route, ...]
    retry_policy: RetryPolicy | None = None
    typed_per_filter_config: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    #: Defaults to ``routes``.
    http_routes: tuple[Route, ...] = attrs.field(
        default=attrs.Factory(lambda self: self.routes, takes_self=True)
    )
    request_headers_to_add: tuple[HeaderToAdd, ...] = ()
    #: Lower-case names.
    request_headers_to_remove: tuple[str, ...] = ()
