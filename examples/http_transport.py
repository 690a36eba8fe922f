"""Proxyless HTTP: ``httpx.AsyncClient`` over `xdsclient.httpx.XdsTransport`, routed by the
control plane.

Two HTTP backends, ``stable`` and ``canary``, serve ``reviews.svc``. The embedded control plane
sends 90% of the requests to ``stable`` and 10% to ``canary``, every request carrying the header
``x-canary: yes`` to ``canary``, and retries a 5xx answer twice; ``ratings.svc`` has no virtual
host, so the transport answers it 404 itself, as Envoy's router would.

    python examples/http_transport.py
"""

from __future__ import annotations

import asyncio
import collections
import random
from typing import Any

import httpx
from envoy.config.route.v3 import route_pb2

from xdsclient import XdsClient
from xdsclient.httpx import ERROR_HEADER, XdsTransport
from xdsclient.testing import ControlPlane, builders, http_backends


def routes() -> Any:
    """The header route first, then the 90/10 split; both retry a 5xx twice."""
    config = route_pb2.RouteConfiguration(name="edge-routes")
    vhost = config.virtual_hosts.add(name="reviews", domains=["reviews.svc"])
    vhost.retry_policy.retry_on = "5xx"
    vhost.retry_policy.num_retries.value = 2
    canary = vhost.routes.add()
    canary.match.prefix = "/"
    canary.match.headers.add(name="x-canary").string_match.exact = "yes"
    canary.route.cluster = "canary"
    split = vhost.routes.add()
    split.match.prefix = "/"
    for name, weight in (("stable", 90), ("canary", 10)):
        split.route.weighted_clusters.clusters.add(name=name).weight.value = weight
    return config


async def main(requests: int = 200) -> dict[str, Any]:
    """Send ``requests`` plain and ``requests // 10`` canary requests; who answered each."""
    async with ControlPlane() as cp, http_backends(names=("stable", "canary")) as backends:
        resources: list[Any] = [builders.api_listener("edge"), routes()]
        for backend in backends:
            resources.append(builders.cluster(backend.name))
            resources.append(builders.cluster_load_assignment(backend.name, [backend.address]))
        cp.set_all(resources)
        async with (
            XdsClient(cp.address, node_id="example") as client,
            XdsTransport("edge", client=client, rng=random.Random(7)) as transport,
            httpx.AsyncClient(transport=transport) as http,
        ):
            split: collections.Counter[str] = collections.Counter()
            for _ in range(requests):
                r = await http.get("http://reviews.svc/api/v1/products/7")
                split[r.headers["x-backend"]] += 1
            pinned: collections.Counter[str] = collections.Counter()
            for _ in range(requests // 10):
                r = await http.get("http://reviews.svc/", headers={"x-canary": "yes"})
                pinned[r.headers["x-backend"]] += 1
            missing = await http.get("http://ratings.svc/")
    return {
        "split": dict(split),
        "pinned": dict(pinned),
        "no virtual host": (missing.status_code, missing.headers[ERROR_HEADER]),
    }


if __name__ == "__main__":
    for name, value in asyncio.run(main()).items():
        print(f"{name}: {value}")
