"""Builders for valid xDS resources: real protobuf messages from a few arguments.

Each builder returns a message that ``xdsclient.resources`` (and so a gRPC client) accepts, so a
control-plane test reads as its intent instead of sixty lines of protobuf plumbing. The messages
are ordinary ``envoy.*`` protobufs: change any field before serving them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import attrs
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

__all__ = [
    "EndpointSpec",
    "LocalitySpec",
    "Target",
    "aggregate_cluster",
    "api_listener",
    "cluster",
    "cluster_load_assignment",
    "logical_dns_cluster",
    "route_configuration",
]

_HEALTH = {"unknown": 0, "healthy": 1, "unhealthy": 2, "draining": 3, "timeout": 4, "degraded": 5}
_LB_POLICIES = {
    "round_robin": cluster_pb2.Cluster.ROUND_ROBIN,
    "ring_hash": cluster_pb2.Cluster.RING_HASH,
    "least_request": cluster_pb2.Cluster.LEAST_REQUEST,
}

Target = str | Mapping[str, int]
"""A route's target: one cluster name, or cluster names with their weights."""


def api_listener(
    name: str,
    *,
    route_config_name: str | None = None,
    routes: Any | None = None,
) -> Any:
    """An API listener (gRPC's client-side listener) with the router filter.

    Give ``route_config_name`` to take routes from RDS over ADS (the default, named
    ``name + "-routes"``), or ``routes`` (a RouteConfiguration message) to inline them.
    """
    if routes is not None and route_config_name is not None:
        raise ValueError("give route_config_name (RDS) or routes (inline), not both")
    manager = hcm_pb2.HttpConnectionManager(stat_prefix=name)
    if routes is not None:
        manager.route_config.CopyFrom(routes)
    else:
        manager.rds.route_config_name = route_config_name or f"{name}-routes"
        manager.rds.config_source.ads.SetInParent()
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    message = listener_pb2.Listener(name=name)
    message.api_listener.api_listener.Pack(manager)
    return message


def route_configuration(
    name: str,
    routes: str | Mapping[str, Any],
    *,
    domains: Sequence[str] = ("*",),
) -> Any:
    """Routes in one virtual host: path prefix -> target, or one target for every path.

    A target is a cluster name or ``{cluster: weight}`` for weighted clusters.
    """
    table = _route_table(routes)
    message = route_pb2.RouteConfiguration(name=name)
    vhost = message.virtual_hosts.add(name=f"{name}-vhost", domains=list(domains))
    for prefix, target in table.items():
        route = vhost.routes.add()
        route.match.prefix = prefix
        if isinstance(target, str):
            route.route.cluster = target
        else:
            for cluster_name, weight in target.items():
                route.route.weighted_clusters.clusters.add(name=cluster_name).weight.value = weight
    return message


def _route_table(routes: str | Mapping[str, Any]) -> Mapping[str, Target]:
    """One target (a name or weights) serves every path; otherwise a prefix -> target table."""
    if isinstance(routes, str):
        return {"/": routes}
    if routes and all(isinstance(value, int) for value in routes.values()):
        return {"/": cast("Mapping[str, int]", routes)}
    return cast("Mapping[str, Target]", routes)


def cluster(
    name: str,
    *,
    eds_service_name: str = "",
    lb_policy: str = "round_robin",
    connect_timeout: float = 5.0,
) -> Any:
    """An EDS cluster fetching its endpoints over ADS.

    ``lb_policy`` is ``"round_robin"``, ``"ring_hash"`` or ``"least_request"`` (grpc-go and
    grpc-java take least request; grpcio's C-core NACKs it: docs/validation.md).
    """
    if lb_policy not in _LB_POLICIES:
        raise ValueError(f"lb_policy must be one of {sorted(_LB_POLICIES)}, not {lb_policy!r}")
    message = cluster_pb2.Cluster(
        name=name, type=cluster_pb2.Cluster.EDS, lb_policy=_LB_POLICIES[lb_policy]
    )
    message.eds_cluster_config.eds_config.ads.SetInParent()
    if eds_service_name:
        message.eds_cluster_config.service_name = eds_service_name
    message.connect_timeout.seconds = int(connect_timeout)
    message.connect_timeout.nanos = round((connect_timeout % 1) * 1e9)
    return message


def aggregate_cluster(name: str, children: Sequence[str]) -> Any:
    """An aggregate cluster: its children in priority order."""
    if not children:
        raise ValueError("an aggregate cluster needs at least one child")
    message = cluster_pb2.Cluster(name=name)
    message.cluster_type.name = "envoy.clusters.aggregate"
    message.cluster_type.typed_config.Pack(aggregate_pb2.ClusterConfig(clusters=list(children)))
    return message


def logical_dns_cluster(name: str, host: str, port: int) -> Any:
    """A LOGICAL_DNS cluster resolving one ``host:port``."""
    message = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.LOGICAL_DNS)
    endpoint = message.load_assignment.endpoints.add().lb_endpoints.add().endpoint
    endpoint.address.socket_address.address = host
    endpoint.address.socket_address.port_value = port
    return message


@attrs.frozen
class EndpointSpec:
    """One endpoint: ``address:port``, its health (an EDS health name) and weight."""

    address: str
    port: int
    #: unknown, healthy, unhealthy, draining, timeout or degraded
    health: str = "healthy"
    #: the endpoint's ``load_balancing_weight``
    weight: int = 1


@attrs.frozen
class LocalitySpec:
    """One locality's endpoints with its priority and load-balancing weight."""

    endpoints: Sequence[EndpointSpec | tuple[str, int]]
    zone: str = "zone-a"
    region: str = ""
    sub_zone: str = ""
    #: the locality's priority, 0 first
    priority: int = 0
    #: ``load_balancing_weight``: a gRPC client shares its priority's traffic between localities
    #: in proportion; 0 is sent as 0, and a gRPC client (and our view) skips the locality
    weight: int = 1


def cluster_load_assignment(
    cluster_name: str,
    endpoints: Sequence[EndpointSpec | tuple[str, int]] | Sequence[LocalitySpec],
) -> Any:
    """Endpoints for ``cluster_name``: either ``(address, port)`` pairs / `EndpointSpec`s in one
    locality, or `LocalitySpec`s (zones, priorities, weights, health)."""
    localities: list[LocalitySpec] = (
        [item for item in endpoints if isinstance(item, LocalitySpec)]
        if endpoints and isinstance(endpoints[0], LocalitySpec)
        else [LocalitySpec(endpoints=endpoints)]  # type: ignore[arg-type]
    )
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=cluster_name)
    for spec in localities:
        group = message.endpoints.add(priority=spec.priority)
        group.locality.region = spec.region
        group.locality.zone = spec.zone
        group.locality.sub_zone = spec.sub_zone
        group.load_balancing_weight.value = spec.weight  # gRPC skips localities without one
        for item in spec.endpoints:
            endpoint = item if isinstance(item, EndpointSpec) else EndpointSpec(*item)
            _add_endpoint(group, endpoint)
    return message


def _add_endpoint(group: Any, endpoint: EndpointSpec) -> None:
    if endpoint.health not in _HEALTH:
        raise ValueError(f"health must be one of {sorted(_HEALTH)}, not {endpoint.health!r}")
    lb = group.lb_endpoints.add(health_status=_HEALTH[endpoint.health])
    lb.load_balancing_weight.value = endpoint.weight
    lb.endpoint.address.socket_address.address = endpoint.address
    lb.endpoint.address.socket_address.port_value = endpoint.port
