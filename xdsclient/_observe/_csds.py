"""CSDS: the client's cache as an ``envoy.service.status.v3.ClientConfig``, and the CSDS service.

Why this shape: operators already read CSDS (``grpcdebug``, Envoy's admin tools, gRPC's
``grpc_csds``); a Python service embedding the client answers the same question, "what config
does this process have, from where, at which version, and what was rejected", in the same
message gRPC C-core fills: one ``generic_xds_configs`` entry per resource with its type, name,
version, the resource itself, when it was last updated (wall clock), its client status and, for
a rejected or failed update, the error state. Several clients go in one response, each with its
``client_scope`` (gRFC A71).

The error state follows C-core's (gRFC A88): every status that carries an error has one (NACKED,
RECEIVED_ERROR, DOES_NOT_EXIST, TIMEOUT, and a deletion ignored under ``ignore_resource_deletion``,
which keeps its resource and says how it was deleted); its ``details`` are the error's text
without the type and name the entry already has (``invalid resource: ...`` for a NACK, as
C-core words it), and ``version_info`` / ``last_update_attempt`` are set only when an update
caused it (the rejected or deleting version): a fired timer has neither. A connectivity error
is not a resource's error state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, Protocol

from .._errors import ResourceError, ResourceValidationError, XdsError
from .._protocol import ResourceState, ResourceStatus

__all__ = ["CsdsClient", "add_csds_service", "client_config"]

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
#: Statuses whose entry carries the error that put it there (C-core: a non-OK failed status).
_ERROR_STATUSES = frozenset(
    {
        ResourceStatus.DOES_NOT_EXIST,
        ResourceStatus.DOES_NOT_EXIST_BUT_CACHED,
        ResourceStatus.EXPIRED,
        ResourceStatus.TIMEOUT,
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
        error = state.error
        if state.status in _ERROR_STATUSES and _about_the_resource(state.status, error):
            assert error is not None
            entry.error_state.details = _details(error, state)
            version = error.version if isinstance(error, ResourceError) else ""
            if version:  # an update caused it: which one, and when
                entry.error_state.version_info = version
                if state.error_time is not None:
                    when = int((state.error_time + offset) * 1e9)
                    entry.error_state.last_update_attempt.FromNanoseconds(when)
    return config


def _about_the_resource(status: ResourceStatus, error: XdsError | None) -> bool:
    """Whether ``error`` put the entry in ``status``: a resource's own error, or the transient
    error of a fired timer (TIMEOUT); not a connectivity error recorded on every entry since."""
    return isinstance(error, ResourceError) or (
        status is ResourceStatus.TIMEOUT and error is not None
    )


def _details(error: XdsError, state: ResourceState) -> str:
    """The error's text as C-core words ``error_state.details``: without the type and name the
    entry already carries; a NACK's reasons after ``invalid resource:``."""
    if isinstance(error, ResourceValidationError):
        return f"invalid resource: {error.message}"
    if isinstance(error, ResourceError):
        return error.message
    text = str(error)
    named = f'{state.type_url.rsplit(".", 1)[-1]} "{state.name}": '
    return text[len(named) :] if text.startswith(named) else text


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


class CsdsClient(Protocol):
    """What the CSDS service reads of a client (an `XdsClient` is one): passed in, so this
    module, which the client uses, never imports it."""

    @property
    def closed(self) -> bool:
        """Whether the client is closed (closed clients are left out)."""

    def csds(self, *, scope: str = "", include_resources: bool = True) -> Any:
        """The client's ``ClientConfig`` in ``scope``."""


def add_csds_service(
    server: Any, clients: CsdsClient | Sequence[CsdsClient] | Mapping[str, CsdsClient]
) -> None:
    """Serve CSDS (``FetchClientStatus`` and ``StreamClientStatus``) for ``clients`` on a
    ``grpc.aio.Server`` (before it starts). Each client is one ``ClientConfig``. To tell several
    apart, pass a mapping of ``client_scope`` to client (gRFC A71: C-core names each client by
    its channel target, ``xds:///svc``): ``{"xds:///a": a, "xds:///b": b}``. A client, or a
    sequence of clients, is served with an empty ``client_scope``. Closed clients are left out.
    """
    import grpc
    from envoy.service.status.v3 import csds_pb2

    scoped = _scoped(clients)

    def status() -> Any:
        response = csds_pb2.ClientStatusResponse()
        for scope, client in scoped:
            if not client.closed:
                response.config.append(client.csds(scope=scope))
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


def _scoped(
    clients: CsdsClient | Sequence[CsdsClient] | Mapping[str, CsdsClient],
) -> list[tuple[str, CsdsClient]]:
    """(client_scope, client) pairs, in the order given."""
    if isinstance(clients, Mapping):
        return [(str(scope), client) for scope, client in clients.items()]
    if isinstance(clients, Sequence):
        return [("", client) for client in clients]
    return [("", clients)]
