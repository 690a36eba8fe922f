"""The shared pick loop (`xdsclient._plane.PlaneCore`) under a real `XdsChannel`: a queued pick
runs the picker once, then waits for a change."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from google.protobuf import struct_pb2
from xds.type.v3 import typed_struct_pb2

from tests.helpers import eventually
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel, register_lb_policy
from xdsclient.lb import ConnectivityState, EndpointKey, PickOutcome, PickRequest, PickResult
from xdsclient.resources import Endpoint, LocalityEndpoints
from xdsclient.testing import ControlPlane, builders

_TYPE = "test.QueueingPolicy"


class QueueingPolicy:
    """Connects nowhere and queues every pick, counting them."""

    def __init__(self, config: Any) -> None:
        self.picks = 0

    def update(self, localities: Sequence[LocalityEndpoints], now: float) -> None:
        pass

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        pass

    def state(self) -> ConnectivityState:
        return ConnectivityState.CONNECTING

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        return ()

    def pick(self, request: PickRequest, rand: Any, now: float) -> PickResult:
        self.picks += 1
        return PickResult(outcome=PickOutcome.QUEUE)


@pytest.fixture
def policies() -> Iterator[list[QueueingPolicy]]:
    """`QueueingPolicy` registered (and unregistered after); the policies built."""
    built: list[QueueingPolicy] = []

    def make(config: Any) -> QueueingPolicy:
        built.append(QueueingPolicy(config))
        return built[-1]

    register_lb_policy(f"type.googleapis.com/{_TYPE}", make)
    try:
        yield built
    finally:
        register_lb_policy(_TYPE, None)


@pytest.fixture
def cp_resources() -> list[Any]:
    """Listener ``svc`` to cluster ``c``, balanced by `QueueingPolicy`."""
    cluster = builders.cluster("c")
    entry = cluster.load_balancing_policy.policies.add()
    entry.typed_extension_config.name = "queueing"
    entry.typed_extension_config.typed_config.Pack(
        typed_struct_pb2.TypedStruct(
            type_url=f"type.googleapis.com/{_TYPE}", value=struct_pb2.Struct()
        )
    )
    assignment = builders.cluster_load_assignment(
        "c", [builders.LocalitySpec(endpoints=[("127.0.0.1", 1)])]
    )
    return [
        builders.api_listener("svc"),
        builders.route_configuration("svc-routes", "c"),
        cluster,
        assignment,
    ]


@pytest.mark.timeout(20)
async def test_a_queued_pick_runs_the_picker_once_before_it_waits(
    cp: ControlPlane, policies: list[QueueingPolicy]
) -> None:
    """A call whose pick queues asks the picker once, then waits for a change (it asked
    twice in a row before the pick loop was one)."""
    async with (
        XdsClient(cp.address, node_id="plane") as client,
        XdsChannel("xds:///svc", client=client) as channel,
    ):
        call = channel.unary_unary("/echo.Echo/Say")(b"hi", timeout=15)
        await eventually(lambda: policies and policies[-1].picks >= 1, what="a pick")
        assert policies[-1].picks == 1
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
