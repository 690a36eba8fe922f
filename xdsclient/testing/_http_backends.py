"""Real HTTP backends on 127.0.0.1 for the HTTP data plane's tests and benchmarks.

Why real servers: what the transport does is only true of a real peer (connection reuse, HTTP/2
over ALPN, TLS handshakes and SNI, a connection reset before any response). Each backend is an
ASGI app served by hypercorn on a free port, HTTP/1.1 and HTTP/2 (ALPN over TLS, prior
knowledge in plaintext), plain or TLS with the given certificate files (mTLS when given a CA to
check clients with). Each counts the requests it gets per path, answers with its name (the
``x-backend`` header and a JSON body echoing the request), and follows a script per path:
`Behaviour` (a status, a delay, headers, a body, or a reset of the connection before any
response), one per request in order, then the default.

hypercorn is a test dependency (the ``dev`` extra): it is imported when a backend starts, and
its absence raises `MissingExtraError`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._errors import MissingExtraError
from ._ports import KeptPort

__all__ = ["Behaviour", "HttpBackend", "SeenRequest", "http_backends"]

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@attrs.frozen(kw_only=True)
class Behaviour:
    """What a backend does with one request: answer ``status`` after ``delay`` seconds with
    ``headers`` added and ``body`` (None: the echo), or reset the connection before any
    response (``reset``)."""

    status: int = 200
    delay: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    reset: bool = False


#: what a backend does when nothing is scripted
ECHO = Behaviour()


@attrs.frozen(kw_only=True)
class SeenRequest:
    """One request a backend received: method, path with its query, headers (names lower
    case), HTTP version ("1.1", "2") and body."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    http_version: str
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or None."""
        name = name.lower()
        return next((value for key, value in self.headers if key == name), None)


class HttpBackend:
    """One backend (see the module's docstring); `http_backends` starts several."""

    def __init__(
        self,
        name: str,
        *,
        certfile: str | Path | None = None,
        keyfile: str | Path | None = None,
        client_ca: str | Path | None = None,
        port: int = 0,
    ) -> None:
        self.name = name
        self.certfile, self.keyfile, self.client_ca = certfile, keyfile, client_ca
        #: where it listens (0 until started on a free port; a restart keeps it)
        self.port = port
        #: every request received, in order
        self.requests: list[SeenRequest] = []
        #: requests received per path (without the query)
        self.counts: collections.Counter[str] = collections.Counter()
        #: the server name each TLS handshake sent (None: no SNI)
        self.server_names: list[str | None] = []
        self._scripts: dict[str, collections.deque[Behaviour]] = {}
        self._defaults: dict[str, Behaviour] = {}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._kept = KeptPort()

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) where it listens."""
        return ("127.0.0.1", self.port)

    @property
    def tls(self) -> bool:
        """Whether it speaks TLS."""
        return self.certfile is not None

    @property
    def total(self) -> int:
        """Requests received on every path."""
        return len(self.requests)

    def script(self, path: str, *behaviours: Behaviour, then: Behaviour | None = None) -> None:
        """Requests to ``path`` ("*": any path not scripted itself) get ``behaviours`` one
        each, in order, then ``then`` (the echo when None) for every later one."""
        self._scripts[path] = collections.deque(behaviours)
        self._defaults[path] = then or ECHO

    def clear(self) -> None:
        """Forget the scripts and what was received."""
        self._scripts.clear()
        self._defaults.clear()
        self.requests.clear()
        self.counts.clear()
        self.server_names.clear()

    def _behaviour(self, path: str) -> Behaviour:
        key = path if path in self._defaults else "*"
        queue = self._scripts.get(key)
        if queue:
            return queue.popleft()
        return self._defaults.get(key, ECHO)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app."""
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen = _seen(scope, body)
        self.requests.append(seen)
        self.counts[scope["path"]] += 1
        behaviour = self._behaviour(scope["path"])
        if behaviour.delay:
            await asyncio.sleep(behaviour.delay)
        if behaviour.reset:
            _abort(send)
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        await self._answer(send, seen, behaviour)

    async def _answer(self, send: Send, seen: SeenRequest, behaviour: Behaviour) -> None:
        body = behaviour.body
        if body is None:
            body = json.dumps(
                {
                    "backend": self.name,
                    "method": seen.method,
                    "path": seen.path,
                    "http_version": seen.http_version,
                    "host": seen.header("host"),
                }
            ).encode()
        headers = [
            (b"x-backend", self.name.encode()),
            (b"content-type", b"application/json" if behaviour.body is None else b"text/plain"),
            (b"content-length", str(len(body)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in behaviour.headers),
        ]
        await send({"type": "http.response.start", "status": behaviour.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def start(self) -> None:
        """Listen on 127.0.0.1 (on `port`, a free one when 0) and serve until `stop`."""
        try:
            from hypercorn.asyncio import serve
        except ImportError:
            raise MissingExtraError(
                "the test HTTP backends need hypercorn: pip install 'xdsclient[dev]'"
            ) from None
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # beside a kept port
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._kept.release()
        config = _config(self)
        config.bind = [f"fd://{listener.detach()}"]  # hypercorn owns and closes it
        self._stop.clear()
        # connections made before hypercorn serves the socket wait in its backlog
        self._task = asyncio.ensure_future(
            serve(self, config, shutdown_trigger=self._stop.wait, mode="asgi")  # type: ignore[arg-type]
        )

    async def stop(self, *, keep_port: bool = False) -> None:
        """Stop serving (hypercorn closes idle connections, and ends those whose requests
        are still running). ``keep_port``: the port stays this backend's until it starts
        again (no other socket on the machine takes it in between; connections to it are
        refused); else it is given back."""
        if keep_port and self._task is not None:
            self._kept.keep(self.port)
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if not keep_port:
            self._kept.release()


class _ClosingAtOnce(ssl.SSLObject):
    """A server-side TLS connection that sends its close_notify and closes without waiting for
    the client's (allowed since TLS 1.3): asyncio otherwise waits for it up to 30 s, and a
    client pool keeping an idle connection never answers, so a backend's `stop` would hang."""

    def unwrap(self) -> Any:
        try:
            return super().unwrap()
        except ssl.SSLWantReadError:
            return None


def _config(backend: HttpBackend) -> Any:
    from hypercorn.config import Config

    class _Config(Config):
        def create_ssl_context(self) -> ssl.SSLContext | None:
            context: ssl.SSLContext | None = super().create_ssl_context()
            if context is not None:

                def record(_: Any, server_name: str | None, __: Any) -> None:
                    backend.server_names.append(server_name)

                context.sni_callback = record
                context.sslobject_class = _ClosingAtOnce
            return context

    config = _Config()
    config.loglevel = "WARNING"
    config.graceful_timeout = 0.1
    config.keep_alive_timeout = 30
    config.keep_alive_max_requests = 10**9  # no GOAWAY after hypercorn's default 1000 requests
    if backend.certfile is not None:
        config.certfile, config.keyfile = str(backend.certfile), str(backend.keyfile)
        if backend.client_ca is not None:
            config.ca_certs = str(backend.client_ca)
            config.verify_mode = ssl.CERT_REQUIRED
    return config


def _seen(scope: Scope, body: bytes) -> SeenRequest:
    path = scope["raw_path"].decode("latin-1")
    if scope["query_string"]:
        path += "?" + scope["query_string"].decode("latin-1")
    return SeenRequest(
        method=scope["method"],
        path=path,
        headers=tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]),
        http_version=scope["http_version"],
        body=body,
    )


def _abort(send: Send) -> None:
    """Reset the request's connection before any response: ASGI has no word for it, so the
    connection's transport is found through hypercorn's senders (the app's ``send`` is bound
    to the stream, whose ``send`` is bound to the protocol, whose ``send`` is bound to the TCP
    server holding the stream writer)."""
    owner: Any = getattr(send, "__self__", None)
    for _ in range(6):
        writer = getattr(owner, "writer", None)
        if isinstance(writer, asyncio.StreamWriter):
            writer.transport.abort()
            return
        owner = getattr(getattr(owner, "send", None), "__self__", None)
    raise RuntimeError("cannot reset: this hypercorn's connection is out of reach")


@contextlib.asynccontextmanager
async def http_backends(
    count: int = 1,
    *,
    names: Sequence[str] | None = None,
    certfile: str | Path | None = None,
    keyfile: str | Path | None = None,
    client_ca: str | Path | None = None,
) -> AsyncIterator[list[HttpBackend]]:
    """``count`` backends (named ``names``, else b0, b1, ...) on free ports of 127.0.0.1,
    TLS when given a certificate and key (requiring client certificates the ``client_ca``
    signed, when given), stopped on exit."""
    labels = list(names) if names is not None else [f"b{i}" for i in range(count)]
    backends = [
        HttpBackend(name, certfile=certfile, keyfile=keyfile, client_ca=client_ca)
        for name in labels
    ]
    try:
        await asyncio.gather(*(backend.start() for backend in backends))
        yield backends
    finally:
        await asyncio.gather(*(backend.stop() for backend in backends))
