"""SyncXdsClient: the client for code without an event loop (Flask, Django, Celery workers).

Why a facade and not a second client: the one `XdsClient` runs on a `LoopThread` this object
owns, and every method here hands a coroutine or a call to that loop and waits. Nothing of the
client's state is touched from another thread, with one exception made on purpose: the latest
value of a name already read (`get`, `get_config`) is kept by a watcher on the loop in a plain
attribute that any thread reads without a hop to the loop, which is what makes a read per
request cheap enough for a request handler.

The names are the async client's: `get` and `get_config` are `wait_for` and `wait_for_config` that
keep watching (the name stays subscribed for the client's life, so the next read is immediate
and always the latest); `add_watcher` and `add_config_watcher` call back on an executor's thread
(`_watchers.py`); `watch` and `watch_config` are blocking iterators.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from .. import (
    ChannelCredentials,
    ClientClosedError,
    ClientConfig,
    ClientOptions,
    ClientStats,
    ConfigUpdate,
    Event,
    FileSource,
    NodeConfig,
    Outcome,
    ResourceState,
    ResourceType,
    RestSource,
    ServerConfig,
    XdsClient,
    XdsConfig,
)
from ._runner import LoopThread
from ._watchers import (
    Latest,
    Pump,
    SyncWatch,
    SyncWatchHandle,
    check_sync_callable,
    check_sync_watcher,
    resource_deliverer,
)

__all__ = ["SyncXdsClient"]

T = TypeVar("T")

_NEW, _RUNNING, _CLOSED = "new", "running", "closed"

#: How long `SyncXdsClient.close` waits for the client to close before stopping its loop.
CLOSE_TIMEOUT = 10.0


class SyncXdsClient:
    """An `XdsClient` for synchronous code, run on a background event-loop thread it owns.

    Takes the arguments of `XdsClient` (a server address, a bootstrap, or nothing for the
    gRPC bootstrap variables), checked at the call. ``executor`` (a
    `concurrent.futures.Executor`) is where watcher callbacks run by default; without one each
    watcher gets a thread of its own. `start` and `close` (or ``with``) start and stop the
    loop thread and the client. Every method is thread-safe; those that wait raise
    `RuntimeError` when called inside a running event loop (use `XdsClient` there), and an
    error raised on the loop is raised in the caller with its type.
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
        sources: Mapping[Any, FileSource | RestSource | ServerConfig] | None = None,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        if executor is not None and not isinstance(executor, concurrent.futures.Executor):
            raise TypeError(f"executor must be a concurrent.futures.Executor, not {executor!r}")
        self._client = XdsClient(
            server,
            node_id=node_id,
            node=node,
            bootstrap=bootstrap,
            channel_credentials=channel_credentials,
            resource_types=resource_types,
            options=options,
            ads=ads,
            delta=delta,
            sources=sources,
        )
        self._executor = executor
        self._runner = LoopThread(name="xdsclient-sync")
        self._lock = threading.Lock()
        self._state = _NEW
        #: (type URL, name) -> its latest value; (listener, authority) -> its latest snapshot.
        #: Written on the loop only.
        self._resources: dict[tuple[str, str], Latest] = {}
        self._configs: dict[tuple[str, str | None], Latest] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def client(self) -> XdsClient:
        """The `XdsClient` it runs. It lives on `loop_thread`: use it only in coroutines given
        to `run`."""
        return self._client

    @property
    def loop_thread(self) -> LoopThread:
        """The `LoopThread` the client runs on, for what should run beside it
        (`xdsclient.httpx.XdsSyncTransport` shares it)."""
        return self._runner

    @property
    def config(self) -> ClientConfig:
        """The `ClientConfig` the client runs with."""
        return self._client.config

    @property
    def options(self) -> ClientOptions:
        """The `ClientOptions` in force."""
        return self._client.options

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._state == _CLOSED

    def __enter__(self) -> SyncXdsClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the loop thread and the client on it. A client starts once (`RuntimeError`
        the second time)."""
        self._runner.check_blocking("SyncXdsClient.start")
        with self._lock:
            if self._state != _NEW:
                raise RuntimeError(f"a SyncXdsClient starts once (this one is {self._state})")
            self._state = _RUNNING
        self._runner.start()
        try:
            self._runner.run(self._client.start())
        except BaseException:
            self._state = _CLOSED
            self._runner.stop()
            raise
        atexit.register(self.close)  # a client left open closes its streams at exit

    def close(self) -> None:
        """Close the client (every watch ends, every callback watcher stops), stop the loop and
        join its thread. Idempotent; calls that read or watch raise `ClientClosedError`
        afterwards. It does not wait for a callback still running on an executor."""
        on_loop = self._runner.is_loop_thread()
        if self._state == _RUNNING and not on_loop:
            self._runner.check_blocking("SyncXdsClient.close")  # before anything is closed
        with self._lock:
            state, self._state = self._state, _CLOSED
        if state != _RUNNING:
            return
        atexit.unregister(self.close)
        try:
            if not on_loop:  # there, the loop cannot wait for the client: its tasks are cancelled
                self._runner.run(self._client.close(), timeout=CLOSE_TIMEOUT)
        finally:
            self._runner.stop()

    def stop(self) -> None:
        """The same as `close`."""
        self.close()

    def run(self, coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
        """Run ``coro`` on the client's loop and wait for its result (``timeout`` seconds at
        most, after which it is cancelled and `TimeoutError` raised): the way to use `client`
        and anything async beside it from synchronous code."""
        if self._state != _RUNNING:
            coro.close()
            self._check_running()
        return self._runner.run(coro, timeout=timeout)

    def _check_running(self) -> None:
        if self._state == _NEW:
            raise RuntimeError("the SyncXdsClient has not started: call start() or use `with`")
        if self._state == _CLOSED:
            raise ClientClosedError("the SyncXdsClient is closed")

    def _call(self, function: Callable[..., T], *args: Any) -> T:
        self._check_running()
        return self._runner.call(function, *args)

    # ------------------------------------------------------------------ reads

    def get(
        self, resource_type: ResourceType[Any] | str, name: str, *, timeout: float = 5.0
    ) -> Any:
        """The latest valid value of one resource (its validated view, e.g. a `ClusterView`),
        waiting ``timeout`` seconds at most for the first.

        The name stays watched for the life of the client, so later calls answer at once
        with whatever arrived last, without a hop to the loop. While the resource has no valid
        value (not yet, or deleted since) the call waits; `WaitTimeoutError` names the last
        event when none came. `resolve` says instead whether the resource exists.
        """
        _check_timeout(timeout)
        key = _key(resource_type, name)
        latest = self._resources.get(key) if key is not None else None
        if latest is not None and self._state == _RUNNING:
            value = latest.value
            if value is not None:
                return value
        if name == "*":
            raise ValueError("get reads one resource; watch '*' with add_watcher or watch")
        self._check_running()
        return self._runner.run(self._get(resource_type, name, float(timeout)))

    async def _get(self, resource_type: ResourceType[Any] | str, name: str, timeout: float) -> Any:
        key = _key(resource_type, name)
        latest = self._resources.get(key) if key is not None else None
        if latest is None:
            latest = Latest(name)
            latest.handle = self._client.add_watcher(resource_type, name, latest)
            assert key is not None  # add_watcher took the type and the name
            latest.what = f"{key[0].rsplit('.', 1)[-1]} {name!r}"
            self._resources[key] = latest
        return await latest.wait(timeout)

    def get_config(
        self, listener: str, *, timeout: float = 5.0, authority: str | None = None
    ) -> XdsConfig:
        """The latest complete `XdsConfig` of ``listener`` (as `XdsClient.watch_config` makes
        it), waiting ``timeout`` seconds at most for the first.

        The listener stays watched for the life of the client, so later calls answer at once
        with the latest snapshot. While there is none (not yet, or the listener or its routes
        are unusable) the call waits; `WaitTimeoutError` names the last update when none came.
        """
        _check_timeout(timeout)
        latest = self._configs.get((listener, authority))
        if latest is not None and self._state == _RUNNING:
            value: XdsConfig | None = latest.value
            if value is not None:
                return value
        self._check_running()
        waiting = self._get_config(listener, authority, float(timeout))
        snapshot: XdsConfig = self._runner.run(waiting)
        return snapshot

    async def _get_config(self, listener: str, authority: str | None, timeout: float) -> Any:
        key = (listener, authority)
        latest = self._configs.get(key)
        if latest is None:
            latest = Latest(f"listener {listener!r}")
            latest.handle = self._client.add_config_watcher(
                listener, latest.on_config, authority=authority
            )
            self._configs[key] = latest
        return await latest.wait(timeout)

    def resolve(
        self, resource_type: ResourceType[Any] | str, name: str, *, timeout: float = 5.0
    ) -> Outcome:
        """`XdsClient.resolve`: `Available`, `Missing` or `TimedOut`, on demand."""
        self._check_running()
        return self._runner.run(self._client.resolve(resource_type, name, timeout=timeout))

    def resource_state(
        self, resource_type: ResourceType[Any] | str, name: str
    ) -> ResourceState | None:
        """The cache's view of one resource (status, version, value, last error)."""
        return self._call(self._client.resource_state, resource_type, name)

    def resource_states(self) -> list[ResourceState]:
        """Every resource in the cache."""
        return self._call(self._client.resource_states)

    def stats(self) -> ClientStats:
        """`XdsClient.stats`: Envoy-style counters per server and resource type."""
        return self._call(self._client.stats)

    def csds(self, *, scope: str = "", include_resources: bool = True) -> Any:
        """`XdsClient.csds`: the cache as an ``envoy.service.status.v3.ClientConfig``."""
        return self._call(
            lambda: self._client.csds(scope=scope, include_resources=include_resources)
        )

    def csds_json(self, *, scope: str = "", include_resources: bool = True) -> str:
        """`csds` in protobuf's canonical JSON."""
        return self._call(
            lambda: self._client.csds_json(scope=scope, include_resources=include_resources)
        )

    def enable_metrics(
        self, meter_provider: Any = None, *, target: str = "#xdsclient"
    ) -> Callable[[], None]:
        """`XdsClient.enable_metrics`: gRFC A78's metrics through OpenTelemetry (the
        ``metrics`` extra). Returns the function that stops reporting (callable from any
        thread)."""
        stop = self._call(lambda: self._client.enable_metrics(meter_provider, target=target))

        def stop_reporting() -> None:
            if self._state == _RUNNING:
                self._runner.call(stop)

        return stop_reporting

    # ------------------------------------------------------------------ watchers

    def add_watcher(
        self,
        resource_type: ResourceType[Any] | str,
        name: str,
        watcher: Any,
        *,
        executor: concurrent.futures.Executor | None = None,
    ) -> SyncWatchHandle:
        """Watch one resource (``"*"``: every one of the type) with a gRFC A88 watcher whose
        plain methods ``on_resource_changed(event)`` and ``on_ambient_error(event)`` run on
        ``executor`` (else the client's, else a thread of the watcher's own), one call at a
        time and in order, never on the loop's thread. It first receives the cached state,
        then the changes; one slower than the changes gets the latest state of each name. One
        that raises is logged and stays registered. Cancel the returned handle to stop."""
        check_sync_watcher(watcher)
        deliver = resource_deliverer(watcher)
        return self._pump(
            lambda: self._client.watch(resource_type, name), deliver, executor, str(watcher)
        )

    def add_config_watcher(
        self,
        listener: str,
        callback: Callable[[ConfigUpdate], None],
        *,
        authority: str | None = None,
        executor: concurrent.futures.Executor | None = None,
    ) -> SyncWatchHandle:
        """``callback(update)`` for each configuration update of ``listener`` (an `XdsConfig`,
        an `XdsError` or an `AmbientError`, as `XdsClient.watch_config` yields them) on
        ``executor`` as `add_watcher` calls watchers: in order, never on the loop's thread, the
        latest snapshot for a slow callback. Cancel the returned handle to stop."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {callback!r}")
        check_sync_callable(callback, "callback")
        what = getattr(callback, "__qualname__", repr(callback))
        return self._pump(
            lambda: self._client.watch_config(listener, authority=authority),
            callback,
            executor,
            what,
        )

    def _pump(
        self,
        make_watch: Callable[[], Any],
        deliver: Callable[[Any], object],
        executor: concurrent.futures.Executor | None,
        what: str,
    ) -> SyncWatchHandle:
        if executor is not None and not isinstance(executor, concurrent.futures.Executor):
            raise TypeError(f"executor must be a concurrent.futures.Executor, not {executor!r}")
        self._check_running()
        chosen = executor or self._executor
        owned = chosen is None
        if chosen is None:
            chosen = concurrent.futures.ThreadPoolExecutor(1, "xdsclient-watcher")
        pump = Pump(
            deliver, chosen, owned=owned, slow=self.options.slow_watcher_threshold, name=what
        )

        def begin() -> SyncWatchHandle:
            watch = make_watch()  # a bad type or name raises here, in the caller
            task = self._client.start_task(pump.run(watch), name=f"xdsclient sync watcher {what}")
            return SyncWatchHandle(self._runner, pump, task)

        try:
            return self._runner.call(begin)
        except BaseException:
            if owned:
                chosen.shutdown(wait=False)
            raise

    def watch(self, resource_type: ResourceType[Any] | str, name: str) -> SyncWatch[Event]:
        """``with client.watch(CLUSTER, "name") as events: for event in events: ...``: the
        events of `XdsClient.watch` (the cached state first, then changes, conflated for a
        slow reader) by blocking iteration. Leaving ``with`` or `SyncWatch.cancel` ends it."""
        self._check_running()
        return SyncWatch(self._runner, self._runner.call(self._client.watch, resource_type, name))

    def watch_config(
        self, listener: str, *, authority: str | None = None
    ) -> SyncWatch[ConfigUpdate]:
        """``with client.watch_config("listener") as updates: for update in updates: ...``:
        the updates of `XdsClient.watch_config` by blocking iteration."""
        self._check_running()
        watch = self._runner.call(lambda: self._client.watch_config(listener, authority=authority))
        return SyncWatch(self._runner, watch)


def _key(resource_type: object, name: object) -> tuple[str, str] | None:
    """The key of a name's `Latest`: (type URL, name), or None for arguments that are not a
    type and a name (the client's own checks then say what is wrong)."""
    if not isinstance(name, str):
        return None
    if isinstance(resource_type, ResourceType):
        return resource_type.type_url, name
    return (resource_type, name) if isinstance(resource_type, str) else None


def _check_timeout(timeout: object) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
