"""Priority failover against grpcio's C-core: the same backends serve as backends go and return.

One control plane serves one round-robin Cluster with two priorities (backends a and b in
priority 0, c in priority 1) to grpcio's xDS client (a child process) and to our `AioBalancer`
(its `ComposedPicker` over real grpc.aio channels). Real grpc.aio backends on 127.0.0.1 answer
with their port. Between phases the test stops or restarts backends; in each phase both clients
send calls until ``streak`` in a row land where the phase expects (the change was seen), then 40
more, and both must send those 40 to the same backends, in the same shares. Both sides use the
same fast reconnect backoff (100-200 ms), so a backend started again is found quickly.
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Sequence

import grpc

from xdsclient import XdsClient
from xdsclient.lb.aio import AioBalancer, PickFailed
from xdsclient.testing import ControlPlane, builders

from .differential_pickers import METHOD, Backend, grpc_session

LISTENER = "tree"
CLUSTER = "tree-cluster"
CALLS = 40
BACKOFF = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 200),
)


async def our_calls(
    balancer: AioBalancer, calls: int, *, until: Sequence[int], streak: int, limit: float = 10.0
) -> tuple[int, list[int]]:
    """What `GrpcSession.calls` does, through our balancer."""

    async def one() -> int:
        try:
            return int(await balancer.unary_unary(METHOD, b"", timeout=5))
        except (grpc.aio.AioRpcError, PickFailed):
            return 0

    deadline, settle, run = time.monotonic() + limit, 0, 0
    while run < streak:
        if time.monotonic() > deadline:
            settle = -1
            break
        settle += 1
        run = run + 1 if await one() in until else 0
    return settle, [await one() for _ in range(calls)]


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


async def test_priority_failover_and_return_serve_the_same_backends_as_grpc():
    """Priority 0 up, half down, all down, back one by one: grpcio and our balancer send the
    settled calls to the same backends in the same shares (round robin over priority 0's READY
    backends, priority 1 only while priority 0 has none)."""
    a, b, c = Backend(), Backend(), Backend()
    for backend in (a, b, c):
        await backend.start()
    try:
        async with (
            ControlPlane() as plane,
            XdsClient(plane.address, node_id="lb-tree-differential") as client,
        ):
            plane.set_all(resources(a.port, b.port, c.port))
            async with (
                grpc_session(plane, LISTENER, options=BACKOFF) as theirs,
                AioBalancer(
                    client, LISTENER, rand=random.Random(25), channel_options=BACKOFF
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
                    for side, session in (("grpcio", theirs.calls), ("ours", None)):
                        if session is not None:
                            settle, picks = await session(CALLS, until=until, streak=streak)
                        else:
                            settle, picks = await our_calls(ours, CALLS, until=until, streak=streak)
                        assert settle != -1, (phase, side, "never settled")
                        assert collections.Counter(picks) == shares, (phase, side, picks)
    finally:
        for backend in (a, b, c):
            await backend.stop()
