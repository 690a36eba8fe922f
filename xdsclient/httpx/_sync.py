"""XdsSyncTransport: the xDS HTTP transport for ``httpx.Client``, on a background loop thread.

Why a bridge and not a sync twin of the transport: routing, retries, balancing, load reports and
the connections all live in the async `XdsTransport` and the client under it, on one event loop.
The sync transport runs that same transport on a `LoopThread` and hands each request to it:
``handle_request`` sends the request there and waits for the response's head; a task on the
loop reads the body ahead (a chunk or two) into a queue the caller's thread takes from, so a
streamed response stays streamed and a short one costs no more hops than its head.
`BridgedTransport` does this for any ``httpx.AsyncBaseTransport`` (it is tested with httpx's
own); `XdsSyncTransport` is the bridge over `XdsTransport`.

Rules:
- One transport serves any number of threads at once: each request is its own task on the
  loop; the caller's thread only waits.
- A request body that is not bytes already (a generator, a multipart upload's files) is read in
  the caller's thread before sending: the loop must never block on the caller's iterator or
  files, and a retry must be able to send it again.
- Closing a response early closes its async stream on the loop (the connection goes back to the
  pool, or closes); closing the transport closes the async transport, then the loop thread if
  the transport started it. A request still waiting for its response is cancelled first, and
  its caller gets `ClientClosedError` (whatever the pool's closing would have made of it).
- Errors raised on the loop (``httpx.ConnectError``, ``httpx.ReadTimeout``...) reach the caller
  as they are, so ``httpx.Client`` treats them as it treats its own transport's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from .. import ClientClosedError
from ..sync import LoopThread, SyncXdsClient
from ._transport import XdsTransport

__all__ = ["BridgedTransport", "XdsSyncTransport"]

#: Extensions of an async response that mean nothing to a sync caller (its network stream is an
#: async object of the loop).
_LOOP_ONLY = frozenset({"network_stream"})


class BridgedTransport(httpx.BaseTransport):
    """A sync ``httpx.BaseTransport`` sending through the ``httpx.AsyncBaseTransport`` that
    ``make_transport()`` returns, created and entered on ``loop_thread`` (a `LoopThread` of its
    own, started now and stopped by `close`, when None)."""

    def __init__(
        self,
        make_transport: Callable[[], httpx.AsyncBaseTransport],
        *,
        loop_thread: LoopThread | None = None,
    ) -> None:
        self._owns_loop = loop_thread is None
        if loop_thread is None:
            loop_thread = LoopThread(name="xdsclient-http")
            loop_thread.start()
        self._runner = loop_thread
        self._lock = threading.Lock()
        self._closed = False
        #: requests sent and not yet answered, cancelled by `close`
        self._in_flight: set[concurrent.futures.Future[Any]] = set()
        try:
            self._transport = loop_thread.run(_entered(make_transport))
        except BaseException:
            if self._owns_loop:
                loop_thread.stop()
            raise

    @property
    def loop_thread(self) -> LoopThread:
        """The `LoopThread` the async transport runs on."""
        return self._runner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the async transport and wait for the response's head; its
        body streams from the loop as it is read."""
        self._runner.check_blocking(f"{type(self).__name__}.handle_request")
        if not isinstance(request.stream, httpx.ByteStream):
            request.read()  # read here, never by the loop (see the module's rules)
        with self._lock:
            if self._closed:
                raise ClientClosedError("the transport is closed")
            future = self._runner.submit(_send(self._runner, self._transport, request))
            self._in_flight.add(future)
        try:
            response, body = self._runner.wait(future)
        except ClientClosedError:
            if self._closed:
                raise ClientClosedError("the transport closed before the response came") from None
            raise
        finally:
            with self._lock:
                self._in_flight.discard(future)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=body,
            extensions={k: v for k, v in response.extensions.items() if k not in _LOOP_ONLY},
        )

    def close(self) -> None:
        """Close the async transport (and the loop thread, when this transport started it).
        Idempotent; refused (`RuntimeError`) before it closes anything inside a running event
        loop, as a request would be."""
        if not self._closed and self._runner.running:
            self._runner.check_blocking(f"{type(self).__name__}.close")
        with self._lock:
            if self._closed:
                return
            self._closed = True
            in_flight, self._in_flight = self._in_flight, set()
        for future in in_flight:  # their callers get ClientClosedError, whatever the pool does
            future.cancel()
        try:
            if self._runner.running:
                self._runner.run(self._transport.aclose())
        finally:
            if self._owns_loop:
                self._runner.stop()


async def _entered(make: Callable[[], httpx.AsyncBaseTransport]) -> httpx.AsyncBaseTransport:
    """The transport made and entered on the loop (``async with`` would enter it there)."""
    transport = make()
    await transport.__aenter__()
    return transport


