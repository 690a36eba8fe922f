"""Every read of a gRPC stream receives the response's bytes and decodes them once, handing
both on; the first asks gRPC for the message at once (not after the server's headers). Over a
real control plane: the first read returns the first response, every read (the second too) has
the bytes the message was decoded from, a first read cancelled while it waits ends the call,
and a call without grpc.aio's internal receive is read as grpc.aio reads it (no bytes)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from envoy.service.discovery.v3 import discovery_pb2

from tests.builders import cluster
from xdsclient import ClientOptions, TransportError
from xdsclient._settings._config import ServerConfig
from xdsclient._transports import StreamSpec
from xdsclient._transports._grpc import GrpcStream, GrpcTransport, _receive
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane

SPEC = StreamSpec(type_url=CLUSTER.type_url, delta=False)


def _request(*names: str) -> Any:
    return discovery_pb2.DiscoveryRequest(
        type_url=CLUSTER.type_url, resource_names=list(names), node={"id": "first-read"}
    )


async def _open(control_plane: ControlPlane) -> tuple[GrpcTransport, GrpcStream]:
    transport = GrpcTransport(ServerConfig(uri=control_plane.address), ClientOptions())
    stream = await asyncio.wait_for(transport.open(SPEC), 10)
    return transport, stream


async def test_the_first_read_asked_before_the_request_returns_the_first_response(
    control_plane: ControlPlane,
) -> None:
    """A read started before anything is written (its receive asked before the headers can
    arrive) returns the response to the request written after it; the next read too."""
    control_plane.set(cluster("a"))
    transport, stream = await _open(control_plane)
    try:
        own_receive = stream._receive is not None  # grpc.aio has the receive it relies on
        assert own_receive
        first = asyncio.ensure_future(stream.read())
        await asyncio.sleep(0)
        await stream.write(_request("a"))
        response = await asyncio.wait_for(first, 10)
        assert response.type_url == CLUSTER.type_url
        assert [r.type_url for r in response.resources] == [CLUSTER.type_url]
        control_plane.set(cluster("b"))
        ack = _request("a", "b")
        ack.version_info, ack.response_nonce = response.version_info, response.nonce
        await stream.write(ack)
        second = await asyncio.wait_for(stream.read(), 10)
        assert len(second.resources) == 2
    finally:
        stream.close()
        await transport.close()


async def test_a_first_read_cancelled_while_it_waits_ends_the_call(
    control_plane: ControlPlane,
) -> None:
    """gRPC cannot take back a receive it was asked for: cancelling the waiting first read
    cancels the call (as grpc.aio's own read does), so nothing waits on a receive nobody
    reads."""
    transport, stream = await _open(control_plane)
    try:
        first = asyncio.ensure_future(stream.read())
        await asyncio.sleep(0.01)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert stream._call.cancelled()
    finally:
        stream.close()
        await transport.close()


async def test_a_first_read_of_a_stream_the_server_ends_reports_its_status(
    control_plane: ControlPlane,
) -> None:
    """A server that ends the stream before any response: the first read reports the
    server's status, as grpc.aio's read does."""
    transport, stream = await _open(control_plane)
    try:
        first = asyncio.ensure_future(stream.read())
        async with asyncio.timeout(10):
            while not control_plane.stream_count:
                await asyncio.sleep(0.005)
        control_plane.close_streams(grpc.StatusCode.UNAVAILABLE, "going away")
        with pytest.raises(TransportError, match="UNAVAILABLE"):
            await asyncio.wait_for(first, 10)
    finally:
        stream.close()
        await transport.close()


def test_a_call_without_grpc_aios_internal_receive_is_read_as_grpc_aio_reads_it() -> None:
    """No ``_cython_call`` (another grpcio, a test double) or no decoder: no receive of our
    own."""

    class Call:
        def cancel(self) -> None: ...

    assert _receive(Call(), bytes) is None
    assert _receive(Call(), None) is None


async def _two_responses(stream: GrpcStream, control_plane: ControlPlane) -> list[Any]:
    """The (response, bytes) of two reads: ``a``, then ``a`` and ``b`` after the ACK."""
    control_plane.set(cluster("a"))
    await stream.write(_request("a"))
    first = await asyncio.wait_for(stream.read_raw(), 10)
    control_plane.set(cluster("b"))
    ack = _request("a", "b")
    ack.version_info, ack.response_nonce = first[0].version_info, first[0].nonce
    await stream.write(ack)
    second = await asyncio.wait_for(stream.read_raw(), 10)
    return [first, second]


async def test_every_read_hands_on_the_bytes_the_response_was_decoded_from(
    control_plane: ControlPlane,
) -> None:
    """Not only the first: each read's bytes are the response's own, the ones it decodes to,
    so a reader of them need not serialize the message again."""
    transport, stream = await _open(control_plane)
    try:
        reads = await _two_responses(stream, control_plane)
        for response, raw in reads:
            assert isinstance(raw, bytes)
            assert discovery_pb2.DiscoveryResponse.FromString(raw) == response
        assert [len(response.resources) for response, _ in reads] == [1, 2]
    finally:
        stream.close()
        await transport.close()


@pytest.mark.parametrize("type_url", [CLUSTER.type_url, None], ids=["per-type", "ADS"])
async def test_every_delta_read_hands_on_its_bytes_too(
    control_plane: ControlPlane, type_url: str | None
) -> None:
    """Delta streams, per-type and ADS, read the same way: two responses (a subscription,
    then another), each with the bytes it was decoded from."""
    transport = GrpcTransport(ServerConfig(uri=control_plane.address), ClientOptions())
    stream = await asyncio.wait_for(transport.open(StreamSpec(type_url=type_url, delta=True)), 10)
    try:
        control_plane.set(cluster("a"))
        control_plane.set(cluster("b"))
        reads = []
        for name in ("a", "b"):
            await stream.write(
                discovery_pb2.DeltaDiscoveryRequest(
                    type_url=CLUSTER.type_url, resource_names_subscribe=[name], node={"id": "d"}
                )
            )
            reads.append(await asyncio.wait_for(stream.read_raw(), 10))
        assert [[r.name for r in response.resources] for response, _ in reads] == [["a"], ["b"]]
        for response, raw in reads:
            assert raw is not None
            assert discovery_pb2.DeltaDiscoveryResponse.FromString(raw) == response
    finally:
        stream.close()
        await transport.close()


async def test_a_call_without_grpc_aios_internal_receive_reads_every_response_without_bytes(
    control_plane: ControlPlane,
) -> None:
    """The fallback (no receive of our own: grpc.aio's ``read`` decodes): every response still
    arrives, with no bytes, and the end of the stream is reported as on the other path."""
    transport = GrpcTransport(ServerConfig(uri=control_plane.address), ClientOptions())
    own = await asyncio.wait_for(transport.open(SPEC), 10)
    stream = GrpcStream(own._call, control_plane.address, ClientOptions())
    try:
        assert stream._receive is None
        reads = await _two_responses(stream, control_plane)
        assert [raw for _, raw in reads] == [None, None]
        assert [len(response.resources) for response, _ in reads] == [1, 2]
        control_plane.close_streams(grpc.StatusCode.UNAVAILABLE, "going away")
        with pytest.raises(TransportError, match="UNAVAILABLE"):
            await asyncio.wait_for(stream.read(), 10)
    finally:
        stream.close()
        await transport.close()


async def test_a_response_that_does_not_decode_is_skipped_and_the_next_one_is_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server that sends bytes that are no DiscoveryResponse, then a good response: the read
    of the bad one logs it and hands on nothing (as C-core's XdsClient ignores a response it
    cannot parse), the next read returns the good one with its bytes."""
    good = discovery_pb2.DiscoveryResponse(
        version_info="1", nonce="n1", type_url=CLUSTER.type_url
    ).SerializeToString()

    async def serve(requests: Any, context: Any) -> Any:
        async for _ in requests:
            yield b"\xff\xff\xff"  # a field 31 of wire type 7: no message decodes this
            yield good

    server = grpc.aio.server()
    service, method = SPEC.method.strip("/").split("/")
    handler: Any = grpc.stream_stream_rpc_method_handler(serve)  # bytes in, bytes out
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(service, {method: handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    transport = GrpcTransport(ServerConfig(uri=f"127.0.0.1:{port}"), ClientOptions())
    try:
        stream = await asyncio.wait_for(transport.open(SPEC), 10)
        await stream.write(_request("a"))
        with caplog.at_level("ERROR", logger="xdsclient.transport"):
            assert await asyncio.wait_for(stream.read_raw(), 10) == (None, None)
        assert "xDS response of 3 bytes does not decode" in caplog.text
        response, raw = await asyncio.wait_for(stream.read_raw(), 10)
        assert (response.nonce, raw) == ("n1", good)
        stream.close()
    finally:
        await transport.close()
        await server.stop(None)
