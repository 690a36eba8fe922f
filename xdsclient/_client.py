"""XdsClient: the asyncio client users embed.

Why this shape: one object owns the channel, the protocol sessions (one for ADS, or one per
type), their stream runners and the dispatcher task, and ends them all when its ``async with``
block ends. Watching is the only way in: the first watcher of a name subscribes it, the last one
to leave unsubscribes it, and every watcher starts from the cached state.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from ._bootstrap import load_bootstrap
from ._config import Backoff, ChannelCredentials, ClientConfig, NodeConfig, ServerConfig
from ._config_watch import ConfigWatch
from ._dependencies import XdsConfig
from ._errors import XdsError
from ._protocol import ProtocolOptions, ResourceState, Session
from ._runner import StreamRunner
from ._services import ADS_SERVICE, PER_TYPE_SERVICES, method_path
from ._transport import TransportOptions, make_channel
from ._watchers import (
    Dispatcher,
    ResourceWatcher,
    Watch,
    WatchFeeder,
    WatchHandle,
    replay_events,
)
from .resources import BUILTIN_TYPES, LISTENER, ResourceType

__all__ = ["XdsClient"]


class XdsClient:
    """An xDS client: watch resources from a management server over gRPC.

    Configure it with a server address (``XdsClient("127.0.0.1:5678", node_id="me")``), a
    bootstrap (a path, a dict, or a `ClientConfig`), or nothing, in which case the gRPC bootstrap
    variables (``GRPC_XDS_BOOTSTRAP``, ``GRPC_XDS_BOOTSTRAP_CONFIG``) are read. Use it as an
    async context manager.

    Transport choices: ``ads`` (one aggregated stream, the default) or one stream per type;
    ``delta`` for the incremental variant. ``does_not_exist_timeout`` is gRFC A57's timer;
    ``max_receive_message_length`` defaults far above gRPC's 4 MiB, which a 14k-cluster SotW
    response exceeds. ``max_resources_per_response`` and ``max_name_length`` bound what a
    hostile server can make the client hold (a response over the first is NACKed whole; a
    resource whose name exceeds the second is rejected).
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
        ads: bool = True,
        delta: bool = False,
        does_not_exist_timeout: float = 15.0,
        max_resources_per_response: int = 1_000_000,
        max_name_length: int = 4096,
        max_receive_message_length: int = TransportOptions().max_receive_message_length,
        keepalive_time: float | None = None,
        keepalive_timeout: float = 20.0,
        backoff: Backoff | None = None,
    ) -> None:
        if server is not None:
            if bootstrap is not None:
                raise ValueError("give either a server address or a bootstrap, not both")
            config = ClientConfig(
                servers=(
                    ServerConfig(
                        uri=server, channel_credentials=channel_credentials or ChannelCredentials()
                    ),
                ),
                node=node or NodeConfig(id=node_id),
            )
        elif isinstance(bootstrap, ClientConfig):
            config = bootstrap
        else:
            config = load_bootstrap(bootstrap)
        self._config = config
        self._server = config.servers[0]
        self._types: dict[str, ResourceType[Any]] = {t.type_url: t for t in BUILTIN_TYPES}
        for rtype in resource_types:
            self._types[rtype.type_url] = rtype
        self._ads = ads
        self._delta = delta
        self._transport = TransportOptions(
            max_receive_message_length=max_receive_message_length,
            keepalive_time=keepalive_time,
            keepalive_timeout=keepalive_timeout,
        )
        self._backoff = backoff if backoff is not None else Backoff()
        self._protocol_options = ProtocolOptions(
            does_not_exist_timeout=does_not_exist_timeout,
            ignore_resource_deletion=self._server.ignore_resource_deletion,
            max_resources_per_response=max_resources_per_response,
            max_name_length=max_name_length,
        )
        if not ads:
            missing = [t for t in self._types if t not in PER_TYPE_SERVICES]
            if missing:
                raise ValueError(
                    f"no per-type xDS service carries {', '.join(missing)}; use ads=True"
                )
        self._runners: dict[str, StreamRunner] = {}  # type_url -> runner (shared under ADS)
        self._dispatcher = Dispatcher()
        self._channel: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def config(self) -> ClientConfig:
        return self._config

    async def __aenter__(self) -> XdsClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Create the channel and start the dispatcher and stream tasks."""
        if self._channel is not None or self._closed:
            raise RuntimeError("an XdsClient starts once")
        self._channel = make_channel(self._server, self._transport)
        node = self._config.node.to_proto()
        if self._ads:
            session = Session(
                node=node,
                resource_types=self._types.values(),
                delta=self._delta,
                options=self._protocol_options,
            )
            runner = self._runner(session, method_path(ADS_SERVICE, delta=self._delta))
            self._runners = dict.fromkeys(self._types, runner)
        else:
            for type_url, rtype in self._types.items():
                service = PER_TYPE_SERVICES[type_url]
                if (service.sotw_method if not self._delta else service.delta_method) is None:
                    continue  # e.g. VHDS exists only as a Delta service
                session = Session(
                    node=node,
                    resource_types=[rtype],
                    delta=self._delta,
                    options=self._protocol_options,
                )
                self._runners[type_url] = self._runner(
                    session, method_path(service, delta=self._delta)
                )
        self._tasks.append(asyncio.create_task(self._dispatcher.run(), name="xdsclient-dispatcher"))
        for runner in {id(r): r for r in self._runners.values()}.values():
            self._tasks.append(asyncio.create_task(runner.run(), name="xdsclient-stream"))

    def _runner(self, session: Session, method: str) -> StreamRunner:
        return StreamRunner(
            session=session,
            channel=self._channel,
            method=method,
            server=self._server.uri,
            dispatcher=self._dispatcher,
            backoff=self._backoff,
            transport=self._transport,
        )

    async def close(self) -> None:
        """Cancel every task and close the channel. Idempotent."""
        self._closed = True
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()

    # ------------------------------------------------------------------ watching

    def _resolve(self, resource_type: ResourceType[Any] | str) -> tuple[str, StreamRunner]:
        type_url = resource_type if isinstance(resource_type, str) else resource_type.type_url
        if type_url not in self._types:
            raise ValueError(
                f"unknown resource type {type_url}; pass it in XdsClient(resource_types=...)"
            )
        if not self._runners:
            raise RuntimeError("the XdsClient is not started: use `async with XdsClient(...)`")
        runner = self._runners.get(type_url)
        if runner is None:
            raise ValueError(
                f"no {'Delta' if self._delta else 'SotW'} per-type service carries {type_url}"
            )
        return type_url, runner

    def add_watcher(
        self, resource_type: ResourceType[Any] | str, name: str, watcher: ResourceWatcher
    ) -> WatchHandle:
        """Watch one resource (``"*"``: every resource of the type) with a gRFC A88 watcher.

        The watcher first receives the cached state, then every change, in order. Cancel the
        returned handle to stop; the last watcher of a name to leave unsubscribes it.
        """
        type_url, runner = self._resolve(resource_type)
        session = runner.session
        if name == "*":
            states = session.resource_states(type_url)
        else:
            state = session.resource_state(type_url, name)
            states = [] if state is None else [state]
        replay = [event for state in states for event in replay_events(state)]
        registration = self._dispatcher.add(type_url, name, watcher, replay)

        def cancel(_: WatchHandle) -> None:
            if self._dispatcher.remove(type_url, name, registration) and not self._closed:
                session.unsubscribe(type_url, name)
                runner.wake()

        handle = WatchHandle(cancel)
        registration.handle = handle
        session.subscribe(type_url, name)
        runner.wake()
        return handle

    def watch(
        self, resource_type: ResourceType[Any] | str, name: str, *, buffer: int = 16
    ) -> Watch:
        """``async for event in client.watch(CLUSTER, "name")``: the cached state, then changes.

        Yields `ResourceChanged`, `DataError` (does-not-exist, invalid, expired...) and
        `AmbientError` values. Subscribes at once; leaving the loop (or ``async with``, or
        `Watch.cancel`) unsubscribes when no one else watches. At most ``buffer`` events wait
        for the loop; beyond that the client waits for it too.
        """
        watch = Watch(buffer)
        watch._attach(self.add_watcher(resource_type, name, WatchFeeder(watch)))
        return watch

    def watch_config(self, listener: str, *, authority: str | None = None) -> ConfigWatch:
        """``async for config in client.watch_config("listener")``: complete snapshots.

        Each `XdsConfig` holds the listener, its route configuration, the virtual host for
        ``authority`` (the listener name by default, as for ``xds:///listener``) and every
        cluster its routes reach with their endpoints; an `XdsError` comes instead when the
        listener or its routes are unusable. The client subscribes to exactly what the
        configuration needs and drops what it stops needing.
        """
        self._resolve(LISTENER)
        return ConfigWatch(self, listener, authority if authority is not None else listener)

    def add_config_watcher(
        self,
        listener: str,
        callback: Callable[[XdsConfig | XdsError], Awaitable[None] | None],
        *,
        authority: str | None = None,
    ) -> ConfigWatch:
        """The callback form of `watch_config`: ``callback(snapshot)`` on each new snapshot
        (plain or ``async``); cancel the returned watch to stop."""
        self._resolve(LISTENER)
        return ConfigWatch(
            self, listener, authority if authority is not None else listener, callback
        )

    # ------------------------------------------------------------------ introspection

    def resource_state(
        self, resource_type: ResourceType[Any] | str, name: str
    ) -> ResourceState | None:
        """The cache's view of one resource (status, version, value, last error)."""
        type_url, runner = self._resolve(resource_type)
        return runner.session.resource_state(type_url, name)

    def resource_states(self) -> list[ResourceState]:
        """Every resource in the cache (a CSDS-like dump)."""
        sessions = {id(r.session): r.session for r in self._runners.values()}
        return [state for session in sessions.values() for state in session.resource_states()]