async def _send(
    runner: LoopThread, transport: httpx.AsyncBaseTransport, request: httpx.Request
) -> tuple[httpx.Response, _SyncBody]:
    """On the loop: the response's head, and its body already being read ahead."""
    response = await transport.handle_async_request(request)
    stream = response.stream
    assert isinstance(stream, httpx.AsyncByteStream)
    body = _SyncBody(runner, stream)
    body.start()
    return response, body


#: How many chunks of a body are read ahead of its sync reader (httpcore reads up to 64 KiB
#: at a time); the pump waits for the reader beyond that.
READ_AHEAD = 2


class _Ended(Exception):
    """The pump's last item when it was cancelled: its reader gets `ClientClosedError`."""


class _SyncBody(httpx.SyncByteStream):
    """An async response body read from sync code.

    A task on the loop (the pump) reads the body as it comes into a queue the reader's thread
    takes from, `READ_AHEAD` chunks ahead at most, so reading a body costs no hop to the loop
    per chunk and a slow reader holds the connection back as httpx's own would. The pump closes
    the async stream when the body ends, fails, or the reader closes it early (`close` cancels
    the pump and waits until the stream is closed); its last item says which.
    """

    def __init__(self, runner: LoopThread, stream: httpx.AsyncByteStream) -> None:
        self._runner = runner
        self._stream = stream
        self._items: queue.SimpleQueue[bytes | BaseException | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._queued = 0  # chunks put and not yet taken
        self._room = asyncio.Event()  # set (from the reader) when the queue has room again
        self._task: asyncio.Task[None] | None = None
        self._iterated = False
        self._ended = False  # the reader took the last item

    def start(self) -> None:
        """On the loop: start reading ahead."""
        self._task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        last: BaseException | None = None
        try:
            async for chunk in self._stream:
                self._items.put(chunk)
                with self._lock:
                    self._queued += 1
                    full = self._queued >= READ_AHEAD
                if full:  # the reader's wake-up comes through the loop, so after this clear
                    self._room.clear()
                    await self._room.wait()
        except asyncio.CancelledError:
            last = _Ended()
        except Exception as error:
            last = error
        finally:
            try:
                await self._stream.aclose()
            finally:
                self._items.put(last)

    def __iter__(self) -> Iterator[bytes]:
        if self._iterated:
            raise httpx.StreamConsumed()
        self._iterated = True
        while not self._ended:
            item = self._items.get()
            if isinstance(item, bytes):
                self._took()
                yield item
                continue
            self._ended = True
            if isinstance(item, _Ended):
                raise ClientClosedError("the response ended early: its transport closed")
            if item is not None:
                raise item

    def _took(self) -> None:
        with self._lock:
            self._queued -= 1
            wake = self._queued == READ_AHEAD - 1
        if wake:
            self._runner.call_soon(self._room.set)

    def close(self) -> None:
        """Stop reading (an unread rest is dropped) and wait until the async stream is closed.
        Idempotent; quiet once the loop stopped (which ended the body with it)."""
        if self._ended:
            return
        self._ended = True
        task = self._task
        if task is None or not self._runner.running or self._runner.is_loop_thread():
            return
        with contextlib.suppress(ClientClosedError):  # the loop stopped meanwhile: it ended it
            self._runner.run(_cancelled(task))


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait((task,))


class XdsSyncTransport(BridgedTransport):
    """`XdsTransport` for ``httpx.Client``: ``httpx.Client(transport=XdsSyncTransport("edge"))``
    routes, retries, balances and load-reports each request by the xDS configuration of the
    listener, from any number of threads at once.

    Takes the arguments of `XdsTransport` (``http2``, ``rng``, ``idle_timeout``...), with
    ``client`` a `SyncXdsClient` instead of an `XdsClient`: the transport then runs on that
    client's loop thread, reads its configuration and leaves it open when it closes. Without
    one, the transport makes its client from the bootstrap as `XdsTransport` does, on a loop
    thread of its own, and closes both with itself. It starts at once and stops with `close`
    (``httpx.Client`` closes it).
    """

    def __init__(
        self, listener: str, *, client: SyncXdsClient | None = None, **options: Any
    ) -> None:
        loop_thread = None
        if client is not None:
            if not isinstance(client, SyncXdsClient):
                raise TypeError(
                    "client must be a SyncXdsClient (its loop thread runs the transport), "
                    f"not {client!r}; an XdsClient belongs with the async XdsTransport"
                )
            loop_thread = client.loop_thread
            options["client"] = client.client
        super().__init__(lambda: XdsTransport(listener, **options), loop_thread=loop_thread)
