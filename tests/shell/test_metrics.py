"""gRFC A78 metrics through OpenTelemetry's SDK with its in-memory reader, after scripted
exchanges on the in-memory transport with a fake clock."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

from tests.builders import endpoints, invalid_endpoints
from tests.helpers import idle
from xdsclient import CallbackWatcher, MissingExtraError, TransportError, XdsClient
from xdsclient.resources import ENDPOINT
from xdsclient.testing import FakeClock, FakeTransport

RESOURCE_TYPE = "envoy.config.endpoint.v3.ClusterLoadAssignment"


def _points(reader: InMemoryMetricReader) -> dict[str, list[tuple[Any, dict[str, Any]]]]:
    """Metric name -> [(value, attributes)] of the last collection."""
    data = reader.get_metrics_data()
    found: dict[str, list[tuple[Any, dict[str, Any]]]] = {}
    if data is None:  # nothing reported
        return found
    for resource_metrics in data.resource_metrics:
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                found[metric.name] = [
                    (point.value, dict(point.attributes or {}))
                    for point in metric.data.data_points
                    if isinstance(point, NumberDataPoint)
                ]
    return found


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


async def test_a78_metrics_follow_a_connect_a_nack_and_a_failure(
    fake: FakeTransport, clock: FakeClock, client: XdsClient, reader: InMemoryMetricReader
) -> None:
    client.enable_metrics(MeterProvider(metric_readers=[reader]), target="xds:///svc")
    for name in ("a", "b", "c"):
        client.add_watcher(ENDPOINT, name, CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a"), invalid_endpoints("b")])
    await idle()
    stream.send([endpoints("a"), endpoints("b")], version="2")
    await idle()
    server = {"grpc.target": "xds:///svc", "grpc.xds.server": "fake:1"}
    typed = {**server, "grpc.xds.resource_type": RESOURCE_TYPE}
    points = _points(reader)
    assert points["grpc.xds_client.connected"] == [(1, server)]
    assert points["grpc.xds_client.resource_updates_valid"] == [(3, typed)]
    assert points["grpc.xds_client.resource_updates_invalid"] == [(1, typed)]
    assert points.get("grpc.xds_client.server_failure", []) == []
    states = {
        attributes["grpc.xds.cache_state"]: value
        for value, attributes in points["grpc.xds_client.resources"]
    }
    assert states == {"acked": 2, "requested": 1}
    assert {a["grpc.xds.authority"] for _, a in points["grpc.xds_client.resources"]} == {"#old"}
    stream.fail()  # after responses: still connected (gRFC A57)
    second = await fake.stream()
    await second.request()
    second.fail(TransportError("reset"))  # no response on this one: a failure
    await idle()
    points = _points(reader)
    assert points["grpc.xds_client.connected"] == [(0, server)]
    assert points["grpc.xds_client.server_failure"] == [(1, server)]


async def test_metrics_enabled_late_start_from_the_current_connectivity_and_can_stop(
    fake: FakeTransport, client: XdsClient, reader: InMemoryMetricReader
) -> None:
    client.add_watcher(ENDPOINT, "a", CallbackWatcher(lambda event: None))
    stream = await fake.stream()
    await stream.request()
    stream.send([endpoints("a")])
    await idle()
    stop = client.enable_metrics(MeterProvider(metric_readers=[reader]))
    points = _points(reader)
    assert [value for value, _ in points["grpc.xds_client.connected"]] == [1]
    assert points["grpc.xds_client.connected"][0][1]["grpc.target"] == "#xdsclient"
    stop()
    assert _points(reader) == {}


async def test_metrics_without_opentelemetry_name_the_extra(
    client: XdsClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(MissingExtraError, match=r"xdsclient\[metrics\]"):
        client.enable_metrics()
