"""The drive loop: one sans-I/O `Session` over streams of one `Transport`, reconnecting.

Why thin: every protocol decision is the session's. This loop waits for the first of "a
response arrived", "interest changed", "the next deadline" (and, while watchers are still busy
with the last response, does not read the next one: gRFC A88 flow control), feeds the session,
hands its events to the dispatcher in the same synchronous step (so a watcher registering in
between sees each version once), then writes what the session returned.

Rules (gRFC A57):
- A stream opens once there is interest. The session counts as connected from the open
  attempt, but requests (and with them does-not-exist timers) go out only once the transport
  says the stream is established.
- A stream that fails before any response reports a connectivity error; one that ends after a
  response does not, and the next one opens at once. Backoff grows over consecutive failures.
- Polling (REST-JSON) has no stream to close after a response (A57's exemption is about a
  server ending streams now and then): every failed poll is a connectivity error, reported
  and backed off, whatever came before it.
- Deadlines (TTLs, timers) and interest changes are served in every state: while opening,
  while backing off, while watchers are busy.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NoReturn, Protocol

from .._config import Backoff
from .._errors import TransportError
from .._gc import gc_paused
from .._names import authority_of
from .._observe import (
    ConnectivityChanged,
    Observers,
    RequestSent,
    ResourceUpdate,
    ResponseReceived,
)
from .._protocol import Event, Session
from .._transports import Stream, StreamSpec, Transport
from ._clock import Clock

__all__ = ["Publish", "StreamDriver"]

logger = logging.getLogger("xdsclient.transport")


class Publish(Protocol):
    """Hands a batch of events to the watchers now; returns what completes once they saw it.
    ``after``: the watchers are called only once it is done (the ACK written), or after a
    short bound (a stream that cannot write must not hold up the watchers)."""

    def __call__(
        self, events: list[Event], after: asyncio.Future[None] | None = None
    ) -> asyncio.Future[None] | None: ...


class StreamDriver:
    """Runs one session over one transport until cancelled; the only owner of the session."""

    def __init__(
        self,
        *,
        session: Session,
        transport: Transport,
        spec: StreamSpec,
        server: str,
        clock: Clock,
        publish: Publish,
        backoff: Backoff,
        uniform: Callable[[], float] = random.random,
        on_failure: Callable[[TransportError], None] = lambda error: None,
        on_response: Callable[[], None] = lambda: None,
        observers: Observers | None = None,
        polling: bool = False,
    ) -> None:
        """``on_failure``: a stream failed before any response (a connectivity failure, gRFC
        A57); ``on_response``: a response arrived. Both run before the session sees it, so the
        client can change which server serves an authority (gRFC A71) first. ``observers``
        hear of every request, response, verdict and connectivity change (`xdsclient._observe`).
        ``polling``: the transport polls (REST-JSON); a failure after a response is a failure."""
        self._session = session
        self._transport = transport
        self._spec = spec
        self._server = server
        self._clock = clock
        self._publish = publish
        self._backoff = backoff
        self._uniform = uniform
        self._on_failure = on_failure
        self._on_response = on_response
        self._polling = polling
        self._wake = asyncio.Event()
        self._last_error = ""
        self._observers = observers if observers is not None else Observers()
        #: what observers were last told of this server: None before the first stream
        self._reachable: bool | None = None

    # ------------------------------------------------------------------ commands

    def subscribe(self, type_url: str, name: str) -> None:
        """Want ``name`` of ``type_url``; the request goes out on the next turn of the loop."""
        self.subscribe_all(type_url, (name,))

    def subscribe_all(self, type_url: str, names: Iterable[str]) -> None:
        """`subscribe` to each of ``names``, with one wake-up."""
        self._session.subscribe_all(type_url, names)
        self._wake.set()

    def unsubscribe(self, type_url: str, name: str) -> None:
        """Stop wanting ``name``; a re-subscription before the next turn changes nothing."""
        self._session.unsubscribe(type_url, name)
        self._wake.set()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Until cancelled: open streams, serve them, back off between failures."""
        attempt = 0
        while True:
            await self._idle(until=None)
            if self._reachable is None:
                self._report_connectivity(True, None)  # gRFC A78: 1 once a stream is created
            error = await self._attempt()
            had_response = self._session.response_received
            failed = error is not None and (self._polling or not had_response)
            if failed and error is not None:
                self._on_failure(error)
                self._report_connectivity(False, error)
            self._publish(self._session.disconnect(self._clock.time(), error, report=failed))
            if error is not None:
                self._log(error, first=attempt == 0)
            if had_response:
                attempt = 0
                if not failed:
                    continue
            delay = self._backoff.delay(attempt, self._uniform())
            attempt += 1
            await self._idle(until=self._clock.time() + delay)

    def _log(self, error: TransportError, *, first: bool) -> None:
        """Every stream failure at DEBUG (the WARNING for a lost server is one per change of
        connectivity, written by the client's `ProtocolLogger`); INFO for a new kind of failure
        of a stream that had answered (a server closing streams now and then)."""
        text = str(error)
        new = first or text != self._last_error
        self._last_error = text
        level = logging.INFO if new and self._reachable else logging.DEBUG
        logger.log(level, "%s", text)

    async def _idle(self, *, until: float | None) -> None:
        """Without a stream: serve deadlines and interest changes until ``until`` (or, with
        None, until there is interest)."""
        session = self._session
        while True:
            now = self._clock.time()
            self._publish(session.expire(now))
            session.requests_to_send(now)  # disconnected: only settles interest
            if until is None and session.has_interest:
                return
            if until is not None and now >= until:
                return
            await self._wait((), _earliest(until, session.next_deadline()))

    async def _attempt(self) -> TransportError | None:
        """One stream, from the open attempt to its failure; returns the error."""
        self._session.connect(self._clock.time())
        try:
            stream = await self._open()
        except TransportError as exc:
            return exc
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
                await self._wait((opening,), self._session.next_deadline())
                self._publish(self._session.expire(self._clock.time()))
        except BaseException:
            if opening.done() and not opening.cancelled() and opening.exception() is None:
                opening.result().close()  # established just as we were cancelled
            _discard(opening)
            raise
        return opening.result()

    async def _serve(self, stream: Stream) -> NoReturn:
        """Serve an established stream until it fails (it ends only by raising)."""
        session = self._session
        read: asyncio.Future[Any] | None = None
        delivery: asyncio.Future[None] | None = None
        try:
            await self._flush(stream)
            while True:
                if delivery is None and read is None:
                    read = asyncio.ensure_future(stream.read())
                waiting = delivery if delivery is not None else read
                assert waiting is not None
                await self._wait((waiting,), session.next_deadline())
                now = self._clock.time()
                events = session.expire(now)
                if delivery is not None and delivery.done():
                    delivery = None
                if read is not None and read.done():
                    response, read = read.result(), None
                    self._on_response()
                    if not self._reachable:
                        self._report_connectivity(True, None)
                    if self._observers:
                        self._report_response(response, now)
                    with gc_paused():
                        events.extend(session.receive(response, now))
                    if self._observers.verdicts:
                        self._report_verdicts(response.type_url, now)
                # The ACK goes out before the watchers run: they (and the walk after them) may
                # take long, and the server is waiting on the ACK.
                written = asyncio.get_running_loop().create_future()
                delivery = self._publish(events, written) or delivery
                try:
                    await self._flush(stream)
                finally:
                    written.set_result(None)
        finally:
            if read is not None:
                _discard(read)

    async def _flush(self, stream: Stream) -> None:
        for request in self._session.requests_to_send(self._clock.time()):
            await stream.write(request)
            if self._observers:
                self._report_request(request)

    # ------------------------------------------------------------------ observers

    def _report_request(self, request: Any) -> None:
        delta = self._session.delta
        detail = request.error_detail.message if request.HasField("error_detail") else None
        self._observers.emit(
            RequestSent(
                server=self._server,
                time=self._clock.time(),
                type_url=request.type_url,
                delta=delta,
                version_info="" if delta else request.version_info,
                nonce=request.response_nonce,
                resource_names=tuple(
                    request.resource_names_subscribe if delta else request.resource_names
                ),
                unsubscribed=tuple(request.resource_names_unsubscribe) if delta else (),
                error_detail=detail,
            )
        )

    def _report_response(self, response: Any, now: float) -> None:
        delta = self._session.delta
        self._observers.emit(
            ResponseReceived(
                server=self._server,
                time=now,
                type_url=response.type_url,
                delta=delta,
                version_info=response.system_version_info if delta else response.version_info,
                nonce=response.nonce,
                resource_count=len(response.resources),
                removed=tuple(response.removed_resources) if delta else (),
                message=response,
            )
        )

    def _report_verdicts(self, type_url: str, now: float) -> None:
        emit = self._observers.emit
        for name, error in self._session.verdicts():
            emit(
                ResourceUpdate(
                    server=self._server,
                    time=now,
                    type_url=type_url,
                    name=name,
                    authority=authority_of(name) if name else "",
                    valid=error is None,
                    error=error,
                )
            )

    def _report_connectivity(self, connected: bool, error: TransportError | None) -> None:
        if self._reachable is connected:
            return
        self._reachable = connected
        if self._observers:
            session = self._session
            self._observers.emit(
                ConnectivityChanged(
                    server=self._server,
                    time=self._clock.time(),
                    connected=connected,
                    error=None if error is None else str(error),
                    type_urls=()
                    if connected
                    else tuple(t for t in session.type_urls if session.subscribed(t)),
                )
            )

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


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


def _discard(future: asyncio.Future[Any]) -> None:
    """Cancel a future we no longer wait for, or collect its error so none goes unretrieved."""
    if not future.done():
        future.cancel()
    elif not future.cancelled():
        future.exception()
