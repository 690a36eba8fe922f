"""Watch one cluster from a control plane and print each change.

Runs against the embedded test control plane, which changes the cluster's circuit breaker a few
times; point `XdsClient` at a real server (or a bootstrap file) to use it for real. The client
delivers a validated `ClusterView`; `event.value.proto` is the original protobuf.

    python examples/watch_cluster.py
"""

from __future__ import annotations

import asyncio

from envoy.config.cluster.v3 import cluster_pb2

from xdsclient import DataError, ResourceChanged, XdsClient
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane


def make_cluster(max_requests: int) -> cluster_pb2.Cluster:
    cluster = cluster_pb2.Cluster(name="backend", type=cluster_pb2.Cluster.EDS)
    cluster.eds_cluster_config.eds_config.ads.SetInParent()  # endpoints come over the same stream
    cluster.circuit_breakers.thresholds.add().max_requests.value = max_requests
    return cluster


async def main(updates: int = 3) -> list[str]:
    lines = []
    async with ControlPlane() as control_plane:
        control_plane.set(make_cluster(100))
        async with (
            XdsClient(control_plane.address, node_id="example") as client,
            client.watch(CLUSTER, "backend") as events,
        ):
            async for event in events:
                if isinstance(event, ResourceChanged):
                    view = event.value
                    source, limit = view.eds_service_name, view.max_requests
                    lines.append(
                        f"{view.name} v{event.version}: {view.type.value} cluster, "
                        f"endpoints from {source!r}, max_requests={limit}"
                    )
                elif isinstance(event, DataError):
                    lines.append(f"{event.name}: {event.error}")
                print(lines[-1])
                if len(lines) == updates:
                    break
                # The control plane changes it.
                control_plane.set(make_cluster(100 * (len(lines) + 1)))
    return lines


if __name__ == "__main__":
    asyncio.run(main())
