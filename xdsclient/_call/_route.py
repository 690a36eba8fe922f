"""Route one call: virtual host, route, and the cluster it goes to (gRFC A28), or why not.

Why per call and pure: the virtual host and route depend on the call's authority, path and
metadata, and a weighted split or a runtime fraction on a random draw; the front end passes
the random source, so a seeded one makes every choice reproducible. It follows C-core's xds
resolver (``XdsConfigSelector::GetCallConfig``) and dependency manager:

- the virtual host is `select_virtual_host`'s; none for the authority fails the call with
  UNAVAILABLE ``empty address list (<LDS|RDS> resource <name>: could not find VirtualHost for
  <authority> in RouteConfiguration)`` (LDS and the listener's name when the routes are
  inline): grpcio's exact details, its dependency manager's error seen through the channel's
  empty resolution, checked by tests/call/test_grpc_differential.py;
- routes are tried in order with `RouteMatch.matches`; a route with a runtime fraction rolls
  its own draw in [0, 1e6) (C-core draws per route, so `match_route`'s one roll for every
  route is not used here); no match is UNAVAILABLE ``No matching route found in xDS route
  config``;
- a matched route that does not forward (non-forwarding, redirect, direct response) is
  UNAVAILABLE ``Matching route has inappropriate action``;
- weighted clusters: one draw in [0, total weight), the first cluster whose running total
  exceeds it (clusters of weight 0 never appear in the view);
- a cluster specifier plugin: the only type gRPC knows is RLS, which this library does not
  implement, so the call fails with UNAVAILABLE naming the plugin, its type and the
  RouteConfiguration (C-core would route by RLS; an unsupported optional plugin's routes were
  already left out by the decoder, as C-core does).

`Router` is `route_call` for one configuration, remembered: the answer for an (authority,
path, values of the headers some route of the virtual host tests) is kept while the
configuration lasts (a new configuration makes a new `Router`), unless a route with a runtime
fraction was tried on the way (that draw is per call); a weighted route keeps its cumulative
weights and one choice per cluster and still draws per call. The draws are the ones
`route_call` makes, in the same order, so a seeded source gives the same choices either way.
A virtual host given by the configuration (the snapshot's, which may have come over VHDS) is
used as it is instead of selecting one from the route configuration's own.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Mapping
from types import MappingProxyType

import attrs

from ..resources import (
    ClusterWeight,
    HttpConnectionManager,
    Route,
    RouteAction,
    RouteActionType,
    RouteConfigurationView,
    VirtualHost,
    select_virtual_host,
)
from ._request import CallRequest
from ._status import Code, Status

__all__ = ["NO_ROUTE", "WRONG_ACTION", "RouteChoice", "Router", "route_call"]

#: C-core's details when no route matches the call.
NO_ROUTE = "No matching route found in xDS route config"
#: C-core's details when the matching route does not forward to a cluster.
WRONG_ACTION = "Matching route has inappropriate action"
_PPM = 1_000_000
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})
#: the answers a `Router` keeps, then starts over (endless distinct header values)
_REMEMBERED = 1024


@attrs.frozen(kw_only=True)
class RouteChoice:
    """Where a call goes: the route it matched and the one cluster chosen for it."""

    virtual_host: VirtualHost
    route: Route
    action: RouteAction
    cluster: str
    #: the weighted-cluster entry chosen (its overrides apply), None for a single cluster
    cluster_weight: ClusterWeight | None = None


def route_call(
    hcm: HttpConnectionManager,
    call: CallRequest,
    rng: random.Random,
    *,
    listener_name: str,
    route_config: RouteConfigurationView | None = None,
    virtual_host: VirtualHost | None = None,
) -> RouteChoice | Status:
    """Route ``call`` by the listener's HTTP connection manager: its inline routes, else
    ``route_config`` (the RDS resource it names, which the front end waits for); in
    ``virtual_host`` when the configuration chose it (VHDS), else in the one of the route
    configuration that matches the call's authority."""
    routes = _routes_of(hcm, route_config)
    vhost = virtual_host or select_virtual_host(routes.virtual_hosts, call.authority)
    if vhost is None:
        return _no_virtual_host(hcm, routes, listener_name, call.authority)
    route, _ = _first_match(vhost, call, rng)
    return _choice(routes, vhost, route, rng)


