"""Servers built to misbehave the way real ones do, on 127.0.0.1, for the checker to survive:
a closed port, a gRPC server with no xDS service, one whose xDS streams abort, one serving
ADS only (the per-type services UNIMPLEMENTED), one that selects what it serves by the
node's metadata, and an LRS service that asks for nothing and refuses reports."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from envoy.service.load_stats.v3 import lrs_pb2

from xdsclient._protocol._messages import DeltaDiscoveryRequest, DiscoveryRequest
from xdsclient._protocol._services import ADS_SERVICE, PER_TYPE_SERVICES
from xdsclient.testing import ControlPlane
from xdsclient.testing._lrs_server import LRS_SERVICE

XDS_SERVICES = (ADS_SERVICE, *PER_TYPE_SERVICES.values())


def closed_port() -> str:
    """host:port where nothing listens (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@contextlib.asynccontextmanager
async def grpc_server(*handlers: grpc.GenericRpcHandler) -> AsyncIterator[str]:
    """A grpc.aio server with these handlers only; yields its address."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


def greeter() -> grpc.GenericRpcHandler:
    """A service that is not xDS: one unary echo method."""

    async def echo(request: bytes, context: Any) -> bytes:
        return request

    return grpc.method_handlers_generic_handler(
        "example.Greeter", {"SayHello": grpc.unary_unary_rpc_method_handler(echo)}
    )


def _every_xds_method(
    serving: Callable[[str], Callable[[AsyncIterator[Any], Any], Any]],
) -> list[grpc.GenericRpcHandler]:
    """Every xDS method, each stream served by ``serving(method path)`` (responses as bytes)."""
    handlers = []
    for service in XDS_SERVICES:
        methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for method, request in (
            (service.sotw_method, DiscoveryRequest),
            (service.delta_method, DeltaDiscoveryRequest),
        ):
            if method is not None:
                methods[method] = grpc.stream_stream_rpc_method_handler(
                    serving(f"/{service.name}/{method}"), request_deserializer=request.FromString
                )
        handlers.append(grpc.method_handlers_generic_handler(service.name, methods))
    return handlers


def aborting(*, read_first: bool) -> list[grpc.GenericRpcHandler]:
    """Every xDS method, each stream aborted with INTERNAL: at once, or on the first request
    (``read_first``)."""

    async def serve(requests: AsyncIterator[Any], context: Any) -> None:
        if read_first:
            await anext(requests)
        await context.abort(grpc.StatusCode.INTERNAL, "this server aborts every stream")

    return _every_xds_method(lambda _: serve)


def ads_only(control_plane: ControlPlane) -> list[grpc.GenericRpcHandler]:
    """The control plane's ADS service alone: every per-type service is UNIMPLEMENTED."""
    handlers = control_plane._handlers()
    return [handlers[list(XDS_SERVICES).index(ADS_SERVICE)]]


def selecting_by_node(backend: str, key: str, value: str) -> list[grpc.GenericRpcHandler]:
    """Every xDS method: a stream whose node carries metadata ``key=value`` is relayed to
    ``backend``; any other node is served nothing (requests read, never answered)."""
    channel = grpc.aio.insecure_channel(backend)

    def serving(path: str) -> Callable[[AsyncIterator[Any], Any], Any]:
        async def relay(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[bytes]:
            first = await anext(requests)
            fields = first.node.metadata.fields
            if key not in fields or fields[key].string_value != value:
                async for _ in requests:
                    pass
                return
            call: Any = channel.stream_stream(
                path, request_serializer=type(first).SerializeToString
            )()
            await call.write(first)
            forward = asyncio.ensure_future(_forward(requests, call))
            try:
                async for response in call:
                    yield response
            finally:
                forward.cancel()
                call.cancel()

        return relay

    return _every_xds_method(serving)


async def _forward(requests: AsyncIterator[Any], call: Any) -> None:
    async for request in requests:
        await call.write(request)


def rude_lrs() -> grpc.GenericRpcHandler:
    """An LRS service that answers the node with a zero interval and ends the stream (INTERNAL)
    at the first load report."""

    async def serve(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        first = True
        async for _ in requests:
            if not first:
                await context.abort(grpc.StatusCode.INTERNAL, "reports are not welcome")
            first = False
            yield lrs_pb2.LoadStatsResponse(send_all_clusters=True)

    method = grpc.stream_stream_rpc_method_handler(
        serve,
        request_deserializer=lrs_pb2.LoadStatsRequest.FromString,
        response_serializer=lrs_pb2.LoadStatsResponse.SerializeToString,
    )
    return grpc.method_handlers_generic_handler(LRS_SERVICE, {"StreamLoadStats": method})


def silent_lrs() -> grpc.GenericRpcHandler:
    """An LRS service that reads every request and never answers."""

    async def serve(requests: AsyncIterator[Any], context: Any) -> None:
        async for _ in requests:
            pass

    method = grpc.stream_stream_rpc_method_handler(
        serve,
        request_deserializer=lrs_pb2.LoadStatsRequest.FromString,
        response_serializer=lrs_pb2.LoadStatsResponse.SerializeToString,
    )
    return grpc.method_handlers_generic_handler(LRS_SERVICE, {"StreamLoadStats": method})
