"""``python -m xdsclient demo``: watch a listener's complete configuration and print each snapshot.

Why it exists: it is the project's main job in one command. With no arguments it starts the
embedded test control plane serving a small realistic configuration (a listener, routes to three
clusters, one of them an aggregate with two children, endpoints that change every few seconds)
and watches it, over gRPC or (``--source file|rest``) through files or REST-JSON polling; with
``--bootstrap`` it watches a real control plane instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import tempfile
from collections.abc import AsyncIterator
from typing import Any, TextIO

from ._client import XdsClient
from ._errors import XdsError
from ._protocol import AmbientError
from ._settings._sources import FileSource, RestSource
from ._watch._dependencies import XdsConfig
from .resources import CLUSTER, ENDPOINT, ROUTE_CONFIGURATION, ClusterType
from .resources import LISTENER as LISTENER_TYPE

__all__ = ["run", "summarize"]

LISTENER = "demo.example.com"
EDS_CLUSTERS = ("web", "api-primary", "api-secondary")
_TYPES = (LISTENER_TYPE, ROUTE_CONFIGURATION, CLUSTER, ENDPOINT)


def summarize(config: XdsConfig | XdsError | AmbientError) -> str:
    """A readable multi-line summary of one snapshot."""
    if isinstance(config, AmbientError):
        return f"warning, the last configuration stays in use: {config.error}"
    if isinstance(config, XdsError):
        return f"configuration unusable: {config}"
    routes, vhost = config.route_config.name, config.virtual_host.name
    lines = [f"listener {config.listener.name} -> routes {routes!r}, virtual host {vhost!r}"]
    for route in config.virtual_host.routes:
        if route.action is None:
            continue
        if route.action.weighted_clusters:
            target = ", ".join(f"{w.name} {w.weight}" for w in route.action.weighted_clusters)
        else:
            target = route.action.cluster
        lines.append(f"  route {route.match.path_match.value} {route.match.path!r} -> {target}")
    for name in sorted(config.clusters):
        cluster = config.clusters[name]
        if cluster.error is not None:
            lines.append(f"  cluster {name}: ERROR {cluster.error}")
        elif cluster.cluster is not None and cluster.cluster.type is ClusterType.AGGREGATE:
            lines.append(f"  cluster {name}: aggregate, in order {' > '.join(cluster.leaves)}")
        elif cluster.endpoints is not None:
            endpoints = [
                f"{e.address}:{e.port}"
                + ("" if e.healthy else f" ({e.health_status.name.lower()})")
                for locality in cluster.endpoints.localities
                for e in locality.endpoints
            ]
            lines.append(f"  cluster {name}: {len(endpoints)} endpoints {', '.join(endpoints)}")
        else:
            lines.append(f"  cluster {name}: no endpoints ({cluster.endpoints_error})")
    return "\n".join(lines)


@contextlib.asynccontextmanager
async def _embedded(source: str) -> AsyncIterator[XdsClient]:
    """The test control plane with the demo configuration, a task changing its endpoints, and
    a client reading it over ``source``: gRPC, files the control plane rewrites, or REST."""
    from .testing import ControlPlane, changing_endpoints, demo_resources

    async with contextlib.AsyncExitStack() as stack:
        control_plane = await stack.enter_async_context(ControlPlane())
        control_plane.set_all(demo_resources(LISTENER))
        tasks = [changing_endpoints(control_plane, EDS_CLUSTERS, random.Random(7))]
        if source == "grpc":
            client = XdsClient(control_plane.address, node_id="xdsclient-demo")
        elif source == "rest":
            url = (await control_plane.serve_rest()).url
            rest = RestSource(url=url, refresh_delay=0.2)
            client = XdsClient(node_id="xdsclient-demo", sources=dict.fromkeys(_TYPES, rest))
        else:
            directory = stack.enter_context(tempfile.TemporaryDirectory())
            files = {
                t: FileSource(path=f"{directory}/{t.type_url.rsplit('.', 1)[-1]}.yaml")
                for t in _TYPES
            }
            for rtype, file in files.items():
                control_plane.write_file(file.path, rtype.type_url)
            tasks.append(_write_files(control_plane, files))
            client = XdsClient(node_id="xdsclient-demo", sources=dict(files))
        running = [asyncio.create_task(t) for t in tasks]
        try:
            yield client
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)


async def _write_files(control_plane: Any, files: dict[Any, FileSource]) -> None:
    """Keep each type's file equal to the control plane's state, as a GitOps sync would."""
    while True:
        await asyncio.sleep(0.2)
        for rtype, file in files.items():
            control_plane.write_file(file.path, rtype.type_url)


async def run(
    *,
    updates: int | None = None,
    bootstrap: str | None = None,
    listener: str = LISTENER,
    source: str = "grpc",
    out: TextIO = sys.stdout,
) -> int:
    """Print snapshots until ``updates`` of them were printed (forever when None)."""
    async with contextlib.AsyncExitStack() as stack:
        if bootstrap is None:
            client = await stack.enter_async_context(_embedded(source))
            print(f"embedded control plane over {source}; watching {listener}", file=out)
        else:
            client = XdsClient(bootstrap=bootstrap)
            print(f"watching {listener} via {client.config.servers[0].uri}", file=out)
        await stack.enter_async_context(client)
        count = 0
        async with client.watch_config(listener) as watch:
            async for config in watch:
                count += 1
                print(f"--- snapshot {count}\n{summarize(config)}", file=out, flush=True)
                if updates is not None and count >= updates:
                    break
    return 0
