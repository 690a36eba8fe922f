"""The sync facade's watchers: callbacks on the user's threads, blocking iterators, and the
latest value of a name kept for reads that do not wait.

Why a pump per watcher: the client calls its watchers one at a time on its loop, and a sync
callback must not run there (it would block every stream and watcher of the client). Each
callback watcher is therefore an ordinary conflating `Watch` (or `ConfigWatch`) on the loop,
read by one task that hands each event to the user's executor and waits for the callback to
return before it reads the next. So:

- callbacks of one watcher run in order, never two at once, never on the loop's thread;
- a callback that blocks holds up only its own watcher: while it runs, the watch keeps only the
  latest state of each name (as `XdsClient.watch` does), and the client, its other watchers and
  its streams go on; one that runs past the client's ``slow_watcher_threshold`` is logged;
- a callback that raises is logged and the watcher keeps its registration;
- once `SyncWatchHandle.cancel` returned, no callback of it starts (one already running ends
  on its own: cancellation never waits on user code).

`Latest` is the client-side record behind `SyncXdsClient.get` and `get_config`: a watcher of the
loop that keeps the last valid value, so that a read of a name already known is a dictionary
lookup in the caller's thread, with no hop to the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar

from .. import (
    AmbientError,
    CallbackWatcher,
    ClientClosedError,
    ConfigWatch,
    DataError,
    Event,
    ResourceChanged,
    WaitTimeoutError,
    Watch,
    XdsConfig,
    XdsError,
)
from ._runner import BridgedIterator, LoopThread

__all__ = ["Latest", "Pump", "SyncWatch", "SyncWatchHandle", "check_sync_watcher"]

logger = logging.getLogger("xdsclient.sync")

T = TypeVar("T")


def check_sync_watcher(watcher: object) -> None:
    """Raise `TypeError` at the call unless ``watcher`` has plain callable
    ``on_resource_changed`` and ``on_ambient_error`` (an ``async`` one would never run on an
    executor's thread)."""
    for method in ("on_resource_changed", "on_ambient_error"):
        function = getattr(watcher, method, None)
        if not callable(function):
            raise TypeError(
                f"a watcher needs callable on_resource_changed and on_ambient_error; "
                f"{watcher!r} has no {method} (wrap a function in CallbackWatcher)"
            )
        check_sync_callable(function, method)
    if isinstance(watcher, CallbackWatcher):  # its methods are plain; what they call may not be
        for function in (watcher.on_event, watcher.on_ambient):
            check_sync_callable(function, "the CallbackWatcher's function")


def check_sync_callable(function: object, what: str) -> None:
    """Raise `TypeError` when ``function`` is a coroutine function."""
    if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004  # an object with an async __call__
    ):
        raise TypeError(
            f"{what} is async: SyncXdsClient calls plain functions on an executor's thread; "
            "use XdsClient for async watchers"
        )


class Pump:
    """Reads one conflating watch on the loop and calls ``deliver`` with each item on
    ``executor``, one at a time. ``owned``: an executor made for this watcher alone, shut
    down (without waiting for user code) when the pump ends."""

    def __init__(
        self,
        deliver: Callable[[Any], object],
        executor: concurrent.futures.Executor,
        *,
        owned: bool,
        slow: float,
        name: str,
    ) -> None:
        self._deliver = deliver
        self._executor = executor
        self._owned = owned
        self._slow = slow
        self.name = name
        #: set by `SyncWatchHandle.cancel` from any thread: no callback starts after it
        self.cancelled = False

    async def run(self, watch: Watch | ConfigWatch) -> None:
        """Deliver what ``watch`` yields until it ends or this task is cancelled."""
        try:
            async with watch:
                async for item in watch:
                    if self.cancelled:
                        return
                    try:
                        future = self._executor.submit(self._call, item)
                    except RuntimeError:  # the user's executor was shut down
                        logger.error("xDS watcher %s: its executor is shut down; it ends", self)
                        return
                    await self._wait(asyncio.wrap_future(future), item)
        finally:
            if self._owned:
                self._executor.shutdown(wait=False, cancel_futures=True)

    async def _wait(self, done: asyncio.Future[None], item: object) -> None:
        finished, _ = await asyncio.wait((done,), timeout=self._slow)
        if not finished:
            logger.warning(
                "xDS watcher %s has run for more than %g s on %s; it gets the latest state "
                "once it returns, and holds up nothing else",
                self,
                self._slow,
                _describe(item),
            )
            await done

    def _call(self, item: object) -> None:
        """On the executor's thread: the user's callback, its errors logged."""
        if self.cancelled:
            return
        try:
            result: object = self._deliver(item)
            if inspect.isawaitable(result):
                _close(result)
                raise TypeError("it returned an awaitable, which no event loop awaits here")
        except Exception:
            logger.exception(
                "xDS watcher %s raised on %s; it keeps its registration", self, _describe(item)
            )

    def __str__(self) -> str:
        return self.name


