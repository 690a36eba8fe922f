"""What every call of one `XdsChannel` shares: the configuration, the connections and their
TLS, out-of-band ORCA streams, and gRPC's words for what fails.

Why apart from the channel and the calls: the shared shell of the call path
(`xdsclient._plane.PlaneCore`: the picker, the pick loop, the waiting, the load reporters) is
the same for every front end; what is gRPC's is here: one config watch for the channel's
target, grpc.aio connections per endpoint and TLS policy (gRFC A29), ORCA streams (A51), and
C-core's statuses. Each decision is synchronous (the snapshot is applied, the pick is made, the
connections are held or released in one step); only waiting is asynchronous.

Calls wait for a configuration only until their deadline. With an error instead (the listener
or its routes missing or deleted, the server unreachable before any snapshot), a call fails
with UNAVAILABLE naming the resource and the reason, unless it is ``wait_for_ready``: then it
waits for a snapshot, as gRPC's queued calls do. A NACK or an outage after a snapshot leaves
that snapshot in use (the watch says so with an ambient error, which changes nothing here).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import grpc

from .. import XdsClient, XdsConfig, XdsError
from .._call import (
    ActiveFaults,
    CallConfig,
    CallRequest,
    Code,
    Status,
    direct_cluster,
    route_call,
)
from .._plane import PlaneCore, resource_details
from .._settings._targets import listener_for
from ..lb import ConnectivityState, EndpointKey, aggregate_state, key_of, orca_interval_of
from ..resources import (
    LISTENER,
    ROUTE_CONFIGURATION,
    CustomLbPolicy,
    LeastRequest,
    ListenerView,
    PickFirst,
    RingHash,
    RoundRobin,
    RouteConfigurationView,
    WeightedRoundRobin,
    WrrLocality,
    select_virtual_host,
)
from ._connections import Connection, Connections
from ._oob import OobStreams
from ._requests import retries_enabled, retry_buffer_size
from ._tls import ClusterSecurity, TlsError

__all__ = ["CLOSED", "ChannelCore", "authority_of"]

logger = logging.getLogger("xdsclient.grpc")

#: The status of a call the channel's `close` ended (C-core's details).
CLOSED = Status(code=Code.CANCELLED, details="Channel closed!")
#: the multi-callables a channel keeps (`ChannelCore.multicallable`)
_MULTICALLABLES = 256
_FACTORIES = {
    (False, False): "unary_unary",
    (False, True): "unary_stream",
    (True, False): "stream_unary",
    (True, True): "stream_stream",
}
_FAILING = ConnectivityState.TRANSIENT_FAILURE
#: the methods whose direct cluster a configuration keeps (`ChannelCore.direct`), then starts
#: over
_DIRECT_KEPT = 256
#: the policies that read no per-call load report
_NO_REPORTS = (RoundRobin, RingHash, LeastRequest, PickFirst)


#: calls inside an injected fault, in every channel of the process: A33's ``max_active_faults``
#: bounds them all, as C-core's one counter does
ACTIVE_FAULTS = ActiveFaults()


class ChannelCore(PlaneCore):
    """The shared state of one channel (see the module's docstring)."""

    closed_status = CLOSED
    security: ClusterSecurity
    connections: Connections

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
        super().__init__(client, owns_client=owns_client, rng=rng, clock=clock)
        self.target = target
        #: the data-plane authority calls are routed by (gRFC A47: the target's path)
        self.authority = authority_of(target)
        #: the bytes a request-streaming call keeps for its retries (C-core's per-RPC limit)
        self.retry_buffer_size = retry_buffer_size(options)
        #: whether calls are retried at all (C-core's ``grpc.enable_retries``, on by default)
        self.retries_enabled = retries_enabled(options)
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
        #: the leaf clusters whose calls' trailers nobody reads: a policy without per-call ORCA
        #: reports (round robin, ring hash, least request, pick first) and no load reporting
        self.quiet: frozenset[str] = frozenset()
        #: why there is no configuration (UNAVAILABLE), None while none came yet
        self.error: Status | None = None
        #: the loop the channel's calls run on: its first call's (None before it), kept as
        #: grpc.aio's channels keep theirs (asyncio's running-loop lookup is a system call)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._watch: Any = None
        self._multicallables: dict[tuple[Any, ...], Any] = {}
        #: method -> `direct`'s answer by ``config`` for calls without metadata, and for calls
        #: with metadata (both emptied when it changes), read by calls
        self.directs: dict[str, str | None] = {}
        self.metadata_directs: dict[str, str | None] = {}

    # --- the plane's hooks ---

    def _watch_configs(self) -> None:
        self._watch = self.client.add_config_watcher(self.target, self._on_update)

    def _start_failed(self, error: Exception) -> None:
        # nothing was added to the client: calls fail with why
        self.error = Status(code=Code.UNAVAILABLE, details=f"{self.target}: {error}")

    def _cancel_watches(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    async def _close_connections(self) -> None:
        await self.oob.close()
        await super()._close_connections()

    # --- state and waiting ---

    def state(self) -> ConnectivityState | None:
        """The channel's connectivity from what it knows (None: nothing yet, CONNECTING)."""
        if self.error is not None and self.config is None:
            return ConnectivityState.TRANSIENT_FAILURE
        if self.config is None:
            return None
        states = self.connections.states()
        return aggregate_state(states) if states else ConnectivityState.TRANSIENT_FAILURE

    async def call_config(
        self, deadline: float | None, wait_for_ready: bool
    ) -> CallConfig | Status:
        """The configuration a call routes by, waiting for one (see the module's docstring)."""

        def answer() -> CallConfig | Status | None:
            if self.config is not None:
                return self.config
            if self.error is not None and not wait_for_ready:
                return self.error
            return None

        return await self.wait_for(answer, deadline)

    def direct(self, config: CallConfig, method: str, metadata: bool = False) -> str | None:
        """The cluster a call to ``method`` (with ``metadata`` or without) goes to on one
        attempt that is its whole plan, None when its plan decides more (`direct_cluster` on
        ``config``, the current configuration, the answer kept while it lasts)."""
        direct = self.metadata_directs if metadata else self.directs
        if method in direct:
            return direct[method]
        if len(direct) >= _DIRECT_KEPT:
            direct.clear()
        found = direct[method] = direct_cluster(
            config, self.authority, method, self.retries_enabled, metadata
        )
        return found

    def multicallable(
        self,
        channel: Any,
        key: tuple[str, bool, bool, bool],
        serializer: Callable[[Any], bytes] | None,
        deserializer: Callable[[bytes], Any] | None,
    ) -> Any:
        """grpc.aio's multi-callable for ``key`` (method, request streaming, response
        streaming, registered: a registered call, as generated code's ``_registered_method``
        asks, which C-core registers once per channel instead of at every call) on an
        endpoint's ``channel``, made once (grpc.aio builds one per call otherwise). Kept for
        at most `_MULTICALLABLES` keys, then started over, so the channels of closed
        connections are not held for long."""
        full = (channel, *key, serializer, deserializer)
        found = self._multicallables.get(full)
        if found is None:
            if len(self._multicallables) >= _MULTICALLABLES:
                self._multicallables.clear()
            method, request_streaming, response_streaming, registered = key
            factory = _FACTORIES[request_streaming, response_streaming]
            found = self._multicallables[full] = getattr(channel, factory)(
                method,
                request_serializer=serializer,
                response_deserializer=deserializer,
                _registered_method=registered,
            )
        return found

    def _unreachable(self, cluster: str) -> str | None:
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

    # --- inputs ---

    def _on_update(self, update: object) -> None:
        if self.closed:
            return
        if isinstance(update, XdsConfig):
            self._apply(update)
        elif isinstance(update, XdsError):
            logger.warning("%s: no configuration: %s", self.target, update)
            self.config = None
            self.directs = {}
            self.metadata_directs = {}
            details = f"empty address list ({resource_details(update, self._node_id)})"
            self.error = self._unroutable() or Status(code=Code.UNAVAILABLE, details=details)
            self.drop_snapshot()
            self.oob.want({})
        else:
            logger.info("%s: %s (the last configuration stays in use)", self.target, update)
            return
        self.notify()

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
        hcm = snapshot.listener.api_listener
        routes = snapshot.route_config if hcm is not None and hcm.route_config_name else None
        self.config = CallConfig.from_listener(snapshot.listener, routes, snapshot.virtual_host)
        self.directs = {}
        self.metadata_directs = {}
        self.quiet = _quiet(snapshot)
        self.error = None
        self.use_snapshot(snapshot)  # the first connections at once, the rest over the next turns
        for key in self.oob.want(_oob_wanted(snapshot)):
            connection = self._connection_for(key) if key in self.connections else None
            if connection is not None:
                self.oob.connectivity(
                    key, connection.state, functools.partial(_channel_of, connection)
                )

    def connect(self, key: EndpointKey, cluster: str) -> Connection:
        """The connection a call picked in leaf ``cluster`` runs on, under that cluster's TLS
        policy; `TlsError` when its certificates cannot be had."""
        return self.connections.connect(key, self.security.policy_of_cluster(cluster))

    def _open(self, key: EndpointKey) -> bool:
        try:
            policy = self.security.policy_of_endpoint(key)
        except TlsError:  # refused: `_connect` says so and fails the endpoint
            self._connect(key)
            return False
        state = self.connections.state_of(key, policy)
        if state is _FAILING and policy is not None:  # remade if its certificates changed
            self._connect(key)
        elif state is None:
            self._connect(key)
            return True
        return False

    def _connect(self, key: EndpointKey) -> None:
        self._connection_for(key)

    def _connection_for(self, key: EndpointKey) -> Connection | None:
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
        self.notify()

    def _oob_channel(self, key: EndpointKey) -> grpc.aio.Channel | None:
        connection = self._connection_for(key)
        return None if connection is None else connection.channel

    def _on_load_report(self, key: EndpointKey, report: Any) -> None:
        self.picker.load_report(key, report, self.clock())


def _channel_of(connection: Connection) -> grpc.aio.Channel:
    return connection.channel


def _quiet(snapshot: XdsConfig) -> frozenset[str]:
    """The clusters of ``snapshot`` whose calls' ORCA reports nobody reads (`ChannelCore.quiet`):
    weighted round robin and custom policies read them, and load reporting their named
    metrics."""
    quiet = []
    for name, entry in snapshot.clusters.items():
        cluster = entry.cluster
        if cluster is None or cluster.lrs_server_self:
            continue
        policy = cluster.lb_policy
        if isinstance(policy, WrrLocality):
            policy = policy.child
        if isinstance(policy, _NO_REPORTS):
            quiet.append(name)
    return frozenset(quiet)


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


def authority_of(target: str) -> str:
    """The authority a target's calls are routed by: an xdstp name as it is, the path of an
    ``xds://[authority]/name`` target without its leading ``/``, or a plain name."""
    if target.startswith("xds:"):
        return urllib.parse.urlsplit(target).path.removeprefix("/")
    return target
