"""Whole runs against the test control plane: the numbers agree with what the server saw."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter

import pytest

from tests.conformance import servers
from tests.load.conftest import CLUSTERS, assignments
from xdsclient.load import NotServedError, Progress, Push, Scenario, UnreachableError, run
from xdsclient.resources import ENDPOINT
from xdsclient.testing import ControlPlane

TYPES = {"Listener", "RouteConfiguration", "Cluster", "ClusterLoadAssignment"}


def _short(type_url: str) -> str:
    return type_url.rsplit(".", 1)[-1]


async def test_a_run_of_two_hundred_clients_agrees_with_the_control_plane(cp):
    """200 clients complete; streams, nodes, messages per type and NACKs match the server's."""
    # Real time, with room for a loaded machine: 200 clients take well under a second alone.
    result = await run(Scenario(server=cp.address, listener="l", clients=200, duration=5.0))
    assert (result.clients, result.connected, result.complete) == (200, 200, 200)
    assert result.first_config.count == 200
    assert all(client.first_config is not None for client in result.per_client)
    firsts = [r for r in cp.requests if r.message.HasField("node")]
    assert len({r.stream for r in cp.requests}) == 200
    assert sorted(r.message.node.id for r in firsts) == sorted(
        f"xdsclient-load-{i}" for i in range(200))  # fmt: skip
    sent = Counter(_short(r.type_url) for r in cp.requests)
    received = Counter(_short(r.type_url) for r in cp.responses)
    assert set(result.messages) == TYPES
    for kind, counts in result.messages.items():
        assert (counts.sent, counts.received) == (sent[kind], received[kind]), kind
    assert result.nacks == len(cp.nacks()) == 0
    assert result.ack_latency.count == len(cp.responses)
    assert result.errors == {}
    assert result.duration == pytest.approx(5.0, abs=0.5)


async def test_a_push_is_measured_to_every_client_that_applied_it(cp):
    """Push-to-applied counts one value per client and changed resource, bounded by the
    server's own send times; fan-out spread counts all but the first client per version."""
    pushed: list[float] = []

    def push() -> None:
        pushed.append(time.monotonic())
        cp.set_all(assignments(9090))

    clients = 40
    # Every client is complete before the push; 4.5 s after it leave a loaded machine room
    # to apply it everywhere before the run ends.
    scenario = Scenario(server=cp.address, listener="l", clients=clients, duration=7.0,
                        push=Push(at=2.5))  # fmt: skip
    result = await run(scenario, push=push)
    assert result.pushes == len(pushed) == 1
    assert result.push_to_applied.count == clients * CLUSTERS
    assert result.fanout.count == clients * CLUSTERS - CLUSTERS
    sends = [r.time - pushed[0] for r in cp.responses
             if r.type_url == ENDPOINT.type_url and r.time >= pushed[0]]  # fmt: skip
    assert result.push_to_applied.min >= min(sends)
    assert result.push_to_applied.max >= max(sends)
    assert result.push_to_applied.max < 2.5  # from the push, not from the run's start


async def test_a_run_told_to_start_in_the_past_keeps_that_schedule(cp):
    """A run that begins after its ``start_at`` (a late worker of a distributed run) counts its
    schedule from it: its push has already run when it begins and it ends at ``start_at`` plus
    its duration, not its duration from now."""
    pushed: list[float] = []
    begun = time.time()
    scenario = Scenario(server=cp.address, listener="l", clients=2, duration=4.0,
                        push=Push(at=1.0))  # fmt: skip
    result = await run(scenario, push=lambda: pushed.append(time.time()), start_at=begun - 2.0)
    ended = time.time()
    assert result.started == pytest.approx(begun - 2.0, abs=0.01)
    assert len(pushed) == 1
    assert pushed[0] - begun < 1.0  # its time had passed: at once
    assert ended - begun < 4.0  # 2 s left of its 4 s (a run from now would take 4)
    assert result.duration >= 4.0
    assert result.cpu_share > 0
    assert result.cpu_seconds / result.cpu_share < 4.0  # a share of the time it ran, not 4 s


async def test_progress_is_published_while_running_and_at_the_end(cp):
    """Snapshots arrive during the run; the last is marked done and has every client."""
    snapshots: list[Progress] = []
    await run(Scenario(server=cp.address, listener="l", clients=10, duration=1.2),
              on_progress=snapshots.append)  # fmt: skip
    assert len(snapshots) >= 2
    assert [s.done for s in snapshots].count(True) == 1
    assert snapshots[-1].done
    assert snapshots[-1].started == 10
    assert any(s.complete == 10 for s in snapshots)
    assert snapshots[-1].latest_first_config is not None


