"""Load reporting across fallback and return (gRFC A27 with A71), over real grpc.aio: two test
control planes serve the same Cluster with ``lrs_server: self``; the primary is down at start,
so the cluster comes from the fallback, then the primary comes back. The client runs on a fake
clock, so report intervals and the primary's backoff pass when the test says. The last test
runs the same story on the fake transport, to see what is opened and closed when."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from tests.helpers import described, eventually, idle
from tests.lrs.test_reporting import _answer
from tests.lrs.test_reporting import _issued as _issued_in
from tests.shell.conftest import OPTIONS
from xdsclient import CallbackWatcher, Event, Locality, ResourceChanged, XdsClient, load_bootstrap
from xdsclient._protocol._lrs import LRS_METHOD
from xdsclient.resources import CLUSTER, ClusterView
from xdsclient.testing import ControlPlane, FakeClock, FakeTransport, bootstrap
from xdsclient.testing.builders import cluster

EAST = Locality(region="r", zone="east")
WEST = Locality(region="r", zone="west")


@pytest.fixture
async def planes() -> AsyncIterator[tuple[ControlPlane, ControlPlane]]:
    """A primary (stopped) and a fallback, both serving cluster ``c`` with ``lrs_server: self``
    and asking for every cluster's load each second."""
    async with ControlPlane() as primary, ControlPlane() as fallback:
        for plane in (primary, fallback):
            message = cluster("c", eds_service_name="svc")
            message.lrs_server.self.SetInParent()
            plane.set(message)
            plane.load_reporting.configure(send_all_clusters=True, interval=1)
        await primary.stop(keep_port=True)  # started again by the tests that return to it
        yield primary, fallback


async def _until(clock: FakeClock, condition: Callable[[], bool], every: float = 1.0) -> None:
    """Advance the clock ``every`` seconds at a time until ``condition`` holds."""

    def held() -> bool:
        if condition():
            return True
        clock.advance(every)  # the next interval is due: the client sends its report
        return False

    await eventually(held, 10, what=described(condition))


def _issued(plane: ControlPlane) -> dict[str, int]:
    """Zone -> calls issued, summed over every report ``plane`` received."""
    totals: dict[str, int] = {}
    for report in plane.load_reports:
        for stats in report.message.cluster_stats:
            assert (stats.cluster_name, stats.cluster_service_name) == ("c", "svc")
            for up in stats.upstream_locality_stats:
                zone = up.locality.zone
                totals[zone] = totals.get(zone, 0) + up.total_issued_requests
    return totals


def _lrs_streams(plane: ControlPlane) -> int:
    return sum(r.first for r in plane.load_reporting.requests)


def _calls(load: object, locality: Locality, count: int) -> None:
    for _ in range(count):
        load.call_started(locality)  # type: ignore[attr-defined]
        load.call_finished(locality, ok=True)  # type: ignore[attr-defined]


async def _client(
    primary: ControlPlane, fallback: ControlPlane, clock: FakeClock
) -> tuple[XdsClient, ClusterView]:
    config = load_bootstrap(bootstrap([primary, fallback]))
    client = XdsClient(bootstrap=config, clock=clock, options=OPTIONS)
    await client.start()
    client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))  # as a channel does
    view: ClusterView = await client.wait_for(CLUSTER, "c", timeout=5)
    return client, view


async def _returned(primary: ControlPlane, fallback: ControlPlane, clock: FakeClock) -> None:
    """Start the primary again and advance the clock until the client went back to it."""
    await primary.start()
    await _until(clock, lambda: bool(primary.requests) and fallback.stream_count == 0)


async def test_after_return_the_same_load_reports_new_calls_to_the_primary(
    planes: tuple[ControlPlane, ControlPlane],
) -> None:
    """`load_reporter` gives the same object before and after the return; the calls made
    while the cluster came from the fallback go to the fallback, those made after the return
    to the primary, each once."""
    primary, fallback = planes
    clock = FakeClock()
    client, view = await _client(primary, fallback, clock)
    try:
        load = client.load_reporter(view)
        _calls(load, EAST, 3)
        await _until(clock, lambda: _issued(fallback) == {"east": 3})
        await _returned(primary, fallback, clock)
        again: ClusterView = await client.wait_for(CLUSTER, "c", timeout=5)
        assert client.load_reporter(again) is load
        _calls(load, WEST, 4)
        await _until(clock, lambda: _issued(primary) == {"west": 4})
        reports = len(primary.load_reports)  # the next interval's (empty) report goes out too:
        await _until(clock, lambda: len(primary.load_reports) > reports)
        assert _issued(primary) == {"west": 4}  # and nothing was reported twice or moved
        assert _issued(fallback) == {"east": 3}
    finally:
        await client.close()


