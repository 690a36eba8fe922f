"""What the `XdsTransport` tests add to `xdsclient.testing.HttpBackend`: `StreamingBackend`, a
backend whose response body comes in two chunks, the second only once the test opens its
``gate`` (to see that a body is streamed, not buffered)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class StreamingBackend:
    """One HTTP/1.1 server on 127.0.0.1 answering ``first``, then ``second`` once `gate` is
    set."""

    def __init__(self) -> None:
        self.port = 0
        self.gate = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]
                await send({"type": f"{kind}.complete"})
                if kind == "lifespan.shutdown":
                    return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await self.gate.wait()
        await send({"type": "http.response.body", "body": b"second"})

    async def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        config = Config()
        config.bind = [f"fd://{listener.detach()}"]  # hypercorn owns and closes it
        config.loglevel = "WARNING"
        config.graceful_timeout = 0.1
        self._task = asyncio.ensure_future(
            serve(self, config, shutdown_trigger=self._stop.wait, mode="asgi")  # type: ignore[arg-type]
        )


@contextlib.asynccontextmanager
async def streaming_backend() -> AsyncIterator[StreamingBackend]:
    """A started `StreamingBackend`, stopped after."""
    backend = StreamingBackend()
    await backend.start()
    try:
        yield backend
    finally:
        backend.gate.set()
        backend._stop.set()
        if backend._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await backend._task
