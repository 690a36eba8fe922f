"""Real HTTP backends on 127.0.0.1 (hypercorn, HTTP/1.1 and HTTP/2) and the xDS resources that
route to them, for the `XdsTransport` tests.

Each `Backend` answers ``<name> <path>`` with the request's headers echoed as ``x-seen-<name>``
response headers, and counts what it served (per path), so tests check at the backends what the
transport did. A request with ``x-status: <code>`` is answered with that status; a backend's
``status`` (None: 200) answers every request so. ``/stream`` answers ``first`` at once and
``second`` only once the test sets the backend's ``gate``; ``/hold`` answers only then.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from hypercorn.asyncio import serve
from hypercorn.config import Config

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class Backend:
    """One HTTP server on 127.0.0.1 (see the module's docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.port = 0
        #: path -> requests served
        self.paths: collections.Counter[str] = collections.Counter()
        #: every request's headers and body, in order
        self.headers: list[dict[str, str]] = []
        self.bodies: list[bytes] = []
        #: the status every request gets (None: 200, or the request's ``x-status``)
        self.status: int | None = None
        #: what ``/stream`` waits for before its second chunk
        self.gate = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def served(self) -> int:
        """Requests served in all."""
        return sum(self.paths.values())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]
                await send({"type": f"{kind}.complete"})
                if kind == "lifespan.shutdown":
                    return
        body_in = b""
        while True:
            message = await receive()
            body_in += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body_in)
        path = scope["raw_path"].decode()
        if scope.get("query_string"):
            path += "?" + scope["query_string"].decode()
        self.paths[scope["path"]] += 1
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.headers.append(headers)
        status = self.status or int(headers.get("x-status", "200"))
        if scope["path"] == "/hold":
            await self.gate.wait()
        if scope["path"] == "/stream":
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b"first", "more_body": True})
            await self.gate.wait()
            await send({"type": "http.response.body", "body": b"second"})
            return
        body = f"{self.name} {path}".encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-length", str(len(body)).encode()),
                    (b"x-backend", self.name.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.set_inheritable(True)
        self.port = sock.getsockname()[1]
        self._sock = sock
        config = Config()
        config.bind = [f"fd://{sock.fileno()}"]
        config.loglevel = "WARNING"
        config.accesslog = None
        config.errorlog = None
        config.graceful_timeout = 0.1
        self._task = asyncio.ensure_future(
            serve(self, config, shutdown_trigger=self._stop.wait)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 5)
        with contextlib.suppress(OSError):  # hypercorn closed it
            self._sock.close()


@contextlib.asynccontextmanager
async def backends(*names: str) -> AsyncIterator[list[Backend]]:
    """Started backends, stopped after."""
    started = [Backend(name) for name in names]
    try:
        for backend in started:
            await backend.start()
        yield started
    finally:
        for backend in started:
            await backend.stop()
