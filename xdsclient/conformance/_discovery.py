"""Discovery: what the server serves to this node, found the way a gRPC client walks it.

Why follow references and not only the wildcards: servers select resources by node and many
serve a cluster by name that no wildcard returns (or answer no wildcard at all), and an
aggregate cluster's children are clusters in their own right (gRFC A37). So the walk starts
from wildcard LDS and CDS (or the listeners and resources given), then asks by name for every
route configuration, cluster (aggregate children included, to gRPC's depth limit) and endpoint
assignment referenced that it has not seen; what is still missing fails ``references-resolve``
(N/A when nothing served names another resource: a vacuous pass would read as a verdict).
"""

from __future__ import annotations

from typing import Any

from .._errors import ResourceDecodeError
from ..resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION, ClusterType
from ._context import BUILTIN_TYPES, FULL_STATE, Context
from ._rules import RuleId

__all__ = ["discover"]

#: how deep aggregate clusters nest at most (gRPC's limit, gRFC A37)
_MAX_DEPTH = 16


async def discover(ctx: Context) -> None:
    """Fill ``ctx.served`` from what the server serves, noting the rules discovery touches."""
    listeners = await _fetch(ctx, LISTENER.type_url, ctx.listeners or None)
    routes: set[str] = set()
    clusters: set[str] = set()
    for _, body in listeners.values():
        manager = getattr(_view(LISTENER.type_url, body), "api_listener", None)
        if manager is None:
            continue
        if manager.route_config_name:
            routes.add(manager.route_config_name)
        elif manager.route_config is not None:
            clusters |= _clusters_of(manager.route_config)
    found_routes = await _fetch(ctx, ROUTE_CONFIGURATION.type_url, sorted(routes)) if routes else {}
    for _, body in found_routes.values():
        view = _view(ROUTE_CONFIGURATION.type_url, body)
        if view is not None:
            clusters |= _clusters_of(view)
    found_clusters = {} if ctx.listeners else await _fetch(ctx, CLUSTER.type_url, None)
    clusters = await _follow_clusters(ctx, clusters, found_clusters)
    assignments = _assignments_of(found_clusters)
    extra = {n for t, n in ctx.resources if t == ENDPOINT.type_url}
    wanted_eds = sorted(assignments | extra)
    found_eds = await _fetch(ctx, ENDPOINT.type_url, wanted_eds) if wanted_eds else {}
    for type_url, name in ctx.resources:
        if type_url != ENDPOINT.type_url:
            await _fetch(ctx, type_url, [name])
    if not (routes or clusters or assignments):  # nothing to follow: the rule did not run
        ctx.note(RuleId.REFERENCES_RESOLVE, None, "no resource served names another to follow")
        return
    missing = sorted(
        [f"route {r}" for r in routes - set(found_routes)]
        + [f"cluster {c}" for c in clusters - set(found_clusters)]
        + [f"endpoints {a}" for a in assignments - set(found_eds)]
    )
    ctx.note(RuleId.REFERENCES_RESOLVE, not missing, f"not served: {', '.join(missing)}")


async def _follow_clusters(
    ctx: Context, referenced: set[str], found: dict[str, tuple[str, bytes]]
) -> set[str]:
    """Ask by name for the referenced clusters not found yet, and for the children of the
    aggregate clusters found, level by level; adds to ``found``; every cluster referenced."""
    asked: set[str] = set()
    for _ in range(_MAX_DEPTH + 1):
        referenced = referenced | _children_of(found)
        unasked = referenced - set(found) - asked
        if not unasked:
            break
        asked |= unasked
        found.update(await _fetch(ctx, CLUSTER.type_url, sorted(unasked)))
    return referenced


def _children_of(clusters: dict[str, tuple[str, bytes]]) -> set[str]:
    children: set[str] = set()
    for _, body in clusters.values():
        view = _view(CLUSTER.type_url, body)
        if view is not None and view.type is ClusterType.AGGREGATE:
            children.update(view.aggregate_children)
    return children


def _assignments_of(clusters: dict[str, tuple[str, bytes]]) -> set[str]:
    assignments: set[str] = set()
    for name, (_, body) in clusters.items():
        view = _view(CLUSTER.type_url, body)
        if view is not None and view.type is ClusterType.EDS:
            assignments.add(view.eds_service_name or name)
    return assignments


async def _fetch(
    ctx: Context, type_url: str, names: list[str] | tuple[str, ...] | None
) -> dict[str, tuple[str, bytes]]:
    """Subscribe on a fresh stream (to ``names``, or the wildcard for None) and collect what
    comes; notes whether it was answered and whether only what was asked came."""
    got: dict[str, tuple[str, bytes]] = {}
    async with ctx.probe(type_url) as probe:
        await ctx.subscribe(probe, type_url, names or [])
        got = await ctx.collect(probe, type_url, set(names) if names else None)
        answered = any(d == "<-" for d, _, _ in probe.log)
        if names is None:
            ctx.note(
                RuleId.WILDCARD_ANSWERED,
                answered,
                "no response to a wildcard subscription",
                probe.evidence(),
            )
        elif answered or not got:
            ctx.note(
                RuleId.INITIAL_REQUEST_ANSWERED, answered or None, "no response", probe.evidence()
            )
        if names is not None:
            extra = sorted(set(got) - set(names))
            ctx.note(
                RuleId.ONLY_REQUESTED_RESOURCES,
                not extra or (type_url in FULL_STATE and not ctx.delta),
                f"not requested: {extra[:5]}",
                probe.evidence(),
            )
    ctx.served.setdefault(type_url, {}).update(got)
    return got


def _view(type_url: str, body: bytes) -> Any:
    try:
        return BUILTIN_TYPES[type_url].decode(body)[1]
    except ResourceDecodeError:
        return None


def _clusters_of(route_config: Any) -> set[str]:
    names = set()
    for vhost in route_config.virtual_hosts:
        for route in vhost.routes:
            action = route.action
            if action is None:
                continue
            if action.cluster:
                names.add(action.cluster)
            names.update(w.name for w in action.weighted_clusters)
    return names
