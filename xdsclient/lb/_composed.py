"""The composed picker: one `XdsConfig` snapshot in, one pick per call out, gRPC's tree inside.

Why: a custom balancer needs the whole of gRPC's client-side xDS tree, not its parts:

    route (the virtual host's routes, `match_route`)
      -> weighted clusters (a uniform draw in [0, total weight), as C-core's route config
         picks; the first cluster whose running sum exceeds it)
      -> aggregate leaves (`ClusterConfig.leaves`: the first leaf whose tree is not
         TRANSIENT_FAILURE, else the last; gRFC A75 puts a priority policy over the leaves)
      -> drops by category, then circuit breaking (xds_cluster_impl, `_drops`,
         `_circuit_breaker`)
      -> priority failover (`_priority`)
      -> outlier detection, when the cluster configures it (`_outlier`)
      -> the priority's child (`child_policy_for`: locality-weighted target of endpoint
         pickers, or ring hash) -> endpoint.

Each leaf cluster keeps its tree across snapshots (`update` rebuilds only what changed: a
cluster whose views are the same objects is left alone, a new assignment goes to the existing
priority policy, which keeps its children by locality and endpoint key, and hands unchanged
localities on as the same objects so nothing below them is rebuilt). Connectivity comes from
the user's transport (`set_endpoint_state`), outcomes from `call_finished`. The picker keeps
the state of the endpoints some cluster's assignment holds (and of those reported since the
last update) and forgets the rest; a cluster or key new to a cluster is told the states known.
Time and randomness are arguments; `next_deadline` says when timers (failover, retention,
outlier sweeps) are due and `poll` fires them.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import random
from collections.abc import Callable, Mapping
from typing import Any

from .. import ClusterConfig, XdsConfig
from ..resources import ClusterType, ClusterView, Endpoint, RingHash, Route, match_route
from ._base import (
    ChildPolicy,
    ConnectivityState,
    EndpointKey,
    Headers,
    LocalFailure,
    OutlierMode,
    PickOutcome,
    PickRequest,
    PickResult,
    header_map,
    key_of,
)
from ._circuit_breaker import CallCounter, CallCounters
from ._drops import DropPolicy
from ._outlier import OutlierDetector
from ._outlier_envoy import EnvoyOutlierDetector
from ._priority import CHILD_RETENTION, FAILOVER_TIMEOUT, PriorityPolicy
from ._request_hash import request_hash as compute_hash
from ._ring_hash import RING_SIZE_CAP
from ._round_robin import FlatRoundRobin
from ._weighted_target import WeightedTarget

__all__ = ["ComposedPicker"]

_READY = ConnectivityState.READY
_FAILURE = ConnectivityState.TRANSIENT_FAILURE
_COMPLETE = PickOutcome.COMPLETE
#: how many paths `ComposedPicker` remembers the route of
_ROUTE_MEMO = 4096
#: a tree with no flat form (`_Leaf.flatten`): its ``until`` has passed for every pick
_NOT_FLAT = FlatRoundRobin((), ())

ChildFactory = Callable[[ClusterView], ChildPolicy]


def _fail(error: str, cluster: str = "") -> PickResult:
    return PickResult(outcome=PickOutcome.FAIL, error=error, cluster=cluster)


class _Leaf:
    """One EDS leaf cluster's tree: drops, call counter, priority policy, outlier detectors."""

    def __init__(
        self, config: ClusterConfig, counters: CallCounters, composed: ComposedPicker
    ) -> None:
        assert config.cluster is not None
        self.name = config.name
        self.config = config
        self.cluster: ClusterView = config.cluster
        self.counter: CallCounter = counters.counter(config.name, self.cluster.eds_service_name)
        self.drops = DropPolicy()
        #: the result of a drop by each category (built at its first drop)
        self._drop_results: dict[str, PickResult] = {}
        self.detectors: list[OutlierDetector] = []
        self.priority = PriorityPolicy(
            self._make_child,
            failover_timeout=composed.failover_timeout,
            retention=composed.retention,
        )
        self._child_factory = composed.child_factory
        self._detector = (
            EnvoyOutlierDetector if composed.outlier_mode == "envoy" else OutlierDetector
        )
        self._endpoints: object = None
        #: whether picks need a request hash (a ring hash cluster)
        self.ring_hash = isinstance(self.cluster.lb_policy, RingHash)
        #: the tree's picks as one picker (`flatten`), None after any change to the tree
        #: (whoever changes it drops it: `ComposedPicker`'s inputs), `_NOT_FLAT` while the
        #: tree has no flat form
        self.flat: FlatRoundRobin | None = None

    def _make_child(self) -> ChildPolicy:
        child = self._child_factory(self.cluster)
        if self.cluster.outlier_detection is None:
            return child
        detector = self._detector(child, self.cluster.outlier_detection)
        self.detectors.append(detector)
        return detector

    def update(self, config: ClusterConfig, counters: CallCounters, now: float) -> bool:
        """Follow the cluster's new config; True when the assignment went to the priority."""
        self.flat = None
        self.config = config
        assigned = False
        assert config.cluster is not None
        if config.cluster is not self.cluster:
            self.cluster = config.cluster
            self.ring_hash = isinstance(self.cluster.lb_policy, RingHash)
            self.counter = counters.counter(config.name, self.cluster.eds_service_name)
            for detector in self.detectors:
                if self.cluster.outlier_detection is not None:
                    detector.update_config(self.cluster.outlier_detection, now)
        if config.endpoints is not self._endpoints:
            self._endpoints = config.endpoints
            assignment = config.endpoints
            self.drops.update(assignment.drop_overloads if assignment else ())
            if self._drop_results:  # only the categories still configured
                kept = {category for category, _ in self.drops.overloads}
                self._drop_results = {
                    c: result for c, result in self._drop_results.items() if c in kept
                }
            self.priority.update(assignment.priorities if assignment else (), now)
            assigned = True
        alive = set(map(id, self.priority.children.values()))
        self.detectors = [d for d in self.detectors if id(d) in alive]
        return assigned

    def pick(
        self,
        headers: Mapping[str, str],
        request_hash: int | None,
        rand: random.Random,
        now: float,
    ) -> PickResult:
        """One pick in this cluster for a call with ``headers`` (a mapping, as `header_map`
        gives it) and ``request_hash``; its `PickRequest` is made only for the tree's walk."""
        for detector in self.detectors:
            detector.poll(rand, now)
        priority = self.priority
        if self.drops.overloads:
            category = self.drops.drop(priority.state(), rand)
            if category is not None:
                return self._dropped(category)
        counter = self.counter
        if counter.in_flight >= self.cluster.max_requests:  # `CallCounter.admit`, inline
            counter.dropped += 1
            return self._broken()
        flat = self.flat
        if flat is None:
            flat = self.flat = self.flatten()
        if now < flat.until:  # the tree's pick without walking it
            result = flat.pick(rand)
        else:
            if flat is not _NOT_FLAT:
                self.flat = None  # a timer is due: the tree changes, and is flattened anew
            request = PickRequest(headers=headers, request_hash=request_hash)
            result = priority.pick(request, rand, now)
        endpoint = result.endpoint
        if result.outcome is _COMPLETE and endpoint is not None:
            counter.in_flight += 1  # `CallCounter.call_started`, inline
            if priority.hooked:  # else nobody counts calls
                priority.call_started((endpoint.address, endpoint.port))
        if result.cluster != self.name:
            result = _with_cluster(result, self.name)
        return result

    def flatten(self) -> FlatRoundRobin:
        """The tree's picks as one picker, valid until it changes or its next timer is due:
        a READY weighted target of round-robin localities whose calls nobody hears (no
        outlier detection, no hooked child); `_NOT_FLAT` for any other tree."""
        priority = self.priority
        if self.detectors or priority.hooked:
            return _NOT_FLAT
        policy = priority.serving
        flat = policy.flat() if isinstance(policy, WeightedTarget) else None
        if flat is None:
            return _NOT_FLAT
        due = priority.next_deadline()
        flat.until = float("inf") if due is None else due
        return flat

    def _dropped(self, category: str) -> PickResult:
        """A drop by the assignment's ``category`` (C-core's "EDS-configured drop"), its
        result built once per category."""
        result = self._drop_results.get(category)
        if result is None:
            result = self._drop_results[category] = PickResult(
                outcome=PickOutcome.DROP,
                drop_category=category,
                cluster=self.name,
                error=f"EDS-configured drop: {category} (cluster {self.name})",
            )
        return result

    def _broken(self) -> PickResult:
        """A drop by circuit breaking, saying the cluster, its calls in flight and the limit
        (C-core's "circuit breaker drop")."""
        service = self.cluster.eds_service_name
        of = f"cluster {self.name}" + (f" (EDS service {service})" if service else "")
        return PickResult(
            outcome=PickOutcome.DROP,
            cluster=self.name,
            error=(
                f"circuit breaker drop: {of} has {self.counter.in_flight} calls in flight, "
                f"at its max_requests of {self.cluster.max_requests}"
            ),
        )

    def call_finished(
        self,
        endpoint: Endpoint,
        ok: bool,
        now: float,
        elapsed: float,
        load_report: Any,
        http_status: int | None,
        local_failure: LocalFailure | None,
    ) -> None:
        counter = self.counter
        if counter.in_flight > 0:  # `CallCounter.call_finished`, inline
            counter.in_flight -= 1
        if not self.priority.hooked:  # no child reads a call's end
            return
        self.priority.call_finished(
            (endpoint.address, endpoint.port),
            ok,
            now,
            elapsed,
            load_report,
            http_status,
            local_failure,
        )


