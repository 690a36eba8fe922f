"""An in-memory transport where the test plays the management server.

Why: timing and ordering rules of the client (does-not-exist timers, backoff, TTLs, flow
control, what is sent when) are facts about which messages cross the stream and when. With
`FakeTransport` and `FakeClock` a test sees every request the client writes, answers with real
protobuf responses, fails or holds streams at will, and moves time itself: nothing waits on a
socket or a real clock. Use it with ``XdsClient(..., transport=fake, clock=clock)``.

It serves any stream a `StreamSpec` names, as a real transport does: discovery (`FakeStream.send`
builds its responses) and any other (load reporting: `FakeStream.respond` with the message, or
with its bytes, which the spec's response deserializer decodes). Every request crosses as the
spec's request serializer encodes it, so a test reads what would have been on the wire.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from typing import Any

from google.protobuf import any_pb2

from .._errors import TransportError
from .._protocol._messages import (
    DeltaDiscoveryResponse,
    DiscoveryResponse,
    Resource,
)
from .._settings._options import ClientOptions
from .._settings._sources import Source
from .._transports import StreamSpec

__all__ = ["FakeStream", "FakeTransport"]

_END = object()


class FakeStream:
    """One stream the client opened. The test reads its requests and writes its responses."""

    def __init__(self, server: str, spec: StreamSpec) -> None:
        self.server = server  #: the server URI the client opened it to
        self.spec = spec  #: which stream: its method (ADS or per-type, SotW or Delta; or other)
        #: every request the client wrote, in order
        self.requests: list[Any] = []
        self._unread: asyncio.Queue[Any] = asyncio.Queue()
        self._responses: asyncio.Queue[Any] = asyncio.Queue()
        self._error: TransportError | None = None
        self.closed = False  #: the client closed it, or the test failed it
        self._nonces = itertools.count(1)
        self._writable = asyncio.Event()
        self._writable.set()

    # ------------------------------------------------------------- the test's side

    async def request(self) -> Any:
        """The next request the client writes (waits for it)."""
        return await self._unread.get()

    def pending_requests(self) -> list[Any]:
        """The requests written and not yet taken with `request`, taken now."""
        taken = []
        while not self._unread.empty():
            taken.append(self._unread.get_nowait())
        return taken

    def respond(self, response: Any) -> None:
        """Queue a response for the client to read: a message, or its serialized bytes (read
        through the spec's response deserializer)."""
        self._responses.put_nowait(response)

    def send(
        self,
        resources: Iterable[Any],
        *,
        type_url: str | None = None,
        version: str = "1",
        removed: Iterable[str] = (),
    ) -> str:
        """Respond with protobuf ``resources`` in this stream's variant; returns the nonce.

        SotW: a `DiscoveryResponse` at ``version``. Delta: a `DeltaDiscoveryResponse` whose
        resources carry ``version`` and their names (``cluster_name`` for endpoints), plus
        ``removed`` names. ``type_url`` is needed only when ``resources`` is empty. Only on a
        discovery stream: answer any other with `respond`.
        """
        if not self.spec.discovery:
            raise ValueError(f"{self.spec} is not a discovery stream: use respond()")
        packed = []
        for message in resources:
            item = any_pb2.Any()
            item.Pack(message)
            packed.append((_name_of(message), item))
        if type_url is None:
            if not packed:
                raise ValueError("give type_url for a response without resources")
            type_url = packed[0][1].type_url
        nonce = f"nonce-{next(self._nonces)}"
        if self.spec.delta:
            response = DeltaDiscoveryResponse(
                type_url=type_url, nonce=nonce, removed_resources=list(removed)
            )
            for name, item in packed:
                response.resources.append(Resource(name=name, version=version, resource=item))
        else:
            response = DiscoveryResponse(type_url=type_url, version_info=version, nonce=nonce)
            response.resources.extend(item for _, item in packed)
        self.respond(response)
        return nonce

    def stall_writes(self) -> None:
        """The client's writes block from now on (a server not reading: flow control)."""
        self._writable.clear()

    def resume_writes(self) -> None:
        """Blocked and later writes go through."""
        self._writable.set()

    def fail(self, error: TransportError | str = "stream failed") -> None:
        """End the stream with an error, as a server reset or a broken connection would."""
        if isinstance(error, str):
            error = TransportError(f"xDS stream to {self.server} failed: {error}")
        self._error = error
        self.closed = True
        self._writable.set()  # a stalled write fails now
        self._responses.put_nowait(_END)

    # ------------------------------------------------------------- the client's side

    async def write(self, request: Any) -> None:
        """The client's side: send a request for the test to read; blocks while writes are
        stalled, and raises `TransportError` once the stream failed or closed."""
        await asyncio.sleep(0)  # a write yields to the loop, as a real one does
        await self._writable.wait()
        if self._error is not None:
            raise self._error
        if self.closed:
            raise TransportError(f"xDS stream to {self.server} is closed")
        copy = type(request).FromString(self.spec.request_serializer(request))
        self.requests.append(copy)
        self._unread.put_nowait(copy)

    async def read(self) -> Any:
        """The client's side: the next response the test sent; raises the stream's error once it
        ended."""
        response = await self._responses.get()
        if response is _END:
            self._responses.put_nowait(_END)  # every later read fails too
            assert self._error is not None
            raise self._error
        if isinstance(response, bytes):
            return self.spec.response_deserializer(response)
        return response

    def close(self) -> None:
        """The client's side: close the stream; its reads and writes fail from now on."""
        if not self.closed:
            self.closed = True
            self._error = TransportError(f"xDS stream to {self.server} was closed by the client")
            self._writable.set()
            self._responses.put_nowait(_END)


class _FakeConnection:
    """The `Transport` one client holds for one server."""

    def __init__(self, fake: FakeTransport, server: str) -> None:
        self._fake = fake
        self._server = server

    async def open(self, spec: StreamSpec) -> FakeStream:
        return await self._fake._open(self._server, spec)

    async def close(self) -> None:
        self._fake.closed_servers.append(self._server)


class FakeTransport:
    """A `TransportFactory` whose streams are `FakeStream` objects the test drives.

    By default a stream is established as soon as it is opened. `hold` keeps new opens waiting
    (a connection that does not come up) until `release`; `refuse` makes them fail with a
    `TransportError` (a server that is down) until `accept`. With several servers (federation,
    fallback), ``server=`` (its URI) scopes `stream`, `refuse` and `accept` to one of them.
    """

    def __init__(self) -> None:
        #: every stream opened, in order
        self.streams: list[FakeStream] = []
        #: servers whose transport the client closed, in order
        self.closed_servers: list[str] = []
        self._opened: asyncio.Queue[FakeStream] = asyncio.Queue()
        self._gate = asyncio.Event()
        self._gate.set()
        self._refusal: TransportError | None = None
        self._refused: dict[str, TransportError] = {}  # per server
        self._per_server: dict[str, asyncio.Queue[FakeStream]] = {}
        self.open_attempts = 0  #: how many times the client tried to open a stream

    def __call__(self, server: Source, options: ClientOptions) -> _FakeConnection:
        return _FakeConnection(self, server.uri)

    async def stream(self, server: str | None = None) -> FakeStream:
        """The next stream the client establishes (to ``server``, when given); waits for it.
        Use either form throughout a test: each stream is handed out once by each."""
        if server is None:
            return await self._opened.get()
        return await self._queue(server).get()

    def _queue(self, server: str) -> asyncio.Queue[FakeStream]:
        queue = self._per_server.get(server)
        if queue is None:
            queue = self._per_server[server] = asyncio.Queue()
        return queue

    def hold(self) -> None:
        """New opens wait, as over a connection that does not come up."""
        self._gate.clear()

    def release(self) -> None:
        """Let held opens (and later ones) through."""
        self._gate.set()

    def refuse(
        self, error: TransportError | str = "connection refused", *, server: str | None = None
    ) -> None:
        """New opens (to ``server``, or to any) fail (held ones too, once released)."""
        refusal = error if isinstance(error, TransportError) else TransportError(error)
        if server is None:
            self._refusal = refusal
        else:
            self._refused[server] = refusal

    def accept(self, *, server: str | None = None) -> None:
        """New opens (to ``server``, or to any) succeed again."""
        if server is None:
            self._refusal = None
            self._refused.clear()
        else:
            self._refused.pop(server, None)

    @property
    def current(self) -> FakeStream:
        """The most recent stream."""
        if not self.streams:
            raise LookupError("the client opened no stream yet")
        return self.streams[-1]

    async def _open(self, server: str, spec: StreamSpec) -> FakeStream:
        self.open_attempts += 1
        await self._gate.wait()
        refusal = self._refused.get(server, self._refusal)
        if refusal is not None:
            raise refusal
        stream = FakeStream(server, spec)
        self.streams.append(stream)
        self._opened.put_nowait(stream)
        self._queue(server).put_nowait(stream)
        return stream


def _name_of(message: Any) -> str:
    """A resource's name: ``cluster_name`` for a ClusterLoadAssignment, else ``name``."""
    if message.DESCRIPTOR.full_name == "envoy.config.endpoint.v3.ClusterLoadAssignment":
        return str(message.cluster_name)
    return str(message.name)
