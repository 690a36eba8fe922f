"""What every request of one `XdsTransport` shares: a configuration per authority, one picker
over the clusters of all of them, the connections, and the load reporters.

Why one config watch per authority: an HTTP request names its own authority (its Host), and
the virtual host, hence the clusters, depend on it; the client's dependency walk chooses one
virtual host per watch (gRPC's model: one channel, one authority). So the transport watches the
listener once per authority it has seen, with Envoy's virtual host and route rules
(``watch_config(..., authority=host, http_rules=True)``): the client subscribes to exactly the
clusters the hosts in use reach, and a VHDS route configuration asks for an unknown host's
virtual host on demand (the request waits for it; the client's does-not-exist timer bounds the
wait, and a host the server does not know answers 404). A watch no request used for
``idle_timeout`` seconds is released (its subscriptions go with it).

Why a cap on the watches (``max_authorities``): Envoy routes every request by one table, but
here each Host a request names costs a config watch (and, with VHDS, a request to the server),
so a flood of made-up Host headers would grow them without bound. At the cap, a new authority
takes the place of the least recently used watch no request is running on (released at once,
as an idle one would be later); when every watch has a request running, the new authority is
answered 503 naming the cap, and its watch is not made.

Why one picker over the union: clusters are global in Envoy (its cluster manager), so one
outlier detector, one circuit breaker and one set of connection states serve every virtual
host that routes to a cluster. The picker follows a snapshot made of the clusters of every
authority's latest snapshot (for a cluster two of them hold, the one updated last).

Errors: no virtual host for the authority (the listener and its routes cached, none matching)
answers 404 as Envoy's router does; a listener or route configuration missing, NACKed before
any value, or unreachable answers 503 naming the resource and the reason. A NACK or an outage
after a snapshot leaves that snapshot in use (the watch's ambient error changes nothing).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from typing import Any

import attrs
import httpx

from .. import Clock, ClusterConfig, XdsClient, XdsConfig, XdsError
from .._call import (
    ActiveFaults,
    CallConfig,
    Code,
    HttpRules,
    LocalReply,
    Status,
)
from .._plane import PlaneCore, resource_details
from .._plane._tls_policy import TlsError
from .._settings._targets import listener_for
from ..lb import ConnectivityState, EndpointKey
from ..resources import LISTENER, ROUTE_CONFIGURATION, ListenerView, RouteConfigurationView
from ._connections import DEFAULT_LIMITS, HttpConnection, HttpConnections
from ._tls import TlsContexts, cluster_security

__all__ = ["ACTIVE_FAULTS", "IDLE_TIMEOUT", "MAX_AUTHORITIES", "HttpCore", "RouteWatch"]

logger = logging.getLogger("xdsclient.httpx")

#: requests inside an injected fault, in every transport of the process (the fault filter's
#: ``max_active_faults`` bounds them all)
ACTIVE_FAULTS = ActiveFaults()
#: How long an authority's config watch outlives its last request, by default (seconds).
IDLE_TIMEOUT = 300.0
#: How many authorities (config watches) one transport keeps at once, by default.
MAX_AUTHORITIES = 1000


#: the rules of an authority before its first configuration (no memo: nothing to keep)
_UNMEMOIZED = HttpRules()


class RouteWatch:
    """One authority's configuration: its config watch and the latest answer."""

    __slots__ = (
        "authority",
        "config",
        "in_flight",
        "reply",
        "rules",
        "snapshot",
        "used",
        "watch",
    )

    def __init__(self, authority: str, now: float) -> None:
        self.authority = authority
        self.watch: Any = None
        #: what requests route by; None until the first snapshot and after an error
        self.config: CallConfig | None = None
        #: Envoy's HTTP rules with a route memo of ``config``'s own (made with it)
        self.rules = _UNMEMOIZED
        self.snapshot: XdsConfig | None = None
        #: the answer while there is no configuration (404, 503), None before the first update
        self.reply: LocalReply | None = None
        #: when a request last asked for it, and how many requests use it now
        self.used = now
        self.in_flight = 0