def _close(awaitable: object) -> None:
    """Close a coroutine nobody will await (no "never awaited" warning on top of our log)."""
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


def _describe(item: object) -> str:
    if isinstance(item, XdsConfig):
        return f"a configuration of {len(item.clusters)} cluster(s)"
    return repr(item)


def resource_deliverer(watcher: Any) -> Callable[[Event], object]:
    """Call the A88 method of ``watcher`` that fits each event."""

    def deliver(event: Event) -> object:
        if isinstance(event, AmbientError):
            return watcher.on_ambient_error(event)
        return watcher.on_resource_changed(event)

    return deliver


class SyncWatchHandle:
    """Returned by `SyncXdsClient.add_watcher` and `add_config_watcher`; `cancel` stops the
    callbacks and drops the interest (the last watcher of a name unsubscribes it)."""

    def __init__(self, runner: LoopThread, pump: Pump, task: asyncio.Task[None]) -> None:
        self._runner = runner
        self._pump = pump
        self._task = task

    @property
    def cancelled(self) -> bool:
        """Whether `cancel` was called, or the watch ended (its client closed)."""
        return self._pump.cancelled or self._task.done()

    def cancel(self) -> None:
        """Idempotent, callable from any thread (a callback's own included), never blocks: no
        callback of this watcher starts once it returned."""
        self._pump.cancelled = True
        self._runner.call_soon(self._task.cancel)


class SyncWatch(Generic[T]):
    """A watch read by blocking iteration: ``with client.watch(CLUSTER, "a") as events: for
    event in events: ...``. It conflates as `XdsClient.watch` does (only the latest state of
    each name waits for a slow reader). `cancel` (or leaving ``with``) ends it, from any
    thread: a ``next`` blocked in another thread then ends the iteration."""

    def __init__(self, runner: LoopThread, watch: Watch | ConfigWatch) -> None:
        self._runner = runner
        self._watch = watch
        iterator: AsyncIterator[Any] = watch
        self._items: BridgedIterator[T] = runner.iterate(iterator)

    @property
    def cancelled(self) -> bool:
        """Whether it ended (cancelled, or its client closed)."""
        return self._watch.cancelled

    def __iter__(self) -> SyncWatch[T]:
        return self

    def __next__(self) -> T:
        try:
            return next(self._items)
        except ClientClosedError:  # its client closed (and its loop with it): the watch ended
            raise StopIteration from None

    def cancel(self) -> None:
        """Stop watching; iteration ends. Idempotent, never blocks."""
        self._runner.call_soon(self._watch.cancel)

    def __enter__(self) -> SyncWatch[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class Latest:
    """The last valid value of one resource or listener, kept on the loop, read anywhere.

    ``value``: the latest `ResourceChanged` value or `XdsConfig`; None before the first and
    after a data error or an error snapshot (until a valid one comes again). A plain attribute
    set on the loop, so that a read from another thread is one lookup.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.value: Any = None
        self._last: object = None
        self._arrived = asyncio.Event()
        self.handle: Any = None  # the registration, cancelled when the client closes

    # as an A88 watcher of one resource
    def on_resource_changed(self, event: ResourceChanged | DataError) -> None:
        """Keep a new value, or drop the one kept on a data error."""
        self._put(event.value if isinstance(event, ResourceChanged) else None, event)

    def on_ambient_error(self, event: AmbientError) -> None:
        """Remember the warning for a timeout's message; the value stays."""
        self._last = event

    # as a configuration callback
    def on_config(self, update: XdsConfig | XdsError | AmbientError) -> None:
        """Keep a new snapshot, drop it on an error snapshot, remember a warning."""
        if isinstance(update, AmbientError):
            self._last = update
        else:
            self._put(update if isinstance(update, XdsConfig) else None, update)

    def _put(self, value: Any, event: object) -> None:
        self.value, self._last = value, event
        if value is not None:
            self._arrived.set()

    async def wait(self, timeout: float) -> Any:
        """The value, waiting ``timeout`` seconds at most for one (`WaitTimeoutError` then,
        naming the last event)."""
        try:
            async with asyncio.timeout(timeout):
                while self.value is None:
                    self._arrived.clear()
                    await self._arrived.wait()
        except TimeoutError:
            last = "nothing arrived" if self._last is None else f"last: {_describe(self._last)}"
            raise WaitTimeoutError(
                f"{self.what}: no valid value within {timeout:g}s; {last}"
            ) from None
        return self.value
