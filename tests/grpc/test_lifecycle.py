"""The channel's lifecycle where a call meets change: the deadline covers the wait for a pick,
a call in flight outlives its endpoint's removal, `close` fails queued calls, a deleted
listener fails calls with UNAVAILABLE, a NACK keeps the last configuration, and a target the
bootstrap cannot resolve fails calls without a watch left behind."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import grpc
import pytest

from xdsclient import ClientOptions, ConnectivityChanged, XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.resources import LISTENER
from xdsclient.testing import ControlPlane, builders

from ..builders import invalid_endpoints
from .echo import EchoBackend, EchoStub, Text, echo_backends, simple, until


@contextlib.asynccontextmanager
async def black_hole() -> AsyncIterator[int]:
    """A TCP port that accepts connections and never says a word (no HTTP/2 handshake)."""
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


def _silent(port: int) -> list[object]:
    return [
        builders.api_listener("svc"),
        builders.route_configuration("svc-routes", "c"),
        builders.cluster("c"),
        builders.cluster_load_assignment("c", [("127.0.0.1", port)]),
    ]


async def test_the_deadline_covers_the_wait_for_a_pick(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Against an endpoint that never finishes its handshake, a call with a 1 s timeout fails
    DEADLINE_EXCEEDED after about 1 s (the pick waited, the deadline did not)."""
    async with black_hole() as port:
        plane.set_all(_silent(port))
        async with XdsChannel("xds:///svc", client=client) as channel:
            started = time.monotonic()
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await EchoStub(channel).Say(Text(value="x"), timeout=1.0)
            took = time.monotonic() - started
    assert failed.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert 0.9 <= took < 5.0  # the deadline, not a handshake that never ends (room for a busy CI)


@pytest.mark.parametrize("leaves", ["removed", "draining"])
async def test_a_call_in_flight_finishes_when_its_endpoint_leaves(
    plane: ControlPlane, client: XdsClient, leaves: str
) -> None:
    """A held call on backend a completes with a's answer after a is removed from the
    assignment (or turns DRAINING) and new calls go to b; then a's connection closes."""
    async with echo_backends("a", "b") as (a, b):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            held = stub.Say(Text(value="hold"), timeout=10)
            await asyncio.wait_for(a.held.wait(), 5)
            endpoints: list[builders.EndpointSpec | tuple[str, int]] = [("127.0.0.1", b.port)]
            if leaves == "draining":
                endpoints.append(builders.EndpointSpec("127.0.0.1", a.port, health="draining"))
            plane.set(builders.cluster_load_assignment("c", endpoints))
            await _until_served_by(stub, b)
            connections = channel._core.connections
            assert ("127.0.0.1", a.port) in connections  # held by the call in flight
            a.release()
            assert (await held).value == "a:hold"
            await until(lambda: ("127.0.0.1", a.port) not in connections)


async def _until_served_by(stub: EchoStub, backend: EchoBackend) -> None:
    async def served() -> None:
        while not (await stub.Say(Text(value="?"), timeout=5)).value.startswith(backend.name):
            pass

    await asyncio.wait_for(served(), 5)


