"""One configuration from three transports: listeners and routes from files (GitOps), clusters
polled over REST-JSON, endpoints streamed over gRPC, as Envoy's per-type ``ConfigSource`` allows.

The embedded test control plane plays all three servers: it writes the files, serves REST and
gRPC. The same `watch_config` walk yields complete snapshots whatever each type's transport.

    python examples/mixed_sources.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from xdsclient import FileSource, RestSource, ServerConfig, XdsClient, XdsConfig
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION
from xdsclient.testing import ControlPlane, demo_resources

SERVICE = "demo.example.com"


async def main() -> list[str]:
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as directory:
        async with ControlPlane() as control_plane:
            control_plane.set_all(demo_resources(SERVICE))
            lds, rds = Path(directory, "lds.yaml"), Path(directory, "rds.json")
            control_plane.write_file(lds, LISTENER.type_url)  # what a GitOps sync would write
            control_plane.write_file(rds, ROUTE_CONFIGURATION.type_url)
            rest = await control_plane.serve_rest()
            sources: dict[Any, FileSource | RestSource | ServerConfig] = {
                LISTENER: FileSource(path=str(lds)),
                ROUTE_CONFIGURATION: FileSource(path=str(rds)),
                CLUSTER: RestSource(url=rest.url, refresh_delay=0.1),
                ENDPOINT: ServerConfig(uri=control_plane.address),
            }
            async with (
                XdsClient(node_id="example", sources=sources) as client,
                client.watch_config(SERVICE) as configs,
            ):
                async for config in configs:
                    if isinstance(config, XdsConfig):
                        for name, cluster in sorted(config.clusters.items()):
                            if cluster.endpoints is not None:
                                count = len(cluster.endpoints.localities)
                                lines.append(f"{name}: {count} localities")
                            else:
                                lines.append(f"{name}: aggregate of {', '.join(cluster.leaves)}")
                        break
    for line in lines:
        print(line)
    return lines


if __name__ == "__main__":
    asyncio.run(main())
