"""Configuration watches: the dependency walk kept up to date against the client's cache.

Why separate from the walk: `walk` is pure; this is the small stateful part around it. It keeps
one resource watch per resource the walk needs (so the client subscribes to exactly those, and
drops what is no longer reachable), re-walks once per batch of cache changes (scheduled after the
batch, so a CDS update adding 100 clusters subscribes their endpoints in one request), and
publishes a snapshot only when it is complete and differs from the last one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ._dependencies import XdsConfig, walk
from ._errors import XdsError
from ._protocol import AmbientError, DataError, ResourceChanged
from ._watchers import WatchHandle

if TYPE_CHECKING:
    from ._client import XdsClient

__all__ = ["ConfigWatch"]

logger = logging.getLogger("xdsclient")

ConfigUpdate = XdsConfig | XdsError


def _same(a: ConfigUpdate | None, b: ConfigUpdate | None) -> bool:
    if isinstance(a, XdsError) or isinstance(b, XdsError):
        return type(a) is type(b) and str(a) == str(b)
    return a == b


class _Feeder:
    """The resource watcher behind a config watch (held weakly, like `Watch`'s)."""

    def __init__(self, owner: ConfigWatch) -> None:
        self._owner = weakref.ref(owner)

    def _changed(self) -> None:
        owner = self._owner()
        if owner is not None:
            owner._schedule()

    def on_resource_changed(self, event: ResourceChanged | DataError) -> None:
        self._changed()

    def on_ambient_error(self, event: AmbientError) -> None:
        """The cached values stay usable, so the snapshot stands."""


class ConfigWatch:
    """Complete configuration snapshots (`XdsConfig`, or an `XdsError` when the listener or its
    routes are unusable) for one listener, as an async iterator.

    Only the latest snapshot waits for the consumer: a slow consumer skips intermediate ones.
    Leaving ``async with``, `cancel`, or dropping the watch ends it and its subscriptions.
    """

    def __init__(
        self,
        client: XdsClient,
        listener: str,
        authority: str,
        callback: Callable[[ConfigUpdate], Awaitable[None] | None] | None = None,
    ) -> None:
        self._client = client
        self.listener = listener
        self.authority = authority
        self._callback = callback
        self._handles: dict[tuple[str, str], WatchHandle] = {}
        self._feeder = _Feeder(self)
        self._published: ConfigUpdate | None = None
        self._pending: ConfigUpdate | None = None
        self._ready = asyncio.Event()
        self._scheduled = False
        self._cancelled = False
        self._tasks: set[asyncio.Future[None]] = set()
        self._walk()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Stop: drop every subscription this watch holds. Idempotent."""
        if self._cancelled:
            return
        self._cancelled = True
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
        for task in self._tasks:
            task.cancel()
        self._ready.set()

    def _schedule(self) -> None:
        if not self._scheduled and not self._cancelled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._walk)

    def _walk(self) -> None:
        self._scheduled = False
        if self._cancelled:
            return
        result = walk(self.listener, self.authority, self._client.resource_state)
        for key in sorted(result.wanted - self._handles.keys()):
            self._handles[key] = self._client.add_watcher(key[0], key[1], self._feeder)
        for key in sorted(self._handles.keys() - result.wanted):
            self._handles.pop(key).cancel()
        if result.config is not None and not _same(result.config, self._published):
            self._published = result.config
            self._publish(result.config)

    def _publish(self, update: ConfigUpdate) -> None:
        if self._callback is None:
            self._pending = update
            self._ready.set()
            return
        try:
            outcome = self._callback(update)
        except Exception:
            logger.exception("xDS config watcher %r raised", self._callback)
            return
        if inspect.isawaitable(outcome):
            task = asyncio.ensure_future(outcome)
            self._tasks.add(task)
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("xDS config watcher %r raised", self._callback, exc_info=task.exception())

    def __aiter__(self) -> ConfigWatch:
        return self

    async def __anext__(self) -> ConfigUpdate:
        while self._pending is None:
            if self._cancelled:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        update, self._pending = self._pending, None
        return update

    async def __aenter__(self) -> ConfigWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()

    def __del__(self) -> None:
        if not self._cancelled:
            for handle in self._handles.values():
                handle.cancel()
