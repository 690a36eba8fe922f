"""The built-in xDS resource types, decoded into their protobuf messages.

Why: these are the types every data-plane client subscribes to. Validated views replace the raw
messages for Listener, RouteConfiguration, Cluster and ClusterLoadAssignment later; the type URLs
and the SotW full-state flags (LDS and CDS only) stay as they are.
"""

from __future__ import annotations

from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2, scoped_route_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from envoy.service.runtime.v3 import rtds_pb2

from ._type import ResourceType

__all__ = [
    "BUILTIN_TYPES",
    "CLUSTER",
    "ENDPOINT",
    "LISTENER",
    "ROUTE_CONFIGURATION",
    "RUNTIME",
    "SCOPED_ROUTE_CONFIGURATION",
    "SECRET",
    "VIRTUAL_HOST",
]

LISTENER: ResourceType[Any] = ResourceType.for_message(
    listener_pb2.Listener, all_resources_required_in_sotw=True
)
ROUTE_CONFIGURATION: ResourceType[Any] = ResourceType.for_message(route_pb2.RouteConfiguration)
SCOPED_ROUTE_CONFIGURATION: ResourceType[Any] = ResourceType.for_message(
    scoped_route_pb2.ScopedRouteConfiguration
)
VIRTUAL_HOST: ResourceType[Any] = ResourceType.for_message(route_components_pb2.VirtualHost)
CLUSTER: ResourceType[Any] = ResourceType.for_message(
    cluster_pb2.Cluster, all_resources_required_in_sotw=True
)
ENDPOINT: ResourceType[Any] = ResourceType.for_message(
    endpoint_pb2.ClusterLoadAssignment, name_field="cluster_name"
)
SECRET: ResourceType[Any] = ResourceType.for_message(secret_pb2.Secret)
RUNTIME: ResourceType[Any] = ResourceType.for_message(rtds_pb2.Runtime)

BUILTIN_TYPES: tuple[ResourceType[Any], ...] = (
    LISTENER,
    ROUTE_CONFIGURATION,
    SCOPED_ROUTE_CONFIGURATION,
    VIRTUAL_HOST,
    CLUSTER,
    ENDPOINT,
    SECRET,
    RUNTIME,
)
