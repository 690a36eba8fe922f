"""Load reporting against grpcio's C-core: the same traffic, the same LRS server, the same reports.

grpcio's xDS client (a child process, `tests/lb/differential_pickers.py`) is served two Clusters
with ``lrs_server: self`` (one served by real backends, one whose every call is dropped by a
``drop_overloads`` category); C-core opens an LRS stream to the control plane and reports the
calls it makes. Our `XdsClient.load_reporter` is told of the same calls (on a fake clock) and
reports to the same `ControlPlane.load_reporting`; reports are told apart by their stream's node.

What C-core does differently, by a choice each side documents (docs/load-balancing.md):
it reports every locality it has a child policy for, counts all zero, where we leave such a
locality out; the report after a counted one is all zeros from C-core and a request without
``cluster_stats`` from us. Neither sends a final report when it closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.helpers import eventually
from tests.lb.differential_pickers import METHOD, backends, grpc_load_session
from tests.shell.conftest import OPTIONS
from xdsclient import Locality, XdsClient
from xdsclient._protocol._lrs import NO_OVERPROVISIONING, SEND_ALL_CLUSTERS
from xdsclient.resources import CLUSTER, ClusterView
from xdsclient.testing import ControlPlane, FakeClock, builders

LISTENER = "lrs-diff"
SERVED = "served"
DROPPING = "dropping"
EAST = Locality(region="r", zone="east", sub_zone="s")
#: Backends do not serve it: each call ends UNIMPLEMENTED, an errored call for LRS.
MISSING = "/lbtest.Who/Missing"
#: Routed to the dropping cluster, whose every call is dropped by category ``throttle``.
DROPPED = "/lbtest.Drop/Me"


def _resources(ports: list[int]) -> list[Any]:
    served = builders.cluster(SERVED, eds_service_name=f"{SERVED}-svc")
    dropping = builders.cluster(DROPPING, eds_service_name=f"{DROPPING}-svc")
    assignments = []
    for message in (served, dropping):
        message.lrs_server.self.SetInParent()
        name = message.eds_cluster_config.service_name
        spec = builders.LocalitySpec(
            endpoints=[("127.0.0.1", port) for port in ports], region="r", zone="east",
            sub_zone="s",
        )  # fmt: skip
        assignments.append(builders.cluster_load_assignment(name, [spec]))
    drop = assignments[1].policy.drop_overloads.add(category="throttle")
    drop.drop_percentage.numerator = 100
    return [
        builders.api_listener(LISTENER),
        builders.route_configuration(
            f"{LISTENER}-routes", {"/lbtest.Drop/": DROPPING, "/": SERVED}
        ),
        served,
        dropping,
        *assignments,
    ]


Totals = dict[tuple[str, str, str, str, str], tuple[int, int, int, int]]


def _streams_of(plane: ControlPlane, node_id: str) -> set[int]:
    return {
        r.stream for r in plane.load_reporting.requests if r.first and r.message.node.id == node_id
    }


def _reports_of(plane: ControlPlane, node_id: str) -> list[Any]:
    streams = _streams_of(plane, node_id)
    return [r.message for r in plane.load_reports if r.stream in streams]


def _totals(reports: list[Any]) -> Totals:
    """(cluster, service, region, zone, sub_zone) -> (issued, succeeded, errored, in progress)
    summed over ``reports``."""
    totals: dict[tuple[str, str, str, str, str], list[int]] = {}
    for report in reports:
        for stats in report.cluster_stats:
            for up in stats.upstream_locality_stats:
                where = up.locality
                key = (stats.cluster_name, stats.cluster_service_name, where.region, where.zone,
                       where.sub_zone)  # fmt: skip
                sums = totals.setdefault(key, [0, 0, 0, 0])
                sums[0] += up.total_issued_requests
                sums[1] += up.total_successful_requests
                sums[2] += up.total_error_requests
                sums[3] += up.total_requests_in_progress
    return {key: (a, b, c, d) for key, (a, b, c, d) in totals.items()}


def _drops(reports: list[Any]) -> dict[tuple[str, str], tuple[int, dict[str, int]]]:
    """(cluster, service) -> (total dropped, dropped by category) summed over ``reports``."""
    drops: dict[tuple[str, str], tuple[int, dict[str, int]]] = {}
    for report in reports:
        for stats in report.cluster_stats:
            key = (stats.cluster_name, stats.cluster_service_name)
            total, categories = drops.get(key, (0, {}))
            for dropped in stats.dropped_requests:
                categories[dropped.category] = (
                    categories.get(dropped.category, 0) + dropped.dropped_count
                )
            drops[key] = (total + stats.total_dropped_requests, categories)
    return {key: value for key, value in drops.items() if value[0] or value[1]}


def _counted(totals: Totals) -> Totals:
    return {key: value for key, value in totals.items() if any(value)}


EXPECTED: Totals = {(SERVED, f"{SERVED}-svc", "r", "east", "s"): (15, 12, 3, 0)}
EXPECTED_DROPS = {(DROPPING, f"{DROPPING}-svc"): (2, {"throttle": 2})}


@pytest.fixture
async def plane() -> AsyncIterator[ControlPlane]:
    async with backends(2) as ports, ControlPlane() as plane:
        plane.set_all(_resources(ports))
        plane.load_reporting.configure(send_all_clusters=True, interval=1)
        yield plane


async def _ours(plane: ControlPlane, clock: FakeClock) -> XdsClient:
    """Our client told of the calls C-core made, reporting until its report arrived."""
    client = XdsClient(plane.address, node_id="our-node", clock=clock, options=OPTIONS)
    await client.start()
    served: ClusterView = await client.wait_for(CLUSTER, SERVED, timeout=5)
    dropping: ClusterView = await client.wait_for(CLUSTER, DROPPING, timeout=5)
    load, drops = client.load_reporter(served), client.load_reporter(dropping)
    for ok in [True] * 12 + [False] * 3:
        load.call_started(EAST)
        load.call_finished(EAST, ok)
    drops.call_dropped("throttle")
    drops.call_dropped("throttle")
    await asyncio.wait_for(plane.load_reporting.wait_for_stream(2), 5)

    def reported() -> bool:
        if _counted(_totals(_reports_of(plane, "our-node"))) == EXPECTED:
            return True
        clock.advance(1)  # the next interval is due: the client sends its report
        return False

    await eventually(reported, 5, what=f"our reports to count {EXPECTED}")
    return client


async def test_our_reports_carry_the_fields_and_counts_grpc_reports(
    plane: ControlPlane,
) -> None:
    """12 answered, 3 unimplemented and 2 dropped calls: C-core and we report the same node
    feature, clusters, services, locality, issued / succeeded / errored / in progress, drops
    by category and total, at the server's interval, with the node advertising send-all-clusters
    and no overprovisioning; C-core also lists the dropping cluster's
    locality with every count zero, which we leave out."""
    async with grpc_load_session(plane, LISTENER, "grpc-node") as session:
        codes = await session.calls([(METHOD, 12), (MISSING, 3), (DROPPED, 2)])
        assert codes == ["OK"] * 12 + ["UNIMPLEMENTED"] * 3 + ["UNAVAILABLE"] * 2
        await eventually(
            lambda: (
                _counted(_totals(_reports_of(plane, "grpc-node"))) == EXPECTED
                and _drops(_reports_of(plane, "grpc-node")) == EXPECTED_DROPS
            ),
            10,
        )
    client = await _ours(plane, FakeClock())
    try:
        theirs, ours = _reports_of(plane, "grpc-node"), _reports_of(plane, "our-node")
        assert _drops(ours) == _drops(theirs) == EXPECTED_DROPS
        assert _counted(_totals(ours)) == _counted(_totals(theirs)) == EXPECTED
        # C-core: the dropping cluster's locality, all zero; we leave such a locality out
        zero = (DROPPING, f"{DROPPING}-svc", "r", "east", "s")
        assert _totals(theirs)[zero] == (0, 0, 0, 0)
        assert zero not in _totals(ours)
        for node in ("grpc-node", "our-node"):
            first = [
                r.message
                for r in plane.load_reporting.requests
                if r.first and r.message.node.id == node
            ]
            assert len(first) == 1
            assert not first[0].cluster_stats
            assert SEND_ALL_CLUSTERS in first[0].node.client_features
            assert NO_OVERPROVISIONING in first[0].node.client_features
            discovery = [r.message.node for r in plane.requests if r.message.node.id == node]
            assert discovery
            assert all(NO_OVERPROVISIONING in n.client_features for n in discovery)
            intervals = [
                s.load_report_interval.ToTimedelta().total_seconds()
                for r in _reports_of(plane, node)
                for s in r.cluster_stats
            ]
            assert intervals
            assert min(intervals) >= 0.99, (node, intervals)
    finally:
        await client.close()


async def test_after_a_counted_report_grpc_sends_zeros_and_we_send_no_cluster_stats(
    plane: ControlPlane,
) -> None:
    """The report after the counted one: C-core's lists both clusters' locality with every
    count zero and no drop; ours is a request without ``cluster_stats``."""
    async with grpc_load_session(plane, LISTENER, "grpc-node") as session:
        await session.calls([(METHOD, 12), (MISSING, 3), (DROPPED, 2)])
        await eventually(lambda: _counted(_totals(_reports_of(plane, "grpc-node"))) == EXPECTED, 10)
        counted = len(_reports_of(plane, "grpc-node"))
        await eventually(lambda: len(_reports_of(plane, "grpc-node")) > counted, 10)
        after = _reports_of(plane, "grpc-node")[counted]
    assert _drops([after]) == {}
    assert set(_totals([after]).values()) == {(0, 0, 0, 0)}
    assert {(s.cluster_name, s.cluster_service_name) for s in after.cluster_stats} == {
        (SERVED, f"{SERVED}-svc"),
        (DROPPING, f"{DROPPING}-svc"),
    }
    clock = FakeClock()
    client = await _ours(plane, clock)
    try:
        counted = len(_reports_of(plane, "our-node"))
        clock.advance(1)
        await eventually(lambda: len(_reports_of(plane, "our-node")) > counted, 5)
        assert not _reports_of(plane, "our-node")[counted].cluster_stats
    finally:
        await client.close()


async def test_neither_grpc_nor_we_send_a_final_report_at_close(plane: ControlPlane) -> None:
    """Calls made after the last report and before the client closes are never reported, by
    C-core (its channel closed, its process ended) nor by us (`XdsClient.close`)."""
    async with grpc_load_session(plane, LISTENER, "grpc-node") as session:
        await session.calls([(METHOD, 1)])
        await eventually(lambda: _counted(_totals(_reports_of(plane, "grpc-node"))) != {}, 10)
        plane.load_reporting.configure(interval=60)
        await session.calls([(METHOD, 4)])
    await eventually(lambda: plane.load_reporting.stream_count == 0, 10)
    assert set(_counted(_totals(_reports_of(plane, "grpc-node"))).values()) == {(1, 1, 0, 0)}
    plane.load_reporting.configure(interval=1)
    client = await _ours(plane, FakeClock())
    served: ClusterView = await client.wait_for(CLUSTER, SERVED, timeout=5)
    load = client.load_reporter(served)
    for _ in range(4):
        load.call_started(EAST)
        load.call_finished(EAST, ok=True)
    await client.close()
    await eventually(lambda: plane.load_reporting.stream_count == 0, 5)
    assert _counted(_totals(_reports_of(plane, "our-node"))) == EXPECTED
