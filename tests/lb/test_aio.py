"""`AioBalancer`, kept for compatibility as a thin use of `XdsChannel`: it warns that it is
deprecated, refuses what it can no longer honour, and its calls and lifecycle are the
channel's: a call in flight outlives its endpoint, the deadline covers the wait for a pick,
`close` fails queued calls, a deleted listener fails calls, a failed start names what is
missing and leaves no watch, and drops and load reports are gRPC's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from envoy.type.v3 import percent_pb2

from tests.grpc.echo import COUNT, SAY, EchoBackend, Text, cluster_of, echo_backends, simple, until
from tests.grpc.test_lifecycle import black_hole
from tests.helpers import eventually
from tests.lrs.test_end_to_end import _totals
from xdsclient import ClientOptions, XdsClient, XdsError
from xdsclient.grpc import XdsChannel
from xdsclient.lb.aio import AioBalancer
from xdsclient.resources import LISTENER
from xdsclient.testing import ControlPlane, builders


@pytest.fixture
async def client(cp: ControlPlane) -> AsyncIterator[XdsClient]:
    async with XdsClient(cp.address, node_id="aio-balancer") as xds_client:
        yield xds_client


def balancer(client: XdsClient, listener: str = "svc", **kwargs: Any) -> AioBalancer:
    """An `AioBalancer`, made as its users make it (it warns that it is deprecated)."""
    with pytest.warns(DeprecationWarning, match="XdsChannel"):
        return AioBalancer(client, listener, **kwargs)


async def say(balancer: AioBalancer, value: str, **kwargs: Any) -> str:
    """One Say call through the balancer, in bytes as it takes them; the answer's text."""
    reply = await balancer.unary_unary(SAY, Text(value=value).SerializeToString(), **kwargs)
    return str(Text.FromString(reply).value)


def _silent(port: int) -> list[object]:
    return [
        builders.api_listener("svc"),
        builders.route_configuration("svc-routes", "c"),
        builders.cluster("c"),
        builders.cluster_load_assignment("c", [("127.0.0.1", port)]),
    ]


async def test_the_balancer_is_an_xds_channel_and_sends_the_calls_metadata(
    cp: ControlPlane, client: XdsClient
) -> None:
    """Its channel is an `XdsChannel` on the listener, sharing the client; a call answers
    with the backend's bytes and the backend sees the call's metadata."""
    async with echo_backends("a") as (a,):
        cp.set_all(simple("svc", [("c", [a])]))
        async with balancer(client, channel_options=[("grpc.enable_retries", 0)]) as ours:
            assert isinstance(ours.channel, XdsChannel)
            assert (ours.channel.target, ours.channel.client) == ("svc", client)
            answer = await say(ours, "hi", metadata=[("x-user", "42")], timeout=5)
    assert answer == "a:hi"
    assert a.metadata[-1]["x-user"] == "42"


@pytest.mark.parametrize("removed", ["picker", "clock"])
def test_what_the_channel_cannot_honour_is_refused_naming_the_way_instead(removed: str) -> None:
    """``picker=`` and ``clock=`` are refused with a TypeError that names what to use instead
    (the channel owns its picker; custom policies are registered)."""
    with pytest.raises(TypeError, match=rf"{removed}=.*register_lb_policy"):
        AioBalancer(object(), "svc", **{removed: object()})  # type: ignore[arg-type]


async def test_a_call_in_flight_finishes_when_its_endpoint_leaves(
    cp: ControlPlane, client: XdsClient
) -> None:
    """A held call on backend a completes with a's answer after a leaves the assignment, while
    new calls go to b (it was cancelled: the caller got a bare CancelledError)."""
    async with echo_backends("a", "b") as (a, b):
        cp.set_all(simple("svc", [("c", [a])]))
        async with balancer(client) as ours:
            held = asyncio.ensure_future(say(ours, "hold", timeout=10))
            await asyncio.wait_for(a.held.wait(), 5)
            cp.set(builders.cluster_load_assignment("c", [("127.0.0.1", b.port)]))
            await asyncio.wait_for(_until_served_by(ours, b), 5)
            a.release()
            assert await asyncio.wait_for(held, 5) == "a:hold"


async def _until_served_by(ours: AioBalancer, backend: EchoBackend) -> None:
    while not (await say(ours, "?", timeout=5)).startswith(backend.name):
        pass


async def test_the_deadline_covers_the_wait_for_a_pick(cp: ControlPlane, client: XdsClient) -> None:
    """Against an endpoint that never finishes its handshake, a call with a 1 s timeout fails
    DEADLINE_EXCEEDED after about 1 s (it took 20 s: the wait for the pick was not bounded)."""
    async with black_hole() as port:
        cp.set_all(_silent(port))
        async with balancer(client) as ours:
            started = time.monotonic()
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await say(ours, "x", timeout=1.0)
            took = time.monotonic() - started
    assert failed.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert 0.9 <= took < 5.0


