"""Priority failover and return through `XdsChannel` against grpcio's C-core: the phases of
tests/lb/test_tree_differential.py (backends a and b in priority 0, c in priority 1, stopped
and started between phases), with the channel in place of the example balancer. Both clients
send calls until the change is seen, then 40 more, which must land on the same backends in the
same shares."""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Sequence

import grpc

from tests.lb.differential_pickers import METHOD, Backend, grpc_session
from tests.lb.test_tree_differential import BACKOFF, CALLS, LISTENER, resources
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane


async def channel_calls(
    channel: XdsChannel, calls: int, *, until: Sequence[int], streak: int, limit: float = 10.0
) -> tuple[int, list[int]]:
    """What `GrpcSession.calls` does, through the channel (0 for a failed call)."""
    call = channel.unary_unary(METHOD)

    async def one() -> int:
        try:
            return int(await call(b"", timeout=5, wait_for_ready=True))
        except grpc.aio.AioRpcError:
            return 0

    deadline, settle, run = time.monotonic() + limit, 0, 0
    while run < streak:
        if time.monotonic() > deadline:
            settle = -1
            break
        settle += 1
        run = run + 1 if await one() in until else 0
    return settle, [await one() for _ in range(calls)]


async def test_priority_failover_and_return_through_the_channel_match_grpc() -> None:
    """Priority 0 up, half down, all down, back one by one: grpcio and `XdsChannel` send the
    settled calls to the same backends in the same shares."""
    a, b, c = Backend(), Backend(), Backend()
    for backend in (a, b, c):
        await backend.start()
    try:
        async with (
            ControlPlane() as plane,
            XdsClient(plane.address, node_id="channel-failover") as client,
        ):
            plane.set_all(resources(a.port, b.port, c.port))
            async with (
                grpc_session(plane, LISTENER, options=BACKOFF) as theirs,
                XdsChannel(
                    f"xds:///{LISTENER}",
                    client=client,
                    channel_options=BACKOFF,
                    rng=random.Random(32),
                ) as ours,
            ):
                phases = [
                    ("all up", None, (a, b), 2, {a.port: 20, b.port: 20}),
                    ("a down", a.stop, (b,), 5, {b.port: 40}),
                    ("b down", b.stop, (c,), 5, {c.port: 40}),
                    ("a back", a.start, (a,), 5, {a.port: 40}),
                    ("b back", b.start, (b,), 1, {a.port: 20, b.port: 20}),
                ]
                for phase, change, expected, streak, shares in phases:
                    if change is not None:
                        await change()
                    until = [backend.port for backend in expected]
                    theirs_settle, theirs_picks = await theirs.calls(
                        CALLS, until=until, streak=streak
                    )
                    settle, picks = await channel_calls(ours, CALLS, until=until, streak=streak)
                    assert theirs_settle != -1, (phase, "grpcio never settled")
                    assert settle != -1, (phase, "ours never settled")
                    assert collections.Counter(theirs_picks) == shares, (phase, theirs_picks)
                    assert collections.Counter(picks) == shares, (phase, picks)
    finally:
        for backend in (a, b, c):
            await backend.stop()
