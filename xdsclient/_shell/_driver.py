"""The drive loop: one sans-I/O stream protocol over streams of one `Transport`, reconnecting.

Why thin: every protocol decision is the protocol object's (`StreamProtocol`: discovery's
`Session` today, load reporting next; any bidirectional stream whose messages a `StreamSpec`
names). This loop waits for the first of "a response arrived", "a command changed the
protocol", "the next deadline" (and, while watchers are still busy with the last response, does
not read the next one: gRFC A88 flow control), feeds the protocol, hands its events on in the
same synchronous step (so a watcher registering in between sees each version once), then
writes what the protocol returned. Whatever else must happen on a stream's life (fallback
between servers, reports to observers) is told to one `StreamEvents` object, which the pool
composes; the loop itself knows nothing of discovery.

Rules (gRFC A57; the stream-life ones are `StreamLife`'s, shared with the load tester):
- A stream opens once there is interest. The protocol counts as connected from the open
  attempt, but requests (and with them does-not-exist timers) go out only once the transport
  says the stream is established.
- A stream that fails before any response reports a connectivity error; one that ends after a
  response does not, and the next one opens at once. Backoff grows over consecutive failures.
- Polling (REST-JSON) has no stream to close after a response (A57's exemption is about a
  server ending streams now and then): every failed poll is a connectivity error, reported
  and backed off, whatever came before it.
- Deadlines (TTLs, timers) and commands are served in every state: while opening, while
  backing off, while watchers are busy.
- The driver is the only owner of its protocol object: every change to it from outside (a
  subscription, a hand-over between servers) is a `command`, run synchronously between two
  steps of the loop, which then writes whatever the change made due.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, NoReturn, Protocol, TypeVar

from .._errors import TransportError
from .._runtime._clock import Clock
from .._runtime._gc import CollectorHold
from .._settings._config import Backoff
from .._transports import Stream, StreamSpec, Transport
from ._stream_life import End, StreamLife

__all__ = ["StreamDriver", "StreamEvents", "StreamProtocol"]

logger = logging.getLogger("xdsclient.transport")

R = TypeVar("R")


class StreamProtocol(Protocol):
    """What the driver needs of a sans-I/O stream protocol: messages and ``now`` in, requests
    and events out (`xdsclient.Session` is one). Events are handed to `StreamEvents.publish`
    as they are; the driver never looks into them."""

    @property
    def has_interest(self) -> bool:
        """Whether a stream should be open now."""
        ...

    @property
    def response_received(self) -> bool:
        """Whether the current (or last) stream received a response (gRFC A57)."""
        ...

    def connect(self, now: float) -> None:
        """A stream is being opened."""
        ...

    def requests_to_send(self, now: float) -> list[Any]:
        """The requests to write now (called only once the stream is established; while
        disconnected, to settle state: it must then return none)."""
        ...

    def receive(self, message: Any, now: float, raw: bytes | None = None) -> list[Any]:
        """Apply one response; returns the events it caused. ``raw``: the bytes ``message``
        was decoded from, where the transport has them (None: only the message)."""
        ...

    def next_deadline(self) -> float | None:
        """When `expire` has work to do next, or None."""
        ...

    def expire(self, now: float) -> list[Any]:
        """Serve every deadline at or before ``now``; returns the events it caused."""
        ...

    def disconnect(self, now: float, error: TransportError | None, *, report: bool) -> list[Any]:
        """The stream ended (``error``: why); ``report``: whether the failure is one to report
        (a connectivity failure, gRFC A57). Returns the events it caused."""
        ...


class StreamEvents(Protocol):
    """What a driver tells about its streams: one object, composed by whoever runs it (the
    pool adds fallback and observer reports). Every call is synchronous and runs in the step
    of the loop that caused it, before the loop goes on."""

    def on_open(self, now: float) -> None:
        """A stream is about to be opened (every attempt)."""
        ...

    def on_request(self, request: Any, now: float) -> None:
        """A request was written."""
        ...

    def on_response(self, response: Any, now: float) -> None:
        """A response was read; the protocol has not seen it yet."""
        ...

    def on_applied(self, response: Any, now: float) -> None:
        """The protocol applied that response."""
        ...

    def on_failure(self, error: TransportError, now: float) -> None:
        """A connectivity failure (gRFC A57): the stream failed before any response, or a poll
        failed; the protocol has not seen it yet."""
        ...

    def publish(
        self, events: list[Any], after: asyncio.Future[None] | None = None
    ) -> asyncio.Future[None] | None:
        """Hand a batch of the protocol's events on now; returns what completes once they were
        delivered (the driver reads the next response only then: flow control). ``after``: they
        are delivered only once it is done (the ACK written), or after a short bound."""
        ...


P = TypeVar("P", bound=StreamProtocol)


class StreamDriver(Generic[P]):
    """Runs one protocol object over one transport until cancelled; its only owner."""

    def __init__(
        self,
        *,
        protocol: P,
        transport: Transport,
        spec: StreamSpec,
        server: str,
        clock: Clock,
        events: StreamEvents,
        backoff: Backoff,
        uniform: Callable[[], float] = random.random,
        polling: bool = False,
        label: str | None = None,
    ) -> None:
        """``events`` hears of every stream, request, response and failure (see
        `StreamEvents`). ``polling``: the transport polls (REST-JSON); a failure after a
        response is a failure. ``label``: what log lines call a stream that is not discovery
        (``"LRS"``): its failures are logged as ``<label> stream to <server> ended: why``."""
        self._protocol = protocol
        self._transport = transport
        self._spec = spec
        self._server = server
        self._clock = clock
        self._events = events
        self._uniform = uniform
        self._life = StreamLife(backoff, polling=polling)
        self._label = label
        self._wake = asyncio.Event()
        self._last_error = ""

    # ------------------------------------------------------------------ commands

    @property
    def protocol(self) -> P:
        """The protocol object, to read (change it only through `command`)."""
        return self._protocol

    def command(self, change: Callable[[P], R]) -> R:
        """Apply ``change`` to the protocol now; what it made due goes out on the next turn of
        the loop. Returns what ``change`` returned."""
        result = change(self._protocol)
        self._wake.set()
        return result

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Until cancelled: open streams, serve them, back off between failures (the rules are
        `StreamLife`'s)."""
        protocol, events, life = self._protocol, self._events, self._life
        while True:
            await self._idle(until=None)
            error = await self._attempt()
            first = life.failures == 0
            verdict = life.ended(End.FAILED, self._uniform)
            if verdict.report:
                events.on_failure(error, self._clock.time())
            events.publish(protocol.disconnect(self._clock.time(), error, report=verdict.report))
            self._log(error, first=first, failed=verdict.report)
            if verdict.delay:
                await self._idle(until=self._clock.time() + verdict.delay)

    def _log(self, error: TransportError, *, first: bool, failed: bool) -> None:
        """Every stream failure at DEBUG (the WARNING for a lost server is one per change of
        connectivity, written by the client's `ProtocolLogger`); INFO for a new kind of failure
        of a stream that had answered (a server closing streams now and then)."""
        text = str(error)
        new = first or text != self._last_error
        self._last_error = text
        level = logging.INFO if new and not failed else logging.DEBUG
        if self._label is None:
            logger.log(level, "%s", text)
            return
        prefix = f"xDS stream to {self._server} failed: "
        why = text[len(prefix) :] if text.startswith(prefix) else text
        logger.log(level, "%s stream to %s ended: %s", self._label, self._server, why)

    async def _idle(self, *, until: float | None) -> None:
        """Without a stream: serve deadlines and commands until ``until`` (or, with None,
        until there is interest)."""
        protocol = self._protocol
        while True:
            now = self._clock.time()
            self._events.publish(protocol.expire(now))
            protocol.requests_to_send(now)  # disconnected: only settles interest
            if until is None and protocol.has_interest:
                return
            if until is not None and now >= until:
                return
            await self._wait((), _earliest(until, protocol.next_deadline()))

    async def _attempt(self) -> TransportError:
        """One stream, from the open attempt to its failure; returns the error."""
        now = self._clock.time()
        self._events.on_open(now)
        self._life.opening()
        self._protocol.connect(now)
        try:
            stream = await self._open()
        except TransportError as exc:
            return exc
        self._life.established()
        try:
            await self._serve(stream)
        except TransportError as exc:
            return exc
        except Exception as exc:  # a bug must not end the client: report and reconnect
            logger.exception("xDS stream to %s broke unexpectedly", self._server)
            return TransportError(f"xDS stream to {self._server} broke: {exc!r}")
        finally:
            stream.close()

    async def _open(self) -> Stream:
        """Open a stream, firing deadlines while the transport establishes it."""
        opening = asyncio.ensure_future(self._transport.open(self._spec))
        try:
            while not opening.done():
                await self._wait((opening,), self._protocol.next_deadline())
                self._events.publish(self._protocol.expire(self._clock.time()))
        except BaseException:
            if opening.done() and not opening.cancelled() and opening.exception() is None:
                opening.result().close()  # established just as we were cancelled
            _discard(opening)
            raise
        return opening.result()

    async def _serve(self, stream: Stream) -> NoReturn:
        """Serve an established stream until it fails (it ends only by raising)."""
        protocol, listener = self._protocol, self._events
        receive = _raw_reader(stream)
        read: asyncio.Future[tuple[Any, bytes | None]] | None = None
        delivery: asyncio.Future[None] | None = None
        held = CollectorHold()
        writes = _Writes(stream, self._life, self._clock, listener.on_request)
        try:
            writes.start(protocol.requests_to_send(self._clock.time()))
            while True:
                if delivery is None and read is None:
                    read = asyncio.ensure_future(receive())
                waiting = delivery if delivery is not None else read
                assert waiting is not None
                until = _earliest(protocol.next_deadline(), held.deadline)
                await self._wait((waiting, *writes.pending), until)
                writes.check()  # a write that failed fails the stream
                now = self._clock.time()
                held.release(now)
                events = protocol.expire(now)
                if delivery is not None and delivery.done():
                    delivery = None
                    if read is None:  # read on while what the watchers asked for is written
                        read = asyncio.ensure_future(receive())
                response = raw = None
                if read is not None and read.done():
                    (response, raw), read = read.result(), None
                if response is None:
                    # What deadlines, commands or watchers made due (a walk's subscriptions)
                    # is written without waiting for it: a response to it is read meanwhile.
                    # The step's events still reach the watchers once it is written.
                    started = writes.start(protocol.requests_to_send(now))
                    delivery = listener.publish(events, started) or delivery
                    continue
                # The collector is held from here for `HOLD_LIMIT`, over the responses that
                # follow meanwhile: the young collections over what they made (11 to 16 ms of
                # CPU after an update of 10,000 assignments) and what their watchers' walks
                # made run after their ACKs and the requests they led to (in a full load,
                # after the last ACK), not between them (`CollectorHold`).
                held.hold(now)
                self._life.received()
                listener.on_response(response, now)
                events.extend(protocol.receive(response, now, raw))
                listener.on_applied(response, now)
                # The ACK is written before the watchers run: they (and the walk after them)
                # may take long, and the server is waiting on the ACK.
                written = asyncio.get_running_loop().create_future()
                delivery = listener.publish(events, written) or delivery
                try:
                    await writes.write(protocol.requests_to_send(self._clock.time()))
                finally:
                    written.set_result(None)
                # Let go of the response and its events before waiting on the watchers: an
                # update's parsed message is freed before the walk builds the next snapshot.
                del response, raw, events
        finally:
            held.release()
            writes.discard()
            if read is not None:
                _discard(read)

    async def _wait(self, futures: Iterable[Awaitable[Any]], until: float | None) -> None:
        """Until one of ``futures`` is done, interest changes, or the clock reaches ``until``."""
        wake = asyncio.ensure_future(self._wake.wait())
        waits: set[asyncio.Future[Any]] = {wake, *(asyncio.ensure_future(f) for f in futures)}
        sleep = None if until is None else asyncio.ensure_future(self._clock.sleep_until(until))
        if sleep is not None:
            waits.add(sleep)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            wake.cancel()
            if sleep is not None:
                sleep.cancel()
        self._wake.clear()


