"""CSDS: the client's cache as an ``envoy.service.status.v3.ClientConfig``, and the CSDS service.

Why this shape: operators already read CSDS (``grpcdebug``, Envoy's admin tools, gRPC's
``grpc_csds``); a Python service embedding the client answers the same question, "what config
does this process have, from where, at which version, and what was rejected", in the same
message gRPC C-core fills: one ``generic_xds_configs`` entry per resource with its type, name,
version, the resource itself, when it was last updated (wall clock), its client status and, for
a rejected or failed update, the error state. Several clients go in one response, each with its
``client_scope`` (gRFC A71).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._errors import ResourceError
from ._protocol import ResourceState, ResourceStatus

if TYPE_CHECKING:
    from ._client import XdsClient

__all__ = ["add_csds_service", "client_config"]

_CSDS_SERVICE = "envoy.service.status.v3.ClientStatusDiscoveryService"

#: Our statuses -> CSDS ``ClientResourceStatus`` names (C-core's mapping).
_CLIENT_STATUS = {
    ResourceStatus.REQUESTED: "REQUESTED",
    ResourceStatus.ACKED: "ACKED",
    ResourceStatus.NACKED: "NACKED",
    ResourceStatus.NACKED_BUT_CACHED: "NACKED",
    ResourceStatus.DOES_NOT_EXIST: "DOES_NOT_EXIST",
    ResourceStatus.DOES_NOT_EXIST_BUT_CACHED: "DOES_NOT_EXIST",
    ResourceStatus.EXPIRED: "DOES_NOT_EXIST",
    ResourceStatus.TIMEOUT: "TIMEOUT",
    ResourceStatus.RECEIVED_ERROR: "RECEIVED_ERROR",
    ResourceStatus.RECEIVED_ERROR_BUT_CACHED: "RECEIVED_ERROR",
}
_ERROR_STATUSES = frozenset(
    {
        ResourceStatus.DOES_NOT_EXIST,
        ResourceStatus.NACKED,
        ResourceStatus.NACKED_BUT_CACHED,
        ResourceStatus.RECEIVED_ERROR,
        ResourceStatus.RECEIVED_ERROR_BUT_CACHED,
    }
)


def client_config(
    states: Iterable[ResourceState],
    *,
    node: Any,
    wall_offset: float,
    scope: str = "",
    include_resources: bool = True,
) -> Any:
    """A ``ClientConfig`` of ``states``; a time in the client's clock plus ``wall_offset`` is
    wall-clock time. ``include_resources=False`` leaves out ``xds_config``."""
    from envoy.admin.v3 import config_dump_shared_pb2
    from envoy.service.status.v3 import csds_pb2

    offset = wall_offset
    config = csds_pb2.ClientConfig(client_scope=scope)
    config.node.CopyFrom(node)
    for state in states:
        entry = config.generic_xds_configs.add(
            type_url=state.type_url,
            name=state.name,
            version_info=state.version or "",
            client_status=config_dump_shared_pb2.ClientResourceStatus.Value(
                _CLIENT_STATUS[state.status]
            ),
        )
        if include_resources and state.status.holds_value and state.value is not None:
            raw = _raw(state.value)
            if raw is not None:
                entry.xds_config.type_url = state.type_url
                entry.xds_config.value = raw
        if state.last_updated is not None and state.status is not ResourceStatus.DOES_NOT_EXIST:
            entry.last_updated.FromNanoseconds(int((state.last_updated + offset) * 1e9))
        if state.status in _ERROR_STATUSES and state.error is not None:
            entry.error_state.details = str(state.error)
            if isinstance(state.error, ResourceError):
                entry.error_state.version_info = state.error.version
            if state.error_time is not None:
                when = int((state.error_time + offset) * 1e9)
                entry.error_state.last_update_attempt.FromNanoseconds(when)
    return config


def _raw(value: Any) -> bytes | None:
    """The serialized resource: a view's ``raw``, or a protobuf message's bytes."""
    raw = getattr(value, "raw", None)
    if isinstance(raw, bytes):
        return raw
    serialize = getattr(value, "SerializeToString", None)
    if serialize is not None:
        data: bytes = serialize()
        return data
    return None


def add_csds_service(server: Any, clients: Sequence[XdsClient] | XdsClient) -> None:
    """Serve CSDS (``FetchClientStatus`` and ``StreamClientStatus``) for ``clients`` on a
    ``grpc.aio.Server`` (before it starts). Each client is one ``ClientConfig``; with several,
    give each a ``scope`` (`XdsClient.csds`)."""
    import grpc
    from envoy.service.status.v3 import csds_pb2

    targets = [clients] if not isinstance(clients, Sequence) else list(clients)

    def status() -> Any:
        response = csds_pb2.ClientStatusResponse()
        for client in targets:
            if not client.closed:
                response.config.append(client.csds())
        return response

    async def fetch(request: Any, context: Any) -> Any:
        return status()

    async def stream(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for _ in requests:
            yield status()

    handler = grpc.method_handlers_generic_handler(
        _CSDS_SERVICE,
        {
            "FetchClientStatus": grpc.unary_unary_rpc_method_handler(
                fetch,
                request_deserializer=csds_pb2.ClientStatusRequest.FromString,
                response_serializer=csds_pb2.ClientStatusResponse.SerializeToString,
            ),
            "StreamClientStatus": grpc.stream_stream_rpc_method_handler(
                stream,
                request_deserializer=csds_pb2.ClientStatusRequest.FromString,
                response_serializer=csds_pb2.ClientStatusResponse.SerializeToString,
            ),
        },
    )
    server.add_generic_rpc_handlers((handler,))
