"""Watchers: registration, replay of cached state, and in-order delivery on one task.

Why one serializer task: watchers must see every state change of their resource once, in
order, never concurrently, and a slow or failing watcher must not corrupt the client. Stream
runners hand each batch of events to `Dispatcher.deliver` and wait until it has been delivered
before reading the next response, so the cache never runs ahead of what watchers saw.

Invariants:
- A new watcher first receives the cached state, snapshotted when it registers; batches queued
  before it registered are not delivered to it (it already has their result from the
  snapshot), batches queued after are.
- A watcher that raises is logged and skipped; the others still run.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import attrs

from ._names import WILDCARD
from ._protocol import AmbientError, DataError, Event, ResourceChanged, ResourceState

__all__ = [
    "CallbackWatcher",
    "Dispatcher",
    "ResourceWatcher",
    "Watch",
    "WatchHandle",
    "replay_events",
]

logger = logging.getLogger("xdsclient")


class ResourceWatcher(Protocol):
    """The gRFC A88 watcher shape. Methods may be plain or ``async``; they run one at a time."""

    def on_resource_changed(self, event: ResourceChanged | DataError) -> Awaitable[None] | None:
        """The resource has a new value, or no usable value any more (the event says why)."""

    def on_ambient_error(self, event: AmbientError) -> Awaitable[None] | None:
        """Something went wrong that leaves the last value usable."""


@attrs.frozen
class CallbackWatcher:
    """A `ResourceWatcher` made of one callable for every event (or two, split as A88 does)."""

    on_event: Callable[[Event], Awaitable[None] | None]
    on_ambient: Callable[[AmbientError], Awaitable[None] | None] | None = None

    def on_resource_changed(self, event: ResourceChanged | DataError) -> Awaitable[None] | None:
        return self.on_event(event)

    def on_ambient_error(self, event: AmbientError) -> Awaitable[None] | None:
        return (self.on_ambient or self.on_event)(event)


def replay_events(state: ResourceState) -> list[Event]:
    """The events that bring a new watcher up to ``state``."""
    events: list[Event] = []
    if state.status.holds_value:
        events.append(
            ResourceChanged(
                type_url=state.type_url,
                name=state.name,
                value=state.value,
                version=state.version or "",
            )
        )
        if state.error is not None:
            events.append(AmbientError(type_url=state.type_url, name=state.name, error=state.error))
    elif state.error is not None:
        events.append(DataError(type_url=state.type_url, name=state.name, error=state.error))
    return events


class WatchHandle:
    """Returned by `XdsClient.add_watcher`; `cancel` stops delivery and drops interest."""

    def __init__(self, on_cancel: Callable[[WatchHandle], None]) -> None:
        self._on_cancel: Callable[[WatchHandle], None] | None = on_cancel

    @property
    def cancelled(self) -> bool:
        return self._on_cancel is None

    def cancel(self) -> None:
        """Idempotent."""
        if self._on_cancel is not None:
            on_cancel, self._on_cancel = self._on_cancel, None
            on_cancel(self)


@attrs.define(eq=False)
class _Registration:
    watcher: ResourceWatcher
    since: int  # the first batch sequence number it is to receive
    handle: WatchHandle | None = None


@attrs.frozen
class _Batch:
    seq: int
    events: list[Event]
    done: asyncio.Future[None] | None
    only: _Registration | None = None  # a replay, for one new watcher


class Dispatcher:
    """Owns the watchers and the task that calls them."""

    def __init__(self) -> None:
        self._watchers: dict[tuple[str, str], list[_Registration]] = {}
        self._queue: asyncio.Queue[_Batch] = asyncio.Queue()
        self._seq = itertools.count(1)

    def has_watchers(self, type_url: str, name: str) -> bool:
        return bool(self._watchers.get((type_url, name)))

    def add(
        self, type_url: str, name: str, watcher: ResourceWatcher, replay: Iterable[Event]
    ) -> _Registration:
        """Register ``watcher``; it first receives ``replay`` (the cached state, taken now)."""
        registration = _Registration(watcher, since=next(self._seq))
        self._watchers.setdefault((type_url, name), []).append(registration)
        events = list(replay)
        if events:
            self._queue.put_nowait(_Batch(registration.since, events, None, only=registration))
        return registration

    def remove(self, type_url: str, name: str, registration: _Registration) -> bool:
        """Unregister; returns True when it was the last watcher of that name."""
        watchers = self._watchers.get((type_url, name), [])
        if registration in watchers:
            watchers.remove(registration)
        if not watchers:
            self._watchers.pop((type_url, name), None)
            return True
        return False

    async def deliver(self, events: list[Event]) -> None:
        """Queue a batch and wait until every watcher has seen it."""
        if not events:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Batch(next(self._seq), events, done))
        await done

    async def run(self) -> None:
        """The serializer: deliver queued batches, in order, until cancelled."""
        while True:
            batch = await self._queue.get()
            try:
                for event in batch.events:
                    targets = (
                        [batch.only] if batch.only is not None else self._targets(event, batch.seq)
                    )
                    for registration in targets:
                        await self._call(registration, event)
            finally:
                if batch.done is not None and not batch.done.done():
                    batch.done.set_result(None)

    def _targets(self, event: Event, seq: int) -> list[_Registration]:
        targets = [r for r in self._watchers.get((event.type_url, event.name), ()) if r.since < seq]
        if event.name != WILDCARD:
            targets.extend(
                r for r in self._watchers.get((event.type_url, WILDCARD), ()) if r.since < seq
            )
        return targets

    async def _call(self, registration: _Registration, event: Event) -> None:
        handle = registration.handle
        if handle is not None and handle.cancelled:
            return
        watcher = registration.watcher
        try:
            if isinstance(event, AmbientError):
                result: Any = watcher.on_ambient_error(event)
            else:
                result = watcher.on_resource_changed(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception(
                "xDS watcher %r raised on %r; it keeps its registration", watcher, event
            )


class Watch:
    """The events of one watched resource, as an async iterator (`XdsClient.watch`).

    The subscription starts when the watch is created and ends when it is cancelled: by
    `cancel`, by leaving ``async with``, or when the watch is dropped (as when an ``async for``
    loop over it ends). At most ``buffer`` events wait for the consumer; beyond that the client
    waits too (flow control), so a consumer that stops reading should cancel.
    """

    def __init__(self, buffer: int) -> None:
        if buffer < 1:
            raise ValueError("buffer must be at least 1")
        self._buffer = buffer
        self._events: collections.deque[Event] = collections.deque()
        self._readable = asyncio.Event()
        self._space = asyncio.Event()
        self._handle: WatchHandle | None = None

    def _attach(self, handle: WatchHandle) -> None:
        self._handle = handle

    async def _push(self, event: Event) -> None:
        """The watcher callback: queue ``event``, waiting while the buffer is full."""
        if self.cancelled:
            return
        self._events.append(event)
        self._readable.set()
        while len(self._events) >= self._buffer and not self.cancelled:
            self._space.clear()
            await self._space.wait()

    @property
    def cancelled(self) -> bool:
        return self._handle is not None and self._handle.cancelled

    def cancel(self) -> None:
        """Stop watching; iteration ends once the events already queued are consumed."""
        if self._handle is not None:
            self._handle.cancel()
        self._readable.set()
        self._space.set()

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> Event:
        while not self._events:
            if self.cancelled:
                raise StopAsyncIteration
            self._readable.clear()
            await self._readable.wait()
        event = self._events.popleft()
        self._space.set()
        return event

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()

    def __del__(self) -> None:
        handle = self._handle
        if handle is not None and not handle.cancelled:
            handle.cancel()


class WatchFeeder:
    """The watcher behind a `Watch`: holds it weakly, so dropping the watch ends the watching."""

    def __init__(self, watch: Watch) -> None:
        self._watch = weakref.ref(watch)

    async def _feed(self, event: Event) -> None:
        watch = self._watch()
        if watch is not None:
            await watch._push(event)

    def on_resource_changed(self, event: ResourceChanged | DataError) -> Awaitable[None]:
        return self._feed(event)

    def on_ambient_error(self, event: AmbientError) -> Awaitable[None]:
        return self._feed(event)
