"""Load reporting through the client over the fake transport with a fake clock: the node and
its feature first, reports at the server's interval for the server's clusters, and nothing
lost across a failed stream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from envoy.service.load_stats.v3 import lrs_pb2

from tests.helpers import idle
from tests.shell.conftest import OPTIONS
from xdsclient import Locality, XdsClient
from xdsclient._protocol._lrs import LRS_METHOD, SEND_ALL_CLUSTERS
from xdsclient.resources import ClusterView
from xdsclient.testing import FakeClock, FakeStream, FakeTransport
from xdsclient.testing.builders import cluster

EAST = Locality(region="r", zone="east")


def _view(name: str, *, service: str = "", lrs: bool = True) -> ClusterView:
    message = cluster(name, eds_service_name=service)
    if lrs:
        message.lrs_server.self.SetInParent()
    return ClusterView.from_proto(message)


def _answer(*, clusters: tuple[str, ...] = (), send_all: bool = False, every: float = 10) -> bytes:
    response = lrs_pb2.LoadStatsResponse(clusters=clusters, send_all_clusters=send_all)
    response.load_reporting_interval.FromNanoseconds(round(every * 1e9))
    data: bytes = response.SerializeToString()
    return data


@pytest.fixture
async def client(fake: FakeTransport, clock: FakeClock) -> AsyncIterator[XdsClient]:
    async with XdsClient("fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS) as c:
        yield c


async def _lrs_stream(fake: FakeTransport) -> FakeStream:
    stream = await fake.stream()
    assert stream.spec.method == LRS_METHOD
    return stream


async def _answered(stream: FakeStream, **answer: Any) -> FakeStream:
    """``stream`` after its first request was read and answered with ``_answer(**answer)``."""
    await stream.request()
    stream.respond(_answer(**answer))
    await idle()
    return stream


def _issued(report: Any) -> dict[tuple[str, str], int]:
    return {
        (stats.cluster_name, locality.locality.zone): locality.total_issued_requests
        for stats in report.cluster_stats
        for locality in stats.upstream_locality_stats
    }


async def test_the_first_request_carries_the_node_with_the_send_all_clusters_feature(
    client: XdsClient, fake: FakeTransport
) -> None:
    """The LRS stream opens once a cluster's load is reported to, and its first request is
    the node, advertising ``envoy.lrs.supports_send_all_clusters``, with no stats."""
    client.load_reporter(_view("c"))
    stream = await _lrs_stream(fake)
    first = await stream.request()
    assert first.node.id == "n"
    assert SEND_ALL_CLUSTERS in first.node.client_features
    assert len(first.cluster_stats) == 0


async def test_reports_follow_the_servers_interval_and_sum_to_the_calls(
    client: XdsClient, fake: FakeTransport, clock: FakeClock
) -> None:
    """Nothing is reported before the interval the server chose has passed; then one report
    per interval, whose counts sum to the calls made, drops included."""
    load = client.load_reporter(_view("c", service="svc"))
    stream = await _answered(await _lrs_stream(fake), send_all=True, every=5)
    for _ in range(4):
        load.call_started(EAST)
    load.call_finished(EAST, ok=True, metrics={"cpu": 0.25})
    load.call_dropped("lb")
    load.call_dropped(None)
    clock.advance(4.9)
    await idle()
    assert stream.pending_requests() == []
    clock.advance(0.1)
    report = await stream.request()
    (stats,) = report.cluster_stats
    assert (stats.cluster_name, stats.cluster_service_name) == ("c", "svc")
    assert stats.load_report_interval.ToTimedelta().total_seconds() == 5.0
    (locality,) = stats.upstream_locality_stats
    assert (locality.total_issued_requests, locality.total_successful_requests) == (4, 1)
    assert locality.total_requests_in_progress == 3
    assert locality.load_metric_stats[0].total_metric_value == 0.25
    assert [(d.category, d.dropped_count) for d in stats.dropped_requests] == [("lb", 1)]
    assert stats.total_dropped_requests == 2
    clock.advance(5)
    second = await stream.request()
    assert second.cluster_stats[0].upstream_locality_stats[0].total_issued_requests == 0
    assert second.cluster_stats[0].upstream_locality_stats[0].total_requests_in_progress == 3


async def test_once_load_stops_one_empty_report_is_sent_then_none_until_load_again(
    client: XdsClient, fake: FakeTransport, clock: FakeClock
) -> None:
    """As gRPC C-core: the report after the last counted one says nothing (no
    ``cluster_stats``); the following empty ones are not sent; new load is reported at the
    next interval; a new stream starts as if its last report had something."""
    load = client.load_reporter(_view("c"))
    stream = await _answered(await _lrs_stream(fake), send_all=True, every=1)
    load.call_started(EAST)
    load.call_finished(EAST, ok=True)
    clock.advance(1)
    assert _issued(await stream.request()) == {("c", "east"): 1}
    clock.advance(1)
    assert not (await stream.request()).cluster_stats
    for _ in range(5):
        clock.advance(1)
        await idle()
    assert stream.pending_requests() == []
    load.call_started(EAST)
    load.call_finished(EAST, ok=False)
    clock.advance(1)
    assert _issued(await stream.request()) == {("c", "east"): 1}
    clock.advance(1)
    assert not (await stream.request()).cluster_stats
    stream.fail()
    await idle()
    again = await _answered(await _lrs_stream(fake), send_all=True, every=1)
    clock.advance(1)
    assert not (await again.request()).cluster_stats  # a new stream's first report is sent


async def test_only_the_clusters_the_server_lists_are_reported(
    client: XdsClient, fake: FakeTransport, clock: FakeClock
) -> None:
    """A server's cluster list limits the reports to those clusters; the others' counts wait
    until the server asks for them, and a new answer changes the list and interval."""
    a, b = client.load_reporter(_view("a")), client.load_reporter(_view("b"))
    stream = await _lrs_stream(fake)
    await stream.request()
    stream.respond(_answer(clusters=("a",), every=2))
    await idle()
    a.call_started(EAST)
    b.call_started(EAST)
    clock.advance(2)
    assert _issued(await stream.request()) == {("a", "east"): 1}
    stream.respond(_answer(clusters=("b",), every=3))
    await idle()
    clock.advance(3)
    assert _issued(await stream.request()) == {("b", "east"): 1}


async def test_a_failed_stream_loses_no_counts(
    client: XdsClient, fake: FakeTransport, clock: FakeClock
) -> None:
    """Calls counted since the last report, before the failure and while the stream is down,
    are in the first report of the next stream, which again starts with the node and waits
    for the server's answer."""
    load = client.load_reporter(_view("c"))
    stream = await _answered(await _lrs_stream(fake), send_all=True, every=1)
    load.call_started(EAST)
    clock.advance(1)
    assert _issued(await stream.request()) == {("c", "east"): 1}
    load.call_started(EAST)
    load.call_started(EAST)
    stream.fail()
    await idle()
    for _ in range(3):
        load.call_started(EAST)
    again = await _lrs_stream(fake)
    assert (await again.request()).node.id == "n"
    clock.advance(10)
    await idle()
    assert again.pending_requests() == []
    again.respond(_answer(send_all=True, every=1))
    await idle()
    clock.advance(1)
    assert _issued(await again.request()) == {("c", "east"): 5}


