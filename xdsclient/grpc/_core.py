"""What every call of one `XdsChannel` shares: the configuration, the picker, the connections,
the load reporters, and the waiting for any of them to change.

Why apart from the channel and the calls: the config watch's callback, the connections'
connectivity reports and the calls all read and write the same few things; keeping them here
keeps each decision in one place and the calls to what gRPC's call does. Each decision is
synchronous (the snapshot is applied, the pick is made, the connections are held or released in
one step); only waiting is asynchronous, on an event replaced at every change (a queued call
picks again after each change, gRPC's queued-pick rule).

Calls wait for a configuration only until their deadline. With an error instead (the listener
or its routes missing or deleted, the server unreachable before any snapshot), a call fails
with UNAVAILABLE naming the resource and the reason, unless it is ``wait_for_ready``: then it
waits for a snapshot, as gRPC's queued calls do. A NACK or an outage after a snapshot leaves
that snapshot in use (the watch says so with an ambient error, which changes nothing here).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from .. import ClusterConfig, ClusterLoad, XdsClient, XdsConfig, XdsError
from .._call import ActiveFaults, CallConfig, CallRequest, Code, Status, route_call
from .._settings._targets import listener_for
from ..lb import (
    ComposedPicker,
    ConnectivityState,
    EndpointKey,
    PickOutcome,
    PickResult,
    aggregate_state,
    key_of,
    orca_interval_of,
)
from ..resources import (
    LISTENER,
    ROUTE_CONFIGURATION,
    CustomLbPolicy,
    ListenerView,
    RouteConfigurationView,
    WeightedRoundRobin,
    WrrLocality,
    select_virtual_host,
)
from ._connections import Connection, Connections
from ._oob import OobStreams
from ._status import resource_details
from ._tls import ClusterSecurity, TlsError

__all__ = ["CLOSED", "ChannelCore", "authority_of"]

logger = logging.getLogger("xdsclient.grpc")

#: The status of a call the channel's `close` ended (C-core's details).
CLOSED = Status(code=Code.CANCELLED, details="Channel closed!")
_DEADLINE = Status(code=Code.DEADLINE_EXCEEDED, details="Deadline Exceeded")
#: the multi-callables a channel keeps (`ChannelCore.multicallable`)
_MULTICALLABLES = 256
_FACTORIES = {
    (False, False): "unary_unary",
    (False, True): "unary_stream",
    (True, False): "stream_unary",
    (True, True): "stream_stream",
}
#: the connections `_connect_wanted` opens in one turn of the loop
_OPENS_PER_TURN = 64
_FAILING = ConnectivityState.TRANSIENT_FAILURE
_COMPLETE = PickOutcome.COMPLETE
_QUEUE = PickOutcome.QUEUE
_FAIL = PickOutcome.FAIL


#: calls inside an injected fault, in every channel of the process: A33's ``max_active_faults``
#: bounds them all, as C-core's one counter does
ACTIVE_FAULTS = ActiveFaults()


class ChannelCore:
    """The shared state of one channel (see the module's docstring)."""

    def __init__(
        self,
        target: str,
        client: XdsClient,
        *,
        owns_client: bool,
        options: tuple[tuple[str, Any], ...],
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
        fallback: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.target = target
        #: the data-plane authority calls are routed by (gRFC A47: the target's path)
        self.authority = authority_of(target)
        self.client = client
        self.rng = rng
        self.clock = clock
        #: gRFC A42's ``channel_id``: one random 64-bit value per channel
        self.channel_id = rng.getrandbits(64)
        self.picker = ComposedPicker(channel_id=self.channel_id)
        #: each cluster's TLS policy and the bootstrap's certificates (gRFC A29)
        self.security = ClusterSecurity(client.config.certificate_providers)
        self.connections = Connections(
            self._on_connectivity,
            options,
            secure=lambda policy: self.security.store.security(policy, self.clock()),
            fallback=fallback,
        )
        #: out-of-band ORCA streams, for the clusters whose policy asks for them
        self.oob = OobStreams(self._on_load_report)
        self.faults = ACTIVE_FAULTS
        self.config: CallConfig | None = None
        self.snapshot: XdsConfig | None = None
        #: why there is no configuration (UNAVAILABLE), None while none came yet
        self.error: Status | None = None
        self.closed = False
        self._owns_client = owns_client
        self._changed = asyncio.Event()
        self._watch: Any = None
        self._start: asyncio.Task[None] | None = None
        self._loads: dict[str, ClusterLoad] = {}
        self._multicallables: dict[tuple[Any, ...], Any] = {}
        #: the pass of `_connect_wanted` due at the next turn of the loop
        self._connecting: asyncio.Handle | None = None
        self._node_id = client.config.node.id

    # --- lifecycle ---

    def started(self) -> bool:
        """Whether `start` ran."""
        return self._start is not None

    def kick(self) -> None:
        """Start watching the target's configuration, once."""
        if self._start is None:
            self._start = asyncio.ensure_future(self._begin())

    async def start(self) -> None:
        """`kick`, and wait until the watch is in place (or failed)."""
        self.kick()
        assert self._start is not None
        await asyncio.shield(self._start)

    async def _begin(self) -> None:
        try:
            if self._owns_client:
                await self.client.start()
            self._watch = self.client.add_config_watcher(self.target, self._on_update)
        except (XdsError, ValueError, RuntimeError) as error:
            # nothing was added to the client: calls fail with why
            self.error = Status(code=Code.UNAVAILABLE, details=f"{self.target}: {error}")
            self._notify()

    def begin_close(self) -> None:
        """Refuse new picks: stop watching and wake every waiting call (they fail)."""
        if self.closed:
            return
        self.closed = True
        if self._watch is not None:
            self._watch.cancel()
        if self._connecting is not None:
            self._connecting.cancel()
        self._notify()

    async def close(self) -> None:
        """`begin_close`, then close the connections and the client this channel made."""
        self.begin_close()
        if self._start is not None:
            await asyncio.gather(self._start, return_exceptions=True)
            if self._watch is not None:
                self._watch.cancel()
        await self.oob.close()
        await self.connections.close()
        if self._owns_client:
            await self.client.close()

    # --- state and waiting ---

    def state(self) -> ConnectivityState | None:
        """The channel's connectivity from what it knows (None: nothing yet, CONNECTING)."""
        if self.error is not None and self.config is None:
            return ConnectivityState.TRANSIENT_FAILURE
        if self.config is None:
            return None
        states = self.connections.states()
        return aggregate_state(states) if states else ConnectivityState.TRANSIENT_FAILURE

    def changed(self) -> asyncio.Event:
        """The event the next change sets."""
        return self._changed

    async def wait_change(self, event: asyncio.Event, until: float | None) -> None:
        """Wait for ``event`` (a change) or until ``until`` on `clock`."""
        if until is None:
            await event.wait()
            return
        timeout = until - self.clock()
        if timeout <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def call_config(
        self, deadline: float | None, wait_for_ready: bool
    ) -> CallConfig | Status:
        """The configuration a call routes by, waiting for one (see the module's docstring)."""
        while True:
            if self.closed:
                return CLOSED
            if self.config is not None:
                return self.config
            if self.error is not None and not wait_for_ready:
                return self.error
            if deadline is not None and self.clock() >= deadline:
                return _DEADLINE
            await self.wait_change(self._changed, deadline)

    async def pick(
        self,
        cluster: str,
        headers: Mapping[str, str],
        request_hash: int,
        deadline: float | None,
        wait_for_ready: bool,
    ) -> PickResult | Status:
        """A pick in ``cluster``: COMPLETE, DROP or FAIL (waiting while it queues, and while it
        fails for a ``wait_for_ready`` call), or the status that ended the wait."""
        picker = self.picker
        while True:
            if self.closed:
                return CLOSED
            event = self._changed
            now = self.clock()
            refused = self.security.invalid(cluster)
            if refused is not None:
                return Status(
                    code=Code.UNAVAILABLE,
                    details=f"CDS resource {cluster}: invalid resource: {refused} "
                    f"(node ID:{self._node_id})",
                )
            timer = picker.next_deadline()
            if timer is not None and timer <= now:
                picker.poll(self.rng, now)
                timer = picker.next_deadline()
            result = picker.pick_in(cluster, headers, self.rng, now, request_hash=request_hash)
            for endpoint in result.connect:
                self._connect(key_of(endpoint))
            outcome = result.outcome
            if outcome is _COMPLETE:
                return result
            if outcome is _FAIL and not wait_for_ready:
                return self.failure(cluster, result)
            if outcome is not _QUEUE and outcome is not _FAIL:
                return result  # a drop fails even a wait-for-ready call
            if deadline is not None and now >= deadline:
                return _DEADLINE
            self._connect_wanted()
            until = deadline if timer is None else min(timer, deadline or timer)
            await self.wait_change(event, until)

    def pick_now(
        self, cluster: str, headers: Mapping[str, str], request_hash: int
    ) -> PickResult | Status | None:
        """`pick` without waiting: its answer when it has one at once (COMPLETE, DROP, FAIL),
        None when the pick would queue, fails, or a timer is due, or the cluster's TLS is refused
        (`pick` waits, fires the timer or fails the call)."""
        picker = self.picker
        timer = picker.next_deadline()
        if (
            self.closed
            or (timer is not None and timer <= self.clock())
            or self.security.invalid(cluster) is not None
        ):
            return None
        result = picker.pick_in(cluster, headers, self.rng, self.clock(), request_hash=request_hash)
        for endpoint in result.connect:
            self._connect(key_of(endpoint))
        outcome = result.outcome
        if outcome is _COMPLETE:
            return result
        if outcome is _QUEUE or outcome is _FAIL:
            return None  # `pick` waits or fails it, with the call's deadline and wait_for_ready
        return result

    def multicallable(
        self,
        channel: Any,
        key: tuple[str, bool, bool],
        serializer: Callable[[Any], bytes] | None,
        deserializer: Callable[[bytes], Any] | None,
    ) -> Any:
        """grpc.aio's multi-callable for ``key`` (method, request streaming, response
        streaming) on an endpoint's ``channel``, made once (grpc.aio builds one per call
        otherwise). Kept for at most `_MULTICALLABLES` keys, then started over, so the channels
        of closed connections are not held for long."""
        full = (channel, *key, serializer, deserializer)
        found = self._multicallables.get(full)
        if found is None:
            if len(self._multicallables) >= _MULTICALLABLES:
                self._multicallables.clear()
            method, request_streaming, response_streaming = key
            factory = _FACTORIES[request_streaming, response_streaming]
            found = self._multicallables[full] = getattr(channel, factory)(
                method, request_serializer=serializer, response_deserializer=deserializer
            )
        return found

    def failure(self, cluster: str, result: PickResult) -> Status:
        """The status of a failed pick: C-core's for a cluster or assignment the snapshot could
        not resolve (``CDS resource <name>: does not exist (node ID:<id>)``) and for a cluster
        with no endpoints or whose every endpoint failed to connect, else the picker's
        reason."""
        snapshot = self.snapshot
        entry = snapshot.clusters.get(cluster) if snapshot is not None else None
        error = None if entry is None else (entry.error or entry.endpoints_error)
        if error is not None:
            details = resource_details(error, self._node_id)
        elif (empty := _empty_assignment(entry)) is not None:
            details = empty
        elif (failed := self._all_failing(cluster)) is not None:
            details = failed
        else:
            details = result.error or f"cluster {cluster}: no endpoint is reachable"
        return Status(code=Code.UNAVAILABLE, details=details)

    def _all_failing(self, cluster: str) -> str | None:
        """C-core's words when every endpoint of the cluster failed to connect, naming the last
        that failed (grpc.aio does not tell why it failed: the OS error C-core adds is left
        out)."""
        last = self.connections.last_failure
        if (
            last is None
            or self.picker.cluster_state(cluster) is not ConnectivityState.TRANSIENT_FAILURE
        ):
            return None
        address = f"ipv6:[{last[0]}]" if ":" in last[0] else f"ipv4:{last[0]}"
        return (
            "connections to all backends failing; last error: "
            f"UNKNOWN: {address}:{last[1]}: Failed to connect to remote host"
            f" (xDS node ID:{self._node_id})"
        )

    # --- load reporting ---

    def load_of(self, cluster: str) -> ClusterLoad | None:
        """The load reporter of leaf ``cluster`` when it reports load (``lrs_server``)."""
        load = self._loads.get(cluster)
        if load is not None:
            return load
        snapshot = self.snapshot
        entry = snapshot.clusters.get(cluster) if snapshot is not None else None
        if entry is None or entry.cluster is None or not entry.cluster.lrs_server_self:
            return None
        try:
            load = self._loads[cluster] = self.client.load_reporter(entry.cluster)
        except XdsError:  # the client closed
            return None
        return load

    # --- inputs ---

    def _on_update(self, update: object) -> None:
        if self.closed:
            return
        if isinstance(update, XdsConfig):
            self._apply(update)
        elif isinstance(update, XdsError):
            logger.warning("%s: no configuration: %s", self.target, update)
            self.config = None
            self.snapshot = None
            details = f"empty address list ({resource_details(update, self._node_id)})"
            self.error = self._unroutable() or Status(code=Code.UNAVAILABLE, details=details)
            self.connections.hold_only(())
            self.oob.want({})
        else:
            logger.info("%s: %s (the last configuration stays in use)", self.target, update)
            return
        self._notify()

    def _unroutable(self) -> Status | None:
        """When the listener and its routes are cached but have no virtual host for the
        channel's authority: the status the call path gives for that (C-core's words)."""
        try:
            name, _ = listener_for(self.client.config, self.target)
        except (XdsError, ValueError):
            return None
        state = self.client.resource_state(LISTENER, name)
        view = state.value if state is not None else None
        if not isinstance(view, ListenerView) or view.api_listener is None:
            return None
        routes = None
        if view.api_listener.route_config is None:
            rds = self.client.resource_state(
                ROUTE_CONFIGURATION, view.api_listener.route_config_name
            )
            routes = rds.value if rds is not None else None
            if not isinstance(routes, RouteConfigurationView):
                return None
        table = view.api_listener.route_config or routes
        assert table is not None
        if select_virtual_host(table.virtual_hosts, self.authority) is not None:
            return None
        config = CallConfig.from_listener(view, routes)
        routed = route_call(
            config.hcm,
            CallRequest(authority=self.authority, path="/"),
            self.rng,
            listener_name=name,
            route_config=routes,
        )
        return routed if isinstance(routed, Status) else None

    def _apply(self, snapshot: XdsConfig) -> None:
        now = self.clock()
        hcm = snapshot.listener.api_listener
        routes = snapshot.route_config if hcm is not None and hcm.route_config_name else None
        self.config = CallConfig.from_listener(snapshot.listener, routes, snapshot.virtual_host)
        self.snapshot = snapshot
        self.error = None
        self.picker.update(snapshot, now)
        self._loads = {}  # the client gives the same load again per (cluster, service)
        self.connections.hold_only(self.security.update(snapshot.clusters))
        self._open_wanted()  # the first connections at once, the rest over the next turns
        for key in self.oob.want(_oob_wanted(snapshot)):
            connection = self._connect(key) if key in self.connections else None
            if connection is not None:
                self.oob.connectivity(
                    key, connection.state, functools.partial(_channel_of, connection)
                )

    def _connect_wanted(self) -> None:
        """Open the connections the picker wants, once per turn of the loop however many
        reports asked, at most `_OPENS_PER_TURN` new ones a turn (the rest on the next turns):
        a call picks as soon as one endpoint is READY, while thousands still open."""
        if self._connecting is None and not self.closed:
            self._connecting = asyncio.get_running_loop().call_soon(self._open_wanted)

    def _open_wanted(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()
            self._connecting = None
        if self.closed:
            return
        opened = 0
        for endpoint in self.picker.wanted_connections():
            key = key_of(endpoint)
            try:
                policy = self.security.policy_of_endpoint(key)
            except TlsError:  # refused: `_connect` says so and fails the endpoint
                self._connect(key)
                continue
            state = self.connections.state_of(key, policy)
            if state is _FAILING and policy is not None:  # remade if its certificates changed
                self._connect(key)
            elif state is None:
                self._connect(key)
                opened += 1
                if opened == _OPENS_PER_TURN:
                    self._connect_wanted()
                    return

    def connect(self, key: EndpointKey, cluster: str) -> Connection:
        """The connection a call picked in leaf ``cluster`` runs on, under that cluster's TLS
        policy; `TlsError` when its certificates cannot be had."""
        return self.connections.connect(key, self.security.policy_of_cluster(cluster))

    def _connect(self, key: EndpointKey) -> Connection | None:
        """Connect ahead of a call (or for an ORCA stream), under the policy of the first
        cluster listing ``key``; an endpoint whose certificates cannot be had is in
        TRANSIENT_FAILURE (None)."""
        try:
            return self.connections.connect(key, self.security.policy_of_endpoint(key))
        except TlsError as error:
            logger.warning("%s: %s:%s: %s", self.target, key[0], key[1], error)
            self.picker.set_endpoint_state(key, ConnectivityState.TRANSIENT_FAILURE, self.clock())
            return None

    def _on_connectivity(self, key: EndpointKey, state: ConnectivityState) -> None:
        self.picker.set_endpoint_state(key, state, self.clock())
        self._connect_wanted()
        if key in self.oob.wanted:
            self.oob.connectivity(key, state, lambda: self._oob_channel(key))
        self._notify()

    def _oob_channel(self, key: EndpointKey) -> grpc.aio.Channel | None:
        connection = self._connect(key)
        return None if connection is None else connection.channel

    def _on_load_report(self, key: EndpointKey, report: Any) -> None:
        self.picker.load_report(key, report, self.clock())


def _channel_of(connection: Connection) -> grpc.aio.Channel:
    return connection.channel


def _oob_wanted(snapshot: XdsConfig) -> dict[EndpointKey, float]:
    """The endpoints of clusters whose policy asks for out-of-band reports (weighted round
    robin with A58's ``enable_oob_load_report``, a custom policy registered with an
    ``orca_interval``), each with the shortest period asked for it."""
    wanted: dict[EndpointKey, float] = {}
    for entry in snapshot.clusters.values():
        policy = entry.cluster.lb_policy if entry.cluster is not None else None
        if isinstance(policy, WrrLocality):
            policy = policy.child
        period: float | None = None
        if isinstance(policy, WeightedRoundRobin) and policy.enable_oob_load_report:
            period = policy.oob_reporting_period
        elif isinstance(policy, CustomLbPolicy):
            period = orca_interval_of(policy)
        if period is None or entry.endpoints is None:
            continue
        for endpoint in entry.endpoints.healthy_endpoints():
            key = key_of(endpoint)
            wanted[key] = min(wanted.get(key, period), period)
    return wanted


def _empty_assignment(entry: ClusterConfig | None) -> str | None:
    """C-core's words for an assignment with no endpoint: no localities, or only empty ones
    (listed as C-core lists them)."""
    assignment = entry.endpoints if entry is not None else None
    if assignment is None:
        return None
    localities = [locality for group in assignment.priorities for locality in group]
    if any(locality.endpoints for locality in localities):
        return None
    if not localities:
        reason = "contains no localities"
    else:
        listed = ", ".join(
            f'{{region="{loc.locality.region}", zone="{loc.locality.zone}", '
            f'sub_zone="{loc.locality.sub_zone}"}}'
            for loc in localities
        )
        reason = f"contains empty localities: [{listed}]"
    return f"no children in weighted_target policy (EDS resource {assignment.name}: {reason})"


def authority_of(target: str) -> str:
    """The authority a target's calls are routed by: an xdstp name as it is, the path of an
    ``xds://[authority]/name`` target without its leading ``/``, or a plain name."""
    if target.startswith("xds:"):
        return urllib.parse.urlsplit(target).path.removeprefix("/")
    return target