async def test_close_fails_queued_calls_and_refuses_new_ones(
    cp: ControlPlane, client: XdsClient
) -> None:
    """Calls queued for a pick fail at `close` with CANCELLED ``Channel closed!`` at once (they
    never returned), and a call after close is refused (it opened a channel never closed)."""
    async with black_hole() as port:
        cp.set_all(_silent(port))
        ours = balancer(client)
        await ours.start()
        queued = [asyncio.ensure_future(say(ours, "q", timeout=30)) for _ in range(3)]
        await until(lambda: ours.channel.get_state() is grpc.ChannelConnectivity.CONNECTING)
        await asyncio.wait_for(ours.close(), 5)
        for call in queued:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await asyncio.wait_for(call, 1)
            assert (failed.value.code(), failed.value.details()) == (
                grpc.StatusCode.CANCELLED,
                "Channel closed!",
            )
        with pytest.raises(grpc.aio.UsageError):
            await say(ours, "late", timeout=5)


async def test_a_deleted_listener_fails_calls_with_unavailable(
    cp: ControlPlane, client: XdsClient
) -> None:
    """Once the server deletes the listener, calls fail UNAVAILABLE naming it, as C-core's do
    (they went on to the old endpoints)."""
    async with echo_backends("a") as (a,):
        cp.set_all(simple("svc", [("c", [a])]))
        async with balancer(client) as ours:
            assert await say(ours, "1", timeout=5) == "a:1"
            cp.remove(LISTENER.type_url, "svc")

            async def failing() -> grpc.aio.AioRpcError:
                while True:
                    try:
                        await say(ours, "2", timeout=5)
                    except grpc.aio.AioRpcError as error:
                        return error

            error = await asyncio.wait_for(failing(), 5)
    assert error.code() is grpc.StatusCode.UNAVAILABLE
    assert "LDS resource svc: does not exist" in (error.details() or "")


async def test_a_failed_start_waits_for_the_timer_names_the_listener_and_leaves_no_watch(
    cp: ControlPlane,
) -> None:
    """A listener the server does not have: `start` waits for the does-not-exist timer (1 s
    here), fails with the client's error naming the listener, and nothing is left watched
    (it gave up at its own 10 s with a bare TimeoutError and left its watcher)."""
    cp.set_all([builders.api_listener("other")])
    options = ClientOptions(does_not_exist_timeout=1.0)
    async with XdsClient(cp.address, node_id="aio-balancer", options=options) as client:
        ours = balancer(client)
        started = time.monotonic()
        with pytest.raises(XdsError, match="svc") as failed:
            await asyncio.wait_for(ours.start(), 8)
        assert time.monotonic() - started >= 1.0
        assert "does not exist" in str(failed.value)
        assert client.resource_states() == []


async def test_a_start_with_a_timeout_fails_naming_the_listener_and_leaves_no_watch(
    cp: ControlPlane, client: XdsClient
) -> None:
    """A ``timeout`` shorter than the does-not-exist timer: `start` raises TimeoutError naming
    the listener, and nothing is left watched."""
    cp.set_all([builders.api_listener("other")])
    ours = balancer(client)
    with pytest.raises(TimeoutError, match="'svc'"):
        await ours.start(timeout=0.2)
    assert client.resource_states() == []


async def test_drops_fail_as_grpc_statuses_and_calls_are_load_reported(
    cp: ControlPlane, client: XdsClient
) -> None:
    """With no user code, answered calls reach the LRS server per locality and a dropped call
    fails UNAVAILABLE with C-core's details (it raised `PickFailed` and reported nothing)."""
    cp.load_reporting.configure(send_all_clusters=True, interval=1)
    routes = builders.route_configuration("svc-routes", {SAY: "c", COUNT: "dropping"})
    async with echo_backends("a") as (a,):
        dropping = builders.cluster_load_assignment("dropping", [("127.0.0.1", a.port)])
        dropping.policy.drop_overloads.add(
            category="throttle", drop_percentage=percent_pb2.FractionalPercent(numerator=100)
        )
        cp.set_all(
            [
                builders.api_listener("svc"),
                routes,
                *cluster_of("c", [a], lrs=True),
                builders.cluster("dropping"),
                dropping,
            ]
        )
        async with balancer(client) as ours:
            for i in range(3):
                assert await say(ours, str(i), timeout=5) == f"a:{i}"
            with pytest.raises(grpc.aio.AioRpcError) as dropped:
                await ours.unary_unary(COUNT, b"", timeout=5)
            assert (dropped.value.code(), dropped.value.details()) == (
                grpc.StatusCode.UNAVAILABLE,
                "EDS-configured drop: throttle",
            )
            await eventually(lambda: _totals(cp.load_reports).get(("c", "", "z-c")) == [3, 3, 0], 8)
