"""Watchers: registrations, replay batches, and in-order delivery on one task.

What a name means, which cached state a new watcher replays and what gets subscribed are
decided by the registry (`_registry.py`), the one path every watcher is added through; the
`Dispatcher` here keeps the registrations and delivers.

Why one serializer task: watchers must see every state change of their resource once, in
order, never concurrently, and a slow or failing watcher must not corrupt the client. The drive
loop publishes each batch of events in the same synchronous step in which the cache changed,
and does not read the next response of its stream until the batch was delivered (gRFC A88
flow control), so the cache never runs ahead of what callback watchers saw.

Invariants:
- A new watcher first receives the cached state, read when it registers; batches published
  before it registered are not delivered to it (the replay already holds their result),
  batches published after are. So every watcher sees each version once.
- A watcher that raises is logged and skipped; one that runs longer than the slow threshold is
  logged by name; cancelling the serializer never waits on user code.
- A `Watch` never blocks delivery: it keeps the latest state per resource for its consumer.
- One pass per batch: the client's own watchers (a `Watch`'s, a configuration watch's: a
  `BatchFeeder`) receive their events of a batch in one call, in order, after the callbacks of
  the events before them and before any callback's coroutine is awaited, so a response of N
  resources costs a walk N dictionary look-ups and one call, not N calls.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import logging
import warnings
import weakref
from collections.abc import Awaitable, Callable, Container, Iterable, Sequence
from itertools import compress, repeat
from typing import Any, Protocol

import attrs

from .._names import WILDCARD
from .._protocol import AmbientError, DataError, Event, ResourceChanged, ResourceState
from .._runtime._clock import Clock

__all__ = [
    "BatchFeeder",
    "CallbackWatcher",
    "Dispatcher",
    "ResourceWatcher",
    "Watch",
    "WatchHandle",
    "await_user_code",
    "cancelled_by_caller",
    "check_watcher",
    "replay_events",
    "warn_never_cancelled",
]

logger = logging.getLogger("xdsclient.watchers")

#: The longest a batch waits for its ``after`` (the ACK of the response it came from to be
#: written): a stream that cannot write holds the watchers up no longer than this.
ACK_FIRST_LIMIT = 0.1


class ResourceWatcher(Protocol):
    """The gRFC A88 watcher shape. Methods may be plain or ``async``; they run one at a time."""

    def on_resource_changed(self, event: ResourceChanged | DataError) -> Awaitable[None] | None:
        """The resource has a new value, or no usable value any more (the event says why)."""

    def on_ambient_error(self, event: AmbientError) -> Awaitable[None] | None:
        """Something went wrong that leaves the last value usable."""


class BatchFeeder:
    """A watcher of the client's own (a `Watch`'s, a configuration watch's) that takes the
    events of one batch in one call: never async, never slow, so the dispatcher delivers a
    response of N resources to it without a call and a clock reading per resource."""

    __slots__ = ()

    def on_batch(self, events: list[Event]) -> None:
        """Every event of one batch this watcher's handles are due, in order."""
        raise NotImplementedError

    def on_resource_changed(self, event: ResourceChanged | DataError) -> None:
        """One event (a replay): as a batch of one."""
        self.on_batch([event])

    def on_ambient_error(self, event: AmbientError) -> None:
        """One event (a replay): as a batch of one."""
        self.on_batch([event])


def check_watcher(watcher: object) -> None:
    """Raise `TypeError` at the call when ``watcher`` is not a `ResourceWatcher`."""
    missing = [
        method
        for method in ("on_resource_changed", "on_ambient_error")
        if not callable(getattr(watcher, method, None))
    ]
    if missing:
        raise TypeError(
            f"a watcher needs callable {' and '.join(missing)}; {watcher!r} has not "
            "(wrap a function in CallbackWatcher)"
        )


@attrs.frozen
class CallbackWatcher:
    """A `ResourceWatcher` made of one callable for every event (or two, split as A88 does)."""

    on_event: Callable[[Event], Awaitable[None] | None]
    on_ambient: Callable[[AmbientError], Awaitable[None] | None] | None = None

    def on_resource_changed(self, event: ResourceChanged | DataError) -> Awaitable[None] | None:
        """Pass the event to ``on_event``."""
        return self.on_event(event)

    def on_ambient_error(self, event: AmbientError) -> Awaitable[None] | None:
        """Pass the event to ``on_ambient``, or to ``on_event`` when that is None."""
        return (self.on_ambient or self.on_event)(event)

    def __str__(self) -> str:
        return getattr(self.on_event, "__qualname__", repr(self.on_event))


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


