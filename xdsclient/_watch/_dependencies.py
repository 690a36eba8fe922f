"""The dependency walk Listener -> RouteConfiguration -> Clusters -> endpoints, as a pure function.

Why pure: given what the cache holds, `walk` says which resources the configuration needs and,
once every one of them is resolved (present, or known to be missing or broken), the complete
snapshot. The client subscribes to what is needed and publishes the snapshot; the walk itself
never does I/O, so every graph shape is tested without a server (gRFC A74's XdsDependencyManager).

Rules:
- The listener must be an API listener; its routes come from RDS or inline.
- The virtual host is chosen for the authority (gRPC's rules, or Envoy's HTTP router's with
  ``http_rules``: `RouteConfigurationView.http_virtual_host_for`, its routes
  `VirtualHost.http_routes`); the clusters are those its routes reach, but for routes that
  resolve their cluster at request time (`request_time_timeout`: a ``cluster_header`` route,
  or one Envoy's on-demand filter covers with ODCDS). When
  none of the route configuration's matches and it carries ``vhds``, the virtual host of the
  authority is asked for on demand over VHDS (``<route configuration>/<authority>``): the
  snapshot waits for it, and a host the server does not know is "no virtual host".
- An EDS cluster needs its ClusterLoadAssignment; LOGICAL_DNS needs nothing more; an aggregate
  cluster expands depth-first into its ordered, de-duplicated leaves, at most 16 levels deep,
  and a cycle is an error for the aggregate that closes it (gRFCs A37, A75).
- A snapshot is published only when everything is resolved, so it is never torn; an error in
  one cluster is reported for that cluster without withholding the others.
- Dynamic clusters (``dynamic``: clusters a data plane subscribed to at request time, gRFC
  A74's cluster subscriptions) are walked too, but never withhold a snapshot: one still
  pending is left out of ``clusters`` until it resolves (present, or known missing or broken),
  and one pending again (a new cluster waiting for its endpoints) keeps its previous entry.

Cost: a walk given the previous snapshot reuses its `ClusterConfig` for every cluster
whose cluster and endpoint views are the very objects it holds (the cache keeps the object of a
resource whose bytes did not change), so comparing snapshots is a pointer compare per cluster.
When only endpoint assignments changed, `rewalk_endpoints` replaces just the clusters that use
them: O(changed) after one dict copy, since endpoints never change what the walk needs.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Collection, Mapping, MutableMapping
from functools import partial
from typing import Any, Protocol

import attrs

from .._errors import ResourceDoesNotExistError, XdsError
from .._protocol import ResourceStatus
from .._slots import slot_setters
from ..resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION, VIRTUAL_HOST
from ..resources._cluster import ClusterType, ClusterView
from ..resources._endpoint import ClusterLoadAssignmentView
from ..resources._listener import HttpConnectionManager, ListenerView
from ..resources._on_demand import odcds_timeout, on_demand_filter, request_time_timeout
from ..resources._route import RouteConfigurationView
from ..resources._route_values import Route, VirtualHost
from ..resources._routing import select_virtual_host
from ..resources._virtual_host import vhds_name

__all__ = [
    "MAX_AGGREGATE_DEPTH",
    "ClusterConfig",
    "Resolved",
    "StatesLookup",
    "TypeLookup",
    "Walk",
    "XdsConfig",
    "endpoint_users",
    "rewalk_endpoints",
    "walk",
]

MAX_AGGREGATE_DEPTH = 16


class Resolved(Protocol):
    """What the walk reads of a cached resource (a `ResourceState`, or the cache's own entry)."""

    @property
    def status(self) -> ResourceStatus: ...

    @property
    def value(self) -> Any: ...

    @property
    def error(self) -> XdsError | None: ...


Lookup = Callable[[str, str], "Resolved | None"]
#: The lookup of one type: type URL -> (name -> cache state). A walk asks for it once per type,
#: then reads a name with one call (the client's registry reads the type's table directly).
TypeLookup = Callable[[str], Callable[[str], "Resolved | None"]]
#: The lookup of many names of one type: (type URL, names) -> their cache states, in order (the
#: client's registry reads the type's table in C when every name is old-style).
StatesLookup = Callable[[str, list[str]], list["Resolved | None"]]


@attrs.frozen(kw_only=True)
class ClusterConfig:
    """One cluster of a snapshot: what it resolved to, or why it could not be.

    EDS clusters carry ``endpoints`` (or ``endpoints_error``); aggregate clusters carry their
    ordered ``leaves``; ``error`` is set when the cluster itself is unusable.
    """

    name: str
    cluster: ClusterView | None = None
    endpoints: ClusterLoadAssignmentView | None = None
    endpoints_error: XdsError | None = attrs.field(default=None, eq=False)
    leaves: tuple[str, ...] = ()
    error: XdsError | None = attrs.field(default=None, eq=False)

    @property
    def ok(self) -> bool:
        """Whether the cluster is usable: ``error`` is None."""
        return self.error is None


@attrs.frozen(kw_only=True)
class XdsConfig:
    """A complete, consistent configuration for one listener."""

    listener: ListenerView
    route_config: RouteConfigurationView
    virtual_host: VirtualHost
    #: every cluster the virtual host's routes reach, with aggregate children, and every
    #: dynamic cluster resolved so far (`ConfigWatch.resolve_cluster`)
    clusters: Mapping[str, ClusterConfig] = attrs.field(hash=False)
    #: the clusters in ``clusters`` only because a data plane subscribed to them at request
    #: time (no route walked ahead reaches them)
    dynamic_clusters: frozenset[str] = frozenset()

    def on_demand_timeout(self, route: Route) -> float | None:
        """How long to resolve ``route``'s cluster at request time, in seconds (with
        `ConfigWatch.resolve_cluster`), when ``route`` (of ``virtual_host``) is a
        ``cluster_header`` route or Envoy's on-demand filter covers it with ODCDS; None when
        its clusters were walked ahead (they are in ``clusters``)."""
        return request_time_timeout(self.listener.api_listener, self.virtual_host, route)


@attrs.frozen(kw_only=True)
class Walk:
    """What the walk found: the snapshot (None while something is pending) and what it needs."""

    config: XdsConfig | XdsError | None
    #: type URL -> the names of that type the configuration needs
    needed: Mapping[str, frozenset[str]]

    @property
    def wanted(self) -> frozenset[tuple[str, str]]:
        """What it needs as (type URL, name) pairs."""
        return frozenset((t, name) for t, names in self.needed.items() for name in names)


_PENDING = object()


def _value(lookup: Lookup, type_url: str, name: str) -> Any:
    """The usable value of a resource, its error, or `_PENDING`."""
    state = lookup(type_url, name)
    if state is None or (not state.status.holds_value and state.error is None):
        return _PENDING
    if state.status.holds_value:
        return state.value
    return state.error or ResourceDoesNotExistError(type_url, name, "unavailable")


def walk(
    listener_name: str,
    authority: str,
    lookup: Lookup,
    previous: XdsConfig | None = None,
    *,
    http_rules: bool = False,
    dynamic: Collection[str] = (),
    by_type: TypeLookup | None = None,
    by_names: StatesLookup | None = None,
) -> Walk:
    """Walk from ``listener_name`` over what ``lookup`` (type URL, name -> cache state) holds;
    ``previous``: the last snapshot, whose unchanged cluster entries are reused; ``http_rules``:
    choose the virtual host and its routes as Envoy's HTTP router does; ``dynamic``: the
    clusters subscribed to at request time (never withholding the snapshot); ``by_type``: the
    same lookup one type at a time (`TypeLookup`, faster for thousands of names), used instead
    of ``lookup`` when given; ``by_names``: many names of one type at once (`StatesLookup`),
    for the thousands of clusters and assignments."""
    values = _Values(by_type or (lambda type_url: partial(lookup, type_url)), by_names)
    value = values.value

    def done(config: XdsConfig | XdsError | None) -> Walk:
        needed = {t: frozenset(names) for t, names in values.needed.items() if names}
        return Walk(config=config, needed=needed)

    listener = value(LISTENER.type_url, listener_name)
    if listener is _PENDING:
        return done(None)
    if isinstance(listener, XdsError):
        return done(listener)
    manager = listener.api_listener
    if manager is None:
        return done(XdsError(f'Listener "{listener_name}" is not an API listener'))
    route_config = manager.route_config
    if route_config is None:
        route_config = value(ROUTE_CONFIGURATION.type_url, manager.route_config_name)
        if route_config is _PENDING:
            return done(None)
        if isinstance(route_config, XdsError):
            return done(route_config)
    if http_rules:
        virtual_host = route_config.http_virtual_host_for(authority)
    else:
        virtual_host = select_virtual_host(route_config.virtual_hosts, authority)
    if virtual_host is None and route_config.vhds:
        on_demand = _on_demand_virtual_host(route_config.name, authority, value)
        if on_demand is _PENDING:
            return done(None)
        if isinstance(on_demand, VirtualHost):
            virtual_host = on_demand
    if virtual_host is None:
        return done(
            XdsError(
                f'RouteConfiguration "{route_config.name}" has no virtual host for {authority!r}'
            )
        )
    routes = virtual_host.http_routes if http_rules else virtual_host.routes
    roots = _roots(manager, virtual_host, routes)
    clusters: dict[str, ClusterConfig] = {}
    reuse = {} if previous is None else previous.clusters
    # Resolve every root (no short cut) so that everything needed is known in one pass.
    complete = _resolve_eds_roots(list(roots), clusters, values, reuse)
    if complete is None:  # a root of another kind: each root resolved in turn
        resolved = [_resolve(root, (), clusters, values, reuse) for root in roots]
        complete = all(leaves is not None for leaves in resolved)
    if not complete:
        return done(None)
    added = _dynamic(dynamic, clusters, values, reuse)
    return done(
        XdsConfig(
            listener=listener,
            route_config=route_config,
            virtual_host=virtual_host,
            clusters=clusters,
            dynamic_clusters=added,
        )
    )


class _Values:
    """A walk's reads: each name's usable value, its error, or `_PENDING`, noting every name
    read as needed. One lookup per type per walk (`TypeLookup`); the clusters' and endpoint
    assignments' readers are bound once, as a walk reads one of each per cluster."""

    __slots__ = ("_by_names", "_by_type", "cluster", "endpoint", "needed")

    def __init__(self, by_type: TypeLookup, by_names: StatesLookup | None = None) -> None:
        self._by_type = by_type
        self._by_names = by_names
        self.needed: dict[str, set[str]] = {}
        self.cluster = self.reader(CLUSTER.type_url)
        self.endpoint = self.reader(ENDPOINT.type_url)

    def reader(self, type_url: str) -> Callable[[str], Any]:
        """The value of one name of ``type_url`` (see `_value`), noting it as needed."""
        get = self._by_type(type_url)
        note = self.needed.setdefault(type_url, set()).add

        def read(name: str) -> Any:
            note(name)
            state = get(name)
            if state is None:
                return _PENDING
            if state.status.holds_value:
                return state.value
            if state.error is None:
                return _PENDING
            return state.error or ResourceDoesNotExistError(type_url, name, "unavailable")

        return read

    def value(self, type_url: str, name: str) -> Any:
        """The value of a name of any type (the listener, its routes, a virtual host)."""
        return self.reader(type_url)(name)

    def values(self, type_url: str, names: list[str]) -> list[Any]:
        """`value` of each of ``names`` (thousands of clusters or assignments), in one loop,
        their states read in one call (`StatesLookup`) when the walk was given one."""
        self.needed.setdefault(type_url, set()).update(names)
        by_names = self._by_names
        if by_names is None:
            states: list[Resolved | None] = list(map(self._by_type(type_url), names))
        else:
            states = by_names(type_url, names)
        found: list[Any] = []
        add = found.append
        for name, state in zip(names, states, strict=True):
            if state is None:
                add(_PENDING)
            elif state.status.holds_value:
                add(state.value)
            elif state.error is None:
                add(_PENDING)
            else:
                add(state.error or ResourceDoesNotExistError(type_url, name, "unavailable"))
        return found


def _roots(
    manager: HttpConnectionManager, virtual_host: VirtualHost, routes: tuple[Route, ...]
) -> dict[str, None]:
    """The clusters ``routes`` (of ``virtual_host``) reach, in order, but for routes that
    resolve their cluster at request time (a ``cluster_header`` route names none)."""
    http_filter = on_demand_filter(manager)
    if http_filter is not None:
        return dict.fromkeys(
            name
            for route in routes
            if route.action is not None and odcds_timeout(http_filter, virtual_host, route) is None
            for name in route.action.clusters
        )
    roots: dict[str, None] = {}
    for route in routes:  # the common case, `RouteAction.clusters` inlined: N routes
        action = route.action
        if action is None:
            continue
        if action.cluster:
            roots[action.cluster] = None
        else:
            for weighted in action.weighted_clusters:
                roots[weighted.name] = None
    return roots


def _dynamic(
    names: Collection[str],
    clusters: dict[str, ClusterConfig],
    values: _Values,
    reuse: Mapping[str, ClusterConfig],
) -> frozenset[str]:
    """Walk the dynamic clusters ``names`` into ``clusters``: each one resolved with all it
    needs goes in; one pending stays out (leaving nothing of it behind) unless the previous
    snapshot (``reuse``) has it, whose entries it keeps. Returns the names added that no
    route reached."""
    added = []
    for name in names:
        if name in clusters:
            continue
        scratch: ChainMap[str, ClusterConfig] = ChainMap({}, clusters)  # writes go to the new map
        if _resolve(name, (), scratch, values, reuse) is not None:
            clusters.update(scratch.maps[0])
        elif name in reuse:
            entry = reuse[name]
            for leaf in (name, *entry.leaves):
                if leaf in reuse and leaf not in clusters:
                    clusters[leaf] = reuse[leaf]
        else:
            continue
        added.append(name)
    return frozenset(added)


def _on_demand_virtual_host(
    route_config: str, authority: str, value: Callable[[str, str], Any]
) -> Any:
    """The virtual host VHDS gives ``authority`` in ``route_config`` (asked for on demand),
    `_PENDING`, or None when the server has none for it (or the authority makes no name)."""
    try:
        name = vhds_name(route_config, authority)
    except ValueError:
        return None
    found = value(VIRTUAL_HOST.type_url, name)
    if found is _PENDING:
        return _PENDING
    return None if isinstance(found, XdsError) else found.virtual_host


def _resolve_eds_roots(
    names: list[str],
    clusters: MutableMapping[str, ClusterConfig],
    values: _Values,
    reuse: Mapping[str, ClusterConfig],
) -> bool | None:
    """`_resolve` of every root (``names``, none in ``clusters`` yet) when each is an EDS
    cluster, an error or pending, as in a walk of thousands of EDS clusters: each type read in
    one pass (`_Values.values`) and no call per cluster but its entry's. Whether all resolved;
    None, with nothing added, when a root is of another kind (`_resolve` then walks them)."""
    found = values.values(CLUSTER.type_url, names)
    eds = _EDS
    for cluster in found:
        if (
            cluster is not _PENDING
            and not isinstance(cluster, XdsError)
            and cluster.type is not eds
        ):
            return None
    services = [
        cluster.eds_service_name
        for cluster in found
        if cluster is not _PENDING and not isinstance(cluster, XdsError)
    ]
    endpoints_of = iter(values.values(ENDPOINT.type_url, services))
    complete = True
    for name, cluster in zip(names, found, strict=True):
        if cluster is _PENDING:
            complete = False
        elif isinstance(cluster, XdsError):
            clusters[name] = ClusterConfig(name=name, error=cluster)
        elif (endpoints := next(endpoints_of)) is _PENDING:
            complete = False
        else:
            old = reuse.get(name)
            if old is not None and old.cluster is cluster and _holds(old, endpoints):
                clusters[name] = old  # the same views: the same entry
            else:
                clusters[name] = _eds_entry(name, cluster, endpoints)
    return complete


_EDS = ClusterType.EDS


def _resolve(
    name: str,
    stack: tuple[str, ...],
    clusters: MutableMapping[str, ClusterConfig],
    values: _Values,
    reuse: Mapping[str, ClusterConfig],
) -> tuple[str, ...] | None:
    """Resolve cluster ``name`` into ``clusters``; returns its leaves, or None while pending."""
    if name in clusters:
        return clusters[name].leaves
    cluster = values.cluster(name)
    if cluster is _PENDING:
        return None
    if isinstance(cluster, XdsError):
        clusters[name] = ClusterConfig(name=name, error=cluster)
        return ()
    if cluster.type is ClusterType.EDS:
        endpoints = values.endpoint(cluster.eds_service_name)
        if endpoints is _PENDING:
            return None
        old = reuse.get(name)
        if old is not None and old.cluster is cluster and _holds(old, endpoints):
            clusters[name] = old  # the same views: the same entry
        else:
            clusters[name] = _eds_entry(name, cluster, endpoints)
        return (name,)
    if cluster.type is ClusterType.LOGICAL_DNS:
        clusters[name] = ClusterConfig(name=name, cluster=cluster, leaves=(name,))
        return (name,)
    return _aggregate(name, cluster, stack, clusters, values, reuse)


def _eds_entry(name: str, cluster: ClusterView, endpoints: Any) -> ClusterConfig:
    """An EDS cluster's entry, given its endpoints' value or error: `ClusterConfig(name=name,
    cluster=cluster, endpoints=... or endpoints_error=..., leaves=(name,))`, built through its
    slots (one per cluster of a walk; tests/test_dependencies.py holds it to __init__)."""
    entry: ClusterConfig = _new(ClusterConfig)
    _e_name(entry, name)
    _e_cluster(entry, cluster)
    if isinstance(endpoints, XdsError):
        _e_endpoints(entry, None)
        _e_endpoints_error(entry, endpoints)
    else:
        _e_endpoints(entry, endpoints)
        _e_endpoints_error(entry, None)
    _e_leaves(entry, (name,))
    _e_error(entry, None)
    return entry


_new = object.__new__
_e_name, _e_cluster, _e_endpoints, _e_endpoints_error, _e_leaves, _e_error = slot_setters(
    ClusterConfig
)


def _holds(entry: ClusterConfig, endpoints: Any) -> bool:
    """Whether an EDS entry already holds this endpoints value (or error) object."""
    return entry.endpoints is endpoints or entry.endpoints_error is endpoints


def endpoint_users(config: XdsConfig) -> dict[str, list[str]]:
    """Which EDS clusters of ``config`` use each endpoint assignment name."""
    users: dict[str, list[str]] = {}
    for name, entry in config.clusters.items():
        cluster = entry.cluster
        if cluster is not None and cluster.type is ClusterType.EDS:  # made by `_eds_entry`
            users.setdefault(cluster.eds_service_name, []).append(name)
    return users


def rewalk_endpoints(
    config: XdsConfig,
    changed: Collection[str],
    lookup: Lookup,
    users: Mapping[str, list[str]],
) -> XdsConfig | None:
    """``config`` after only the endpoint assignments ``changed`` changed: what `walk` would
    give, without walking again. ``users``: `endpoint_users` of ``config``. None when it cannot
    tell (a name no cluster uses as spelled, or an assignment pending again): walk instead.

    Sound because endpoints never decide what else the walk needs: an EDS cluster's entry is
    its cluster and its endpoints' value or error, and no other entry depends on them."""
    clusters: dict[str, ClusterConfig] | None = None
    for eds_name in changed:
        names = users.get(eds_name)
        if names is None:
            return None
        endpoints = _value(lookup, ENDPOINT.type_url, eds_name)
        if endpoints is _PENDING:
            return None
        for name in names:
            old = config.clusters[name]
            if _holds(old, endpoints):
                continue
            assert old.cluster is not None  # an EDS entry (see endpoint_users)
            if clusters is None:
                clusters = dict(config.clusters)
            clusters[name] = _eds_entry(name, old.cluster, endpoints)
    if clusters is None:
        return config
    return attrs.evolve(config, clusters=clusters)


def _aggregate(
    name: str,
    cluster: ClusterView,
    stack: tuple[str, ...],
    clusters: MutableMapping[str, ClusterConfig],
    values: _Values,
    reuse: Mapping[str, ClusterConfig],
) -> tuple[str, ...] | None:
    path = (*stack, name)
    if len(path) > MAX_AGGREGATE_DEPTH:
        error = XdsError(f'aggregate cluster "{path[0]}" nests deeper than {MAX_AGGREGATE_DEPTH}')
        clusters[name] = ClusterConfig(name=name, cluster=cluster, error=error)
        return ()
    leaves: dict[str, None] = {}
    pending = False
    for child in cluster.aggregate_children:
        if child in path:
            cycle = " -> ".join((*path[path.index(child) :], child))
            clusters[name] = ClusterConfig(
                name=name, cluster=cluster, error=XdsError(f"aggregate cluster cycle: {cycle}")
            )
            return ()
        child_leaves = _resolve(child, path, clusters, values, reuse)
        if child_leaves is None:
            pending = True
        else:
            leaves.update(dict.fromkeys(child_leaves))
    if pending:
        return None
    child_error = next(
        (
            clusters[c].error
            for c in cluster.aggregate_children
            if c in clusters and clusters[c].error
        ),
        None,
    )
    if not leaves and child_error is not None:
        clusters[name] = ClusterConfig(name=name, cluster=cluster, error=child_error)
        return ()
    clusters[name] = ClusterConfig(name=name, cluster=cluster, leaves=tuple(leaves))
    return tuple(leaves)
