"""XdsClient: the asyncio client users embed.

Why this shape: the client is a facade over parts that each own one thing, and it builds and
wires them. The `Registry` owns every watcher's registration (`watch`, `add_watcher`,
`watch_config`) and every read of the cache (`ResourceCache`, which holds every resource keyed by
authority, type and name and outlives any stream), with the checks that make a name a cache key.
The `ServerPool` owns the servers: each `StreamDriver` owns one protocol session and runs it over
a transport. `TaskOwner` owns every task, so `close` ends all of them. Commands take one path: a
watcher's first arrival or last departure becomes a subscribe/unsubscribe the registry routes to
the pool (name -> authority -> server -> the driver of its stream); nothing else touches a
session, and nothing below the client calls back into it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any

import attrs

from ._observe._csds import client_config
from ._observe._events import Observer, Observers
from ._observe._logs import ProtocolLogger
from ._observe._metrics import enable_metrics
from ._observe._stats import ClientStats, StatsRecorder
from ._protocol import ResourceState
from ._protocol._load_store import ClusterLoad
from ._protocol._services import PER_TYPE_SERVICES
from ._runtime._clock import Clock, LoopClock
from ._runtime._tasks import TaskOwner
from ._settings._bootstrap import load_bootstrap
from ._settings._config import ChannelCredentials, ClientConfig, NodeConfig, ServerConfig
from ._settings._options import ClientOptions
from ._settings._sources import FileSource, RestSource, Source
from ._settings._targets import listener_for
from ._shell._pool import ServerPool
from ._transports import TransportFactory
from ._watch._config_watch import ConfigUpdate, ConfigWatch
from ._watch._dependencies import XdsConfig
from ._watch._registry import Registry, check_name
from ._watch._resolve import Outcome
from ._watch._resolver import Resolver
from ._watch._wait import wait_for, wait_for_config
from ._watch._watchers import ResourceWatcher, Watch, WatchHandle, check_watcher
from .resources import (
    BUILTIN_TYPES,
    CLUSTER,
    LISTENER,
    VIRTUAL_HOST,
    ClusterView,
    ResourceType,
    cluster_type,
    listener_type,
)
from .resources._virtual_host import vhds_name

__all__ = ["XdsClient"]


class XdsClient:
    """An xDS client: watch resources from management servers.

    Configure it with a server address (``XdsClient("127.0.0.1:5678", node_id="me")``), a
    bootstrap (a path, a dict, or a `ClientConfig`), or nothing, in which case the gRPC bootstrap
    variables (``GRPC_XDS_BOOTSTRAP``, ``GRPC_XDS_BOOTSTRAP_CONFIG``) are read. Use it as an
    async context manager.

    ``sources`` (resource types or type URLs -> sources) serves some types from elsewhere than
    the servers, as Envoy's ``ConfigSource`` does:
    ``{LISTENER: FileSource(path="lds.yaml"), ENDPOINT: RestSource(url="http://cp")}``
    (the bootstrap's ``xdsclient_sources`` says the same; with sources for every type watched,
    no server is needed). ``options`` (a `ClientOptions`) holds every setting; ``ads`` and
    ``delta`` are shortcuts for the transport variant. ``resource_types`` adds custom types.
    Clusters are validated against the bootstrap's ``certificate_providers`` as gRPC does: one
    whose TLS context names an instance the bootstrap lacks is NACKed (`cluster_type`).
    ``transport`` and ``clock`` replace the transports and the event loop's clock
    (`xdsclient.testing.FakeTransport` and `FakeClock` test timing without waiting).
    """

    def __init__(
        self,
        server: str | None = None,
        *,
        node_id: str = "",
        node: NodeConfig | None = None,
        bootstrap: str | os.PathLike[str] | Mapping[str, Any] | ClientConfig | None = None,
        channel_credentials: ChannelCredentials | None = None,
        resource_types: Iterable[ResourceType[Any]] = (),
        options: ClientOptions | None = None,
        ads: bool | None = None,
        delta: bool | None = None,
        transport: TransportFactory | None = None,
        clock: Clock | None = None,
        sources: Mapping[Any, FileSource | RestSource | ServerConfig] | None = None,
    ) -> None:
        self._config = _client_config(
            server, node_id, node, bootstrap, channel_credentials, _source_map(sources)
        )
        self._options = _options(options, ads=ads, delta=delta)
        self._types = _resource_types(
            resource_types, ads=self._options.ads, providers=self._config.certificate_providers
        )
        self._transport_factory = transport
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._tasks = TaskOwner()
        self._registry = Registry(
            types=self._types,
            clock=self._clock,
            slow_threshold=self._options.slow_watcher_threshold,
            tasks=self._tasks,
        )
        self._observers = Observers()
        self._resolver = Resolver(
            self._registry,
            self._clock,
            grace=self._options.on_demand_grace,
            add_observer=self._observers.add,
        )
        self._stats = StatsRecorder()
        self._observers.add(self._stats, verdicts=False)
        self._observers.add(ProtocolLogger(), verdicts=False)
        self._pool: ServerPool | None = None
        self._wall_offset = 0.0

    # ------------------------------------------------------------------ lifecycle

    @property
    def config(self) -> ClientConfig:
        """The `ClientConfig` the client runs with: from its arguments or the bootstrap."""
        return self._config

    @property
    def options(self) -> ClientOptions:
        """The `ClientOptions` in force."""
        return self._options

    @property
    def closed(self) -> bool:
        """Whether `close` was called; a closed client refuses calls with `ClientClosedError`."""
        return self._registry.closed

    async def __aenter__(self) -> XdsClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the dispatcher; channels to servers open when something is first watched."""
        registry = self._registry
        if registry.started or registry.closed:
            raise RuntimeError("an XdsClient starts once")
        self._wall_offset = time.time() - self._clock.time()  # client clock -> wall clock
        self._pool = ServerPool(
            config=self._config,
            options=self._options,
            types=self._types,
            cache=registry.cache,
            clock=self._clock,
            publish=registry.dispatcher.publish,
            tasks=self._tasks,
            transport=self._transport_factory,
            observers=self._observers,
        )
        registry.open(self._pool)
        self._tasks.start(registry.dispatcher.run(), name="xdsclient-dispatcher")

    async def close(self) -> None:
        """End every watch and iteration, cancel and await every task, close the transports.

        Idempotent. Calls that watch or read the cache raise `ClientClosedError` afterwards.
        """
        if self._registry.closed:
            return
        self._registry.close()
        if self._pool is not None:
            await self._pool.close()
        await self._tasks.close()

    # ------------------------------------------------------------------ commands

    def add_watcher(
        self, resource_type: ResourceType[Any] | str, name: str, watcher: ResourceWatcher
    ) -> WatchHandle:
        """Watch one resource (``"*"``: every resource of the type) with a gRFC A88 watcher.

        The watcher first receives the cached state, then every change, in order. Cancel the
        returned handle to stop; the last watcher of a name to leave unsubscribes it.
        """
        check_watcher(watcher)
        self._check_vhds(resource_type)
        return self._registry.add_watcher(resource_type, name, watcher)

    def watch(self, resource_type: ResourceType[Any] | str, name: str) -> Watch:
        """``async with client.watch(CLUSTER, "name") as events: async for event in events``.

        Yields `ResourceChanged`, `DataError` (does-not-exist, invalid, expired...) and
        `AmbientError` values: the cached state first, then changes. The watch keeps only the
        latest state of each resource for a slow consumer (it conflates) and never holds up the
        client. Leaving ``async with`` (or `Watch.cancel`) unsubscribes when no one else watches;
        a watch dropped without that still unsubscribes, with a `ResourceWarning`.
        """
        self._check_vhds(resource_type)
        watch = Watch()
        feeder = watch._watcher()
        watch._attach(self._registry.add_watcher(resource_type, name, feeder, feeder.closed))
        return watch

    async def resolve(
        self, resource_type: ResourceType[Any] | str, name: str, *, timeout: float = 5.0
    ) -> Outcome:
        """Resolve ``name`` on demand, as Envoy's on-demand CDS does: `Available` (its value),
        `Missing` (the server said it does not exist) or `TimedOut` (nothing decisive within
        ``timeout`` seconds of the client's clock). Never raises for those outcomes.

        Concurrent resolves of a name share one subscription; names asked while the first
        on-demand request of their type is unanswered go out together in the next one. The
        name stays subscribed while anything watches it, and ``options.on_demand_grace``
        seconds after its last resolve (a resolve then is answered at once). Works for any
        type on any transport that subscribes by name (docs/on-demand.md).
        """
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self._check_vhds(resource_type)
        type_url = self._registry.type_url(resource_type)
        key = self._registry.name(type_url, name)
        self._registry.check_open()
        assert self._pool is not None
        self._pool.check_type(type_url)
        return await self._resolver.resolve(type_url, key, float(timeout))

    def watch_virtual_host(self, route_config_name: str, authority: str) -> Watch:
        """Watch the virtual host of ``authority`` in ``route_config_name`` over VHDS (Delta
        only): the `VIRTUAL_HOST` resource ``<route configuration name>/<authority>``, whose
        events carry `VirtualHostView` values, or a `DataError` of
        `ResourceDoesNotExistError` when the server knows no such host. Keep the route
        configuration watched too (`watch_config` does): the server serves a route
        configuration's virtual hosts to a client that has it."""
        check_name(route_config_name)
        check_name(authority)
        return self.watch(VIRTUAL_HOST, vhds_name(route_config_name, authority))

    def _check_vhds(self, resource_type: ResourceType[Any] | str) -> None:
        """VHDS is Delta only (the xDS protocol has no SotW variant of it): a clear error."""
        type_url = (
            resource_type.type_url if isinstance(resource_type, ResourceType) else resource_type
        )
        if type_url == VIRTUAL_HOST.type_url and not self._options.delta and self._options.ads:
            raise ValueError(
                "VHDS (VirtualHost) exists only in Delta (incremental) xDS; "
                "create the client with delta=True"
            )

    async def wait_for(
        self,
        resource_type: ResourceType[Any] | str,
        name: str,
        predicate: Callable[[Any], bool] | None = None,
        *,
        timeout: float,
    ) -> Any:
        """The first valid value of ``name`` (cached or new) for which ``predicate`` holds.

        Raises `WaitTimeoutError` after ``timeout`` seconds, `ClientClosedError` if the client
        closes first. Errors and does-not-exist events do not end the wait: a later value may.
        """
        watch = self.watch(resource_type, name)
        return await wait_for(watch, name, predicate, timeout, resource_type)

    async def wait_for_config(
        self,
        listener: str,
        predicate: Callable[[XdsConfig], bool] | None = None,
        *,
        timeout: float,
        authority: str | None = None,
    ) -> XdsConfig:
        """The first complete `XdsConfig` of ``listener`` (as `watch_config` yields it) for
        which ``predicate`` holds.

        Raises `WaitTimeoutError` after ``timeout`` seconds (naming the last update),
        `ClientClosedError` if the client closes first. Error snapshots and ambient errors do
        not end the wait: a later snapshot may satisfy it.
        """
        configs = self.watch_config(listener, authority=authority)
        return await wait_for_config(configs, listener, predicate, timeout)

    def watch_config(
        self, listener: str, *, authority: str | None = None, http_rules: bool = False
    ) -> ConfigWatch:
        """``async with client.watch_config("listener") as configs``: complete snapshots.

        Each `XdsConfig` holds the listener, its route configuration, the virtual host for
        ``authority`` (the listener name by default, as for ``xds:///listener``) and every
        cluster its routes reach with their endpoints; an `XdsError` comes instead when the
        listener or its routes are unusable (a server that cannot be reached included), and an
        `AmbientError` when something failed that leaves the last snapshot usable. The client
        subscribes to exactly what the configuration needs and drops what it stops needing.
        With ``http_rules``, the virtual host and its routes are chosen as Envoy's HTTP router
        does (domain precedence, the port, routes with query parameter conditions), for an
        HTTP data plane.
        """
        return self._config_watch(listener, authority, None, http_rules)

    def add_config_watcher(
        self,
        listener: str,
        callback: Callable[[ConfigUpdate], Awaitable[None] | None],
        *,
        authority: str | None = None,
        http_rules: bool = False,
    ) -> ConfigWatch:
        """The callback form of `watch_config`: ``callback(update)`` for each update, in order
        (plain or ``async``), on a task the client owns; cancel the returned watch to stop."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {callback!r}")
        return self._config_watch(listener, authority, callback, http_rules)

    def _config_watch(
        self,
        listener: str,
        authority: str | None,
        callback: Callable[[ConfigUpdate], Awaitable[None] | None] | None,
        http_rules: bool = False,
    ) -> ConfigWatch:
        check_name(listener)
        if authority is not None and not isinstance(authority, str):
            raise TypeError(f"authority must be a string, not {authority!r}")
        self._registry.check_open()
        name, target_authority = listener_for(self._config, listener)
        return self._registry.watch_config(
            name,
            authority if authority is not None else target_authority,
            callback,
            http_rules=http_rules,
            on_demand=self._resolver,
        )

    def start_task(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        """Run ``coro`` on a task the client owns (ended by `close`). For config watches."""
        return self._registry.start_task(coro, name=name)

    def load_reporter(self, cluster: ClusterView) -> ClusterLoad:
        """The load of ``cluster`` (per cluster and EDS service name, empty when the cluster
        names none, as C-core reports it) that this client reports
        to the server the cluster came from (``lrs_server: self``, gRFC A27), on one LRS stream
        per server sharing its connection. Report each call to it: ``call_started(locality)``,
        ``call_finished(locality, ok, metrics)``, ``call_dropped(category)`` (None for a
        circuit-breaker drop). The same object for the same (cluster, service) for the life of
        the client: after a fallback (gRFC A71) it reports to the fallback server, and to the
        primary again once the client is back there; the counts outlive a failed stream.
        Raises ValueError for a cluster without ``lrs_server``."""
        if not cluster.lrs_server_self:
            raise ValueError(f"cluster {cluster.name} does not report load (no lrs_server: self)")
        self._registry.check_open()
        assert self._pool is not None
        return self._pool.load_reporter(cluster.name, cluster.lrs_service_name)

    # ------------------------------------------------------------------ introspection

    def resource_state(
        self, resource_type: ResourceType[Any] | str, name: str
    ) -> ResourceState | None:
        """The cache's view of one resource (status, version, value, last error)."""
        return self._registry.state(resource_type, name)

    def add_observer(self, observer: Observer, *, verdicts: bool = True) -> Callable[[], None]:
        """Tell ``observer`` of every protocol event from now on: each request sent (ACK, NACK,
        subscription change), response received, verdict on a resource, change of a
        server's connectivity and of its load reporting stream (`RequestSent`,
        `ResponseReceived`, `ResourceUpdate`, `ConnectivityChanged`, `LoadReportingChanged`).
        It runs synchronously on the event loop and must not block; one that raises is logged
        and changes nothing else. Returns the function that removes it.
        Without observers the client builds none of these events; with ``verdicts=False`` the
        observer is not told of `ResourceUpdate` (one per resource of every response), and
        while no observer wants them none is built."""
        return self._observers.add(observer, verdicts=verdicts)

    def stats(self) -> ClientStats:
        """Envoy-style counters per server and resource type, counted since the client
        started: ``update_attempt``, ``update_success``, ``update_rejected``,
        ``update_failure``, ``update_empty``, ``version``, and each server's
        ``connected_state``, ``lrs_state`` and ``lrs_stream_failures``
        (docs/observability.md says how each is counted)."""
        return attrs.evolve(
            self._stats.snapshot(),
            resolves=dict(self._resolver.book.counts),
            cluster_resolves=dict(self._resolver.cluster_counts),
        )

    def enable_metrics(
        self, meter_provider: Any = None, *, target: str = "#xdsclient"
    ) -> Callable[[], None]:
        """Export gRFC A78's XdsClient metrics through OpenTelemetry, on ``meter_provider``
        (default: the global one): ``grpc.xds_client.connected``, ``.server_failure``,
        ``.resource_updates_valid``, ``.resource_updates_invalid`` and ``.resources``, labelled
        with ``grpc.target`` (``target``: the channel target or service this client serves),
        ``grpc.xds.server``, ``grpc.xds.authority``, ``grpc.xds.resource_type`` and
        ``grpc.xds.cache_state``; our ``xdsclient.lrs.reporting`` gauge and
        ``xdsclient.lrs.stream_failure`` counter for load reporting streams; and the
        ``xdsclient.resolves`` counter of `resolve` calls by ``xdsclient.resolve.outcome``
        (and ``xdsclient.cluster_resolves`` of `ConfigWatch.resolve_cluster` calls, likewise).
        Needs the ``metrics`` extra (`MissingExtraError` otherwise). Returns the function that stops
        reporting."""
        self._registry.check_open()
        connected = {name: server.connected_state for name, server in self.stats().servers.items()}
        return enable_metrics(
            self.add_observer,
            self._registry.cache.states,
            meter_provider=meter_provider,
            target=target,
            connected=connected,
            resolves=lambda: self._resolver.book.counts,
            cluster_resolves=lambda: self._resolver.cluster_counts,
        )

    def resource_states(self) -> list[ResourceState]:
        """Every resource in the cache (a CSDS-like dump)."""
        self._registry.check_open()
        return self._registry.cache.states()

    def csds(self, *, scope: str = "", include_resources: bool = True) -> Any:
        """The cache as CSDS reports it: an ``envoy.service.status.v3.ClientConfig`` shaped as
        gRPC C-core fills it (node; per resource its type, name, version, the resource itself
        unless ``include_resources`` is False, wall-clock ``last_updated``, ``client_status``
        and, for a rejected or failed update, ``error_state``). ``scope`` goes in
        ``client_scope`` (the channel target, for several clients in one dump).
        `xdsclient.add_csds_service` serves it over gRPC."""
        self._registry.check_open()
        return client_config(
            self._registry.cache.states(),
            node=self._config.node.to_proto(),
            wall_offset=self._wall_offset,
            scope=scope,
            include_resources=include_resources,
        )

    def csds_json(self, *, scope: str = "", include_resources: bool = True) -> str:
        """`csds` in protobuf's canonical JSON."""
        from google.protobuf import json_format

        message = self.csds(scope=scope, include_resources=include_resources)
        text: str = json_format.MessageToJson(message, indent=2)
        return text


