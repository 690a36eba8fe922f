"""One simulated client against real servers: its walk follows the resources it holds (updates
included), and its streams live by the client's own rules (gRFC A57: when timers start, when to
back off, which status a stream ended with), each checked over the client's driver as well."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from tests.conformance.servers import grpc_server
from tests.helpers import eventually
from tests.load.conftest import NAMES, assignments
from tests.load.servers import Ending
from tests.reliability.proxy import Proxy
from xdsclient import Backoff, ClientOptions, NodeConfig, ServerConfig
from xdsclient._protocol import Session
from xdsclient._shell._driver import StreamDriver
from xdsclient._transports import StreamSpec
from xdsclient._transports._grpc import GrpcTransport
from xdsclient.load import Faults, Push, Scenario, run
from xdsclient.load._client import SimClient
from xdsclient.load._fleet import Fleet
from xdsclient.load._lean import SharedDecoder
from xdsclient.load._results import RunResult
from xdsclient.resources import CLUSTER, ENDPOINT, ROUTE_CONFIGURATION
from xdsclient.testing import ControlPlane, FakeClock
from xdsclient.testing.builders import cluster, cluster_load_assignment, route_configuration


def _last_names(cp, stream: int, type_url: str) -> set[str]:
    requests = [r for r in cp.requests if r.stream == stream and r.type_url == type_url]
    return set(requests[-1].message.resource_names)


async def test_an_update_that_names_other_clusters_moves_every_clients_subscriptions(cp):
    """A new route configuration naming c0 and c9 (no longer c1, c2) makes each client
    subscribe to c9's cluster and assignment and drop c1's and c2's."""

    def push() -> None:
        cp.set_all([cluster("c9"), cluster_load_assignment("c9", [("10.0.9.1", 8080)]),
                    route_configuration("routes", {"/c0/": "c0", "/c9/": "c9"})])  # fmt: skip

    scenario = Scenario(server=cp.address, listener="l", clients=5, duration=1.0,
                        push=Push(at=0.5))  # fmt: skip
    result = await run(scenario, push=push)
    assert result.complete == 5
    assert result.nacks == 0
    streams = {r.stream for r in cp.requests}
    assert len(streams) == 5
    for stream in streams:
        assert _last_names(cp, stream, CLUSTER.type_url) == {"c0", "c9"}
        assert _last_names(cp, stream, ENDPOINT.type_url) == {"c0", "c9"}


async def test_an_update_of_every_assignment_keeps_the_subscriptions_and_is_applied(cp):
    """New versions of the assignments change nothing the walk reads: each client applies
    them (push to applied counts them) and requests no other names."""
    scenario = Scenario(server=cp.address, listener="l", clients=5, duration=1.0,
                        push=Push(at=0.5))  # fmt: skip
    result = await run(scenario, push=lambda: cp.set_all(assignments(9090)))
    assert result.push_to_applied.count == 5 * len(NAMES)
    for stream in {r.stream for r in cp.requests}:
        assert _last_names(cp, stream, CLUSTER.type_url) == set(NAMES)
        assert _last_names(cp, stream, ENDPOINT.type_url) == set(NAMES)


# ---------------------------------------------------------------------------- stream rules
# The client's driver and the load tester's simulated client run the same stream-life rules
# (`xdsclient._shell._stream_life`): each test below runs over both loops.


class _WatchedClock(FakeClock):
    """A `FakeClock` that tells when its sleepers wait until (a loop backing off sleeps)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: list[float] = []

    async def sleep_until(self, when: float) -> None:
        self.waiting.append(when)
        try:
            await super().sleep_until(when)
        finally:
            self.waiting.remove(when)


class _Recorder:
    """The driver's `StreamEvents`: counts the streams it opens."""

    def __init__(self) -> None:
        self.opened = 0

    def on_open(self, now: float) -> None:
        self.opened += 1

    def on_request(self, request: Any, now: float) -> None: ...
    def on_response(self, response: Any, now: float) -> None: ...
    def on_applied(self, response: Any, now: float) -> None: ...
    def on_failure(self, error: Any, now: float) -> None: ...

    def publish(self, events: list[Any], after: Any = None) -> None:
        return None


class _Loop:
    """One stream loop watching the assignment ``missing`` (no server sends it, nor anything
    else: a response would make the loop reconnect at once): streams opened, next deadline."""

    def __init__(
        self, task: asyncio.Task[None], opened: Callable[[], int],
        deadline: Callable[[], float | None],
    ) -> None:  # fmt: skip
        self._task = task
        self.opened = opened
        self.deadline = deadline

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def _driver(address: str, clock: FakeClock) -> _Loop:
    session = Session(node=NodeConfig(id="n").to_proto(), resource_types=[ENDPOINT])
    session.subscribe(ENDPOINT.type_url, "missing")
    events = _Recorder()
    driver = StreamDriver(
        protocol=session, transport=GrpcTransport(ServerConfig(uri=address), ClientOptions()),
        spec=StreamSpec(), server=address, clock=clock, events=events, backoff=Backoff(),
    )  # fmt: skip
    task = asyncio.create_task(driver.run())
    return _Loop(task, lambda: events.opened, session.next_deadline)


