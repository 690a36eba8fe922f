"""Route one HTTP request as Envoy's router does: virtual host, route, action, and what the
attempts send (path, authority, header changes), or the local answer instead.

Why apart from `_route`: gRPC's routing is C-core's and fails a call with a status; Envoy's
router answers an HTTP request itself in several cases, and reads more of the route. The
matching is `xdsclient.resources`' Envoy rules (`select_http_virtual_host`,
`match_http_route`, `rewrite_path`, `rewrite_authority`, `redirect_location`); this module
decides per request, following Envoy's router (``source/common/router/router.cc``,
``config_impl.cc``, ``header_parser.cc``):

- no virtual host for the authority, or no route in it: 404 (Envoy's ``route_not_found``),
  with a body and an ``x-xdsclient-error`` header naming the route configuration (``RDS
  resource <name>``, or ``LDS resource <listener>`` for routes inline in the listener) and the
  authority or path; a matched route that neither forwards, redirects nor answers (a
  non-forwarding action): 404 as well, as Envoy has no route entry for it;
- ``redirect``: its status with a ``location`` header and no body; ``direct_response``: its
  status and body;
- the cluster: ``cluster``; ``weighted_clusters`` by one draw in [0, total weight) (Envoy:
  the first entry whose running total exceeds it); ``cluster_header`` names the cluster in a
  request header, and an absent (or empty) header is Envoy's 503 for a cluster not found; a
  cluster specifier plugin (RLS) is not supported: 503 naming it;
- ``prefix_rewrite`` / ``regex_rewrite`` on the path and ``host_rewrite_literal`` on the
  authority;
- request headers: the route's, then the virtual host's, then the route configuration's
  ``request_headers_to_remove`` and ``request_headers_to_add`` (Envoy's order when
  ``most_specific_header_mutations_wins`` is off, its default: the later level wins); at each
  level the removals first, then the overwrites (``OVERWRITE_IF_EXISTS_OR_ADD``, and
  ``OVERWRITE_IF_EXISTS`` when present), then the appends (``APPEND_IF_EXISTS_OR_ADD``, and
  ``ADD_IF_ABSENT`` when absent), presence judged before the level's changes; an empty value
  is added only with ``keep_empty_value``. Values are literal: Envoy's ``%...%`` formatters
  are not expanded. The retry headers the router consumes (``x-envoy-retry-on``,
  ``x-envoy-max-retries``, ``x-envoy-retriable-header-names``,
  ``x-envoy-retriable-status-codes``) are removed. The result is given as "remove these
  names, then add these pairs" (`apply_header_changes`).

Why a memo (`RouteMemo`, one per configuration): most requests of a service go to a few
(authority, path) pairs, and a route whose choice depends on nothing else (no runtime
fraction, no header matcher on any route looked at up to it, one ``cluster``) chooses the same
way every time; the memo keeps that choice, so such a request skips the virtual host and route
walk. Header changes are still worked out per request (they depend on the request's headers),
and so is everything random or header-dependent: those routes are never memoized. A kept
choice whose whole plan is fixed besides (`DirectRoute`, found by `HttpRules`: no header
change, rewrite, retry or hash policy, fault filter) lets the front end skip the plan too.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from types import MappingProxyType

import attrs

from ..resources import (
    ClusterWeight,
    HeaderAppendAction,
    HeaderToAdd,
    Route,
    RouteAction,
    RouteActionType,
    RouteConfigurationView,
    RouteMatch,
    VirtualHost,
    http_route_matches,
    redirect_location,
    rewrite_path,
)
from ._http_retry import CONSUMED_HEADERS, carries_retry_headers
from ._reply import LocalReply
from ._request import CallRequest
from ._route import RouteChoice

__all__ = [
    "MEMO_LIMIT",
    "DirectRoute",
    "HttpRoute",
    "RouteMemo",
    "apply_header_changes",
    "route_http",
]

_PPM = 1_000_000
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})
Pairs = tuple[tuple[str, str], ...]
#: How many (authority, path) choices a `RouteMemo` keeps (the oldest go first).
MEMO_LIMIT = 1024


@attrs.frozen(kw_only=True)
class HttpRoute:
    """Where a request goes and what each attempt sends."""

    choice: RouteChoice
    path: str
    authority: str
    #: remove every header named here, then add these pairs (`apply_header_changes`)
    headers_to_remove: tuple[str, ...] = ()
    headers_to_add: Pairs = ()


def route_http(
    routes: RouteConfigurationView,
    call: CallRequest,
    rng: random.Random,
    *,
    source: str,
    memo: RouteMemo | None = None,
) -> HttpRoute | LocalReply:
    """Route ``call`` by ``routes`` (``source`` names them in errors: ``RDS resource x``),
    through ``memo`` (of these ``routes``) when given."""
    key = (call.authority, call.path)
    if memo is not None:
        memo.use(routes)
        hit = memo.get(key)
        if hit is not None:
            return _with_headers(hit, call)
    vhost = routes.http_virtual_host_for(call.authority)
    if vhost is None:
        return LocalReply.error(
            404, f"{source}: no virtual host matches the authority {call.authority}"
        )
    route, stable = _first_match(vhost, call, rng, memo)
    if route is None:
        return LocalReply.error(
            404,
            f"{source}: no route of virtual host {vhost.name} matches {call.path} "
            f"(authority {call.authority})",
        )
    if route.redirect is not None:
        location = redirect_location(
            route.redirect, route.match, call.scheme, call.authority, call.path
        )
        return LocalReply(status=route.redirect.response_code, headers=(("location", location),))
    if route.direct_response is not None:
        return LocalReply(status=route.direct_response.status, body=route.direct_response.body)
    action = route.action
    if route.action_type is not RouteActionType.ROUTE or action is None:
        return LocalReply.error(
            404,
            f"{source}: the route matching {call.path} in virtual host {vhost.name} "
            "does not forward",
        )
    chosen = _cluster(routes, vhost, route, call, rng, source)
    if isinstance(chosen, LocalReply):
        return chosen
    path = call.path
    if action.prefix_rewrite or action.regex_rewrite is not None:
        path = rewrite_path(route, path)
    choice = _Choice(
        route=HttpRoute(
            choice=chosen, path=path, authority=action.host_rewrite_literal or call.authority
        ),
        levels=tuple(_levels(route, vhost, routes)),
    )
    if memo is not None and stable and action.cluster:
        memo.put(key, choice)
    return _with_headers(choice, call)


class _Choice:
    """A route choice without the request's header changes, and the levels that make them;
    ``direct`` once the rules found the whole plan of a request to it fixed (`DirectRoute`)."""

    __slots__ = ("direct", "levels", "route")

    def __init__(self, *, route: HttpRoute, levels: tuple[Level, ...]) -> None:
        self.route = route
        self.levels = levels
        self.direct: DirectRoute | None = None


@attrs.frozen(kw_only=True)
class DirectRoute:
    """What every request to one (authority, path) is, when its route fixes it all: one
    attempt in ``cluster`` with the request as sent (no rewrite, no header change), within
    ``timeout`` seconds (None: none), nothing to retry, fault or hash. Such a request needs no
    plan of its own unless its attempt fails (`HttpRules.direct`)."""

    route: HttpRoute
    cluster: str
    timeout: float | None


def _with_headers(choice: _Choice, call: CallRequest) -> HttpRoute:
    """``choice`` with ``call``'s header changes (none, the usual request: shared as is)."""
    view = call.headers
    if not choice.levels and not carries_retry_headers(view):
        return choice.route  # no generator: this is every request's path
    remove, add = header_changes(call.metadata, choice.levels, view)
    return attrs.evolve(choice.route, headers_to_remove=remove, headers_to_add=add)


