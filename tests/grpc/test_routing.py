"""What the call path decides, done over real calls: routes by path and header, a weighted
split, retries (counted at the backends, with ``grpc-previous-rpc-attempts``), a fault abort,
and the request the backends receive."""

from __future__ import annotations

import asyncio
import collections
import random
import time
from typing import Any

import grpc
import pytest
from envoy.config.route.v3 import route_components_pb2

from tests.call.builders import add_route, fault, listener, override, route_config
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.lb import ConnectivityState
from xdsclient.testing import ControlPlane

from .echo import SAY, EchoBackend, EchoStub, Text, cluster_of, echo_backends, until


def _served(routes: Any, clusters: dict[str, list[EchoBackend]], **kwargs: Any) -> list[Any]:
    resources = [listener(name="svc", rds=routes.name, **kwargs), routes]
    for name, backends in clusters.items():
        resources += cluster_of(name, backends)
    return resources


async def test_calls_are_routed_by_path_and_header(plane: ControlPlane, client: XdsClient) -> None:
    """The first matching route decides: a header match sends to one cluster, the path
    prefix to another, the rest to a third."""
    async with echo_backends("h", "p", "d") as (h, p, d):
        routes = route_config("svc-routes")
        vhost = routes.virtual_hosts[0]
        by_header = add_route(vhost, "/echo.", "ch")
        by_header.match.headers.add(name="x-env").string_match.exact = "canary"
        add_route(vhost, "/echo.Echo/Say", "cp")
        add_route(vhost, "", "cd")
        plane.set_all(_served(routes, {"ch": [h], "cp": [p], "cd": [d]}))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            canary = await stub.Say(Text(value="1"), metadata=[("x-env", "canary")], timeout=5)
            plain = await stub.Say(Text(value="2"), metadata=[("x-env", "prod")], timeout=5)
            other = [m.value async for m in stub.Count(Text(value="1"), timeout=5)]
        assert (canary.value, plain.value, other) == ("h:1", "p:2", ["d:0"])


async def test_a_weighted_split_sends_each_cluster_its_share(
    plane: ControlPlane, client: XdsClient
) -> None:
    """400 calls over a 75/25 split: the 25 side gets 100 +- 5 standard deviations."""
    async with echo_backends("big", "small") as (big, small):
        routes = route_config("svc-routes")
        route = add_route(routes.virtual_hosts[0], "", cluster=None)
        route.route.weighted_clusters.clusters.add(name="cbig").weight.value = 75
        route.route.weighted_clusters.clusters.add(name="csmall").weight.value = 25
        plane.set_all(_served(routes, {"cbig": [big], "csmall": [small]}))
        async with XdsChannel("xds:///svc", client=client, rng=random.Random(32)) as channel:
            stub = EchoStub(channel)
            replies = [(await stub.Say(Text(value=""), timeout=5)).value for _ in range(400)]
        shares = collections.Counter(reply.split(":")[0] for reply in replies)
        assert abs(shares["small"] - 100) < 5 * (400 * 0.25 * 0.75) ** 0.5
        assert shares["big"] + shares["small"] == 400