async def test_counts_not_yet_reported_at_the_return_go_to_the_fallback_on_its_one_stream(
    planes: tuple[ControlPlane, ControlPlane],
) -> None:
    """Releasing the fallback's discovery channel neither closes nor reopens its LRS stream:
    the calls counted there since its last report go in its next report, on the stream it
    had, which then ends (nothing is left to report there); the primary gets only what
    follows."""
    primary, fallback = planes
    fallback.load_reporting.configure(interval=3600)  # its stream's first answer says so
    clock = FakeClock()
    client, view = await _client(primary, fallback, clock)
    try:
        load = client.load_reporter(view)
        _calls(load, EAST, 3)
        await _until(clock, lambda: _issued(fallback) == {"east": 3}, every=300)
        _calls(load, EAST, 2)  # the next report is an hour away
        await _returned(primary, fallback, clock)
        assert fallback.load_reporting.stream_count == 1  # still up, waiting for its report
        assert _lrs_streams(fallback) == 1  # and not reopened
        _calls(load, WEST, 4)
        await _until(clock, lambda: _issued(fallback) == {"east": 5}, every=300)
        await _until(clock, lambda: _issued(primary) == {"west": 4})
        await eventually(lambda: not fallback.load_reporting.stream_count, 5)
        assert _lrs_streams(fallback) == 1
        assert _issued(fallback) == {"east": 5}
        assert _lrs_streams(primary) == 1
    finally:
        await client.close()


PRIMARY, SECONDARY = "primary:1", "secondary:1"


def _reporting_cluster() -> object:
    message = cluster("c", eds_service_name="svc")
    message.lrs_server.self.SetInParent()
    return message


async def test_the_fallback_keeps_its_transport_for_its_lrs_stream_until_its_counts_are_sent(
    fake: FakeTransport, clock: FakeClock
) -> None:
    """Back on the primary, the fallback's discovery stream closes at once, but its LRS stream
    and transport stay until the counts left there are in a report; then both close, and no
    stream is opened to the fallback again. The primary's LRS stream reports what follows."""
    fake.refuse(server=PRIMARY)
    config = load_bootstrap(bootstrap([PRIMARY, SECONDARY]))
    async with XdsClient(bootstrap=config, transport=fake, clock=clock, options=OPTIONS) as client:
        seen: list[Event] = []
        client.add_watcher(CLUSTER, "c", CallbackWatcher(seen.append))
        discovery = await fake.stream(SECONDARY)
        await discovery.request()
        discovery.send([_reporting_cluster()], version="1")
        await idle()
        assert isinstance(seen[-1], ResourceChanged)
        load = client.load_reporter(seen[-1].value)
        lrs = await fake.stream(SECONDARY)
        assert lrs.spec.method == LRS_METHOD
        await lrs.request()
        lrs.respond(_answer(send_all=True, every=10))  # its first report is due at 10 s
        await idle()
        _calls(load, EAST, 2)
        fake.accept(server=PRIMARY)
        clock.advance(1.0)
        primary = await fake.stream(PRIMARY)
        await primary.request()
        primary.send([_reporting_cluster()], version="1")
        await idle()
        assert (discovery.closed, lrs.closed, fake.closed_servers) == (True, False, [])
        _calls(load, WEST, 3)
        primary_lrs = await fake.stream(PRIMARY)
        assert primary_lrs.spec.method == LRS_METHOD
        await primary_lrs.request()
        primary_lrs.respond(_answer(send_all=True, every=10))  # due at 11 s
        await idle()
        clock.advance(9)
        assert _issued_in(await lrs.request()) == {("c", "east"): 2}
        await idle()
        assert lrs.closed
        assert fake.closed_servers == [SECONDARY]
        clock.advance(1)
        assert _issued_in(await primary_lrs.request()) == {("c", "west"): 3}
        clock.advance(60)
        await idle()
        assert [s for s in fake.streams if s.server == SECONDARY] == [discovery, lrs]