class RouteMemo:
    """The route choices of one route configuration by (authority, path), for the routes
    whose choice depends on nothing else (see the module's docstring); at most ``limit``,
    the oldest dropped first. Given another route configuration (`use`), it starts again."""

    __slots__ = ("_choices", "_paths", "_routes", "limit")

    def __init__(self, limit: int = MEMO_LIMIT) -> None:
        self._choices: dict[tuple[str, str], _Choice] = {}
        #: each route's match without its header matchers and runtime fraction, by the id of
        #: the route (one of ``_routes``': they live as long as it is used)
        self._paths: dict[int, RouteMatch] = {}
        self._routes: RouteConfigurationView | None = None
        self.limit = limit

    def __len__(self) -> int:
        return len(self._choices)

    def use(self, routes: RouteConfigurationView) -> None:
        """Route by ``routes`` from now on (the choices of others are forgotten)."""
        if routes is not self._routes:
            self._routes = routes
            self._choices.clear()
            self._paths.clear()

    def get(self, key: tuple[str, str]) -> _Choice | None:
        """The choice kept for ``key``."""
        return self._choices.get(key)

    def direct(self, key: tuple[str, str]) -> DirectRoute | None:
        """The fixed plan kept for ``key`` (`DirectRoute`), if any."""
        choice = self._choices.get(key)
        return None if choice is None else choice.direct

    def set_direct(self, key: tuple[str, str], direct: DirectRoute) -> None:
        """Keep ``direct`` for ``key`` when its choice is kept and changes no header."""
        choice = self._choices.get(key)
        if choice is not None and not choice.levels and choice.route is direct.route:
            choice.direct = direct

    def put(self, key: tuple[str, str], choice: _Choice) -> None:
        """Keep ``choice`` for ``key``."""
        choices = self._choices
        if len(choices) >= self.limit:
            del choices[next(iter(choices))]
        choices[key] = choice

    def path_matches(self, route: Route, path: str) -> bool:
        """Whether ``path`` meets ``route``'s match but for its header matchers and runtime
        fraction (then those decided it, and the choice depends on more than the path)."""
        match = self._paths.get(id(route))
        if match is None:
            match = attrs.evolve(route.match, headers=(), runtime_fraction_ppm=None)
            self._paths[id(route)] = match
        return http_route_matches(match, path, _NO_HEADERS, 0)