def _with_cluster(result: PickResult, cluster: str) -> PickResult:
    return PickResult(
        outcome=result.outcome,
        endpoint=result.endpoint,
        connect=result.connect,
        cluster=cluster,
        locality=result.locality,
        drop_category=result.drop_category,
        error=result.error,
    )


class ComposedPicker:
    """gRPC's client-side xDS balancing from an `XdsConfig`: route, weighted clusters,
    aggregate leaves, drops, circuit breaking, priority, outlier detection, child, endpoint.

    ``child_factory`` builds a priority's child for a cluster (by default
    ``child_policy_for(cluster.lb_policy, cluster=cluster.name, ring_size_cap=...,
    use_hash_key=...)``); ``counters`` may be shared with other pickers (gRPC shares call
    counters per cluster and EDS service process-wide). ``ring_size_cap`` is gRPC's
    channel-level cap on both ring sizes (A42, ``GRPC_RING_HASH_CAP``) and ``use_hash_key``
    takes ring hash endpoint keys from ``envoy.lb`` ``hash_key`` metadata (A76); both reach
    the ring hash children the default factory builds, so neither goes with
    ``child_factory`` (a `ValueError`). ``outlier_mode`` says whose outlier detection rules
    apply (`OutlierMode`): gRFC A50's (``"grpc"``, the default) or Envoy's (``"envoy"``, the
    HTTP transport's: consecutive 5xx, gateway and local-origin failures too).
    """

    def __init__(
        self,
        *,
        counters: CallCounters | None = None,
        child_factory: ChildFactory | None = None,
        failover_timeout: float = FAILOVER_TIMEOUT,
        retention: float = CHILD_RETENTION,
        channel_id: int = 0,
        ring_size_cap: int = RING_SIZE_CAP,
        use_hash_key: bool = False,
        outlier_mode: OutlierMode = "grpc",
    ) -> None:
        if outlier_mode not in ("grpc", "envoy"):
            raise ValueError(f"outlier_mode must be 'grpc' or 'envoy', not {outlier_mode!r}")
        if child_factory is not None and (ring_size_cap != RING_SIZE_CAP or use_hash_key):
            raise ValueError(
                "ring_size_cap and use_hash_key configure the default child factory: "
                "give them to the ring hash children child_factory builds instead"
            )
        if ring_size_cap < 1:
            raise ValueError(f"ring_size_cap must be at least 1, not {ring_size_cap}")
        #: what a ``channel_id`` hash policy hashes (gRPC: the channel's own id)
        self.channel_id = channel_id
        #: whose outlier detection rules the clusters follow (`OutlierMode`)
        self.outlier_mode: OutlierMode = outlier_mode
        self.counters = counters if counters is not None else CallCounters()
        self.child_factory: ChildFactory = child_factory or functools.partial(
            _default_child, ring_size_cap=ring_size_cap, use_hash_key=use_hash_key
        )
        self.failover_timeout = failover_timeout
        self.retention = retention
        self._config: XdsConfig | None = None
        self._leaves: dict[str, _Leaf] = {}
        #: each cluster's weighted choice: (cumulative weights, names), and its leaves
        self._splits: dict[int, tuple[list[int], list[str]]] = {}
        #: the route of each path seen, while no route of the snapshot looks at anything but
        #: the path (no header matcher, no runtime fraction); None otherwise
        self._routes_by_path: dict[str, Route | None] | None = None
        #: the transport's reported states of the keys some leaf's assignment holds, and of
        #: the keys reported since the last update (``_strays``, forgotten then unless held)
        self._endpoint_states: dict[EndpointKey, ConnectivityState] = {}
        self._strays: set[EndpointKey] = set()

    @property
    def config(self) -> XdsConfig | None:
        """The snapshot picks follow (None before the first `update`)."""
        return self._config

    def update(self, config: XdsConfig, now: float) -> None:
        """Follow a new snapshot: trees kept by cluster, their state by priority, locality and
        endpoint key; clusters gone from the snapshot are dropped."""
        self._config = config
        leaves: dict[str, _Leaf] = {}
        gone: list[EndpointKey] = []
        states = self._endpoint_states
        for name, entry in config.clusters.items():
            if entry.cluster is None or _aggregate(entry) or entry.error is not None:
                continue
            if entry.endpoints is None and entry.endpoints_error is None:
                continue  # not an EDS cluster (LOGICAL_DNS): no assignment to balance
            leaf = self._leaves.get(name)
            if leaf is None:
                leaf = _Leaf(entry, self.counters, self)
            if leaf.update(entry, self.counters, now):
                priority = leaf.priority
                for key in priority.added_keys:  # what the transport said of them
                    state = states.get(key)
                    if state is not None:
                        priority.set_endpoint_state(key, state, now)
                gone.extend(priority.removed_keys)
            leaves[name] = leaf
        dropped = any(name not in leaves for name in self._leaves)
        self._leaves = leaves
        self._forget(list(states) if dropped else gone)
        self._splits = {}
        path_only = all(
            not route.match.headers and route.match.runtime_fraction_ppm is None
            for route in config.virtual_host.routes
        )
        self._routes_by_path = {} if path_only else None
        self.counters.prune(
            {(leaf.name, leaf.cluster.eds_service_name) for leaf in leaves.values()}
        )

    def _forget(self, candidates: list[EndpointKey]) -> None:
        """Drop the states of ``candidates`` and of the strays that no leaf holds now."""
        states, leaves = self._endpoint_states, self._leaves.values()
        candidates.extend(self._strays)
        self._strays.clear()
        for key in candidates:
            if key in states and not any(leaf.priority.wants(key) for leaf in leaves):
                del states[key]

    def endpoint_states(self) -> dict[EndpointKey, ConnectivityState]:
        """The endpoint states the picker keeps (a copy): those of the keys some cluster's
        assignment holds, and of keys reported since the last `update`."""
        return dict(self._endpoint_states)

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The transport reports an endpoint's connectivity."""
        self._endpoint_states[key] = state
        held = False
        for leaf in self._leaves.values():
            leaf.flat = None
            leaf.priority.set_endpoint_state(key, state, now)
            held = held or leaf.priority.wants(key)
        if not held:
            self._strays.add(key)

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """Every endpoint some tree wants connected now."""
        wanted: dict[EndpointKey, Endpoint] = {}
        for leaf in self._leaves.values():
            for endpoint in leaf.priority.wanted_connections():
                wanted.setdefault(key_of(endpoint), endpoint)
        return tuple(wanted.values())

    def cluster_state(self, cluster: str) -> ConnectivityState:
        """A cluster's state: its priority's, or for an aggregate its first usable leaf's."""
        leaf = self._leaf_for(cluster)
        return _FAILURE if leaf is None else leaf.priority.state()

    def pick(
        self,
        path: str,
        headers: Headers,
        rand: random.Random,
        now: float,
        *,
        request_hash: int | None = None,
    ) -> PickResult:
        """One call's pick: route, cluster, leaf, then the leaf's tree. ``headers`` is a mapping
        with lower-case names, or the call's metadata as (name, value) pairs, repeated names
        joined with ``,`` and binary headers left out as gRPC does (`header_map`). For a ring
        hash cluster the request hash comes from the route's hash policies (`request_hash`)
        unless the caller passes its own ``request_hash``."""
        if self._config is None:
            return PickResult(outcome=PickOutcome.QUEUE)
        headers = header_map(headers)
        route = self._route(path, headers)
        if route is None:
            return _fail(f"no route matches {path}")
        cluster = self._cluster_of(route, rand)
        if cluster is None:
            return _fail(f"the route for {path} does not forward to a cluster")
        leaf = self._leaves.get(cluster)  # the common case: an EDS cluster, no aggregate
        if leaf is None:
            return self._pick_aggregate(cluster, route, headers, rand, now, request_hash)
        return self._pick_leaf(leaf, route, headers, rand, now, request_hash)

    def pick_in(
        self,
        cluster: str,
        headers: Mapping[str, str],
        rand: random.Random,
        now: float,
        *,
        request_hash: int | None = None,
    ) -> PickResult:
        """A pick within ``cluster``, for a caller that has routed the call itself (the call
        path: each attempt of a call picks again in the cluster its route chose). An aggregate
        cluster picks in its first usable leaf; a cluster the snapshot lacks or cannot use
        fails. For ring hash, ``request_hash`` is the call's (computed from ``headers`` and
        the route's policies only by `pick`)."""
        if self._config is None:
            return PickResult(outcome=PickOutcome.QUEUE)
        leaf = self._leaves.get(cluster)
        if leaf is None:
            entry = self._config.clusters.get(cluster)
            if entry is None or entry.error is not None:
                error = entry.error if entry is not None else "not in the configuration"
                return _fail(f"cluster {cluster} is unusable: {error}", cluster)
            leaf = self._leaf_for(cluster)
            if leaf is None:
                return _fail(f"cluster {cluster} has no endpoints to balance", cluster)
        return leaf.pick(headers, request_hash, rand, now)

    def _pick_aggregate(
        self,
        cluster: str,
        route: Route,
        headers: Mapping[str, str],
        rand: random.Random,
        now: float,
        request_hash: int | None,
    ) -> PickResult:
        assert self._config is not None
        entry = self._config.clusters.get(cluster)
        if entry is None or entry.error is not None:
            error = entry.error if entry is not None else None
            return _fail(f"cluster {cluster} is unusable: {error}", cluster)
        leaf = self._leaf_for(cluster)
        if leaf is None:
            return _fail(f"cluster {cluster} has no endpoints to balance", cluster)
        return self._pick_leaf(leaf, route, headers, rand, now, request_hash)

    def _pick_leaf(
        self,
        leaf: _Leaf,
        route: Route,
        headers: Mapping[str, str],
        rand: random.Random,
        now: float,
        request_hash: int | None,
    ) -> PickResult:
        if request_hash is None and leaf.ring_hash:
            assert route.action is not None
            policies = route.action.hash_policies
            request_hash = compute_hash(policies, headers, self.channel_id, rand)
        return leaf.pick(headers, request_hash, rand, now)

    def call_finished(
        self,
        result: PickResult,
        ok: bool,
        now: float,
        *,
        elapsed: float = 0.0,
        load_report: Any = None,
        http_status: int | None = None,
        local_failure: LocalFailure | None = None,
    ) -> None:
        """A call picked by `pick` ended: circuit breaking, outlier detection and least
        request learn it, and a policy with a ``call_ended`` hook (weighted round robin, a
        custom policy) gets its `CallEnd`: ``elapsed`` seconds on the endpoint and the
        backend's ORCA ``load_report`` (an ``OrcaLoadReport``, None when none came).
        Envoy's outlier detection also reads the response's ``http_status``, or the
        ``local_failure`` when none came (gRPC's reads ``ok`` only)."""
        leaf = self._leaves.get(result.cluster)
        if leaf is not None and result.endpoint is not None:
            if not leaf.priority.hooked:  # `_Leaf.call_finished`, inline: the count alone
                counter = leaf.counter
                if counter.in_flight > 0:
                    counter.in_flight -= 1
                return
            leaf.call_finished(
                result.endpoint, ok, now, elapsed, load_report, http_status, local_failure
            )

    def call_abandoned(self, result: PickResult) -> None:
        """A pick whose call has no outcome: the caller did not use it (it picked again, say
        to avoid a host), or gave the call up before any answer came (Envoy's downstream
        reset, which it counts as no upstream failure): handed back to circuit breaking and
        least request, and counted by neither outlier detection nor anything reading
        outcomes."""
        leaf = self._leaves.get(result.cluster)
        if leaf is not None and result.endpoint is not None:
            leaf.counter.call_finished()
            leaf.flat = None
            leaf.priority.call_abandoned(key_of(result.endpoint))

    def load_report(self, key: EndpointKey, report: Any, now: float) -> None:
        """An out-of-band ORCA report (``OrcaLoadReport``) from endpoint ``key``: told to the
        policy of every cluster holding it that has a ``load_report`` hook (weighted round
        robin, a custom policy)."""
        for leaf in self._leaves.values():
            if leaf.priority.wants(key):
                leaf.flat = None
                leaf.priority.load_report(key, report, now)

    def poll(self, rand: random.Random, now: float) -> None:
        """Fire every timer that is due (picks do this for their own cluster)."""
        for leaf in self._leaves.values():
            leaf.flat = None
            leaf.priority.poll(now)
            for detector in leaf.detectors:
                detector.poll(rand, now)

    def next_deadline(self) -> float | None:
        """When a timer is next due (None when none runs)."""
        earliest = None  # asked before every pick: no lists, no call per leaf
        for leaf in self._leaves.values():
            due = leaf.priority.next_deadline()
            if due is not None and (earliest is None or due < earliest):
                earliest = due
            for detector in leaf.detectors:
                due = detector.next_deadline()
                if due is not None and (earliest is None or due < earliest):
                    earliest = due
        return earliest

    def _route(self, path: str, headers: Mapping[str, str]) -> Route | None:
        """`match_route`, remembered by path while only paths decide (at most `_ROUTE_MEMO`
        paths: a picker fed endless distinct paths starts over)."""
        assert self._config is not None
        memo = self._routes_by_path
        if memo is None:
            return match_route(self._config.virtual_host, path, headers)
        if path in memo:
            return memo[path]
        if len(memo) >= _ROUTE_MEMO:
            memo.clear()
        route = memo[path] = match_route(self._config.virtual_host, path, headers)
        return route

    def _cluster_of(self, route: Route, rand: random.Random) -> str | None:
        action = route.action
        if action is None:
            return None
        if action.cluster:
            return action.cluster
        if not action.weighted_clusters:
            return None
        split = self._splits.get(id(action))
        if split is None:
            weights = list(itertools.accumulate(w.weight for w in action.weighted_clusters))
            split = self._splits[id(action)] = (weights, [w.name for w in action.weighted_clusters])
        weights, names = split
        return names[bisect.bisect_right(weights, rand.randrange(weights[-1]))]

    def _leaf_for(self, cluster: str) -> _Leaf | None:
        assert self._config is not None
        entry = self._config.clusters.get(cluster)
        if entry is None:
            return None
        if not _aggregate(entry):
            return self._leaves.get(cluster)
        found = [self._leaves[name] for name in entry.leaves if name in self._leaves]
        for leaf in found:
            if leaf.priority.state() is not _FAILURE:
                return leaf
        return found[-1] if found else None


def _aggregate(entry: ClusterConfig) -> bool:
    return entry.cluster is not None and entry.cluster.type is ClusterType.AGGREGATE


def _default_child(cluster: ClusterView, *, ring_size_cap: int, use_hash_key: bool) -> ChildPolicy:
    from ._policies import child_policy_for

    return child_policy_for(
        cluster.lb_policy,
        cluster=cluster.name,
        ring_size_cap=ring_size_cap,
        use_hash_key=use_hash_key,
    )