def _client_config(
    server: object,
    node_id: object,
    node: object,
    bootstrap: object,
    channel_credentials: object,
    sources: dict[str, Source] | None = None,
) -> ClientConfig:
    """The configuration from a server address or a bootstrap, checked at the call, with
    ``sources`` given in code added (they win over the bootstrap's)."""
    config = _base_config(server, node_id, node, bootstrap, channel_credentials, bool(sources))
    if not sources:
        return config
    return attrs.evolve(config, sources={**config.sources, **sources})


def _base_config(
    server: object,
    node_id: object,
    node: object,
    bootstrap: object,
    channel_credentials: object,
    sourced: bool,
) -> ClientConfig:
    if not isinstance(node_id, str):
        raise TypeError(f"node_id must be a string, not {node_id!r}")
    if node is not None and not isinstance(node, NodeConfig):
        raise TypeError(f"node must be a NodeConfig, not {node!r}")
    if channel_credentials is not None and not isinstance(channel_credentials, ChannelCredentials):
        raise TypeError(
            f"channel_credentials must be ChannelCredentials, not {channel_credentials!r}"
        )
    if server is None:
        if isinstance(bootstrap, ClientConfig):
            return bootstrap
        if bootstrap is not None and not isinstance(bootstrap, str | os.PathLike | Mapping):
            raise TypeError(
                f"bootstrap must be a path, a dict or a ClientConfig, not {bootstrap!r}"
            )
        if bootstrap is None and sourced:  # every type watched has a source: no server
            return ClientConfig(node=node or NodeConfig(id=node_id))
        return load_bootstrap(bootstrap)
    if not isinstance(server, str):
        raise TypeError(f"server must be an address string such as 'host:port', not {server!r}")
    if not server:
        raise ValueError("server must be an address such as 'host:port', not empty")
    if bootstrap is not None:
        raise ValueError("give either a server address or a bootstrap, not both")
    return ClientConfig(
        servers=(
            ServerConfig(
                uri=server, channel_credentials=channel_credentials or ChannelCredentials()
            ),
        ),
        node=node or NodeConfig(id=node_id),
    )


