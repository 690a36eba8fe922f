"""Builders for real xDS protobuf messages used across the tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2, duration_pb2

from xdsclient import ProtocolOptions, ResourceDecodeError, ResourceStatus, Session
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER, ResourceType

CDS = CLUSTER.type_url
EDS = ENDPOINT.type_url
LDS = LISTENER.type_url
WRAPPER = "type.googleapis.com/envoy.service.discovery.v3.Resource"
NODE = base_pb2.Node(id="test-node", cluster="test-cluster")


def cluster(name: str, *, timeout_s: int = 5) -> Any:
    """A gRPC-valid EDS cluster; ``timeout_s`` only varies its content."""
    message = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.EDS)
    message.eds_cluster_config.eds_config.ads.SetInParent()
    message.connect_timeout.seconds = timeout_s
    return message


def endpoints(name: str, *, port: int = 8080) -> Any:
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=name)
    group = message.endpoints.add()
    group.load_balancing_weight.value = 1  # gRPC skips localities without a weight
    group.locality.region = "r"  # and requires a locality
    lb = group.lb_endpoints.add()
    lb.endpoint.address.socket_address.address = "10.0.0.1"
    lb.endpoint.address.socket_address.port_value = port
    return message


def invalid_endpoints(name: str) -> Any:
    """An assignment gRPC rejects (an endpoint without an address): NACKed, reason names the
    field ``...socket_address.address``."""
    message = endpoints(name)
    message.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address = ""
    return message


def listener(name: str, *, route: str = "routes") -> Any:
    """A gRPC-valid API listener taking its routes from RDS."""
    from envoy.extensions.filters.http.router.v3 import router_pb2
    from envoy.extensions.filters.network.http_connection_manager.v3 import (
        http_connection_manager_pb2 as hcm_pb2,
    )

    manager = hcm_pb2.HttpConnectionManager()
    manager.rds.route_config_name = route
    manager.rds.config_source.ads.SetInParent()
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    message = listener_pb2.Listener(name=name)
    message.api_listener.api_listener.Pack(manager)
    return message


def routes(
    *targets: str | dict[str, int], name: str = "routes", domains: tuple[str, ...] = ("*",)
) -> Any:
    message = route_pb2.RouteConfiguration(name=name)
    vhost = message.virtual_hosts.add(name="vh", domains=list(domains))
    for i, target in enumerate(targets):
        route = vhost.routes.add()
        route.match.prefix = f"/{i}/"
        if isinstance(target, str):
            route.route.cluster = target
        else:
            for cluster_name, weight in target.items():
                route.route.weighted_clusters.clusters.add(name=cluster_name).weight.value = weight
    return message


def pack(message: Any) -> Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def raw_any(type_url: str, value: bytes) -> Any:
    return any_pb2.Any(type_url=type_url, value=value)


def duration(seconds: float) -> Any:
    whole = int(seconds)
    return duration_pb2.Duration(seconds=whole, nanos=round((seconds - whole) * 1e9))


def wrapped(
    message: Any | None, *, name: str = "", version: str = "", ttl: float | None = None
) -> Any:
    """A resource inside ``envoy.service.discovery.v3.Resource``, packed in an Any."""
    resource = discovery_pb2.Resource(name=name, version=version)
    if message is not None:
        resource.resource.Pack(message)
    if ttl is not None:
        resource.ttl.CopyFrom(duration(ttl))
    return pack(resource)


def sotw_response(
    type_url: str,
    resources: list[Any],
    *,
    version: str,
    nonce: str,
    errors: list[tuple[str, int, str]] = (),  # type: ignore[assignment]
) -> Any:
    response = discovery_pb2.DiscoveryResponse(type_url=type_url, version_info=version, nonce=nonce)
    for item in resources:
        response.resources.append(
            item if item.DESCRIPTOR.full_name == "google.protobuf.Any" else pack(item)
        )
    _add_errors(response, errors)
    return response


def _add_errors(response: Any, errors: Iterable[tuple[str, int, str]]) -> None:
    for name, code, message in errors:
        error = response.resource_errors.add()
        error.resource_name.name = name
        error.error_detail.code = code
        error.error_detail.message = message


def delta_resource(
    name: str,
    message: Any | None,
    *,
    version: str,
    ttl: float | None = None,
    aliases: tuple[str, ...] = (),
) -> Any:
    resource = discovery_pb2.Resource(name=name, version=version, aliases=list(aliases))
    if message is not None:
        resource.resource.CopyFrom(
            message if message.DESCRIPTOR.full_name == "google.protobuf.Any" else pack(message)
        )
    if ttl is not None:
        resource.ttl.CopyFrom(duration(ttl))
    return resource


def delta_response(
    type_url: str,
    resources: list[Any] = (),  # type: ignore[assignment]
    *,
    nonce: str,
    removed: tuple[str, ...] = (),
    system_version: str = "",
    errors: list[tuple[str, int, str]] = (),  # type: ignore[assignment]
) -> Any:
    response = discovery_pb2.DeltaDiscoveryResponse(
        type_url=type_url,
        nonce=nonce,
        system_version_info=system_version,
        removed_resources=list(removed),
    )
    response.resources.extend(resources)
    _add_errors(response, errors)
    return response


def session(*types: ResourceType[Any], delta: bool = False, **options: Any) -> Session:
    return Session(
        node=NODE,
        resource_types=types or (LISTENER, CLUSTER, ENDPOINT),
        delta=delta,
        options=ProtocolOptions(**options),
    )


def connected(
    *types: ResourceType[Any],
    delta: bool = False,
    subscribe: dict[str, list[str]] | None = None,
    now: float = 0.0,
    **options: Any,
) -> tuple[Session, list[Any]]:
    """A connected session with the given subscriptions, and the first requests it wrote."""
    result = session(*types, delta=delta, **options)
    for type_url, names in (subscribe or {}).items():
        for name in names:
            result.subscribe(type_url, name)
    result.connect(now)
    return result, result.requests_to_send(now)


def status_of(s: Session, type_url: str, name: str) -> ResourceStatus | None:
    """The status of a resource in a session's cache, or None when it is not there."""
    state = s.resource_state(type_url, name)
    return None if state is None else state.status


def strict_clusters() -> ResourceType[Any]:
    """Clusters, where a connect_timeout above 60 s is invalid (the error names the resource)."""

    def decode(data: bytes) -> tuple[str, Any]:
        name, view = CLUSTER.decode(data)
        if view.proto.connect_timeout.seconds > 60:
            raise ResourceDecodeError("connect_timeout: must be at most 60s", name=name)
        return name, view

    return ResourceType(type_url=CDS, decode=decode, all_resources_required_in_sotw=True)