class Router:
    """`route_call` for one configuration, its answers remembered (see the module's
    docstring)."""

    __slots__ = (
        "_fixed",
        "_hcm",
        "_header_names",
        "_listener_name",
        "_memo",
        "_routes",
        "_vhosts",
    )

    def __init__(
        self,
        hcm: HttpConnectionManager,
        *,
        listener_name: str,
        route_config: RouteConfigurationView | None = None,
        virtual_host: VirtualHost | None = None,
    ) -> None:
        self._hcm = hcm
        self._listener_name = listener_name
        self._routes = hcm.route_config if hcm.route_config is not None else route_config
        #: the configuration's virtual host, for every authority (None: select per authority)
        self._fixed = virtual_host
        #: authority -> its virtual host in the route configuration
        self._vhosts: dict[str, VirtualHost | None] = {}
        #: id of a virtual host -> the headers its routes test
        self._header_names: dict[int, tuple[str, ...]] = {}
        self._memo: dict[tuple[str | None, ...], RouteChoice | Status | _Weighted] = {}

    def route(self, call: CallRequest, rng: random.Random) -> RouteChoice | Status:
        """Where ``call`` goes: as `route_call` answers, from memory when it can."""
        routes = self._routes
        if routes is None:
            routes = _routes_of(self._hcm, None)  # raises: the routes are needed
        authority = call.authority
        vhost = self._fixed or self._vhosts.get(authority) or self._virtual_host(routes, authority)
        if vhost is None:
            return _no_virtual_host(self._hcm, routes, self._listener_name, authority)
        names = self._header_names.get(id(vhost))
        if names is None:
            names = self._header_names[id(vhost)] = _tested_headers(vhost)
        if names:
            headers = call.headers
            key: tuple[str | None, ...] = (authority, call.path, *map(headers.get, names))
        else:
            key = (authority, call.path)
        known = self._memo.get(key)
        if known is None:
            route, rolled = _first_match(vhost, call, rng)
            if rolled:  # a runtime fraction's draw decided: nothing to remember
                return _choice(routes, vhost, route, rng)
            known = _remembered(routes, vhost, route)
            if len(self._memo) >= _REMEMBERED:
                self._memo.clear()
            self._memo[key] = known
        return known.draw(rng) if isinstance(known, _Weighted) else known

    def _virtual_host(self, routes: RouteConfigurationView, authority: str) -> VirtualHost | None:
        vhosts = self._vhosts
        if authority in vhosts:
            return vhosts[authority]
        if len(vhosts) >= _REMEMBERED:
            vhosts.clear()
        vhost = vhosts[authority] = select_virtual_host(routes.virtual_hosts, authority)
        return vhost


@attrs.frozen
class _Weighted:
    """A weighted route's choices: one `RouteChoice` per cluster and the running totals of
    their weights, for one draw per call."""

    ends: list[int]
    choices: tuple[RouteChoice, ...]

    def draw(self, rng: random.Random) -> RouteChoice:
        return self.choices[bisect.bisect_right(self.ends, rng.randrange(self.ends[-1]))]


def _tested_headers(vhost: VirtualHost) -> tuple[str, ...]:
    """The names of the headers some route of ``vhost`` tests, each once, in order."""
    names = (header.name for route in vhost.routes for header in route.match.headers)
    return tuple(dict.fromkeys(names))


def _routes_of(
    hcm: HttpConnectionManager, route_config: RouteConfigurationView | None
) -> RouteConfigurationView:
    routes = hcm.route_config if hcm.route_config is not None else route_config
    if routes is None:
        raise ValueError(f"RouteConfiguration {hcm.route_config_name!r} is needed to route")
    return routes


def _no_virtual_host(
    hcm: HttpConnectionManager,
    routes: RouteConfigurationView,
    listener_name: str,
    authority: str,
) -> Status:
    kind, name = ("LDS", listener_name) if hcm.route_config is not None else ("RDS", routes.name)
    return Status(
        code=Code.UNAVAILABLE,
        details=f"empty address list ({kind} resource {name}: could not find "
        f"VirtualHost for {authority} in RouteConfiguration)",
    )


def _choice(
    routes: RouteConfigurationView,
    vhost: VirtualHost,
    route: Route | None,
    rng: random.Random,
) -> RouteChoice | Status:
    """The call's cluster on ``route`` (one draw for weighted clusters), or why none."""
    known = _remembered(routes, vhost, route)
    return known.draw(rng) if isinstance(known, _Weighted) else known


def _remembered(
    routes: RouteConfigurationView, vhost: VirtualHost, route: Route | None
) -> RouteChoice | Status | _Weighted:
    """What `_choice` decides before any draw: the choice or status, or a weighted route's
    choices to draw from."""
    if route is None:
        return Status(code=Code.UNAVAILABLE, details=NO_ROUTE)
    action = route.action
    if route.action_type is not RouteActionType.ROUTE or action is None:
        return Status(code=Code.UNAVAILABLE, details=WRONG_ACTION)
    if action.cluster:
        return RouteChoice(virtual_host=vhost, route=route, action=action, cluster=action.cluster)
    if action.weighted_clusters:
        weights = action.weighted_clusters
        return _Weighted(
            list(itertools.accumulate(entry.weight for entry in weights)),
            tuple(
                RouteChoice(
                    virtual_host=vhost,
                    route=route,
                    action=action,
                    cluster=entry.name,
                    cluster_weight=entry,
                )
                for entry in weights
            ),
        )
    return _unsupported_plugin(routes, action.cluster_specifier_plugin)


def _first_match(
    vhost: VirtualHost, call: CallRequest, rng: random.Random
) -> tuple[Route | None, bool]:
    """The first route of ``vhost`` the call matches, and whether a runtime fraction was
    drawn on the way."""
    path = call.path
    rolled = False
    for route in vhost.routes:
        match = route.match
        roll = None
        if match.runtime_fraction_ppm is not None:
            roll = rng.randrange(_PPM)
            rolled = True
        # the header view is built only for a route that tests headers
        if match.matches(path, call.headers if match.headers else _NO_HEADERS, roll):
            return route, rolled
    return None, rolled


def _unsupported_plugin(routes: RouteConfigurationView, plugin: str) -> Status:
    type_url, _config = routes.cluster_specifier_plugins.get(plugin, ("(unknown type)", b""))
    return Status(
        code=Code.UNAVAILABLE,
        details=f"RouteConfiguration {routes.name}: cluster specifier plugin {plugin!r} of "
        f"type {type_url.rpartition('/')[2]} is not supported by this client",
    )
