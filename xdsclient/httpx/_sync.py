"""XdsSyncTransport: the xDS HTTP transport for ``httpx.Client``, on a background loop thread.

Why a bridge and not a sync twin of the transport: routing, retries, balancing, load reports and
the connections all live in the async `XdsTransport` and the client under it, on one event loop.
The sync transport runs that same transport on a `LoopThread` and hands each request to it:
``handle_request`` sends the request there and waits for the response's head; the body then
comes back as a sync stream, one loop step per chunk, so a streamed response stays streamed.
`BridgedTransport` does this for any ``httpx.AsyncBaseTransport`` (it is tested with httpx's
own); `XdsSyncTransport` is the bridge over `XdsTransport`.

Rules:
- One transport serves any number of threads at once: each request is its own task on the
  loop; the caller's thread only waits.
- A sync request body (a generator) is read in the caller's thread before sending: the loop
  must never block on the caller's iterator, and a retry must be able to send it again.
- Closing a response early closes its async stream on the loop (the connection goes back to the
  pool, or closes); closing the transport closes the async transport, then the loop thread if
  the transport started it. A request still waiting for its response is cancelled first, and
  its caller gets `ClientClosedError` (whatever the pool's closing would have made of it).
- Errors raised on the loop (``httpx.ConnectError``, ``httpx.ReadTimeout``...) reach the caller
  as they are, so ``httpx.Client`` treats them as it treats its own transport's.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from .. import ClientClosedError
from ..sync import LoopThread, SyncXdsClient

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
        self._in_flight: set[concurrent.futures.Future[httpx.Response]] = set()
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
        self._runner.check_blocking("XdsSyncTransport.handle_request")
        if not isinstance(request.stream, httpx.AsyncByteStream):
            request.read()  # a sync body: read here, never by the loop (see the module's rules)
        with self._lock:
            if self._closed:
                raise ClientClosedError("the transport is closed")
            future = self._runner.submit(self._transport.handle_async_request(request))
            self._in_flight.add(future)
        try:
            response = self._runner.wait(future)
        except ClientClosedError:
            if self._closed:
                raise ClientClosedError("the transport closed before the response came") from None
            raise
        finally:
            with self._lock:
                self._in_flight.discard(future)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_SyncBody(self._runner, stream),
            extensions={k: v for k, v in response.extensions.items() if k not in _LOOP_ONLY},
        )

    def close(self) -> None:
        """Close the async transport (and the loop thread, when this transport started it).
        Idempotent."""
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


class _SyncBody(httpx.SyncByteStream):
    """An async response body read from sync code: a loop step per chunk; closed on the loop
    at its end or on `close`, whichever comes first."""

    def __init__(self, runner: LoopThread, stream: httpx.AsyncByteStream) -> None:
        self._runner = runner
        self._stream = stream
        self._chunks: Any = None  # the async iterator, once iteration began
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        if self._chunks is not None:
            raise httpx.StreamConsumed()
        self._chunks = self._stream.__aiter__()
        while not self._closed:
            chunk = self._runner.run(_next_chunk(self._chunks, self._stream))
            if chunk is None:
                self._closed = True  # closed on the loop by the step that ended it
                return
            yield chunk

    def close(self) -> None:
        """Close the async body on the loop (an unread rest is dropped). Idempotent; quiet once
        the loop stopped (which ended the body with it)."""
        if self._closed:
            return
        self._closed = True
        if not self._runner.running or self._runner.is_loop_thread():
            return
        with contextlib.suppress(ClientClosedError):  # the loop stopped meanwhile: it ended it
            self._runner.run(_close_body(self._chunks, self._stream))


async def _next_chunk(chunks: Any, stream: httpx.AsyncByteStream) -> bytes | None:
    """The next chunk, or None at the end, with the stream closed in the same step."""
    try:
        chunk: bytes = await chunks.__anext__()
    except StopAsyncIteration:
        await stream.aclose()
        return None
    except BaseException:
        await stream.aclose()
        raise
    return chunk


async def _close_body(chunks: Any, stream: httpx.AsyncByteStream) -> None:
    if chunks is not None and hasattr(chunks, "aclose"):
        await chunks.aclose()
    await stream.aclose()


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
        transport = importlib.import_module("xdsclient.httpx._transport").XdsTransport
        super().__init__(lambda: transport(listener, **options), loop_thread=loop_thread)
