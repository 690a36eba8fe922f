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

__all__ = ["NO_ROUTE", "WRONG_ACTION", "RouteChoice", "route_call"]

#: C-core's details when no route matches the call.
NO_ROUTE = "No matching route found in xDS route config"
#: C-core's details when the matching route does not forward to a cluster.
WRONG_ACTION = "Matching route has inappropriate action"
_PPM = 1_000_000
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


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
) -> RouteChoice | Status:
    """Route ``call`` by the listener's HTTP connection manager: its inline routes, else
    ``route_config`` (the RDS resource it names, which the front end waits for)."""
    routes = hcm.route_config if hcm.route_config is not None else route_config
    if routes is None:
        raise ValueError(f"RouteConfiguration {hcm.route_config_name!r} is needed to route")
    vhost = select_virtual_host(routes.virtual_hosts, call.authority)
    if vhost is None:
        kind, name = (
            ("LDS", listener_name) if hcm.route_config is not None else ("RDS", routes.name)
        )
        return Status(
            code=Code.UNAVAILABLE,
            details=f"empty address list ({kind} resource {name}: could not find "
            f"VirtualHost for {call.authority} in RouteConfiguration)",
        )
    route = _first_match(vhost, call, rng)
    if route is None:
        return Status(code=Code.UNAVAILABLE, details=NO_ROUTE)
    action = route.action
    if route.action_type is not RouteActionType.ROUTE or action is None:
        return Status(code=Code.UNAVAILABLE, details=WRONG_ACTION)
    if action.cluster:
        return RouteChoice(virtual_host=vhost, route=route, action=action, cluster=action.cluster)
    if action.weighted_clusters:
        chosen = _weighted_pick(action.weighted_clusters, rng)
        return RouteChoice(
            virtual_host=vhost,
            route=route,
            action=action,
            cluster=chosen.name,
            cluster_weight=chosen,
        )
    return _unsupported_plugin(routes, action.cluster_specifier_plugin)


def _first_match(vhost: VirtualHost, call: CallRequest, rng: random.Random) -> Route | None:
    path = call.path
    for route in vhost.routes:
        match = route.match
        roll = rng.randrange(_PPM) if match.runtime_fraction_ppm is not None else None
        # the header view is built only for a route that tests headers
        if match.matches(path, call.headers if match.headers else _NO_HEADERS, roll):
            return route
    return None


def _weighted_pick(clusters: tuple[ClusterWeight, ...], rng: random.Random) -> ClusterWeight:
    ends = list(itertools.accumulate(entry.weight for entry in clusters))
    key = rng.randrange(ends[-1])
    return clusters[bisect.bisect_right(ends, key)]


def _unsupported_plugin(routes: RouteConfigurationView, plugin: str) -> Status:
    type_url, _config = routes.cluster_specifier_plugins.get(plugin, ("(unknown type)", b""))
    return Status(
        code=Code.UNAVAILABLE,
        details=f"RouteConfiguration {routes.name}: cluster specifier plugin {plugin!r} of "
        f"type {type_url.rpartition('/')[2]} is not supported by this client",
    )