def _first_match(
    vhost: VirtualHost, call: CallRequest, rng: random.Random, memo: RouteMemo | None
) -> tuple[Route | None, bool]:
    """`match_http_route`'s rules over the request's own header view: one roll per request
    for every runtime fraction, drawn only when a route has one; and (with a ``memo``)
    whether the answer depends on the authority and path alone: no route whose path matched
    on the way has header matchers or a runtime fraction."""
    path = call.path
    roll = -1
    stable = memo is not None
    for route in vhost.http_routes:
        match = route.match
        varies = bool(match.headers)
        if match.runtime_fraction_ppm is not None:
            varies = True
            if roll < 0:
                roll = rng.randrange(_PPM)
        if http_route_matches(match, path, call.headers if match.headers else _NO_HEADERS, roll):
            return route, stable and not varies
        if varies and stable and memo is not None and memo.path_matches(route, path):
            stable = False  # its headers or the roll turned it down: another request's may not
    return None, stable


def _cluster(
    routes: RouteConfigurationView,
    vhost: VirtualHost,
    route: Route,
    call: CallRequest,
    rng: random.Random,
    source: str,
) -> RouteChoice | LocalReply:
    action = route.action
    assert action is not None
    if action.cluster:
        return RouteChoice(virtual_host=vhost, route=route, action=action, cluster=action.cluster)
    if action.weighted_clusters:
        entry = _weighted_pick(action.weighted_clusters, rng.randrange(_total(action)))
        return RouteChoice(
            virtual_host=vhost, route=route, action=action, cluster=entry.name, cluster_weight=entry
        )
    if action.cluster_header:
        name = call.headers.get(action.cluster_header, "")
        if not name:
            return LocalReply.error(
                503, f"{source}: no cluster: the request has no {action.cluster_header} header"
            )
        return RouteChoice(virtual_host=vhost, route=route, action=action, cluster=name)
    plugin = action.cluster_specifier_plugin
    type_url, _config = routes.cluster_specifier_plugins.get(plugin, ("(unknown type)", b""))
    return LocalReply.error(
        503,
        f"{source}: cluster specifier plugin {plugin!r} of type "
        f"{type_url.rpartition('/')[2]} is not supported by this client",
    )