class HttpCore(PlaneCore):
    """The shared state of one transport (see the module's docstring)."""

    closed_status = Status(code=Code.CANCELLED, details="the XdsTransport is closed")
    outlier_mode = "envoy"
    connections: HttpConnections

    def __init__(
        self,
        listener: str,
        client: XdsClient,
        *,
        owns_client: bool,
        rng: random.Random,
        clock: Clock | None = None,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = DEFAULT_LIMITS,
        idle_timeout: float = IDLE_TIMEOUT,
        max_authorities: int = MAX_AUTHORITIES,
    ) -> None:
        if max_authorities < 1:
            raise ValueError(f"max_authorities must be at least 1, not {max_authorities}")
        now = time.monotonic if clock is None else clock.time
        super().__init__(client, owns_client=owns_client, rng=rng, clock=now)
        #: a clock given to test with (`xdsclient.testing.FakeClock`): every time read and
        #: every wait is on it; None: the monotonic clock and the loop's timers
        self._sleeps = clock
        self.listener = listener
        self.idle_timeout = idle_timeout
        self.max_authorities = max_authorities
        #: each cluster's TLS policy and the bootstrap's certificates (as the gRPC channel's)
        self.security = cluster_security(client.config.certificate_providers)
        self.connections = HttpConnections(
            self.on_connectivity,
            http1=http1,
            http2=http2,
            limits=limits,
            tls=TlsContexts(self.security.store, clock=now),
            rng=rng,
            clock=clock,
        )
        self.faults = ACTIVE_FAULTS
        #: why no request can be routed at all (a bad listener name), None otherwise
        self.error: LocalReply | None = None
        self._routes: dict[str, RouteWatch] = {}
        #: when idle watches were last looked for (None: before the first request)
        self._swept: float | None = None

    async def wait_change(self, event: asyncio.Event, until: float | None) -> None:
        """`PlaneCore.wait_change`, sleeping on the clock given to test with when there is
        one (its waits end only as the test moves it past ``until``, never on real time)."""
        sleeps = self._sleeps
        if sleeps is None or until is None:
            await super().wait_change(event, until)
            return
        if until <= self.clock():
            return
        waits = (
            asyncio.ensure_future(event.wait()),
            asyncio.ensure_future(sleeps.sleep_until(until)),
        )
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    # --- the plane's hooks ---

    def _watch_configs(self) -> None:
        listener_for(self.client.config, self.listener)  # a bad name raises here, once

    def _start_failed(self, error: Exception) -> None:
        self.error = LocalReply.error(503, f"listener {self.listener}: {error}")

    def _cancel_watches(self) -> None:
        for route in self._routes.values():
            if route.watch is not None:
                route.watch.cancel()

    def _unreachable(self, cluster: str) -> str | None:
        """When every endpoint of ``cluster`` fails to connect: the words naming one and why
        its last connect failed (a refused connection, a TLS check)."""
        snapshot = self.snapshot
        if (
            snapshot is None
            or self.picker.cluster_state(cluster) is not ConnectivityState.TRANSIENT_FAILURE
        ):
            return None
        entry = snapshot.clusters.get(cluster)
        leaves = entry.leaves if entry is not None else ()
        for leaf in leaves:
            assignment = snapshot.clusters[leaf].endpoints if leaf in snapshot.clusters else None
            for endpoint in assignment.healthy_endpoints() if assignment is not None else ():
                key = (endpoint.address, endpoint.port)
                error = self.connections.last_error(key)
                if error is not None:
                    return (
                        f"cluster {cluster}: no endpoint is reachable; the last connect to "
                        f"{key[0]}:{key[1]} failed: {error}"
                    )
        return None

    def _connect(self, key: EndpointKey) -> None:
        """Connect ahead of a request, under the policy of the first cluster listing ``key``;
        an endpoint whose TLS cannot be set up is in TRANSIENT_FAILURE."""
        try:
            self.connections.connect(key, self.security.policy_of_endpoint(key))
        except (TlsError, RuntimeError) as error:  # RuntimeError: closed
            logger.warning("%s: %s:%s: %s", self.listener, key[0], key[1], error)
            self.picker.set_endpoint_state(key, ConnectivityState.TRANSIENT_FAILURE, self.clock())

    def _open(self, key: EndpointKey) -> bool:
        pools = len(self.connections)
        self._connect(key)
        return len(self.connections) > pools  # a new pool: it opens a connection ahead

    def connect(self, key: EndpointKey, cluster: str) -> HttpConnection:
        """The connection a request picked in leaf ``cluster`` runs on, under that cluster's
        TLS policy."""
        return self.connections.connect(key, self.security.policy_of_cluster(cluster))

    # --- configurations per authority ---

    def config_now(self, authority: str) -> RouteWatch | None:
        """The config watch of ``authority`` when its configuration is there now (the usual
        request: no wait, no coroutine), else None (`call_config` waits or answers)."""
        if self.error is not None or self.closed or not self.started():
            return None
        route = self.route(authority)
        return route if route.config is not None else None

    async def call_config(
        self, authority: str, deadline: float | None
    ) -> tuple[RouteWatch, CallConfig | LocalReply | Status]:
        """The configuration a request for ``authority`` routes by, waiting for the first
        answer of its watch (until ``deadline``), or the local answer there is instead."""
        if not self.started():
            await self.start()
        if self.error is not None:
            return RouteWatch(authority, self.clock()), self.error
        route = self.route(authority)
        if route.config is not None and not self.closed:  # the usual request: no wait
            return route, route.config

        def answer() -> CallConfig | LocalReply | None:
            return route.config if route.config is not None else route.reply

        return route, await self.wait_for(answer, deadline)

    def route(self, authority: str) -> RouteWatch:
        """The config watch of ``authority``, started at its first request."""
        now = self.clock()
        if self._swept is None:
            self._swept = now
        elif now - self._swept >= self.idle_timeout / 4:
            self._sweep(now)
        route = self._routes.get(authority)
        if route is None:
            if len(self._routes) >= self.max_authorities and not self._release_least_used():
                route = RouteWatch(authority, now)  # not kept: the answer is the cap's
                route.reply = LocalReply.error(
                    503,
                    f"listener {self.listener}: {authority} not routed: the transport has a "
                    f"request running on each of its {len(self._routes)} authorities, "
                    f"its max_authorities",
                )
                return route
            route = self._routes[authority] = RouteWatch(authority, now)
            try:
                route.watch = self.client.add_config_watcher(
                    self.listener,
                    functools.partial(self._on_update, route),
                    authority=authority,
                    http_rules=True,
                )
            except (XdsError, ValueError, RuntimeError) as error:
                del self._routes[authority]
                route.reply = LocalReply.error(503, f"listener {self.listener}: {error}")
        route.used = now
        return route

    def _release_least_used(self) -> bool:
        """Release the least recently used watch no request runs on, to make room for a new
        authority at the cap; False when every watch has a request running."""
        idle = [route for route in self._routes.values() if route.in_flight == 0]
        if not idle:
            return False
        oldest = min(idle, key=lambda route: route.used)
        del self._routes[oldest.authority]
        if oldest.watch is not None:
            oldest.watch.cancel()
        logger.info(
            "%s: %s released for a new authority (max_authorities %d)",
            self.listener,
            oldest.authority,
            self.max_authorities,
        )
        self._rebuild()
        return True

    def authorities(self) -> list[str]:
        """The authorities with a config watch, the first watched first."""
        return list(self._routes)

    def _sweep(self, now: float) -> None:
        """Release the watches of authorities no request used for `idle_timeout`."""
        self._swept = now
        idle = [
            route
            for route in self._routes.values()
            if route.in_flight == 0 and now - route.used >= self.idle_timeout
        ]
        for route in idle:
            del self._routes[route.authority]
            if route.watch is not None:
                route.watch.cancel()
        if idle:
            self._rebuild()

    def _on_update(self, route: RouteWatch, update: object) -> None:
        if self.closed or self._routes.get(route.authority) is not route:
            return
        if isinstance(update, XdsConfig):
            route.config = _call_config(update)
            route.rules = HttpRules().memoized()
            route.snapshot = update
            route.reply = None
        elif isinstance(update, XdsError):
            route.config = route.snapshot = None
            route.reply = self._reply_for(route.authority, update)
            level = logging.INFO if route.reply.status == 404 else logging.WARNING
            logger.log(
                level, "%s (%s): no configuration: %s", self.listener, route.authority, update
            )
        else:
            logger.info(
                "%s (%s): %s (the last configuration stays in use)",
                self.listener,
                route.authority,
                update,
            )
            return
        self._rebuild()
        self.notify()

    def catch_up(self, route: RouteWatch) -> None:
        """Take ``route``'s latest snapshot now if its watch published one the callback has
        not delivered yet (a request-time cluster just resolved in it)."""
        latest = route.watch.latest if route.watch is not None else None
        if latest is not None and latest is not route.snapshot:
            self._on_update(route, latest)

    def _rebuild(self) -> None:
        """The picker follows the union of every authority's latest snapshot."""
        snapshots = [r.snapshot for r in self._routes.values() if r.snapshot is not None]
        if not snapshots:
            if self.snapshot is not None:
                self.drop_snapshot()
            return
        if len(snapshots) == 1:
            self.use_snapshot(snapshots[0])
            return
        clusters: dict[str, ClusterConfig] = {}
        for snapshot in snapshots:
            clusters.update(snapshot.clusters)
        self.use_snapshot(attrs.evolve(snapshots[-1], clusters=clusters))

    def _reply_for(self, authority: str, error: XdsError) -> LocalReply:
        """404 when the listener and its routes are cached but have no virtual host for
        ``authority`` (Envoy's router), else 503 naming the resource and why."""
        routes = self._cached_routes()
        if routes is not None:
            table, source = routes
            if table.http_virtual_host_for(authority) is None:
                return LocalReply.error(
                    404, f"{source}: no virtual host matches the authority {authority}"
                )
        return LocalReply.error(503, resource_details(error, self._node_id))

    def _cached_routes(self) -> tuple[RouteConfigurationView, str] | None:
        """The listener's route configuration and how errors name it, when cached."""
        try:
            name, _ = listener_for(self.client.config, self.listener)
        except (XdsError, ValueError):
            return None
        state = self.client.resource_state(LISTENER, name)
        view = state.value if state is not None else None
        if not isinstance(view, ListenerView) or view.api_listener is None:
            return None
        hcm = view.api_listener
        if hcm.route_config is not None:
            return hcm.route_config, f"LDS resource {name}"
        rds = self.client.resource_state(ROUTE_CONFIGURATION, hcm.route_config_name)
        routes = rds.value if rds is not None else None
        if not isinstance(routes, RouteConfigurationView):
            return None
        return routes, f"RDS resource {routes.name}"


def _call_config(snapshot: XdsConfig) -> CallConfig:
    """What requests route by: the listener and its route configuration, with the virtual
    host VHDS gave for the authority when the route configuration does not list it."""
    hcm = snapshot.listener.api_listener
    routes = snapshot.route_config if hcm is not None and hcm.route_config_name else None
    if routes is not None and snapshot.virtual_host not in routes.virtual_hosts:
        routes = attrs.evolve(routes, virtual_hosts=(snapshot.virtual_host, *routes.virtual_hosts))
    return CallConfig.from_listener(snapshot.listener, routes)
