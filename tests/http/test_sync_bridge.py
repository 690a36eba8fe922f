"""The sync bridge over an async httpx transport (httpx's own here), against a real HTTP/1.1
and HTTP/2 server (hypercorn) on 127.0.0.1: what `XdsSyncTransport` is built on."""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from hypercorn.asyncio import serve
from hypercorn.config import Config

from tests.helpers import idle
from tests.sync.conftest import until
from xdsclient import ClientClosedError
from xdsclient.httpx._sync import READ_AHEAD, BridgedTransport, XdsSyncTransport
from xdsclient.sync import LoopThread

Scope = dict[str, Any]


class Backend:
    """An ASGI app: ``/hello``, ``/echo`` (the request body back), ``/stream?n=N`` (N chunks),
    ``/forever`` (chunks until the client goes, which it records) and ``/slow`` (answers
    after 10 s)."""

    def __init__(self) -> None:
        self.disconnected = threading.Event()
        self.requests = 0

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.requests += 1
        path = scope["path"]
        if path == "/echo":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            await _answer(send, body, http_version=scope["http_version"])
        elif path == "/stream":
            count = int(scope["query_string"].decode().split("=")[1])
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for i in range(count):
                more = i < count - 1
                chunk = f"chunk {i};".encode()
                await send({"type": "http.response.body", "body": chunk, "more_body": more})
        elif path == "/forever":
            await self._forever(receive, send)
        elif path == "/slow":
            await asyncio.sleep(10)
            await _answer(send, b"late")
        else:
            await _answer(send, f"hello {scope['query_string'].decode()}".encode())

    async def _forever(self, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        sending = asyncio.ensure_future(_chunks_forever(send))
        while (await receive())["type"] != "http.disconnect":
            pass
        self.disconnected.set()
        sending.cancel()


async def _chunks_forever(send: Any) -> None:
    while True:
        await send({"type": "http.response.body", "body": b"x" * 1024, "more_body": True})
        await asyncio.sleep(0.001)


async def _answer(send: Any, body: bytes, http_version: str = "") -> None:
    headers = [(b"x-http-version", http_version.encode())] if http_version else []
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def backend() -> Iterator[tuple[Backend, str]]:
    """The backend served by hypercorn (HTTP/1.1 and h2c) on a loop thread; its base URL."""
    app = Backend()
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{listening.detach()}"]  # hypercorn owns and closes it
    config.accesslog = config.errorlog = None
    config.graceful_timeout = 0.1
    with LoopThread(name="test-backend") as thread:
        stop = thread.run(_event())
        serving = thread.submit(serve(app, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
        try:
            yield app, f"http://127.0.0.1:{port}"
        finally:
            thread.call_soon(stop.set)
            serving.result(10)


async def _event() -> asyncio.Event:
    return asyncio.Event()


def bridge(*, http2: bool = False, **options: Any) -> BridgedTransport:
    if http2:
        options.update(http1=False, http2=True)  # h2c with prior knowledge
    return BridgedTransport(lambda: httpx.AsyncHTTPTransport(**options))


@pytest.mark.parametrize("http2", [False, True], ids=["http1.1", "h2c"])
def test_a_sync_client_sends_through_the_async_transport(
    backend: tuple[Backend, str], http2: bool
) -> None:
    """httpx.Client over the bridge: the response, its headers and its protocol come back."""
    _, url = backend
    with httpx.Client(transport=bridge(http2=http2), base_url=url) as client:
        hello = client.get("/hello?a=1")
        echoed = client.post("/echo", content=b"payload")
    assert (hello.status_code, hello.text) == (200, "hello a=1")
    assert echoed.text == "payload"
    assert echoed.headers["x-http-version"] == ("2" if http2 else "1.1")
    assert echoed.http_version == ("HTTP/2" if http2 else "HTTP/1.1")


def test_a_sync_generator_body_is_sent_whole(backend: tuple[Backend, str]) -> None:
    """A body given as a sync generator (which the loop cannot read) arrives complete."""
    _, url = backend

    def parts() -> Iterator[bytes]:
        yield b"one,"
        yield b"two"

    with httpx.Client(transport=bridge(), base_url=url) as client:
        assert client.post("/echo", content=parts()).text == "one,two"


def test_thirty_two_threads_share_one_transport(backend: tuple[Backend, str]) -> None:
    """32 threads send 10 requests each through one transport; each gets its own answer."""
    app, url = backend
    barrier = threading.Barrier(32)
    with httpx.Client(transport=bridge(), base_url=url) as client:

        def work(i: int) -> list[str]:
            barrier.wait(10)
            return [client.get(f"/hello?{i}-{k}").text for k in range(10)]

        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            results = list(pool.map(work, range(32)))
    assert results == [[f"hello {i}-{k}" for k in range(10)] for i in range(32)]
    assert app.requests == 320


def test_a_streamed_body_comes_chunk_by_chunk(backend: tuple[Backend, str]) -> None:
    """client.stream reads the body as the server sends it, and iter_raw ends at its end."""
    _, url = backend
    with (
        httpx.Client(transport=bridge(), base_url=url) as client,
        client.stream("GET", "/stream?n=5") as response,
    ):
        body = b"".join(response.iter_raw())
    assert body == b"".join(f"chunk {i};".encode() for i in range(5))


def test_closing_a_stream_early_ends_it_at_the_server(backend: tuple[Backend, str]) -> None:
    """A response closed after two chunks of an endless body is closed on the loop: the
    server sees the client go (HTTP/1.1: the connection is not reused mid-body)."""
    app, url = backend
    with httpx.Client(transport=bridge(), base_url=url) as client:
        with client.stream("GET", "/forever") as response:
            chunks = response.iter_raw()
            next(chunks)
            next(chunks)
        assert app.disconnected.wait(5)
        assert client.get("/hello").text == "hello "  # the transport still serves


def test_errors_on_the_loop_reach_the_caller_as_httpx_raises_them(
    backend: tuple[Backend, str],
) -> None:
    """A refused connection is httpx.ConnectError and a slow answer httpx.ReadTimeout."""
    _, url = backend
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with httpx.Client(transport=bridge()) as client:
        with pytest.raises(httpx.ConnectError):
            client.get(f"http://127.0.0.1:{port}/")
        with pytest.raises(httpx.ReadTimeout):
            client.get(f"{url}/slow", timeout=0.1)


def test_close_is_idempotent_stops_its_loop_and_ends_requests_in_flight(
    backend: tuple[Backend, str],
) -> None:
    """Closing the transport while a request waits fails that request with
    ClientClosedError, joins the loop thread it started, and refuses later requests."""
    app, url = backend
    transport = bridge()
    client = httpx.Client(transport=transport, base_url=url)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client.get, "/slow")
        until(lambda: app.requests == 1, what="the slow request at the server")
        transport.close()
        with pytest.raises(ClientClosedError, match="closed before the response came"):
            waiting.result(10)
    transport.close()
    thread = transport.loop_thread._thread
    assert thread is not None
    assert not thread.is_alive()
    with pytest.raises(ClientClosedError, match="transport is closed"):
        transport.handle_request(httpx.Request("GET", f"{url}/hello"))
    client.close()


def test_a_transport_on_a_shared_loop_leaves_it_running(backend: tuple[Backend, str]) -> None:
    """Given a loop thread, the bridge uses it and leaves it running when it closes."""
    _, url = backend
    with LoopThread(name="shared") as shared:
        transport = BridgedTransport(httpx.AsyncHTTPTransport, loop_thread=shared)
        with httpx.Client(transport=transport, base_url=url) as client:
            assert client.get("/hello").text == "hello "
        assert shared.running


def test_xds_sync_transport_takes_a_sync_client_only() -> None:
    """An async XdsClient lives on another loop: refused with a clear TypeError."""
    from xdsclient import XdsClient

    with pytest.raises(TypeError, match="SyncXdsClient"):
        XdsSyncTransport("edge", client=XdsClient("127.0.0.1:1"))  # type: ignore[arg-type]


class Counted(httpx.AsyncByteStream):
    """An endless body made in memory, counting the chunks it made and whether it closed."""

    def __init__(self) -> None:
        self.made = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            self.made += 1
            yield str(self.made).encode()

    async def aclose(self) -> None:
        self.closed = True


class CountedTransport(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.body = Counted()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=self.body)


def test_a_slow_reader_holds_the_body_back_and_closing_it_closes_the_stream() -> None:
    """The loop reads READ_AHEAD chunks ahead of the reader, no more (checked once the loop
    is idle); closing the response closes the async stream on the loop."""
    counted = CountedTransport()
    transport = BridgedTransport(lambda: counted)
    with httpx.Client(transport=transport) as client:
        with client.stream("GET", "http://x/") as response:
            chunks = response.iter_raw()
            for taken in (1, 2, 3):
                assert next(chunks) == str(taken).encode()
                transport.loop_thread.run(idle())
                assert counted.body.made == taken + READ_AHEAD
            assert not counted.body.closed
        assert (counted.body.closed, counted.body.made) == (True, 3 + READ_AHEAD)


class Recording(io.BytesIO):
    """A file that records the threads it was read on."""

    def __init__(self, content: bytes) -> None:
        super().__init__(content)
        self.threads: set[str] = set()

    def read(self, size: int | None = -1) -> bytes:
        self.threads.add(threading.current_thread().name)
        return super().read(size)


def test_an_upload_is_read_in_the_callers_thread_never_on_the_loop(
    backend: tuple[Backend, str],
) -> None:
    """A multipart upload's file is read by the thread that sends it, and arrives whole."""
    _, url = backend
    upload = Recording(b"file content")
    with httpx.Client(transport=bridge(), base_url=url) as client:
        echoed = client.post("/echo", files={"f": ("a.txt", upload)})
    assert b"file content" in echoed.content
    assert upload.threads == {threading.current_thread().name}


def test_closing_inside_a_running_loop_is_refused_and_closes_nothing(
    backend: tuple[Backend, str],
) -> None:
    """close() in a coroutine raises before anything is closed; the transport still serves."""
    _, url = backend
    transport = bridge()

    async def inside() -> None:
        transport.close()

    with httpx.Client(transport=transport, base_url=url) as client:
        with pytest.raises(RuntimeError, match="running event loop"):
            asyncio.run(inside())
        assert client.get("/hello").text == "hello "