def _absorb(watcher: object, event: Event, exc: BaseException) -> None:
    """A watcher failed: log it and go on (it keeps its registration), unless it is our own
    task that is being cancelled. Called in the ``except`` block, so the log has the trace."""
    if not isinstance(exc, asyncio.CancelledError):
        logger.exception("xDS watcher %s raised on %r; it keeps its registration", watcher, event)
    elif cancelled_by_caller():
        raise exc
    else:
        logger.exception(
            "xDS watcher %s raised CancelledError on %r without being cancelled; "
            "it keeps its registration",
            watcher,
            event,
        )


def cancelled_by_caller() -> bool:
    """Whether the running task is being cancelled (by its owner, not by user code it ran).

    A watcher callback may raise `CancelledError` of its own (it cancelled something and let the
    error escape); that is a failing callback, to be logged like any other, not a reason for the
    serializer to stop. Only a cancellation requested of our task ends it.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def await_user_code(awaitable: Awaitable[Any]) -> Any:
    """Await a watcher's coroutine without letting it hold up our own cancellation.

    It runs as a task of its own; if we are cancelled meanwhile, that task is cancelled and not
    waited for, so user code that swallows the cancellation cannot hang the client's close.
    """
    task = asyncio.ensure_future(awaitable)
    try:
        await asyncio.wait((task,))
    except asyncio.CancelledError:
        task.cancel()
        raise
    return task.result()


class WatchHandle:
    """Returned by `XdsClient.add_watcher`; `cancel` stops delivery and drops interest.

    It is also the dispatcher's record of the registration: one small object per watched name
    (a walk of N clusters holds 2N), rather than a record, a handle and a bound callback.
    """

    __slots__ = (
        "_batch",
        "_dispatcher",
        "_done",
        "_name",
        "_on_close",
        "_since",
        "_type_url",
        "_watcher",
    )

    def __init__(
        self,
        dispatcher: Dispatcher,
        type_url: str,
        name: str,
        watcher: ResourceWatcher,
        since: int,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._type_url = type_url
        self._name = name
        self._watcher = watcher
        self._since = since  # the first batch sequence number it is to receive
        self._on_close = on_close  # told when the dispatcher closes
        self._done = False
        #: the client's own watcher, which takes a batch's events in one call
        self._batch = watcher if isinstance(watcher, BatchFeeder) else None

    @property
    def cancelled(self) -> bool:
        """Whether it was cancelled, or its client closed: nothing more is delivered."""
        return self._done

    def cancel(self) -> None:
        """Idempotent."""
        if not self._done:
            self._done = True
            self._dispatcher._remove(self)


@attrs.frozen
class _Batch:
    seq: int
    events: list[Event]
    done: asyncio.Future[None] | None
    only: WatchHandle | None = None  # a replay, for one new watcher
    after: asyncio.Future[None] | None = None  # deliver once done (the ACK written)


#: A name's registrations in the `Dispatcher`: its one handle, or a tuple of two or more.
_Registered = WatchHandle | tuple[WatchHandle, ...]


def _handles(found: _Registered | None) -> tuple[WatchHandle, ...]:
    """A name's registrations as a tuple (empty for None)."""
    if found is None:
        return ()
    return found if isinstance(found, tuple) else (found,)


def _joined(found: _Registered | None, handle: WatchHandle) -> _Registered:
    """A name's registrations with ``handle`` added last."""
    return handle if found is None else (*_handles(found), handle)


def _gather(
    gathered: dict[int, tuple[BatchFeeder, list[Event]]], feeder: BatchFeeder, event: Event
) -> list[Event]:
    """Add ``event`` to what ``feeder`` is handed at the end of the pass; returns its list."""
    found = gathered.get(id(feeder))
    if found is None:
        found = gathered[id(feeder)] = (feeder, [])
    found[1].append(event)
    return found[1]


