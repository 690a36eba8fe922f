"""Priority failover and return through `XdsChannel` against grpcio's C-core: the same backends
serve as backends go and return.

One control plane serves one round-robin Cluster with two priorities (backends a and b in
priority 0, c in priority 1) to grpcio's xDS client (a child process) and to `XdsChannel`. Real
grpc.aio backends on 127.0.0.1 answer with their port. Between phases the test stops or
restarts backends; in each phase both clients send calls until ``streak`` in a row land where
the phase expects (the change was seen), then 40 more, which must land on the same backends in
the same shares. The channel sends them twice, as wait-for-ready calls and as plain ones (as
the deprecated `AioBalancer` sends them). Both sides use the same fast reconnect backoff
(100-200 ms), so a backend started again is found quickly.
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Sequence

import grpc

from tests.lb.differential_pickers import METHOD, Backend, grpc_session
from xdsclient import XdsClient
from xdsclient.grpc import XdsChannel
from xdsclient.testing import ControlPlane, builders

LISTENER = "tree"
CLUSTER = "tree-cluster"
CALLS = 40
BACKOFF = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 200),
)


def resources(a: int, b: int, c: int) -> list[object]:
    localities = [
        builders.LocalitySpec(endpoints=[("127.0.0.1", a), ("127.0.0.1", b)], zone="p0"),
        builders.LocalitySpec(endpoints=[("127.0.0.1", c)], zone="p1", priority=1),
    ]
    return [
        builders.api_listener(LISTENER),
        builders.route_configuration(f"{LISTENER}-routes", CLUSTER),
        builders.cluster(CLUSTER),
        builders.cluster_load_assignment(CLUSTER, localities),
    ]


async def channel_calls(
    channel: XdsChannel,
    calls: int,
    *,
    until: Sequence[int],
    streak: int,
    wait_for_ready: bool,
    limit: float = 10.0,
) -> tuple[int, list[int]]:
    """What `GrpcSession.calls` does, through the channel (0 for a failed call), settled once
    every expected backend answers (`_settled`)."""
    call = channel.unary_unary(METHOD)

    async def one() -> int:
        try:
            return int(await call(b"", timeout=5, wait_for_ready=wait_for_ready))
        except grpc.aio.AioRpcError:
            return 0

    deadline, settle = time.monotonic() + limit, 0
    recent: collections.deque[int] = collections.deque(maxlen=streak)
    while not _settled(recent, until, streak):
        if time.monotonic() > deadline:
            settle = -1
            break
        settle += 1
        recent.append(await one())
    return settle, [await one() for _ in range(calls)]


def _settled(recent: Sequence[int], until: Sequence[int], streak: int) -> bool:
    """The last ``streak`` calls all went to ``until``, and to each of them when the streak is
    long enough to show it (round robin over every expected backend: all of them READY, not
    the first of them only)."""
    if len(recent) < streak or any(port not in until for port in recent):
        return False
    return streak < len(until) or set(until) <= set(recent)


async def test_priority_failover_and_return_through_the_channel_match_grpc() -> None:
    """Priority 0 up, half down, all down, back one by one: grpcio and `XdsChannel` (its calls
    wait-for-ready or not) send the settled calls to the same backends in the same shares
    (round robin over priority 0's READY backends, priority 1 only while priority 0 has none)."""
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
                    assert theirs_settle != -1, (phase, "grpcio never settled")
                    assert collections.Counter(theirs_picks) == shares, (phase, theirs_picks)
                    for ready in (True, False):
                        settle, picks = await channel_calls(
                            ours, CALLS, until=until, streak=streak, wait_for_ready=ready
                        )
                        assert settle != -1, (phase, ready, "ours never settled")
                        assert collections.Counter(picks) == shares, (phase, ready, picks)
    finally:
        for backend in (a, b, c):
            await backend.stop()
