"""Priority failover and return through `XdsChannel` against grpcio's C-core: the same backends
serve as backends go and return.

One control plane serves one round-robin Cluster with two priorities (backends a and b in
priority 0, c in priority 1) to grpcio's xDS client (a child process) and to `XdsChannel`. Real
grpc.aio backends on 127.0.0.1 answer with their port. Between phases the test stops or
restarts backends; in each phase both clients send calls until they settle (``streak`` in a row
land where the phase expects, on each expected backend when the streak can show it: the change
was seen and every backend it brings is READY), then 40 more, which must land on the same
backends in the same shares. Both clients settle by one rule (`settled`, which grpcio's child
runs too). The channel sends them twice, as wait-for-ready calls and as plain ones (as the
deprecated `AioBalancer` sends them). Both sides use the same fast reconnect backoff (100-200
ms), so a backend started again is found quickly.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import random
import socket
import time
from collections.abc import Sequence
from typing import Any

import grpc
import pytest

from tests.lb.differential_pickers import METHOD, Backend, grpc_session, settled
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
    """What `GrpcSession.calls` does, through the channel (0 for a failed call), by the same
    rule (`settled`: once every expected backend answers)."""
    call = channel.unary_unary(METHOD)

    async def one() -> int:
        try:
            return int(await call(b"", timeout=5, wait_for_ready=wait_for_ready))
        except grpc.aio.AioRpcError:
            return 0

    deadline, settle = time.monotonic() + limit, 0
    recent: collections.deque[int] = collections.deque(maxlen=streak)
    while not settled(recent, until, streak):
        if time.monotonic() > deadline:
            settle = -1
            break
        settle += 1
        recent.append(await one())
    return settle, [await one() for _ in range(calls)]


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
            await backend.close()


async def test_grpcio_settles_only_once_every_expected_backend_answers() -> None:
    """grpcio's session, its first calls landing on a while b is down, keeps settling until b
    (started after a answered three calls) answers too, so its counted calls split 20/20."""
    a, b, c = Backend(), Backend(), Backend()
    for backend in (a, b, c):
        await backend.start()
    await b.stop()  # its port is known; it refuses connections until it starts again
    try:
        async with ControlPlane() as plane:
            plane.set_all(resources(a.port, b.port, c.port))
            async with grpc_session(plane, LISTENER, options=BACKOFF) as theirs:
                phase = asyncio.ensure_future(theirs.calls(CALLS, until=[a.port, b.port], streak=2))
                await a.answered(3)
                await b.start()
                settle, picks = await phase
        assert settle >= 3, settle
        assert collections.Counter(picks) == {a.port: 20, b.port: 20}, picks
    finally:
        for backend in (a, b, c):
            await backend.close()


async def test_a_stopped_backend_keeps_its_port_until_it_starts_again() -> None:
    """While a backend is stopped no other socket can bind its port and connecting to it is
    refused; it starts again on that port and answers there."""
    backend = Backend()
    await backend.start()
    try:
        await backend.stop()
        with socket.socket() as other, pytest.raises(OSError, match="in use") as taken:
            other.bind(("127.0.0.1", backend.port))
        assert taken.value.errno == errno.EADDRINUSE
        with socket.socket() as client, pytest.raises(ConnectionRefusedError):
            client.connect(("127.0.0.1", backend.port))
        await backend.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{backend.port}") as channel:
            call: Any = channel.unary_unary(METHOD)
            reply = await call(b"", timeout=5)
        assert int(reply) == backend.port
    finally:
        await backend.close()
