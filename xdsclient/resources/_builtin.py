"""The built-in xDS resource types.

Why: these are the types every data-plane client subscribes to. Listener, RouteConfiguration,
Cluster and ClusterLoadAssignment decode into validated views (gRPC's rules); the others into
their protobuf messages. LDS and CDS are the full-state types of SotW.
"""

from __future__ import annotations

from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2, scoped_route_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from envoy.service.runtime.v3 import rtds_pb2

from ._cluster import ClusterView, decode_cluster
from ._endpoint import ClusterLoadAssignmentView, decode_cluster_load_assignment
from ._listener import ListenerView, decode_listener
from ._route import RouteConfigurationView, decode_route_configuration
from ._type import ResourceType
from ._virtual_host import VirtualHostView, decode_virtual_host

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

_URL = "type.googleapis.com/"

#: LDS: Listeners, decoded into validated `ListenerView` values; a full-state type in SotW.
LISTENER: ResourceType[ListenerView] = ResourceType(
    type_url=_URL + listener_pb2.Listener.DESCRIPTOR.full_name,
    decode=decode_listener,
    all_resources_required_in_sotw=True,
)
#: RDS: RouteConfigurations, decoded into validated `RouteConfigurationView` values.
ROUTE_CONFIGURATION: ResourceType[RouteConfigurationView] = ResourceType(
    type_url=_URL + route_pb2.RouteConfiguration.DESCRIPTOR.full_name,
    decode=decode_route_configuration,
)
#: SRDS: ScopedRouteConfigurations, delivered as their protobuf messages.
SCOPED_ROUTE_CONFIGURATION: ResourceType[Any] = ResourceType.for_message(
    scoped_route_pb2.ScopedRouteConfiguration
)
#: VHDS: VirtualHosts (Delta only), named ``<route configuration name>/<host>``, decoded into
#: validated `VirtualHostView` values.
VIRTUAL_HOST: ResourceType[VirtualHostView] = ResourceType(
    type_url=_URL + route_components_pb2.VirtualHost.DESCRIPTOR.full_name,
    decode=decode_virtual_host,
)
#: CDS: Clusters, decoded into validated `ClusterView` values; a full-state type in SotW.
CLUSTER: ResourceType[ClusterView] = ResourceType(
    type_url=_URL + cluster_pb2.Cluster.DESCRIPTOR.full_name,
    decode=decode_cluster,
    all_resources_required_in_sotw=True,
)
#: EDS: ClusterLoadAssignments, decoded into validated `ClusterLoadAssignmentView` values.
ENDPOINT: ResourceType[ClusterLoadAssignmentView] = ResourceType(
    type_url=_URL + endpoint_pb2.ClusterLoadAssignment.DESCRIPTOR.full_name,
    decode=decode_cluster_load_assignment,
)
#: SDS: Secrets, delivered as their protobuf messages.
SECRET: ResourceType[Any] = ResourceType.for_message(secret_pb2.Secret)
#: RTDS: Runtime layers, delivered as their protobuf messages.
RUNTIME: ResourceType[Any] = ResourceType.for_message(rtds_pb2.Runtime)

#: Every built-in type above.
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