def _server_connections(port: int) -> int:
    """Established TCP connections accepted on ``port`` (this network namespace)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as file:
                lines = file.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


@pytest.mark.parametrize(("share", "expected"), [(False, 20), (True, 1)])
async def test_each_client_has_its_own_connection_unless_shared(cp, share, expected):
    """By default every client dials its own TCP connection; shared, all use one."""
    seen: list[int] = []

    def look(progress) -> None:
        if progress.complete == 20 and not progress.done:
            seen.append(_server_connections(cp.port))

    scenario = Scenario(server=cp.address, listener="l", clients=20, duration=3.0,
                        share_connections=share)  # fmt: skip
    result = await run(scenario, on_progress=look)
    assert result.complete == 20
    assert seen
    # the run's reachability probe closes its own connection asynchronously: the fewest seen
    assert min(seen) == expected


@pytest.mark.parametrize(("ads", "delta", "share"),
                         [(False, False, False), (True, True, False), (False, True, False),
                          (False, False, True)])  # fmt: skip
async def test_every_variant_completes_and_is_acked(cp, ads, delta, share):
    """Per-type streams and Delta complete too, every response answered without a NACK (and
    per-type streams on a shared connection: a client's four streams on one channel)."""
    result = await run(Scenario(server=cp.address, listener="l", clients=10, duration=3.0,
                                ads=ads, delta=delta, share_connections=share))  # fmt: skip
    assert result.complete == 10
    assert len({r.stream for r in cp.requests}) == (10 if ads else 40)
    assert all(r.is_delta == delta for r in cp.requests)
    assert result.ack_latency.count == len(cp.responses)


async def test_an_unreachable_server_fails_the_run_before_it_starts():
    """No server: `UnreachableError` within ``connect_timeout``, no clients started."""
    async with ControlPlane() as gone:
        address = gone.address
    started = time.monotonic()
    with pytest.raises(UnreachableError, match="cannot reach"):
        await run(Scenario(server=address, listener="l", clients=5, connect_timeout=0.3))
    assert time.monotonic() - started < 2


async def test_a_server_without_xds_ends_the_run_at_once_as_not_served():
    """A gRPC server with no xDS service: the first stream that ends UNIMPLEMENTED before any
    response ends the run with `NotServedError` naming the method (not at ``duration``)."""
    async with servers.grpc_server(servers.greeter()) as address, asyncio.timeout(20):
        with pytest.raises(NotServedError, match=r"does not serve .*/StreamAggregatedResources"):
            await run(Scenario(server=address, listener="l", clients=5, duration=60))


async def test_per_type_streams_to_an_ads_only_server_are_not_served_but_ads_runs(cp):
    """A server serving ADS only: a per-type scenario is not served (its LDS method is
    UNIMPLEMENTED); the same scenario over ADS completes."""
    async with servers.grpc_server(*servers.ads_only(cp)) as address, asyncio.timeout(20):
        with pytest.raises(NotServedError, match="ListenerDiscoveryService"):
            await run(Scenario(server=address, listener="l", clients=3, duration=60, ads=False))
        result = await run(Scenario(server=address, listener="l", clients=3, duration=1.0))
    assert result.complete == 3


async def test_ack_latency_ends_when_the_ack_is_handed_to_grpc_not_when_the_loop_hears_of_it(cp):
    """With the event loop busy 50 ms a turn, an ACK still counts from the response read to the
    ACK handed to gRPC (the same turn), not to the later turn that reports the write done."""
    turn = 0.05
    hog: list[asyncio.Task[None]] = []

    async def busy_loop() -> None:
        while True:
            time.sleep(turn)  # a saturated generator: every loop turn takes this long
            await asyncio.sleep(0)

    def push() -> None:
        cp.set_all(assignments(9090))
        hog.append(asyncio.create_task(busy_loop()))

    scenario = Scenario(server=cp.address, listener="l", clients=1, duration=0.8,
                        push=Push(at=0.4))  # fmt: skip
    try:
        result = await run(scenario, push=push)
    finally:
        for task in hog:
            task.cancel()
    assert result.push_to_applied.count == CLUSTERS  # the push was answered while hogged
    assert result.ack_latency.count == len(cp.responses)
    assert result.ack_latency.max < turn


async def test_starting_every_client_at_once_lets_the_event_loop_turn_between_them(cp):
    """Without a ramp, clients are started in short turns of the event loop (other tasks run
    between them), not all in one turn that holds the loop for the whole fleet's start."""
    counts: list[int] = []

    async def turns() -> None:
        while True:
            counts.append(len(asyncio.all_tasks()))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(turns())
    try:
        scenario = Scenario(server=cp.address, listener="l", clients=300, duration=0.3,
                            share_connections=True)  # fmt: skip
        result = await run(scenario)
    finally:
        watcher.cancel()
    assert result.clients == 300
    started = [after - before for before, after in itertools.pairwise(counts)]
    assert 0 < max(started) < 300  # each client is a task: never all of them in one turn


def test_unimplemented_after_a_response_is_an_error_not_a_server_without_xds() -> None:
    """Once any client read a response, a later UNIMPLEMENTED (say, one per-type service a
    server lacks) is counted like any error; the run goes on. Before, it ends the run."""
    from xdsclient.load._fleet import Fleet
    from xdsclient.load._lean import SharedDecoder
    from xdsclient.load._results import RunResult
    from xdsclient.resources import LISTENER

    ended: list[str] = []
    answered = Fleet(RunResult(scenario={}), SharedDecoder())
    answered.on_unserved = lambda: ended.append("answered")
    answered.counts(LISTENER.type_url).received += 1
    answered.not_served("x does not serve y")
    assert (answered.unserved, ended) == (None, [])
    fresh = Fleet(RunResult(scenario={}), SharedDecoder())
    fresh.on_unserved = lambda: ended.append("fresh")
    fresh.not_served("x does not serve y")
    fresh.not_served("x does not serve z")  # the first reason stands, told once
    assert (fresh.unserved, ended) == ("x does not serve y", ["fresh"])
