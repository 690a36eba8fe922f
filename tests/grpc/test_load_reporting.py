"""Load reporting with no user code: calls over `XdsChannel` to a cluster with ``lrs_server``
reach the control plane's LRS server per locality (issued, succeeded, errored) and drops by
category, and the picker hears each attempt's outcome."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from envoy.type.v3 import percent_pb2

from tests.helpers import eventually
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane, builders

from ..lrs.test_end_to_end import _totals
from .echo import EchoStub, Text, cluster_of, echo_backends


def _drops(plane: ControlPlane) -> dict[str, int]:
    found: dict[str, int] = {}
    for report in plane.load_reports:
        for stats in report.message.cluster_stats:
            for drop in stats.dropped_requests:
                found[drop.category] = found.get(drop.category, 0) + drop.dropped_count
    return found


def _resources(backend_port: int, served: list[Any]) -> list[Any]:
    routes = builders.route_configuration(
        "svc-routes", {"/echo.Echo/Say": "c", "/echo.Echo/Count": "dropping"}
    )
    dropping = builders.cluster("dropping")
    dropping.lrs_server.self.SetInParent()
    assignment = builders.cluster_load_assignment("dropping", [("127.0.0.1", backend_port)])
    assignment.policy.drop_overloads.add(
        category="throttle",
        drop_percentage=percent_pb2.FractionalPercent(numerator=100),
    )
    return [builders.api_listener("svc"), routes, *served, dropping, assignment]


async def test_calls_are_reported_per_locality_and_drops_by_category(
    plane: ControlPlane, client: XdsClient
) -> None:
    """5 answered calls, 2 failed ones and 3 dropped ones: the LRS server receives issued 7,
    succeeded 5, errored 2 for the cluster's locality, and 3 ``throttle`` drops."""
    plane.load_reporting.configure(send_all_clusters=True, interval=1)
    async with echo_backends("a") as (a,):
        plane.set_all(_resources(a.port, cluster_of("c", [a], lrs=True)))
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            for _ in range(5):
                await stub.Say(Text(value="ok"), timeout=5)
            for _ in range(2):
                with pytest.raises(grpc.aio.AioRpcError):
                    await stub.Say(Text(value="fail:INTERNAL"), timeout=5)
            for _ in range(3):
                with pytest.raises(grpc.aio.AioRpcError) as dropped:
                    await stub.Count(Text(value="1"), timeout=5).read()
                assert dropped.value.code() is grpc.StatusCode.UNAVAILABLE
                assert dropped.value.details() == "EDS-configured drop: throttle"

            await eventually(
                lambda: (
                    _totals(plane.load_reports).get(("c", "c", "z-c")) == [7, 5, 2]
                    and _drops(plane) == {"throttle": 3}
                ),
                8,
            )


async def test_the_circuit_breaker_counts_each_call_until_it_ends(
    plane: ControlPlane, client: XdsClient
) -> None:
    """With ``max_requests`` 1, a second call while one is in flight is dropped with
    UNAVAILABLE ``circuit breaker drop``; once the first ends (the picker is told), calls go
    through again."""
    async with echo_backends("a") as (a,):
        served = cluster_of("c", [a])
        served[0].circuit_breakers.thresholds.add().max_requests.value = 1
        plane.set_all(
            [builders.api_listener("svc"), builders.route_configuration("svc-routes", "c"), *served]
        )
        async with XdsChannel("xds:///svc", client=client) as channel:
            stub = EchoStub(channel)
            held = stub.Say(Text(value="hold"), timeout=5)
            await asyncio.wait_for(a.held.wait(), 5)
            with pytest.raises(grpc.aio.AioRpcError) as dropped:
                await stub.Say(Text(value="second"), timeout=5)
            assert (dropped.value.code(), dropped.value.details()) == (
                grpc.StatusCode.UNAVAILABLE,
                "circuit breaker drop",
            )
            a.release()
            assert (await held).value == "a:hold"
            assert (await stub.Say(Text(value="third"), timeout=5)).value == "a:third"
