"""`ConfigWatch.resolve_cluster` over grpc.aio against the test control plane: a
``cluster_header`` route's cluster resolved at request time joins the snapshot with its
endpoints (both variants), an unknown one is Missing through ``removed_resources`` and joins
when the server gains it, CSDS shows the on-demand cluster and its endpoints, and the metric
counts resolves by outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from envoy.admin.v3 import config_dump_shared_pb2

from tests.builders import cluster, endpoints, listener
from tests.ondemand.test_resolve_cluster import header_routes
from xdsclient import Available, Missing, XdsClient, XdsConfig
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import ControlPlane

ACKED = config_dump_shared_pb2.ClientResourceStatus.ACKED


@pytest.fixture
async def control_plane() -> AsyncIterator[ControlPlane]:
    async with ControlPlane() as cp:
        cp.set_all([listener("svc"), header_routes(), cluster("a"), endpoints("a")])
        cp.set_all([cluster("b"), endpoints("b", port=9090)])
        yield cp


async def first_snapshot(updates: Any) -> XdsConfig:
    update = await anext(updates)
    assert isinstance(update, XdsConfig)
    return update


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
async def test_a_header_routed_cluster_resolves_into_the_snapshot(
    control_plane: ControlPlane, delta: bool
) -> None:
    """The route names its cluster by header: the first snapshot walks only a; resolving the
    header's cluster b at request time puts b and its endpoints in the next one."""
    async with (
        XdsClient(control_plane.address, node_id="n", delta=delta) as client,
        client.watch_config("svc") as updates,
    ):
        first = await first_snapshot(updates)
        assert list(first.clusters) == ["a"]
        route = first.virtual_host.http_routes[1]
        assert route.action is not None
        assert route.action.cluster_header == "x-cluster"
        timeout = first.on_demand_timeout(route)
        assert timeout == 5.0
        outcome = await updates.resolve_cluster("b", timeout=timeout)
        assert isinstance(outcome, Available)
        snapshot = await first_snapshot(updates)
        assert sorted(snapshot.clusters) == ["a", "b"]
        assignment = snapshot.clusters["b"].endpoints
        assert assignment is not None
        assert [e.port for e in assignment.healthy_endpoints()] == [9090]
        assert client.stats().cluster_resolves["available"] == 1
        dumped = {(c.type_url, c.name): c for c in client.csds().generic_xds_configs}
        for key in ((CLUSTER.type_url, "b"), (ENDPOINT.type_url, "b")):
            assert dumped[key].client_status == ACKED  # CSDS shows it as any other


async def test_an_unknown_cluster_is_missing_and_joins_once_the_server_has_it(
    control_plane: ControlPlane,
) -> None:
    """Delta: the server names an unknown cluster in ``removed_resources`` (Missing); while
    a subscription holds it, the snapshot carries its error, and the cluster the server adds
    later arrives in a snapshot without asking again."""
    async with (
        XdsClient(control_plane.address, node_id="n", delta=True) as client,
        client.watch_config("svc") as updates,
    ):
        await first_snapshot(updates)
        with updates.subscribe_cluster("late") as subscription:
            outcome = await subscription.resolve(timeout=5.0)
            assert isinstance(outcome, Missing)
            [removal] = [
                r
                for r in control_plane.responses
                if r.type_url == CLUSTER.type_url and "late" in r.removed
            ]
            assert removal is not None
            errored = await first_snapshot(updates)
            assert not errored.clusters["late"].ok
            control_plane.set_all([cluster("late"), endpoints("late")])
            arrived = await first_snapshot(updates)
            assert arrived.clusters["late"].ok
            assert arrived.clusters["late"].endpoints is not None
            assert isinstance(await subscription.resolve(timeout=5.0), Available)


async def test_metrics_count_cluster_resolves_by_outcome(control_plane: ControlPlane) -> None:
    """``xdsclient.cluster_resolves`` counts each finished resolve_cluster by outcome."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from tests.shell.test_metrics import _points

    reader = InMemoryMetricReader()
    async with (
        XdsClient(control_plane.address, node_id="n", delta=True) as client,
        client.watch_config("svc") as updates,
    ):
        client.enable_metrics(MeterProvider(metric_readers=[reader]), target="xds:///svc")
        await first_snapshot(updates)
        assert isinstance(await updates.resolve_cluster("b"), Available)
        assert isinstance(await updates.resolve_cluster("ghost"), Missing)
        counts = {
            attributes["xdsclient.resolve.outcome"]: value
            for value, attributes in _points(reader)["xdsclient.cluster_resolves"]
        }
    assert counts == {"available": 1, "missing": 1}
