"""A pick made on connectivity the channel has not yet heard about: the endpoint's connection
closed a moment ago, its watcher has not told the picker, and the pick still names it.

C-core queues such a pick and picks again with the next picker, so a plain call (not
wait-for-ready) does not fail while another endpoint is READY. The test freezes the moment by
cancelling the closed endpoint's watcher (the one task that would tell the picker), stops that
backend and waits until its grpc.aio channel has left READY: the picker still says READY.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc

from tests.lb.differential_pickers import METHOD, Backend
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane, builders


def _resources(a: int, b: int) -> list[object]:
    locality = builders.LocalitySpec(endpoints=[("127.0.0.1", a), ("127.0.0.1", b)])
    return [
        builders.api_listener("stale"),
        builders.route_configuration("stale-routes", "stale-cluster"),
        builders.cluster("stale-cluster"),
        builders.cluster_load_assignment("stale-cluster", [locality]),
    ]


async def test_a_plain_call_picked_to_a_connection_that_just_closed_goes_to_a_ready_one(
    plane: ControlPlane, client: XdsClient
) -> None:
    """Round robin over a and b, a's backend gone and its channel no longer READY before the
    picker hears it: four plain calls all answer from b, none fails."""
    a, b = Backend(), Backend()
    for backend in (a, b):
        await backend.start()
    try:
        plane.set_all(_resources(a.port, b.port))
        async with XdsChannel("xds:///stale", client=client, rng=random.Random(7)) as channel:
            call: Any = channel.unary_unary(METHOD)
            answered = {int(await call(b"", timeout=5, wait_for_ready=True)) for _ in range(4)}
            assert answered == {a.port, b.port}  # both READY in the picker
            connection = channel._core.connections.connect(("127.0.0.1", a.port))
            assert connection.watcher is not None
            connection.watcher.cancel()  # the picker hears nothing more about a
            await a.stop()
            if connection.channel.get_state() is grpc.ChannelConnectivity.READY:
                await asyncio.wait_for(
                    connection.channel.wait_for_state_change(grpc.ChannelConnectivity.READY), 5
                )
            replies = [int(await call(b"", timeout=5)) for _ in range(4)]
        assert replies == [b.port] * 4
    finally:
        for backend in (a, b):
            await backend.close()