def _total(action: RouteAction) -> int:
    return sum(entry.weight for entry in action.weighted_clusters)


def _weighted_pick(clusters: tuple[ClusterWeight, ...], draw: int) -> ClusterWeight:
    """Envoy's pick for a draw in [0, total weight): the first entry whose running total
    exceeds it."""
    running = 0
    for entry in clusters:
        running += entry.weight
        if draw < running:
            return entry
    return clusters[-1]  # pragma: no cover - the draw is below the total


Level = tuple[tuple[str, ...], tuple[HeaderToAdd, ...]]


def _levels(route: Route, vhost: VirtualHost, routes: RouteConfigurationView) -> list[Level]:
    levels = [
        (route.request_headers_to_remove, route.request_headers_to_add),
        (vhost.request_headers_to_remove, vhost.request_headers_to_add),
        (routes.request_headers_to_remove, routes.request_headers_to_add),
    ]
    return [level for level in levels if level[0] or level[1]]


def header_changes(
    metadata: Iterable[tuple[str, str | bytes]],
    levels: Iterable[Level],
    view: Mapping[str, str],
) -> tuple[tuple[str, ...], Pairs]:
    """The names to remove and the pairs to add that turn the request's headers into what
    Envoy's header mutations at ``levels`` (in order) make of them, with the consumed retry
    headers gone (``view``: the request's headers by lower-case name)."""
    consumed = tuple(name for name in CONSUMED_HEADERS if name in view)
    if not levels:
        return consumed, ()
    original = [(name.lower(), value) for name, value in metadata if isinstance(value, str)]
    pairs = list(original)
    for remove, add in levels:
        pairs = _mutate(pairs, remove, add)
    before, after = _grouped(original), _grouped(pairs)
    gone = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    gone.update(consumed)
    changed = sorted(gone)
    added = tuple(
        (name, value) for name, value in pairs if name in gone and name not in CONSUMED_HEADERS
    )
    return tuple(changed), added


def _grouped(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Each name's values, in order."""
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name, []).append(value)
    return grouped


def _mutate(
    pairs: list[tuple[str, str]], remove: tuple[str, ...], add: tuple[HeaderToAdd, ...]
) -> list[tuple[str, str]]:
    """One level of Envoy's ``HeaderParser::evaluateHeaders``."""
    if remove:
        dropped = set(remove)
        pairs = [pair for pair in pairs if pair[0] not in dropped]
    present = {name for name, _ in pairs}
    overwrite: dict[str, str] = {}
    append: list[tuple[str, str]] = []
    for header in add:
        if not header.value and not header.keep_empty_value:
            continue
        action = header.append_action
        if action is HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD:
            append.append((header.name, header.value))
        elif action is HeaderAppendAction.ADD_IF_ABSENT:
            if header.name not in present:
                append.append((header.name, header.value))
        elif action is HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD or header.name in present:
            overwrite[header.name] = header.value
    if overwrite:
        pairs = [pair for pair in pairs if pair[0] not in overwrite]
        pairs.extend(overwrite.items())
    pairs.extend(append)
    return pairs


def apply_header_changes(
    headers: Iterable[tuple[str, str]], remove: Iterable[str], add: Iterable[tuple[str, str]]
) -> list[tuple[str, str]]:
    """``headers`` without those named in ``remove`` (any case), then ``add`` appended: what
    an attempt sends (`Attempt.headers_to_remove`, `Attempt.headers_to_add`)."""
    dropped = {name.lower() for name in remove}
    kept = [(name, value) for name, value in headers if name.lower() not in dropped]
    kept.extend(add)
    return kept
