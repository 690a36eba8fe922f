"""Load reporting end to end over real grpc.aio: a Cluster with ``lrs_server: self`` from the
test control plane, calls reported to its load, reports read from the control plane's LRS
server. The client runs on a fake clock, so intervals pass when the test says."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.helpers import eventually
from tests.shell.conftest import OPTIONS
from xdsclient import Locality, XdsClient
from xdsclient._protocol._lrs import NO_OVERPROVISIONING, SEND_ALL_CLUSTERS
from xdsclient.resources import CLUSTER, ClusterView
from xdsclient.testing import ControlPlane, FakeClock, ReceivedLoadReport
from xdsclient.testing.builders import cluster

EAST = Locality(region="r", zone="east")
WEST = Locality(region="r", zone="west")


@pytest.fixture
def cp_resources() -> list[Any]:
    """What ``control_plane`` serves: cluster ``c``, which reports load to its own server."""
    message = cluster("c", eds_service_name="svc")
    message.lrs_server.self.SetInParent()
    return [message]


async def _reporting(cp: ControlPlane, clock: FakeClock) -> tuple[XdsClient, ClusterView]:
    client = XdsClient(cp.address, node_id="lrs-node", clock=clock, options=OPTIONS)
    await client.start()
    view: ClusterView = await client.wait_for(CLUSTER, "c", timeout=5)
    return client, view


def _totals(reports: list[ReceivedLoadReport]) -> dict[tuple[str, str, str], list[int]]:
    """(cluster, service, zone) -> [issued, succeeded, errored] summed over ``reports``."""
    totals: dict[tuple[str, str, str], list[int]] = {}
    for report in reports:
        for stats in report.message.cluster_stats:
            for loc in stats.upstream_locality_stats:
                key = (stats.cluster_name, stats.cluster_service_name, loc.locality.zone)
                sums = totals.setdefault(key, [0, 0, 0])
                sums[0] += loc.total_issued_requests
                sums[1] += loc.total_successful_requests
                sums[2] += loc.total_error_requests
    return totals


async def _report_arrives(cp: ControlPlane, clock: FakeClock, count: int, every: float) -> None:
    """Advance the clock an interval at a time until ``count`` reports arrived."""
    server = cp.load_reporting

    def arrived() -> bool:
        if len(server.reports) >= count:
            return True
        clock.advance(every)  # the next interval is due: the client sends its report
        return False

    await eventually(arrived, 5, what=f"{count} load reports")


async def test_reports_over_grpc_sum_to_the_calls_and_survive_a_stream_restart(
    control_plane: ControlPlane,
) -> None:
    """The control plane's LRS server reads the node with the send-all feature, then reports
    whose counts sum to the calls made; after it ends the stream, the client reconnects on the
    same connection and the calls made meanwhile are reported too."""
    cp, clock = control_plane, FakeClock()
    cp.load_reporting.configure(send_all_clusters=True, interval=2)
    client, view = await _reporting(cp, clock)
    try:
        load = client.load_reporter(view)
        await asyncio.wait_for(cp.load_reporting.wait_for_stream(1), 5)
        first = cp.load_reporting.requests[0].message
        assert first.node.id == "lrs-node"
        assert SEND_ALL_CLUSTERS in first.node.client_features
        for locality, ok in ((EAST, True), (EAST, False), (WEST, True)):
            load.call_started(locality)
            load.call_finished(locality, ok)
        await _report_arrives(cp, clock, 1, 2)
        cp.load_reporting.end_streams()
        await asyncio.wait_for(cp.load_reporting.wait_for_stream(2), 5)
        load.call_started(WEST)
        load.call_finished(WEST, ok=True)
        await _report_arrives(cp, clock, 2, 2)
        await _report_arrives(cp, clock, len(cp.load_reports) + 1, 2)
        assert _totals(cp.load_reports) == {
            ("c", "svc", "east"): [2, 1, 1],
            ("c", "svc", "west"): [2, 2, 0],
        }
        intervals = {
            s.load_report_interval.ToTimedelta().total_seconds()
            for r in cp.load_reports
            for s in r.message.cluster_stats
        }
        assert min(intervals) >= 2.0  # the server's interval, on the fake clock
    finally:
        await client.close()


async def test_a_server_cluster_list_over_grpc_limits_the_reports(
    control_plane: ControlPlane,
) -> None:
    """A control plane that lists clusters gets reports of those only."""
    cp, clock = control_plane, FakeClock()
    cp.load_reporting.configure(clusters=["other"], interval=1)
    client, view = await _reporting(cp, clock)
    try:
        load = client.load_reporter(view)
        await asyncio.wait_for(cp.load_reporting.wait_for_stream(1), 5)
        load.call_started(EAST)
        await _report_arrives(cp, clock, 1, 1)
        assert _totals(cp.load_reports) == {}
        cp.load_reporting.configure(clusters=["c"])
        count = len(cp.load_reports)
        await _report_arrives(cp, clock, count + 2, 1)
        assert _totals(cp.load_reports) == {("c", "svc", "east"): [1, 0, 0]}
    finally:
        await client.close()


async def test_both_nodes_on_the_wire_advertise_no_overprovisioning_as_c_core_does(
    control_plane: ControlPlane,
) -> None:
    """C-core puts ``envoy.lb.does_not_support_overprovisioning`` in the node of every stream:
    the discovery stream's first request carries it, and the LRS stream's first request
    carries it before the send-all-clusters feature, as C-core orders them."""
    cp, clock = control_plane, FakeClock()
    client, view = await _reporting(cp, clock)
    try:
        client.load_reporter(view)
        await asyncio.wait_for(cp.load_reporting.wait_for_stream(1), 5)
        discovery = cp.requests[0].message.node
        assert NO_OVERPROVISIONING in discovery.client_features
        features = list(cp.load_reporting.requests[0].message.node.client_features)
        assert features.index(NO_OVERPROVISIONING) < features.index(SEND_ALL_CLUSTERS)
        assert len(features) == len(set(features))
    finally:
        await client.close()