class _Writes:
    """A stream's writes, in order: a batch of requests is written after the ones before it
    are; `start` does not wait for it to be written, `write` does."""

    def __init__(
        self,
        stream: Stream,
        life: StreamLife,
        clock: Clock,
        on_request: Callable[[Any, float], None],
    ) -> None:
        self._stream, self._life, self._clock, self._on_request = stream, life, clock, on_request
        self._pending: asyncio.Future[None] | None = None

    @property
    def pending(self) -> tuple[asyncio.Future[None], ...]:
        """The writes started and not yet checked (one chain)."""
        return () if self._pending is None else (self._pending,)

    def start(self, requests: list[Any]) -> asyncio.Future[None] | None:
        """Write ``requests`` after the writes before them, without waiting; returns what
        completes once they are written (None: nothing to write)."""
        if not requests:
            return None
        self._pending = asyncio.ensure_future(self._after(self._pending, requests))
        return self._pending

    async def write(self, requests: list[Any]) -> None:
        """Write ``requests`` after the writes before them, and wait until they are written
        (raising the first failure)."""
        previous, self._pending = self._pending, None
        await self._after(previous, requests)

    def check(self) -> None:
        """Raise the error of a started write that failed."""
        if self._pending is not None and self._pending.done():
            pending, self._pending = self._pending, None
            pending.result()

    def discard(self) -> None:
        if self._pending is not None:
            _discard(self._pending)

    async def _after(self, previous: asyncio.Future[None] | None, requests: list[Any]) -> None:
        if previous is not None:
            await previous
        assert self._life.may_write
        for request in requests:
            await self._stream.write(request)
            self._on_request(request, self._clock.time())


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def _discard(future: asyncio.Future[Any]) -> None:
    """Cancel a future we no longer wait for, and collect its error so none goes unretrieved:
    now if it is done, else when it ends (a task may end with an error in spite of the cancel,
    as a read inside Python 3.11's ``asyncio.wait_for`` does when its wait is woken as it is
    cancelled: the REST poll's read raised "is closed" that way at every client close)."""
    if future.done():
        _retrieve(future)
    else:
        future.add_done_callback(_retrieve)
        future.cancel()


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _raw_reader(stream: Stream) -> Callable[[], Awaitable[tuple[Any, bytes | None]]]:
    """The stream's read of a response with the bytes it was decoded from, where it has one
    (the gRPC transport's ``read_raw``); else its ``read``, with no bytes (REST, files, fakes:
    a reader of the bytes then serializes the message itself)."""
    read_raw: Callable[[], Awaitable[tuple[Any, bytes | None]]] | None = getattr(
        stream, "read_raw", None
    )
    if read_raw is not None:
        return read_raw

    async def read() -> tuple[Any, bytes | None]:
        return await stream.read(), None

    return read