def _simulated(address: str, clock: FakeClock) -> _Loop:
    scenario = Scenario(server=address, resources=(("endpoint", "missing"),))
    fleet = Fleet(RunResult(scenario={}), SharedDecoder(), clock=clock)
    client = SimClient(0, scenario, fleet, target=address, node=NodeConfig(id="n"))
    task = asyncio.create_task(client.run())
    return _Loop(task, lambda: client.streams_opened, client.next_deadline)


LOOPS = pytest.mark.parametrize("make", [_driver, _simulated], ids=["driver", "load"])


@LOOPS
async def test_a_reopened_streams_does_not_exist_timer_starts_when_it_is_established(make):
    """A stream re-opened over a connection that takes a minute to come up starts the
    does-not-exist timer of its request once established, not at the dial (gRFC A57)."""
    clock = _WatchedClock()
    async with ControlPlane() as control_plane, Proxy(control_plane.address) as proxy:
        loop = make(proxy.address, clock)
        try:
            assert await eventually(loop.deadline) == 15.0  # established at 0
            proxy.stall()  # the next connection comes up only when the test says
            proxy.cut()
            await eventually(lambda: clock.waiting and loop.deadline() is None)  # backing off
            clock.set(10.0)
            await eventually(lambda: loop.opened() == 2)  # dialled at 10
            clock.set(70.0)
            proxy.resume()
            assert await eventually(loop.deadline) == 70.0 + 15.0
        finally:
            await loop.close()


@LOOPS
async def test_streams_a_server_ends_with_ok_before_any_response_are_backed_off(make):
    """A server that ends every stream with OK and no response: each next stream waits the
    backoff (1 s, then x1.6, +-20 %), as after any failure before a response."""
    clock = _WatchedClock()
    server = Ending(grpc.StatusCode.OK, answer=False)
    async with grpc_server(*server.handlers()) as address:
        loop = make(address, clock)
        try:
            for streams, base in ((1, 1.0), (2, 1.6), (3, 2.56)):
                await eventually(lambda n=streams: server.streams == n and clock.waiting)
                assert server.streams == loop.opened() == streams
                (until,) = clock.waiting
                assert 0.8 * base <= until - clock.time() <= 1.2 * base
                clock.set(until)
        finally:
            await loop.close()


@pytest.mark.parametrize("slow_ack", [0.0, 0.05], ids=["ack-at-once", "ack-late"])
async def test_a_stream_ended_as_its_ack_goes_out_counts_the_status_the_server_sent(slow_ack):
    """A server that answers, then ends the stream UNAVAILABLE while the ACK is written: each
    stream counts UNAVAILABLE, never gRPC's own INTERNAL for the failed write (nor, written
    late, does the client stop)."""
    server = Ending(grpc.StatusCode.UNAVAILABLE, answer=True, limit=5)
    async with grpc_server(*server.handlers()) as address:
        faults = (Faults(slow_ack=slow_ack),) if slow_ack else ()
        scenario = Scenario(server=address, listener="l", faults=faults, backoff_initial=0.01)
        fleet = Fleet(RunResult(scenario={}), SharedDecoder())
        client = SimClient(0, scenario, fleet, target=address, node=NodeConfig(id="n"))
        task = asyncio.create_task(client.run())
        try:
            await eventually(lambda: server.streams == 6 and client.result.errors == 5)
            assert fleet.result.errors == {"UNAVAILABLE": 5}
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def test_a_reference_spelled_another_way_is_looked_up_under_its_canonical_name():
    """The load tester's walk follows a route's xdstp cluster names in the canonical form the
    session keys responses by (empty authority as A47 writes it, parameters reordered, needless
    escapes), as the client's walk does; a malformed reference stays as written."""
    spelled = {
        "xdstp:///envoy.config.cluster.v3.Cluster/c?b=2&a=1": (
            "xdstp:/envoy.config.cluster.v3.Cluster/c?a=1&b=2"
        ),
        "xdstp://auth/envoy.config.cluster.v3.Cluster/%64": (
            "xdstp://auth/envoy.config.cluster.v3.Cluster/d"
        ),
        "xdstp://auth/envoy.config.listener.v3.Listener/wrong-type": (
            "xdstp://auth/envoy.config.listener.v3.Listener/wrong-type"
        ),
        "plain": "plain",
    }
    config = route_configuration("r", {f"/{i}": name for i, name in enumerate(spelled)})
    decode = SharedDecoder().decoder(ROUTE_CONFIGURATION.type_url)
    name, lean = decode(config.SerializeToString())
    assert name == "r"
    assert dict(lean.refs) == {CLUSTER.type_url: tuple(spelled.values())}