async def test_close_fails_queued_calls_and_refuses_new_ones(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Calls queued for a pick (wait-for-ready, an endpoint that never connects) fail at
    `close` with CANCELLED ``Channel closed!``, at once; a call after close is refused."""
    async with black_hole() as port:
        plane.set_all(_silent(port))
        channel = XdsChannel("xds:///svc", client=client)
        stub = EchoStub(channel)
        queued = [stub.Say(Text(value="q"), timeout=30, wait_for_ready=True) for _ in range(3)]
        await until(lambda: channel.get_state() is grpc.ChannelConnectivity.CONNECTING)
        await asyncio.wait_for(channel.close(), 5)
        for call in queued:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await asyncio.wait_for(call, 1)
            assert (failed.value.code(), failed.value.details()) == (
                grpc.StatusCode.CANCELLED,
                "Channel closed!",
            )
        with pytest.raises(grpc.aio.UsageError):
            await stub.Say(Text(value="late"), timeout=5)


async def test_a_deleted_listener_fails_calls_with_unavailable(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Once the server deletes the listener, calls fail UNAVAILABLE naming it (C-core's
    ``LDS resource <name>: does not exist``) instead of going on to the old endpoints."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="1"), timeout=5)).value == "a:1"
            plane.remove(LISTENER.type_url, "svc")

            async def failing() -> grpc.aio.AioRpcError:
                while True:
                    try:
                        await stub.Say(Text(value="2"), timeout=5)
                    except grpc.aio.AioRpcError as error:
                        return error

            error = await asyncio.wait_for(failing(), 5)
    assert error.code() is grpc.StatusCode.UNAVAILABLE
    assert "LDS resource svc: does not exist (node ID:xds-channel)" in (error.details() or "")


async def test_a_nack_keeps_the_last_good_configuration(
    plane: ControlPlane, client: XdsClient
) -> None:
    """An invalid assignment is NACKed and calls go on to the endpoints of the last one."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            assert (await stub.Say(Text(value="1"), timeout=5)).value == "a:1"
            nacks = len(plane.nacks())
            plane.set(invalid_endpoints("c"))
            await until(lambda: len(plane.nacks()) > nacks)
            assert (await stub.Say(Text(value="2"), timeout=5)).value == "a:2"


async def test_an_unknown_authority_fails_calls_and_leaves_no_watch(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A target naming an authority the bootstrap lacks: calls fail UNAVAILABLE saying so,
    and the client subscribed to nothing."""
    async with XdsChannel("xds://nowhere/svc", client=client) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await EchoStub(channel).Say(Text(value="x"), timeout=5)
        assert channel.get_state() is grpc.ChannelConnectivity.TRANSIENT_FAILURE
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "nowhere" in (failed.value.details() or "")
    assert client.resource_states() == []


async def test_a_missing_listener_fails_calls_naming_it_after_the_timer(
    plane: ControlPlane,
) -> None:
    """A listener the server does not have: a call waits for the does-not-exist timer (1 s
    here), then fails UNAVAILABLE with C-core's details naming the listener."""
    plane.set_all([builders.api_listener("other")])
    options = ClientOptions(does_not_exist_timeout=1.0)
    async with (
        XdsClient(plane.address, node_id="xds-channel", options=options) as client,
        XdsChannel("xds:///svc", client=client) as channel,
    ):
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await EchoStub(channel).Say(Text(value="x"), timeout=20)
        assert time.monotonic() - started >= 1.0
    assert (failed.value.code(), failed.value.details()) == (
        grpc.StatusCode.UNAVAILABLE,
        "empty address list (LDS resource svc: does not exist (node ID:xds-channel))",
    )


async def test_wait_for_ready_waits_where_a_plain_call_fails(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Every endpoint refuses connections: a plain call fails UNAVAILABLE, a wait-for-ready
    call waits, and goes through once the assignment names a live backend."""
    async with black_hole() as refused_port:
        pass  # a port that was listening and is now closed: connections are refused
    async with echo_backends("b") as (b,):
        plane.set_all(_silent(refused_port))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            waiting = stub.Say(Text(value="w"), timeout=10, wait_for_ready=True)
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await stub.Say(Text(value="x"), timeout=10)
            assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
            assert not waiting.done()
            plane.set(builders.cluster_load_assignment("c", [("127.0.0.1", b.port)]))
            assert (await waiting).value == "b:w"


async def test_close_lets_calls_in_flight_finish_within_grace_then_ends_them(
    plane: ControlPlane, client: XdsClient
) -> None:
    """`close(grace)` waits for a call in flight that ends within the grace; without grace a
    call in flight ends at once with CANCELLED ``Channel closed!``, never a bare
    CancelledError."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        graceful = XdsChannel("xds:///svc", client=client)
        held = EchoStub(graceful).Say(Text(value="hold"), timeout=10)
        await asyncio.wait_for(a.held.wait(), 5)
        closing = asyncio.ensure_future(graceful.close(grace=5))
        await until(lambda: graceful.get_state() is grpc.ChannelConnectivity.SHUTDOWN)
        assert not closing.done()
        a.release()
        assert (await held).value == "a:hold"
        await asyncio.wait_for(closing, 5)
    async with echo_backends("b") as (b,):
        plane.set_all(simple("svc", [("c", [b])]))
        abrupt = XdsChannel("xds:///svc", client=client)
        held = EchoStub(abrupt).Say(Text(value="hold"), timeout=10)
        await asyncio.wait_for(b.held.wait(), 5)
        await asyncio.wait_for(abrupt.close(), 5)
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await held
        assert (ended.value.code(), ended.value.details()) == (
            grpc.StatusCode.CANCELLED,
            "Channel closed!",
        )


async def test_calls_go_on_while_the_control_plane_is_down_and_after_it_returns(
    plane: ControlPlane, client: XdsClient
) -> None:
    """The control plane stops (the client sees its connection fail) and starts again: every
    call meanwhile and after goes to the known backend."""
    async with echo_backends("a") as (a,):
        plane.set_all(simple("svc", [("c", [a])]))
        lost = asyncio.Event()
        back = asyncio.Event()

        def observe(event: object) -> None:
            if isinstance(event, ConnectivityChanged):
                (back if event.connected and lost.is_set() else lost).set()

        remove = client.add_observer(observe, verdicts=False)
        try:
            async with XdsChannel("xds:///svc", client=client) as channel:
                stub = EchoStub(channel)
                assert (await stub.Say(Text(value="1"), timeout=5)).value == "a:1"
                await plane.stop(keep_port=True)
                await asyncio.wait_for(lost.wait(), 10)
                for i in range(5):
                    assert (await stub.Say(Text(value=f"d{i}"), timeout=5)).value == f"a:d{i}"
                await plane.start()
                await asyncio.wait_for(back.wait(), 10)
                assert (await stub.Say(Text(value="2"), timeout=5)).value == "a:2"
        finally:
            remove()