async def test_a_stream_refused_is_retried_with_backoff_keeping_the_counts(
    client: XdsClient, fake: FakeTransport, clock: FakeClock
) -> None:
    """A refused LRS stream is retried on the client's backoff schedule; the counts made
    meanwhile are reported once a stream is up."""
    fake.refuse("lrs down")
    load = client.load_reporter(_view("c"))
    load.call_started(EAST)
    await idle()
    assert fake.open_attempts == 1
    clock.advance(0.99)
    await idle()
    assert fake.open_attempts == 1
    fake.accept()
    clock.advance(0.01)
    stream = await _answered(await _lrs_stream(fake), send_all=True, every=1)
    clock.advance(1)
    assert _issued(await stream.request()) == {("c", "east"): 1}


async def test_a_cluster_without_lrs_server_has_no_load_reporter(client: XdsClient) -> None:
    """Only a Cluster with ``lrs_server: self`` reports load."""
    with pytest.raises(ValueError, match="lrs_server"):
        client.load_reporter(_view("c", lrs=False))


async def test_the_same_cluster_and_service_share_one_load_and_one_stream(
    client: XdsClient, fake: FakeTransport
) -> None:
    """Asking twice for a (cluster, service) returns the same load; one LRS stream per
    server carries every cluster."""
    assert client.load_reporter(_view("c")) is client.load_reporter(_view("c"))
    client.load_reporter(_view("d"))
    await _lrs_stream(fake)
    await idle()
    assert fake.open_attempts == 1