def _source_map(sources: object) -> dict[str, Source]:
    """``sources`` as given in code, keyed by type URL and checked."""
    if sources is None:
        return {}
    if not isinstance(sources, Mapping):
        raise TypeError(f"sources must map resource types to sources, not {sources!r}")
    result: dict[str, Source] = {}
    for rtype, source in sources.items():
        type_url = rtype.type_url if isinstance(rtype, ResourceType) else rtype
        if not isinstance(type_url, str):
            raise TypeError(f"sources keys are resource types or type URLs, not {rtype!r}")
        if not isinstance(source, FileSource | RestSource | ServerConfig):
            raise TypeError(f"a source is a FileSource, RestSource or ServerConfig, not {source!r}")
        result[type_url] = source
    return result


def _options(options: object, *, ads: object, delta: object) -> ClientOptions:
    if options is None:
        options = ClientOptions()
    if not isinstance(options, ClientOptions):
        raise TypeError(f"options must be ClientOptions, not {options!r}")
    return attrs.evolve(
        options, ads=_flag("ads", ads, options.ads), delta=_flag("delta", delta, options.delta)
    )


def _flag(name: str, value: object, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {value!r}")
    return value


def _resource_types(
    extra: Iterable[ResourceType[Any]], *, ads: bool, providers: Iterable[str]
) -> dict[str, ResourceType[Any]]:
    """The built-in types, clusters and listeners decoded against the bootstrap's certificate
    provider instances (gRPC's decode context), then ``extra``: a type of the user's own
    replaces the built-in one of its URL as it is (passing `CLUSTER` or `LISTENER` itself keeps
    the bootstrap's check)."""
    providers = frozenset(providers)
    types: dict[str, ResourceType[Any]] = {t.type_url: t for t in BUILTIN_TYPES}
    types[CLUSTER.type_url] = cluster_type(providers)
    types[LISTENER.type_url] = listener_type(providers)
    for rtype in extra:
        if not isinstance(rtype, ResourceType):
            raise TypeError(f"resource_types must hold ResourceType values, not {rtype!r}")
        if rtype is not CLUSTER and rtype is not LISTENER:
            types[rtype.type_url] = rtype
    if not ads:
        missing = [t for t in types if t not in PER_TYPE_SERVICES]
        if missing:
            raise ValueError(f"no per-type xDS service carries {', '.join(missing)}; use ads=True")
    return types
