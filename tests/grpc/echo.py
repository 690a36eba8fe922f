"""A hand-built echo service in the shape of generated code, real backends serving it on
127.0.0.1, and the xDS resources that route to them: what the `XdsChannel` tests share.

``EchoStub(channel)`` is what ``protoc``'s grpc plugin would write for a service ``echo.Echo``
whose messages are ``google.protobuf.StringValue``: the multi-callables with serializers. Each
`EchoBackend` answers with its name, and counts what it served (per method, with each call's
``grpc-previous-rpc-attempts``) so tests check at the backends what the channel did; one
stopped with ``keep_port`` starts again on its port, which no other socket took meanwhile.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import grpc
from google.protobuf import wrappers_pb2

from tests.helpers import described, eventually
from xdsclient.testing import builders
from xdsclient.testing._ports import KeptPort

SERVICE = "echo.Echo"
SAY = f"/{SERVICE}/Say"
COUNT = f"/{SERVICE}/Count"
COLLECT = f"/{SERVICE}/Collect"
CHAT = f"/{SERVICE}/Chat"
Text = wrappers_pb2.StringValue


class EchoStub:
    """The client stub generated code would give: one attribute per method."""

    def __init__(self, channel: Any) -> None:
        ser, de = Text.SerializeToString, Text.FromString
        self.Say = channel.unary_unary(
            SAY, request_serializer=ser, response_deserializer=de, _registered_method=True
        )
        self.Count = channel.unary_stream(
            COUNT, request_serializer=ser, response_deserializer=de, _registered_method=True
        )
        self.Collect = channel.stream_unary(
            COLLECT, request_serializer=ser, response_deserializer=de, _registered_method=True
        )
        self.Chat = channel.stream_stream(
            CHAT, request_serializer=ser, response_deserializer=de, _registered_method=True
        )


class EchoBackend:
    """One server on 127.0.0.1. ``Say`` answers ``<name>:<request>``; a request ``fail:<code>``
    fails with that status code; ``hold`` waits until `release`. ``Count`` streams
    ``<name>:<i>`` for i < int(request); ``Collect`` joins the requests; ``Chat`` echoes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.port = 0
        #: method -> calls served
        self.calls: collections.Counter[str] = collections.Counter()
        #: every Say call's grpc-previous-rpc-attempts (None when absent)
        self.previous: list[str | None] = []
        #: the metadata of every Say call, as the server saw it (the last value of a key)
        self.metadata: list[dict[str, str | bytes]] = []
        #: the metadata of every Say call, every (key, value) in order
        self.raw_metadata: list[list[tuple[str, str | bytes]]] = []
        self.held = asyncio.Event()
        #: TLS (or mTLS) credentials to serve with; None: plaintext
        self.credentials: grpc.ServerCredentials | None = None
        self._release = asyncio.Event()
        self._server: grpc.aio.Server | None = None
        self._kept = KeptPort()

    def release(self) -> None:
        """Let held calls answer."""
        self._release.set()

    async def start(self) -> None:
        server = grpc.aio.server()
        handlers = {
            "Say": grpc.unary_unary_rpc_method_handler(self._say, Text.FromString, _ser),
            "Count": grpc.unary_stream_rpc_method_handler(self._count, Text.FromString, _ser),
            "Collect": grpc.stream_unary_rpc_method_handler(self._collect, Text.FromString, _ser),
            "Chat": grpc.stream_stream_rpc_method_handler(self._chat, Text.FromString, _ser),
        }
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
        await self._listen(server)

    async def _listen(self, server: grpc.aio.Server) -> None:
        """Serve with ``server`` on `port` (a free one when 0), with `credentials`."""
        address = f"127.0.0.1:{self.port}"
        if self.credentials is None:
            self.port = server.add_insecure_port(address)
        else:
            self.port = server.add_secure_port(address, self.credentials)
        await server.start()
        self._server = server
        self._kept.release()

    async def stop(self, *, keep_port: bool = False) -> None:
        """Stop at once, closing every connection. ``keep_port``: the port stays this
        backend's until it starts again (`KeptPort`: no other socket takes it in between);
        else it is given back."""
        if self._server is not None:
            if keep_port:
                self._kept.keep(self.port)
            await self._server.stop(None)
            self._server = None
        if not keep_port:
            self._kept.release()

    async def _say(self, request: Any, context: Any) -> Any:
        self.calls[SAY] += 1
        raw = [(item[0], item[1]) for item in context.invocation_metadata() or ()]
        self.raw_metadata.append(raw)
        metadata = dict(raw)
        self.metadata.append(metadata)
        previous = metadata.get("grpc-previous-rpc-attempts")
        self.previous.append(None if previous is None else str(previous))
        if request.value.startswith("fail:"):
            await context.abort(grpc.StatusCode[request.value[5:]], f"{self.name} failed")
        if request.value == "hold":
            self.held.set()
            await self._release.wait()
        return Text(value=f"{self.name}:{request.value}")

    async def _count(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self.calls[COUNT] += 1
        for i in range(int(request.value)):
            yield Text(value=f"{self.name}:{i}")

    async def _collect(self, requests: AsyncIterator[Any], context: Any) -> Any:
        self.calls[COLLECT] += 1
        values = [request.value async for request in requests]
        return Text(value=f"{self.name}:{','.join(values)}")

    async def _chat(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        self.calls[CHAT] += 1
        async for request in requests:
            yield Text(value=f"{self.name}:{request.value}")


def _ser(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


@contextlib.asynccontextmanager
async def echo_backends(*names: str) -> AsyncIterator[list[EchoBackend]]:
    """Started backends named ``names``; stopped at the end."""
    backends = [EchoBackend(name) for name in names]
    try:
        for backend in backends:
            await backend.start()
        yield backends
    finally:
        for backend in backends:
            backend.release()
            await backend.stop()


def cluster_of(
    name: str, backends: Sequence[EchoBackend], *, lrs: bool = False, **kwargs: Any
) -> list[Any]:
    """A round-robin EDS cluster ``name`` over ``backends`` (one locality, zone ``z-<name>``)
    and its assignment; ``lrs``: it reports load to the control plane."""
    cluster = builders.cluster(name, **kwargs)
    if lrs:
        cluster.lrs_server.self.SetInParent()
    spec = builders.LocalitySpec(
        endpoints=[("127.0.0.1", backend.port) for backend in backends], zone=f"z-{name}"
    )
    return [cluster, builders.cluster_load_assignment(name, [spec])]


def simple(listener: str, clusters: Iterable[tuple[str, Sequence[EchoBackend]]]) -> list[Any]:
    """A listener routing every path to the first cluster, with those clusters."""
    clusters = list(clusters)
    resources: list[Any] = [
        builders.api_listener(listener),
        builders.route_configuration(f"{listener}-routes", clusters[0][0]),
    ]
    for name, backends in clusters:
        resources += cluster_of(name, backends)
    return resources


async def until(predicate: Any, timeout: float = 5.0) -> None:
    """Wait until ``predicate()`` holds (`tests.helpers.eventually`, named for the predicate)."""
    await eventually(predicate, timeout, what=described(predicate))
