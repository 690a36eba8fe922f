"""Watch one cluster from a control plane and print each change.

Runs against the embedded test control plane, which changes the cluster a few times; point
`XdsClient` at a real server (or a bootstrap file) to use it for real.

    python examples/watch_cluster.py
"""

from __future__ import annotations

import asyncio

from envoy.config.cluster.v3 import cluster_pb2

from xdsclient import DataError, ResourceChanged, XdsClient
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane


def make_cluster(timeout_s: int) -> cluster_pb2.Cluster:
    cluster = cluster_pb2.Cluster(name="backend", type=cluster_pb2.Cluster.EDS)
    cluster.connect_timeout.seconds = timeout_s
    return cluster


async def main(updates: int = 3) -> list[str]:
    lines = []
    async with ControlPlane() as control_plane:
        control_plane.set(make_cluster(1))
        async with XdsClient(control_plane.address, node_id="example") as client:
            async for event in client.watch(CLUSTER, "backend"):
                if isinstance(event, ResourceChanged):
                    timeout = event.value.connect_timeout.seconds
                    lines.append(f"{event.name} v{event.version}: connect_timeout={timeout}s")
                elif isinstance(event, DataError):
                    lines.append(f"{event.name}: {event.error}")
                print(lines[-1])
                if len(lines) == updates:
                    break
                control_plane.set(make_cluster(len(lines) + 1))  # the control plane changes it
    return lines


if __name__ == "__main__":
    asyncio.run(main())
