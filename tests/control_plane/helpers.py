"""A server stream over a store, without gRPC, and what its responses say once decoded."""

from __future__ import annotations

from typing import Any

from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.endpoint.v3.endpoint_pb2 import ClusterLoadAssignment
from envoy.config.listener.v3.listener_pb2 import Listener
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DeltaDiscoveryResponse,
    DiscoveryRequest,
    DiscoveryResponse,
)
from google.protobuf import any_pb2

from xdsclient.testing._encoding import Encoder
from xdsclient.testing._faults import Faults
from xdsclient.testing._seeded import SeededBug
from xdsclient.testing._server_delta import DeltaServerStream
from xdsclient.testing._server_sotw import SotwServerStream
from xdsclient.testing._server_stream import ServerStream
from xdsclient.testing._store import ResourceStore

LDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"


def packed(type_url: str, name: str, generation: int = 0) -> Any:
    """An ``Any`` of a real resource of this type called ``name``; ``generation`` changes
    its content."""
    result = any_pb2.Any()
    result.Pack(message(type_url, name, generation))
    return result


def message(type_url: str, name: str, generation: int = 0) -> Any:
    """A real resource of this type called ``name``; ``generation`` changes its content."""
    message: Any
    if type_url == EDS:
        message = ClusterLoadAssignment(cluster_name=name)
        message.policy.overprovisioning_factor.value = 100 + generation
    elif type_url == CDS:
        message = Cluster(name=name)
        message.connect_timeout.seconds = 1 + generation
    else:
        message = Listener(name=name, stat_prefix=str(generation))
    return message


def set_(store: ResourceStore, type_url: str, name: str, generation: int = 0) -> str:
    """Serve a resource; its version."""
    return store.set(type_url, name, packed(type_url, name, generation))


def stream(
    store: ResourceStore,
    *,
    delta: bool = False,
    bugs: tuple[SeededBug, ...] = (),
    stream_id: int = 1,
    encoder: Encoder | None = None,
) -> ServerStream:
    """A SotW (or Delta) stream on ADS, over this store."""
    faults = Faults(bugs)
    kind = DeltaServerStream if delta else SotwServerStream
    return kind(
        stream_id=stream_id,
        method="/ads",
        type_url=None,
        store=store,
        faults=faults,
        encoder=encoder or Encoder(faults),
    )


def sotw_request(type_url: str, *names: str, nonce: str = "", version: str = "") -> Any:
    return DiscoveryRequest(
        type_url=type_url, resource_names=names, response_nonce=nonce, version_info=version
    )


def delta_request(
    type_url: str,
    subscribe: tuple[str, ...] = (),
    unsubscribe: tuple[str, ...] = (),
    *,
    nonce: str = "",
    initial: dict[str, str] | None = None,
) -> Any:
    return DeltaDiscoveryRequest(
        type_url=type_url,
        resource_names_subscribe=subscribe,
        resource_names_unsubscribe=unsubscribe,
        response_nonce=nonce,
        initial_resource_versions=initial or {},
    )


def sotw_responses(s: ServerStream, now: float = 0.0) -> list[Any]:
    """What the stream owes now, decoded."""
    return [DiscoveryResponse.FromString(o.data) for o in s.respond(now)]


def delta_responses(s: ServerStream, now: float = 0.0) -> list[Any]:
    """What the stream owes now, decoded."""
    return [DeltaDiscoveryResponse.FromString(o.data) for o in s.respond(now)]


def names_of(response: Any) -> list[str]:
    """The names of the resources in a SotW response of `packed` resources."""
    classes = {LDS: Listener, CDS: Cluster, EDS: ClusterLoadAssignment}
    names = []
    for item in response.resources:
        message = classes[item.type_url].FromString(item.value)
        names.append(message.cluster_name if item.type_url == EDS else message.name)
    return names
