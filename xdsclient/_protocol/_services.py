"""The xDS gRPC services: names, methods, and which type each per-type service carries.

Why one table: the control plane serves all of them and the client's per-type streams call
them; both read the method paths from here.
"""

from __future__ import annotations

import attrs

from ..resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE_CONFIGURATION,
    RUNTIME,
    SCOPED_ROUTE_CONFIGURATION,
    SECRET,
    VIRTUAL_HOST,
)

__all__ = ["ADS_SERVICE", "PER_TYPE_SERVICES", "Service", "method_path"]


@attrs.frozen
class Service:
    """One xDS gRPC service: its full name, the SotW and Delta methods, the type it carries."""

    name: str
    sotw_method: str | None
    delta_method: str
    type_url: str | None  # None for ADS, which carries every type
    rest: str | None = None  # the REST-JSON resource: POST /v3/discovery:{rest}


ADS_SERVICE = Service(
    "envoy.service.discovery.v3.AggregatedDiscoveryService",
    "StreamAggregatedResources",
    "DeltaAggregatedResources",
    None,
)

_PER_TYPE = (
    Service(
        "envoy.service.listener.v3.ListenerDiscoveryService",
        "StreamListeners",
        "DeltaListeners",
        LISTENER.type_url,
        "listeners",
    ),
    Service(
        "envoy.service.route.v3.RouteDiscoveryService",
        "StreamRoutes",
        "DeltaRoutes",
        ROUTE_CONFIGURATION.type_url,
        "routes",
    ),
    Service(
        "envoy.service.route.v3.ScopedRoutesDiscoveryService",
        "StreamScopedRoutes",
        "DeltaScopedRoutes",
        SCOPED_ROUTE_CONFIGURATION.type_url,
        "scoped-routes",
    ),
    Service(
        "envoy.service.route.v3.VirtualHostDiscoveryService",
        None,
        "DeltaVirtualHosts",
        VIRTUAL_HOST.type_url,
    ),
    Service(
        "envoy.service.cluster.v3.ClusterDiscoveryService",
        "StreamClusters",
        "DeltaClusters",
        CLUSTER.type_url,
        "clusters",
    ),
    Service(
        "envoy.service.endpoint.v3.EndpointDiscoveryService",
        "StreamEndpoints",
        "DeltaEndpoints",
        ENDPOINT.type_url,
        "endpoints",
    ),
    Service(
        "envoy.service.secret.v3.SecretDiscoveryService",
        "StreamSecrets",
        "DeltaSecrets",
        SECRET.type_url,
        "secrets",
    ),
    Service(
        "envoy.service.runtime.v3.RuntimeDiscoveryService",
        "StreamRuntime",
        "DeltaRuntime",
        RUNTIME.type_url,
        "runtime",
    ),
)

PER_TYPE_SERVICES: dict[str, Service] = {s.type_url: s for s in _PER_TYPE if s.type_url is not None}


def method_path(service: Service, *, delta: bool) -> str:
    """The gRPC method path, e.g. ``/envoy.service.discovery.v3.AggregatedDiscoveryService/...``."""
    method = service.delta_method if delta else service.sotw_method
    if method is None:
        raise ValueError(f"{service.name} has no {'Delta' if delta else 'SotW'} method")
    return f"/{service.name}/{method}"