class Dispatcher:
    """Owns the watchers and the serializer that calls them."""

    def __init__(
        self,
        *,
        clock: Clock,
        slow_threshold: float = 1.0,
        on_last_watcher: Callable[[str, str], None] | None = None,
    ) -> None:
        self._clock = clock
        self._slow = slow_threshold
        #: told (type URL, name) when the last watcher of a name leaves, to drop the interest
        self._on_last_watcher = on_last_watcher
        #: type URL -> name -> registrations: the handle alone (most names have one watcher,
        #: and a 1-tuple each is 1.3 MiB for a walk's 20,000), or a tuple of two or more
        self._watchers: dict[str, dict[str, _Registered]] = {}
        self._queue: collections.deque[_Batch] = collections.deque()
        self._queued = asyncio.Event()
        self._seq = itertools.count(1)
        self._closed = False

    def add(
        self,
        type_url: str,
        name: str,
        watcher: ResourceWatcher,
        replay: Iterable[Event],
        *,
        on_close: Callable[[], None] | None = None,
    ) -> WatchHandle:
        """Register ``watcher``; it first receives ``replay`` (the cached state, read now).

        Cancelling the returned handle unregisters it; when it was the last watcher of that
        name, ``on_last_watcher`` hears of it.
        """
        if self._closed:
            raise RuntimeError("the XdsClient is closed")
        handle = WatchHandle(self, type_url, name, watcher, next(self._seq), on_close)
        names = self._watchers.get(type_url)
        if names is None:
            names = self._watchers[type_url] = {}
        names[name] = _joined(names.get(name), handle)
        events = list(replay)
        if events:
            self._put(_Batch(handle._since, events, None, only=handle))
        return handle

    def add_all(
        self,
        type_url: str,
        names: Sequence[str],
        watcher: ResourceWatcher,
        replay: Callable[[str, str], list[Event]],
        cached: Container[str] | None = None,
    ) -> list[WatchHandle]:
        """`add` ``watcher`` for each of ``names`` (a walk adds thousands at once), each with
        its replay ``replay(type_url, name)``, in one pass: the handles share one sequence
        number (they are registered in one step, so every later batch is after all of them).
        ``cached``: the only names that can have a replay (a walk's new names are mostly not
        cached yet: the others are not asked); None: any name can."""
        if self._closed:
            raise RuntimeError("the XdsClient is closed")
        since = next(self._seq)
        registered = self._watchers.get(type_url)
        if registered is None:
            registered = self._watchers[type_url] = {}
        # Built and registered per batch, not per name (no Python loop over a walk's names
        # unless one of them is registered already or given twice).
        handles = list(
            map(WatchHandle, repeat(self), repeat(type_url), names, repeat(watcher), repeat(since))
        )
        fresh = dict(zip(names, handles, strict=True))
        if len(fresh) == len(handles) and registered.keys().isdisjoint(fresh):
            registered.update(fresh)
        else:
            for name, handle in zip(names, handles, strict=True):
                others = registered.get(name)
                registered[name] = handle if others is None else _joined(others, handle)
        pairs: Iterable[tuple[str, WatchHandle]] = zip(names, handles, strict=True)
        if cached is not None:
            pairs = compress(pairs, map(cached.__contains__, names))
        for name, handle in pairs:
            events = replay(type_url, name)
            if events:
                self._put(_Batch(since, events, None, only=handle))
        return handles

    def _remove(self, handle: WatchHandle) -> None:
        names = self._watchers.get(handle._type_url)
        if names is None:  # closed
            return
        registered = _handles(names.get(handle._name))
        if handle not in registered:
            return
        rest = tuple(other for other in registered if other is not handle)
        if rest:
            names[handle._name] = rest[0] if len(rest) == 1 else rest
            return
        del names[handle._name]
        if self._on_last_watcher is not None and not self._closed:
            self._on_last_watcher(handle._type_url, handle._name)

    def publish(
        self, events: list[Event], after: asyncio.Future[None] | None = None
    ) -> asyncio.Future[None] | None:
        """Queue a batch now, in the caller's synchronous step (so a watcher added after it
        gets this state from its replay, not twice). ``after``: deliver it (and what follows
        it) once that is done, or `ACK_FIRST_LIMIT` seconds later at most: a driver passes
        the writing of its ACK, which the watchers' work must not delay.

        Returns a future that completes once every watcher has been called for the batch, or
        once the dispatcher closes (nothing more will be delivered; it is never cancelled, so
        whoever awaits it is not handed a cancellation that is not theirs); None when there is
        nothing to deliver.
        """
        if not events or self._closed:
            return None
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._put(_Batch(next(self._seq), events, done, after=after))
        return done

    def _put(self, batch: _Batch) -> None:
        self._queue.append(batch)
        self._queued.set()

    def close(self) -> None:
        """Deliver nothing more; every `Watch` iteration ends. Idempotent."""
        self._closed = True
        handles = [
            h for names in self._watchers.values() for hs in names.values() for h in _handles(hs)
        ]
        self._watchers.clear()
        for handle in handles:
            handle._done = True
            if handle._on_close is not None:
                handle._on_close()
        for batch in self._queue:
            if batch.done is not None and not batch.done.done():
                batch.done.set_result(None)
        self._queue.clear()

    async def run(self) -> None:
        """The serializer: deliver queued batches, in order, until cancelled."""
        while True:
            while not self._queue:
                self._queued.clear()
                await self._queued.wait()
            batch = self._queue[0]
            if batch.after is not None and not batch.after.done():
                await self._wait_for_ack(batch.after)
                if not self._queue or self._queue[0] is not batch:
                    continue  # closed meanwhile
            self._queue.popleft()
            try:
                if batch.only is not None:
                    await self._deliver_each(batch.only, batch.events)
                else:
                    await self._deliver(batch.events, batch.seq)
            finally:
                if batch.done is not None and not batch.done.done():
                    batch.done.set_result(None)
            # Not held while waiting for the next one: a response's events (and the views they
            # carry) would live on until the next response, beside its own.
            del batch

    async def _deliver_each(self, handle: WatchHandle, events: list[Event]) -> None:
        """A replay: its events to the one new watcher, in order."""
        for event in events:
            pending = self._call(handle, event)
            if pending is not None:  # an async callback: wait for it, in order
                await self._finish(handle, event, *pending)

    async def _deliver(self, events: list[Event], seq: int) -> None:
        """One pass over a published batch: each event to every watcher registered before it
        (``_since`` < ``seq``), in order. The `BatchFeeder` watchers' events are gathered and
        handed over in one call each, before a callback's coroutine is awaited and at the end.

        A response's events are of one type and most names have one watcher, the client's own
        (a configuration watch's feeder): the type's names and wildcard are looked up once per
        run of events of one type, and an event whose one handle is that feeder's goes to its
        list with no further look-up."""
        gathered: dict[int, tuple[BatchFeeder, list[Event]]] = {}
        type_url: str | None = None
        names: dict[str, _Registered] | None = None
        wildcard: tuple[WatchHandle, ...] = ()
        feeder: BatchFeeder | None = None  # the last feeder an event went to, and its list
        feeder_events: list[Event] = []
        for event in events:
            if event.type_url != type_url:
                type_url = event.type_url
                names = self._watchers.get(type_url)
                wildcard = () if names is None else _handles(names.get(WILDCARD))
            if names is None:
                continue
            registered = names.get(event.name)
            if registered is None:
                handles: tuple[WatchHandle, ...] = ()
            elif isinstance(registered, tuple):
                handles = registered
            else:
                if (
                    registered._batch is feeder
                    and feeder is not None
                    and registered._since < seq
                    and not registered._done
                    and (not wildcard or event.name == WILDCARD)
                ):
                    feeder_events.append(event)  # the common case: `_gather`, inlined
                    continue
                handles = (registered,)  # one watcher: the handle alone (see `_watchers`)
            if wildcard and event.name != WILDCARD:
                handles = (*handles, *wildcard)
            for handle in handles:
                if handle._since >= seq or handle._done:
                    continue
                if handle._batch is not None:
                    feeder = handle._batch
                    feeder_events = _gather(gathered, feeder, event)
                    continue
                pending = self._call(handle, event)
                if pending is not None:  # an async callback: the feeders first, then wait
                    self._hand_over(gathered)
                    feeder = None
                    await self._finish(handle, event, *pending)
        self._hand_over(gathered)

    def _hand_over(self, gathered: dict[int, tuple[BatchFeeder, list[Event]]]) -> None:
        """Each feeder's gathered events, in one call (their own code: it does not raise)."""
        for feeder, events in gathered.values():
            try:
                feeder.on_batch(events)
            except Exception as exc:
                _absorb(feeder, events[-1], exc)
        gathered.clear()

    async def _wait_for_ack(self, written: asyncio.Future[None]) -> None:
        """Until ``written`` is done, `ACK_FIRST_LIMIT` seconds at most (on the clock)."""
        bound = asyncio.ensure_future(self._clock.sleep_until(self._clock.time() + ACK_FIRST_LIMIT))
        try:
            await asyncio.wait((written, bound), return_when=asyncio.FIRST_COMPLETED)
        finally:
            bound.cancel()

    def _call(self, handle: WatchHandle, event: Event) -> tuple[Awaitable[Any], float] | None:
        """Call the watcher synchronously (no coroutine per event); an async callback's
        awaitable and start time come back for `_finish`."""
        if handle._done:
            return None
        watcher = handle._watcher
        start = self._clock.time()
        try:
            if isinstance(event, AmbientError):
                result: Any = watcher.on_ambient_error(event)
            else:
                result = watcher.on_resource_changed(event)
            if inspect.isawaitable(result):
                return result, start
            if self._clock.time() - start > self._slow:
                self._log_slow(watcher, event)
        except (asyncio.CancelledError, Exception) as exc:
            _absorb(watcher, event, exc)
        return None

    async def _finish(
        self, handle: WatchHandle, event: Event, awaitable: Awaitable[Any], start: float
    ) -> None:
        watcher = handle._watcher
        try:
            await self._await(awaitable, watcher, event, start)
        except (asyncio.CancelledError, Exception) as exc:
            _absorb(watcher, event, exc)

    async def _await(
        self, awaitable: Awaitable[Any], watcher: ResourceWatcher, event: Event, start: float
    ) -> None:
        """Await an async callback, logging it by name once it runs past the slow threshold."""
        task = asyncio.ensure_future(awaitable)
        sleep = asyncio.ensure_future(self._clock.sleep_until(start + self._slow))
        try:
            await asyncio.wait((task, sleep), return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                self._log_slow(watcher, event)
            await await_user_code(task)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            sleep.cancel()

    def _log_slow(self, watcher: ResourceWatcher, event: Event) -> None:
        logger.warning(
            "xDS watcher %s has run for more than %g s on %s %r; the stream it watches does not"
            " read on until it returns",
            watcher,
            self._slow,
            event.type_url.rsplit(".", 1)[-1],
            event.name,
        )


@attrs.define(eq=False)
class _Pending:
    change: ResourceChanged | DataError | None = None
    ambient: AmbientError | None = None


class Watch:
    """The events of one watched resource (or ``"*"``: of a type), as an async iterator.

    Made by `XdsClient.watch`. It conflates, so it never holds up the client or other watchers:
    for a consumer that reads slower than updates arrive, only the latest state of each resource
    waits. A newer `ResourceChanged` or `DataError` for a name replaces the one waiting and drops
    that name's waiting `AmbientError`; an `AmbientError` waits beside the change and comes after
    it. Names come out in the order they became pending. The subscription ends with `cancel` or
    ``async with``; iteration ends at once then (what was waiting is dropped), and likewise when
    the client closes. A watch dropped without being cancelled is cancelled by the garbage
    collector, with a `ResourceWarning`.
    """

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._readable = asyncio.Event()
        self._handle: WatchHandle | None = None
        self._ended = False

    def _attach(self, handle: WatchHandle) -> None:
        self._handle = handle

    def _watcher(self) -> _WatchFeeder:
        return _WatchFeeder(self)

    def _push(self, event: Event) -> None:
        """Keep ``event`` as the latest state of its resource. Never blocks."""
        if self._ended:
            return
        pending = self._pending.get(event.name)
        if pending is None:
            pending = self._pending[event.name] = _Pending()
        if isinstance(event, AmbientError):
            pending.ambient = event
        else:
            pending.change, pending.ambient = event, None
        self._readable.set()

    def _end(self) -> None:
        self._ended = True
        self._pending.clear()
        self._readable.set()

    @property
    def cancelled(self) -> bool:
        """Whether the watch ended (cancelled, or its client closed)."""
        return self._ended

    def cancel(self) -> None:
        """Stop watching; iteration ends at once, dropping what was waiting. Idempotent."""
        if self._handle is not None:
            self._handle.cancel()
        self._end()

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> Event:
        while not self._pending:
            if self._ended:
                raise StopAsyncIteration
            self._readable.clear()
            await self._readable.wait()
        name, pending = next(iter(self._pending.items()))
        event: Event | None = pending.change
        if event is not None:
            pending.change = None
        else:
            event, pending.ambient = pending.ambient, None
        if pending.change is None and pending.ambient is None:
            del self._pending[name]
        assert event is not None
        return event

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()

    def __del__(self) -> None:
        if self._ended or self._handle is None:  # ended, or never got as far as watching
            return
        warn_never_cancelled(self)
        self._ended = True
        self._handle.cancel()


def warn_never_cancelled(watch: object) -> None:
    """What a watch dropped without being cancelled says (as anyio warns of unclosed streams)."""
    warnings.warn(
        f"{watch!r} was never cancelled: leave it with `async with` or call cancel(); "
        "it is cancelled now",
        ResourceWarning,
        source=watch,
        stacklevel=2,
    )


class _WatchFeeder(BatchFeeder):
    """The watcher behind a `Watch`: holds it weakly, so dropping the watch ends the watching."""

    __slots__ = ("_watch",)

    def __init__(self, watch: Watch) -> None:
        self._watch = weakref.ref(watch)

    def on_batch(self, events: list[Event]) -> None:
        watch = self._watch()
        if watch is not None:
            for event in events:
                watch._push(event)

    def closed(self) -> None:
        """The client closed: the watch's iteration ends."""
        watch = self._watch()
        if watch is not None:
            watch._end()
