"""Embedding dynamic configuration in an asyncio service.

A service keeps the latest complete configuration of its listener in memory, updated in the
background by `XdsClient.watch_config`, and consults it on every request: which route matches,
which cluster serves it, which endpoints that cluster has. Requests never wait on the control
plane; they see one consistent snapshot at a time.

    python examples/embedded_service.py
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from envoy.config.route.v3 import route_pb2

from xdsclient import AmbientError, XdsClient, XdsConfig, XdsError
from xdsclient.resources import match_route
from xdsclient.testing import ControlPlane, demo_resources

LISTENER = "shop.example.com"


class Service:
    """Routes requests by the latest configuration."""

    def __init__(self, client: XdsClient, listener: str) -> None:
        self._client = client
        self._listener = listener
        self.config: XdsConfig | None = None
        self.snapshots = 0
        self.ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Service:
        self._task = asyncio.create_task(self._follow())
        await asyncio.wait_for(self.ready.wait(), 10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _follow(self) -> None:
        async with self._client.watch_config(self._listener) as watch:
            async for update in watch:
                if isinstance(update, AmbientError):
                    print(f"keeping the last good configuration: {update.error}")
                    continue
                if isinstance(update, XdsError):
                    print(f"keeping the last good configuration: {update}")
                    continue
                self.config = update
                self.snapshots += 1
                self.ready.set()

    def handle(self, path: str, headers: dict[str, str] | None = None) -> str:
        """Where a request for ``path`` goes: 'cluster (n endpoints)', or why nowhere."""
        config = self.config
        assert config is not None
        route = match_route(config.virtual_host, path, headers)
        if route is None or route.action is None:
            return "404 no route"
        clusters = route.action.clusters
        name = (
            clusters[0]
            if len(clusters) == 1
            else max(route.action.weighted_clusters, key=lambda w: w.weight).name
        )
        cluster = config.clusters[name]
        leaves = cluster.leaves or (name,)
        endpoints = sum(
            len(locality.endpoints)
            for leaf in leaves
            if (assignment := config.clusters[leaf].endpoints) is not None
            for locality in assignment.localities
        )
        return f"{name} ({endpoints} endpoints)"


def reroute(api_prefix: str) -> Any:
    """The control plane moves the API to another prefix."""
    resources = demo_resources(LISTENER)
    routes = next(r for r in resources if isinstance(r, route_pb2.RouteConfiguration))
    routes.virtual_hosts[0].routes[0].match.prefix = api_prefix
    return routes


async def main() -> list[str]:
    answers = []
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources(LISTENER))
        async with (
            XdsClient(control_plane.address, node_id="shop") as client,
            Service(client, LISTENER) as service,
        ):
            for path in ("/api/cart", "/index.html"):
                answers.append(f"{path} -> {service.handle(path)}")
            control_plane.set(reroute("/v2/api/"))
            await asyncio.wait_for(_until(lambda: service.snapshots >= 2), 10)
            for path in ("/api/cart", "/v2/api/cart"):
                answers.append(f"{path} -> {service.handle(path)}")
    for answer in answers:
        print(answer)
    return answers


async def _until(predicate: Any) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


if __name__ == "__main__":
    asyncio.run(main())
