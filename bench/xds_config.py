"""A gRPC-valid xDS configuration of N routes to N EDS clusters, for the benchmarks.

One listener (API listener, RDS), one route configuration with N routes, N EDS clusters and
N ClusterLoadAssignments: what a gRPC xDS client (ours or grpcio's) needs to load fully.
"""

from __future__ import annotations

from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import config_source_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import api_listener_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

LISTENER = "bench-listener"
ROUTE = "bench-route"


def _ads_source() -> Any:
    source = config_source_pb2.ConfigSource(resource_api_version=config_source_pb2.V3)
    source.ads.SetInParent()
    return source


def listener() -> Any:
    hcm = hcm_pb2.HttpConnectionManager(stat_prefix="bench")
    hcm.rds.route_config_name = ROUTE
    hcm.rds.config_source.CopyFrom(_ads_source())
    router = hcm.http_filters.add(name="envoy.filters.http.router")
    router.typed_config.Pack(router_pb2.Router())
    message = listener_pb2.Listener(name=LISTENER)
    message.api_listener.CopyFrom(api_listener_pb2.ApiListener())
    message.api_listener.api_listener.Pack(hcm)
    return message


#: Endpoints per assignment (one locality each), as in the measurements that set the load
#: tester's targets.
ENDPOINTS_PER_ASSIGNMENT = 3


def cluster_name(i: int) -> str:
    return f"cluster-{i}"


def route_configuration(n: int) -> Any:
    vhost = route_components_pb2.VirtualHost(name="bench", domains=["*"])
    for i in range(n):
        route = vhost.routes.add()
        route.match.prefix = f"/svc{i}/"
        route.route.cluster = cluster_name(i)
    return route_pb2.RouteConfiguration(name=ROUTE, virtual_hosts=[vhost])


def cluster(i: int) -> Any:
    message = cluster_pb2.Cluster(name=cluster_name(i), type=cluster_pb2.Cluster.EDS)
    message.eds_cluster_config.eds_config.CopyFrom(_ads_source())
    message.eds_cluster_config.service_name = cluster_name(i)
    message.connect_timeout.seconds = 1
    return message


def endpoints(i: int, *, generation: int = 0) -> Any:
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=cluster_name(i))
    group = message.endpoints.add()
    group.locality.region = "local"
    group.load_balancing_weight.value = 1
    for k in range(ENDPOINTS_PER_ASSIGNMENT):
        lb = group.lb_endpoints.add()
        lb.endpoint.address.socket_address.address = f"10.{k}.{i // 250 % 250}.{i % 250 + 1}"
        lb.endpoint.address.socket_address.port_value = 10000 + (i + generation) % 50000
    return message


def generation_of(i: int, port: int) -> int:
    """The generation of assignment ``i`` whose endpoints listen on ``port``."""
    return (port - 10000 - i) % 50000
