"""The test control plane's gRPC front end: every xDS service over sans-I/O server streams.

Why it only moves bytes: what to answer is decided by the server streams (`_server_sotw.py`,
`_server_delta.py`) from the store; this part owns the grpc.aio server, one `ServerStream` per
RPC, and per stream a reader (requests in, stamped with the clock) and a writer that wakes when
a request arrived, the store changed a type the stream asked for, or the test asked for
something (a raw response, a heartbeat, an end). Responses go out as the bytes the encoder
made, shared among streams (`_encoding.py`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import attrs
import grpc

from .._errors import XdsError
from .._protocol._messages import DeltaDiscoveryRequest, DiscoveryRequest
from .._protocol._services import ADS_SERVICE, PER_TYPE_SERVICES, Service
from ._encoding import Encoder
from ._faults import Abort, Faults
from ._lrs_server import LoadReportingServer
from ._ports import refuse_listeners
from ._records import Journal
from ._server_delta import DeltaServerStream
from ._server_sotw import SotwServerStream
from ._server_stream import Outgoing, ServerStream
from ._store import ResourceStore

__all__ = ["GrpcFront", "ListenError"]


class ListenError(XdsError, OSError):
    """Local: the control plane cannot listen on its address; ``errno`` says why
    (``EADDRINUSE``: another server listens there)."""

    def __init__(self, address: str, code: int | None, reason: str) -> None:
        super().__init__(f"cannot listen on {address}: {reason}")
        self.errno = code  # OSError's own field, as the OS would set it


class _Serving:
    """One open RPC: its server stream, and what wakes its writer."""

    def __init__(self, stream: ServerStream) -> None:
        self.stream = stream
        self.wake = asyncio.Event()
        self.raw: collections.deque[Any] = collections.deque()  # messages to send as given

    def send(self, message: Any) -> None:
        self.raw.append(message)
        self.wake.set()

    def end(self, abort: Abort) -> None:
        self.stream.abort = abort
        self.wake.set()


class GrpcFront:
    """A grpc.aio server on ``host:port`` serving the store on every xDS service and variant."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        credentials: grpc.ServerCredentials | None,
        store: ResourceStore,
        faults: Faults,
        journal: Journal,
        clock: Callable[[], float] = time.monotonic,
        load_reporting: LoadReportingServer | None = None,
    ) -> None:
        """``load_reporting``: the LRS server to serve beside discovery, if any."""
        self._host = host
        self._load_reporting = load_reporting
        self.port = port  #: the port listened on (chosen at the first start when 0)
        self._credentials = credentials
        self._store = store
        self._faults = faults
        self._journal = journal
        self._clock = clock
        self._encoder = Encoder(faults)
        self._server: grpc.aio.Server | None = None
        self._open: dict[int, _Serving] = {}
        self._ids = itertools.count(1)
        #: while set, requests are read and recorded but nothing is answered
        self.paused = False
        store.listen(self._changed)

    async def start(self) -> None:
        """Listen and serve; `ListenError` when the address cannot be bound."""
        # Tests run clients with short keepalives: accept their pings instead of GOAWAY-ing them.
        # Load tests open thousands of streams at once: gRPC's server cancels new calls while
        # over 1,000 (then 3,000) wait to be accepted by this loop; 5,000 on one connection
        # lost 1,224 that way (bench/control_plane.py), so the waiting room is made larger.
        # SO_REUSEPORT (gRPC's default) lets a stopping control plane keep its port (`KeptPort`);
        # a port another server listens on is still refused (`refuse_listeners`), or clients
        # would land on either server at random.
        server = grpc.aio.server(
            options=[
                ("grpc.so_reuseport", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 100),
                ("grpc.http2.max_ping_strikes", 0),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.server.max_pending_requests", 100000),
                ("grpc.server.max_pending_requests_hard_limit", 100000),
            ]
        )
        server.add_generic_rpc_handlers(self.handlers())
        try:
            port = self._bind(server)
        except RuntimeError:  # grpc says only "Failed to bind": ask the OS why
            await server.stop(None)
            raise _listen_error(self._host, self.port) from None
        except OSError as exc:
            await server.stop(None)
            raise _refused(self._host, self.port, exc) from None
        await server.start()
        self.port = port
        self._server = server

    def _bind(self, server: grpc.aio.Server) -> int:
        """Bind ``server`` to the address, refusing a port a socket listens on; the port."""
        address = f"{self._host}:{self.port}"
        # port 0: the kernel picks a port no socket has
        with (
            contextlib.nullcontext() if self.port == 0 else refuse_listeners(self._host, self.port)
        ):
            if self._credentials is None:
                return server.add_insecure_port(address)
            return server.add_secure_port(address, self._credentials)

    @property
    def serving(self) -> bool:
        """Whether it listens now."""
        return self._server is not None

    async def stop(self, grace: float | None) -> None:
        """End every open stream (UNAVAILABLE) and stop listening."""
        if self._server is not None:
            server, self._server = self._server, None
            self.end_all(Abort("UNAVAILABLE", "control plane stopping"))
            await server.stop(grace)

    def streams(self) -> Iterator[_Serving]:
        """The open streams, in order of arrival."""
        return iter(list(self._open.values()))

    @property
    def count(self) -> int:
        """How many streams are open."""
        return len(self._open)

    def end_all(self, abort: Abort) -> None:
        """End every open stream with this status."""
        for serving in self.streams():
            serving.end(abort)

    def wake_all(self) -> None:
        """Let every stream send what it owes (after a pause)."""
        for serving in self._open.values():
            serving.wake.set()

    def handlers(self) -> list[grpc.GenericRpcHandler]:
        """One generic handler per xDS service (ADS first, then per type), SotW and Delta;
        then load reporting's, when there is an LRS server."""
        handlers = []
        for service in (ADS_SERVICE, *PER_TYPE_SERVICES.values()):
            methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
            for delta in (False, True):
                method = service.delta_method if delta else service.sotw_method
                if method is None:
                    continue
                methods[method] = grpc.stream_stream_rpc_method_handler(
                    self._serve_factory(service, method, delta=delta),
                    request_deserializer=(
                        DeltaDiscoveryRequest if delta else DiscoveryRequest
                    ).FromString,
                    response_serializer=None,  # responses are bytes already
                )
            handlers.append(grpc.method_handlers_generic_handler(service.name, methods))
        if self._load_reporting is not None:
            handlers.append(self._load_reporting.handler())
        return handlers

    def _changed(self, type_url: str) -> None:
        for serving in self._open.values():
            if serving.stream.changed(type_url):
                serving.wake.set()

    def _serve_factory(self, service: Service, method: str, *, delta: bool) -> Callable[..., Any]:
        path = f"/{service.name}/{method}"
        kind = DeltaServerStream if delta else SotwServerStream

        async def serve(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
        ) -> None:
            stream = kind(
                stream_id=next(self._ids),
                method=path,
                type_url=service.type_url,
                store=self._store,
                faults=self._faults,
                encoder=self._encoder,
            )
            serving = self._open[stream.id] = _Serving(stream)
            reader = asyncio.create_task(self._read(serving, requests))
            reader.add_done_callback(lambda _: serving.wake.set())
            try:
                await self._write_loop(serving, reader, context)
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
                self._open.pop(stream.id, None)

        return serve

    async def _write_loop(
        self,
        serving: _Serving,
        reader: asyncio.Task[None],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        stream = serving.stream
        while True:
            await serving.wake.wait()
            serving.wake.clear()
            if stream.abort is not None:
                await context.abort(grpc.StatusCode[stream.abort.code], stream.abort.details)
            if reader.done():
                return
            while serving.raw:
                await self._write(context, stream.encode(serving.raw.popleft(), self._clock()))
            if not self.paused:
                for outgoing in stream.respond(self._clock()):
                    await self._write(context, outgoing)

    async def _write(self, context: grpc.aio.ServicerContext[Any, Any], outgoing: Outgoing) -> None:
        # Stamped as it is written, not when it was decided: a response's time is when it left,
        # after the server built it (what a client's latency is measured from).
        self._journal.sent(attrs.evolve(outgoing.record, time=self._clock()))
        await context.write(outgoing.data)

    async def _read(self, serving: _Serving, requests: AsyncIterator[Any]) -> None:
        async for request in requests:
            self._journal.received(serving.stream.receive(request, self._clock()))
            serving.wake.set()


def _refused(host: str, port: int, exc: OSError) -> ListenError:
    """``host:port`` refused: a socket listens there, or the address is not this machine's."""
    return ListenError(f"{host}:{port}", exc.errno, (exc.strerror or str(exc)).lower())


def _listen_error(host: str, port: int) -> ListenError:
    """Why ``host:port`` cannot be bound, found by binding it as gRPC does (SO_REUSEADDR)."""
    address = f"{host}:{port}"
    try:
        with socket.create_server((host.strip("[]"), port)):
            pass
    except OSError as exc:
        return _refused(host, port, exc)
    return ListenError(address, None, "gRPC could not bind it")
