"""``python -m xdsclient demo``: watch a listener's complete configuration and print each snapshot.

Why it exists: it is the project's main job in one command. With no arguments it starts the
embedded test control plane serving a small realistic configuration (a listener, routes to three
clusters, one of them an aggregate with two children, endpoints that change every few seconds)
and watches it; with ``--bootstrap`` it watches a real control plane instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
from collections.abc import AsyncIterator, Sequence
from typing import TextIO

from ._client import XdsClient
from ._dependencies import XdsConfig
from ._errors import XdsError
from ._protocol import AmbientError
from .resources import ClusterType

__all__ = ["main", "run", "summarize"]

LISTENER = "demo.example.com"
_EDS_CLUSTERS = ("web", "api-primary", "api-secondary")


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
async def _embedded() -> AsyncIterator[str]:
    """The test control plane with the demo configuration, and a task changing its endpoints."""
    from .testing import ControlPlane, changing_endpoints, demo_resources

    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources(LISTENER))
        task = asyncio.create_task(
            changing_endpoints(control_plane, _EDS_CLUSTERS, random.Random(7))
        )
        try:
            yield control_plane.address
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def run(
    *,
    updates: int | None = None,
    bootstrap: str | None = None,
    listener: str = LISTENER,
    out: TextIO = sys.stdout,
) -> int:
    """Print snapshots until ``updates`` of them were printed (forever when None)."""
    async with contextlib.AsyncExitStack() as stack:
        if bootstrap is None:
            address = await stack.enter_async_context(_embedded())
            client = XdsClient(address, node_id="xdsclient-demo")
            print(f"embedded control plane on {address}; watching {listener}", file=out)
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xdsclient", description="xdsclient tools")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="watch a listener's configuration and print each snapshot"
    )
    demo.add_argument("--updates", type=int, default=None, help="stop after this many snapshots")
    demo.add_argument("--bootstrap", help="a gRPC xDS bootstrap file: watch a real control plane")
    demo.add_argument(
        "--listener", default=LISTENER, help=f"the listener to watch (default {LISTENER})"
    )
    args = parser.parse_args(argv)
    try:
        return asyncio.run(
            run(updates=args.updates, bootstrap=args.bootstrap, listener=args.listener)
        )
    except KeyboardInterrupt:
        return 130
