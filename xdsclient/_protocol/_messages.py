"""The protobuf messages the core reads and writes, in one place.

Why: xds-protos ships no type stubs, so these classes are typed ``Any``; importing them from here
keeps that boundary narrow and makes the core's signatures say which message they mean.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from envoy.config.core.v3 import base_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.rpc import status_pb2

__all__ = [
    "DeltaDiscoveryRequest",
    "DeltaDiscoveryResponse",
    "DiscoveryRequest",
    "DiscoveryResponse",
    "Node",
    "Request",
    "Resource",
    "Response",
    "Status",
]

DiscoveryRequest: Any = discovery_pb2.DiscoveryRequest
DiscoveryResponse: Any = discovery_pb2.DiscoveryResponse
DeltaDiscoveryRequest: Any = discovery_pb2.DeltaDiscoveryRequest
DeltaDiscoveryResponse: Any = discovery_pb2.DeltaDiscoveryResponse
Resource: Any = discovery_pb2.Resource
Node: Any = base_pb2.Node
Status: Any = status_pb2.Status

#: A ``DiscoveryRequest`` or a ``DeltaDiscoveryRequest`` message.
Request: TypeAlias = Any
#: A ``DiscoveryResponse`` or a ``DeltaDiscoveryResponse`` message.
Response: TypeAlias = Any
