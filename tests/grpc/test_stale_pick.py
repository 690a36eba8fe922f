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
from collections.abc import Callable
from typing import Any

import grpc
import pytest

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


class _Passing(grpc.aio.UnaryUnaryClientInterceptor):
    """Passes every call on unchanged: the channel's calls are `XdsCall`s, not direct."""

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        return await continuation(client_call_details, request)


@pytest.mark.parametrize("path", ["direct", "driven"])
async def test_a_pick_handed_back_unused_counts_no_outcome_and_ends_its_count(
    plane: ControlPlane, client: XdsClient, path: str
) -> None:
    """A pick naming a connection that just closed is handed back unused, by a direct call
    and by a call the driver runs (an interceptor's): the picker hears no outcome of a call to
    that endpoint (neither success nor failure, for outlier detection and the policies), only
    that the pick was given back, and the cluster's count of calls in flight is zero after."""
    a, b = Backend(), Backend()
    for backend in (a, b):
        await backend.start()
    try:
        plane.set_all(_resources(a.port, b.port))
        interceptors = [_Passing()] if path == "driven" else []
        async with XdsChannel(
            "xds:///stale", client=client, rng=random.Random(7), interceptors=interceptors
        ) as channel:
            call: Any = channel.unary_unary(METHOD)
            answered = {int(await call(b"", timeout=5, wait_for_ready=True)) for _ in range(4)}
            assert answered == {a.port, b.port}
            connection = channel._core.connections.connect(("127.0.0.1", a.port))
            assert connection.watcher is not None
            connection.watcher.cancel()
            await a.stop()
            if connection.channel.get_state() is grpc.ChannelConnectivity.READY:
                await asyncio.wait_for(
                    connection.channel.wait_for_state_change(grpc.ChannelConnectivity.READY), 5
                )
            picker: Any = channel._core.picker  # its hooks wrapped below
            finished: list[tuple[int, bool]] = []
            abandoned: list[int] = []
            finish, abandon = picker.call_finished, picker.call_abandoned

            def call_finished(picked: Any, ok: bool, *args: Any, **kwargs: Any) -> None:
                finished.append((picked.endpoint.port, ok))
                finish(picked, ok, *args, **kwargs)

            def call_abandoned(picked: Any) -> None:
                abandoned.append(picked.endpoint.port)
                abandon(picked)

            picker.call_finished = call_finished
            picker.call_abandoned = call_abandoned
            replies = [int(await call(b"", timeout=5)) for _ in range(4)]
            assert replies == [b.port] * 4
            assert finished == [(b.port, True)] * 4  # no outcome for a
            assert abandoned == [a.port]
            assert picker._leaves["stale-cluster"].counter.in_flight == 0
    finally:
        for backend in (a, b):
            await backend.close()
