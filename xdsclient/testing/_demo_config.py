"""A small realistic configuration, the demo's and a handy test fixture.

A listener, routes to three clusters (one an aggregate of two), and endpoints that change every
few seconds.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from ._control_plane import ControlPlane

__all__ = ["assignment", "changing_endpoints", "demo_resources"]


def demo_resources(listener_name: str) -> list[Any]:
    """The demo configuration (``make demo``): an API listener ``listener_name`` whose routes,
    ``demo-routes`` over ADS, send ``/api/`` to the aggregate cluster ``api`` (children
    ``api-primary`` and ``api-secondary``) and ``web`` by weights 90 and 10, and everything
    else to ``web``; the three EDS clusters have two healthy endpoints each."""
    manager = hcm_pb2.HttpConnectionManager(stat_prefix="demo")
    manager.rds.route_config_name = "demo-routes"
    manager.rds.config_source.ads.SetInParent()
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    listener = listener_pb2.Listener(name=listener_name)
    listener.api_listener.api_listener.Pack(manager)

    routes = route_pb2.RouteConfiguration(name="demo-routes")
    vhost = routes.virtual_hosts.add(name="demo", domains=[listener_name, "*"])
    api = vhost.routes.add()
    api.match.prefix = "/api/"
    api.route.weighted_clusters.clusters.add(name="web").weight.value = 10
    api.route.weighted_clusters.clusters.add(name="api").weight.value = 90
    web = vhost.routes.add()
    web.match.prefix = "/"
    web.route.cluster = "web"

    aggregate = cluster_pb2.Cluster(name="api")
    aggregate.cluster_type.name = "envoy.clusters.aggregate"
    aggregate.cluster_type.typed_config.Pack(
        aggregate_pb2.ClusterConfig(clusters=["api-primary", "api-secondary"])
    )
    resources: list[Any] = [listener, routes, aggregate]
    for i, name in enumerate(("web", "api-primary", "api-secondary")):
        cluster = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.EDS)
        cluster.eds_cluster_config.eds_config.ads.SetInParent()
        resources.append(cluster)
        resources.append(assignment(name, [(f"10.0.{i}.{k}", 8080, True) for k in range(1, 3)]))
    return resources


def assignment(name: str, endpoints: Sequence[tuple[str, int, bool]]) -> Any:
    """A ClusterLoadAssignment for ``name``: one locality (``zone-a``, weight 1) holding an
    endpoint per (address, port, healthy), each HEALTHY or UNHEALTHY."""
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=name)
    group = message.endpoints.add()
    group.locality.zone = "zone-a"
    group.load_balancing_weight.value = 1
    for address, port, healthy in endpoints:
        lb = group.lb_endpoints.add(health_status=1 if healthy else 2)
        lb.endpoint.address.socket_address.address = address
        lb.endpoint.address.socket_address.port_value = port
    return message


async def changing_endpoints(
    control_plane: ControlPlane, clusters: Sequence[str], rng: random.Random, period: float = 2.0
) -> None:
    """Every ``period`` seconds, give one cluster a new set of endpoints (some unhealthy)."""
    while True:
        await asyncio.sleep(period)
        name = rng.choice(list(clusters))
        index = clusters.index(name)
        count = rng.randint(1, 4)
        endpoints = [(f"10.0.{index}.{k}", 8080, rng.random() > 0.2) for k in range(1, count + 1)]
        control_plane.set(assignment(name, endpoints))