async def test_retries_reach_the_backends_each_with_a_new_pick(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A route retrying UNAVAILABLE 3 times: a call that keeps failing is sent 4 times, each
    a new pick (round robin alternates the two backends); it ends with the last attempt's
    status. A code the policy does not name is sent once. (grpcio's client drops
    ``grpc-previous-rpc-attempts`` from application metadata, so the backends never see it.)"""
    async with echo_backends("a", "b") as (a, b):
        routes = route_config("svc-routes")
        route = add_route(routes.virtual_hosts[0], "", "c")
        route.route.retry_policy.retry_on = "unavailable"
        route.route.retry_policy.num_retries.value = 3
        route.route.retry_policy.retry_back_off.base_interval.FromMilliseconds(1)
        plane.set_all(_served(routes, {"c": [a, b]}))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            await stub.Say(Text(value="warm"), timeout=5)  # round robin's first pick done
            states = channel._core.connections.states
            await until(lambda: states() == [ConnectivityState.READY] * 2)
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await stub.Say(Text(value="fail:UNAVAILABLE"), timeout=5)
            assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
            assert failed.value.details() in {"a failed", "b failed"}
            assert a.calls[SAY] + b.calls[SAY] == 5
            assert a.calls[SAY] == b.calls[SAY] + 1 or b.calls[SAY] == a.calls[SAY] + 1
            with pytest.raises(grpc.aio.AioRpcError) as other:
                await stub.Say(Text(value="fail:INTERNAL"), timeout=5)
            assert other.value.code() is grpc.StatusCode.INTERNAL
            assert a.calls[SAY] + b.calls[SAY] == 6


async def test_a_fault_abort_fails_the_call_before_any_backend(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A route's fault override aborting 100% with RESOURCE_EXHAUSTED fails its calls with
    that code, and no backend sees them; other routes go through."""
    async with echo_backends("a") as (a,):
        routes = route_config("svc-routes")
        aborted = add_route(routes.virtual_hosts[0], "/echo.Echo/Say", "c")
        aborted.typed_per_filter_config["fault0"].Pack(
            override(fault(abort_grpc=8, abort_percent=(100, 0)))
        )
        add_route(routes.virtual_hosts[0], "", "c")
        plane.set_all(_served(routes, {"c": [a]}, faults=(fault(),)))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await stub.Say(Text(value="x"), timeout=5)
            assert failed.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert [m.value async for m in stub.Count(Text(value="1"), timeout=5)] == ["a:0"]
        assert a.calls[SAY] == 0


@pytest.mark.parametrize(
    ("metadata", "by_header"),
    [((), False), ((("x-user", "42"),), False), ((("x-user", "42"),), True)],
    ids=["direct", "direct-with-metadata", "planned"],
)
async def test_a_call_past_its_deadline_before_its_attempt_fails_unsent(
    plane: ControlPlane,
    client: XdsClient,
    metadata: tuple[tuple[str, str], ...],
    by_header: bool,
) -> None:
    """A call whose deadline has passed when its attempt would start (``timeout=0``) fails
    DEADLINE_EXCEEDED with gRPC's details and reaches no backend, whether the channel sends it
    without a plan (a plain route) or with one (metadata, and a route testing a header before
    its own); the next call goes through."""
    async with echo_backends("a") as (a,):
        routes = route_config("svc-routes")
        if by_header:
            tested = add_route(routes.virtual_hosts[0], "/other.", "c")
            tested.match.headers.add(name="x-user").present_match = True
        add_route(routes.virtual_hosts[0], "", "c")
        plane.set_all(_served(routes, {"c": [a]}))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            await channel.channel_ready()
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await stub.Say(Text(value="never"), timeout=0, metadata=metadata)
            assert failed.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            assert failed.value.details() == "Deadline Exceeded"
            assert a.calls[SAY] == 0
            assert (await stub.Say(Text(value="x"), timeout=5, metadata=metadata)).value == "a:x"
            directs = channel._core.metadata_directs if metadata else channel._core.directs
            assert directs == {SAY: None if by_header else "c"}
        assert a.calls[SAY] == 1


async def test_a_direct_call_with_metadata_sends_what_a_grpc_aio_channel_sends(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A unary call with metadata on a route no header chooses is sent without a plan, and
    the backend receives the same metadata, in the same order (repeated keys, ``-bin``
    values, an empty value), as from a grpc.aio channel of its own."""
    metadata = (
        ("x-user", "a"), ("x-other", "o"), ("x-user", "b"), ("k-bin", b"\x00\x01"),
        ("x-empty", ""),
    )  # fmt: skip
    async with echo_backends("a") as (a,):
        routes = route_config("svc-routes")
        add_route(routes.virtual_hosts[0], "/echo.", "c")
        tested = add_route(routes.virtual_hosts[0], "", "c")  # after the call's route
        tested.match.headers.add(name="x-user").present_match = True
        plane.set_all(_served(routes, {"c": [a]}))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{a.port}") as plain:
            assert (await EchoStub(plain).Say(Text(value="p"), metadata=metadata)).value == "a:p"
        async with XdsChannel("xds:///svc", client=client) as channel:
            reply = await EchoStub(channel).Say(Text(value="x"), timeout=5, metadata=metadata)
            assert reply.value == "a:x"
            assert channel._core.metadata_directs == {SAY: "c"}
        sent, direct = a.raw_metadata
        assert direct == sent
        assert [k for k, _ in direct if k in ("x-user", "k-bin", "x-empty")] == [
            "x-user", "x-user", "k-bin", "x-empty",
        ]  # fmt: skip


async def test_a_fault_delay_holds_the_call_before_it_is_sent(
    plane: ControlPlane, client: XdsClient
) -> None:
    """A 100% fixed delay of 0.3 s: the call reaches the backend and returns after at least
    0.3 s; a call whose deadline falls inside the delay fails DEADLINE_EXCEEDED unsent."""
    async with echo_backends("a") as (a,):
        routes = route_config("svc-routes")
        add_route(routes.virtual_hosts[0], "", "c")
        delay = fault(delay_s=0.3, delay_percent=(100, 0))
        plane.set_all(_served(routes, {"c": [a]}, faults=(delay,)))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            await channel.channel_ready()
            started = time.monotonic()
            assert (await stub.Say(Text(value="late"), timeout=5)).value == "a:late"
            assert time.monotonic() - started >= 0.3
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await stub.Say(Text(value="never"), timeout=0.1)
            assert failed.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert a.calls[SAY] == 1


async def test_max_active_faults_is_one_budget_for_every_channel_of_the_process(
    plane: ControlPlane, client: XdsClient
) -> None:
    """``max_active_faults`` 1 with a 100% delay of 60 s: while one channel's call is inside
    its delay, a call on a second channel is not delayed (A33: one count for the process, as
    C-core keeps it), and returns at once."""
    async with echo_backends("a") as (a,):
        routes = route_config("svc-routes")
        add_route(routes.virtual_hosts[0], "", "c")
        delay = fault(delay_s=60, delay_percent=(100, 0), max_active=1)
        plane.set_all(_served(routes, {"c": [a]}, faults=(delay,)))
        async with (
            XdsChannel("xds:///svc", client=client) as first,
            XdsChannel("xds:///svc", client=client) as second,
        ):
            await first.channel_ready()
            await second.channel_ready()
            held = asyncio.ensure_future(EchoStub(first).Say(Text(value="held"), timeout=30))
            await until(lambda: first._core.faults.active == 1)
            try:
                reply = await EchoStub(second).Say(Text(value="free"), timeout=5)
                assert reply.value == "a:free"
            finally:
                held.cancel()
        assert a.calls[SAY] == 1


async def test_max_stream_duration_is_the_calls_deadline(
    plane: ControlPlane, client: XdsClient
) -> None:
    """The listener's ``max_stream_duration`` of 0.5 s ends a call the backend holds with
    DEADLINE_EXCEEDED after about 0.5 s, though the caller gave 10 s."""
    async with echo_backends("a") as (a,):
        routes = route_config("svc-routes")
        add_route(routes.virtual_hosts[0], "", "c")
        plane.set_all(_served(routes, {"c": [a]}, max_stream_duration_s=0.5))
        async with XdsChannel("xds:///svc", client=client) as channel:
            await channel.channel_ready()
            started = time.monotonic()
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await EchoStub(channel).Say(Text(value="hold"), timeout=10)
            took = time.monotonic() - started
        assert failed.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        assert 0.45 <= took < 5.0  # the stream duration, not the caller's 10 s (room for a busy CI)


async def test_a_virtual_host_that_came_over_vhds_routes_the_calls(plane: ControlPlane) -> None:
    """The route configuration has no virtual host for the channel's authority and carries
    ``vhds``: the host the server answers on demand routes the calls to its cluster."""
    async with echo_backends("v") as (v,):
        routes = route_config("svc-routes")
        del routes.virtual_hosts[:]
        routes.vhds.config_source.ads.SetInParent()
        on_demand = route_components_pb2.VirtualHost(name="svc-routes/vh", domains=["svc"])
        add_route(on_demand, "", "cv")
        plane.set_all([*_served(routes, {"cv": [v]}), on_demand])
        async with (
            XdsClient(plane.address, node_id="vhds", delta=True) as delta_client,
            XdsChannel("xds:///svc", client=delta_client) as channel,
        ):
            reply = await EchoStub(channel).Say(Text(value="on demand"), timeout=5)
        assert reply.value == "v:on demand"
