"""Export the client's gRFC A78 metrics through OpenTelemetry, and read Envoy-style stats.

Runs against the embedded test control plane with an in-memory reader; in a service, pass the
`MeterProvider` your OpenTelemetry setup exports from (Prometheus, OTLP, ...), or nothing to
use the global one. Needs the ``metrics`` extra: ``pip install 'xdsclient[metrics]'`` (and
``opentelemetry-sdk`` for a provider).

    python examples/metrics.py
"""

from __future__ import annotations

import asyncio

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

from xdsclient import RequestSent, XdsClient
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane
from xdsclient.testing.builders import cluster


async def main() -> list[str]:
    reader = InMemoryMetricReader()
    async with ControlPlane() as control_plane:
        control_plane.set(cluster("backend"))
        async with (
            XdsClient(control_plane.address, node_id="example") as client,
            client.watch(CLUSTER, "backend"),  # keeps it subscribed (and so in the cache)
        ):
            client.enable_metrics(MeterProvider(metric_readers=[reader]), target="xds:///shop")
            acked = asyncio.Event()  # an observer sees every request the client writes
            client.add_observer(
                lambda e: acked.set() if isinstance(e, RequestSent) and e.nonce else None
            )
            await client.wait_for(CLUSTER, "backend", timeout=10)
            await asyncio.wait_for(acked.wait(), timeout=10)
            stats = client.stats().type_stats(CLUSTER.type_url)
            lines = [
                f"cds.update_success={stats.update_success} version={stats.version}",
                *_metric_lines(reader),
            ]
    for line in lines:
        print(line)
    return lines


def _metric_lines(reader: InMemoryMetricReader) -> list[str]:
    """One line per data point: name{a few labels} value."""
    data = reader.get_metrics_data()
    assert data is not None
    lines = []
    for metric in (m for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics):
        for point in metric.data.data_points:
            if isinstance(point, NumberDataPoint):
                labels = {
                    k: v
                    for k, v in (point.attributes or {}).items()
                    if k not in ("grpc.target", "grpc.xds.server")  # the server's port varies
                }
                text = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
                lines.append(f"{metric.name}{{{text}}} {point.value}")
    return sorted(lines)


if __name__ == "__main__":
    asyncio.run(main())
