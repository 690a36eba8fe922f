"""The transport interface: open a stream, write, read, close; errors are ours at this line.

Why so small: everything a sans-I/O stream protocol needs from a transport is a bidirectional
stream of messages. The drive loop (`xdsclient._shell`) runs any such protocol (discovery's
`Session` today, load reporting next) over any implementation: grpc.aio, REST-JSON polling, a
watched file, an in-memory fake in `xdsclient.testing`. The `StreamSpec` says which stream:
its gRPC method and how its messages are encoded, so a transport needs no knowledge of the
protocol on it (REST and files carry discovery only, and read the type and variant from it).
Every failure crosses this boundary as a `TransportError` (foreign exceptions are mapped inside
the implementation), and `open` returns only once the stream is established, which is when
does-not-exist timers may start (gRFC A57).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from .._protocol._messages import DeltaDiscoveryResponse, DiscoveryResponse
from .._protocol._services import ADS_SERVICE, PER_TYPE_SERVICES, method_path

if TYPE_CHECKING:
    from .._settings._options import ClientOptions
    from .._settings._sources import Source

__all__ = ["Stream", "StreamSpec", "Transport", "TransportFactory"]


def serialize(message: Any) -> bytes:
    """Encode a protobuf message (the request serializer of every xDS stream)."""
    data: bytes = message.SerializeToString()
    return data


def _discovery_method(spec: StreamSpec) -> str:
    """The gRPC method of a discovery stream ("" for a type no per-type service carries)."""
    service = ADS_SERVICE if spec.type_url is None else PER_TYPE_SERVICES.get(spec.type_url)
    if service is None or (not spec.delta and service.sotw_method is None):
        return ""
    return method_path(service, delta=spec.delta)


def _discovery_response(spec: StreamSpec) -> Callable[[bytes], Any]:
    decoder: Callable[[bytes], Any] = (
        DeltaDiscoveryResponse if spec.delta else DiscoveryResponse
    ).FromString
    return decoder


@attrs.frozen(kw_only=True)
class StreamSpec:
    """Which stream to open: its gRPC method and the codecs of its messages.

    A discovery stream is named by ``type_url`` (None: the aggregated ADS stream, which carries
    every type; otherwise the per-type service of that type) and ``delta`` (the incremental
    variant); its method and codecs follow from them. Any other bidirectional stream (load
    reporting) gives its ``method`` and codecs itself: use `StreamSpec.of_method`.
    """

    type_url: str | None = None
    delta: bool = False
    #: the gRPC method path, ``/package.Service/Method`` ("" when no gRPC service carries it)
    method: str = attrs.field(default=attrs.Factory(_discovery_method, takes_self=True))
    #: encodes a request message to bytes
    request_serializer: Callable[[Any], bytes] = attrs.field(
        default=serialize, eq=False, repr=False
    )
    #: decodes bytes to a response message
    response_deserializer: Callable[[bytes], Any] = attrs.field(
        default=attrs.Factory(_discovery_response, takes_self=True), eq=False, repr=False
    )
    #: whether this is an xDS discovery stream (what REST and file transports carry)
    discovery: bool = True

    @classmethod
    def of_method(
        cls,
        method: str,
        *,
        request_serializer: Callable[[Any], bytes] = serialize,
        response_deserializer: Callable[[bytes], Any],
    ) -> StreamSpec:
        """A stream that is not discovery: ``method`` (``/package.Service/Method``) with its
        codecs, e.g. ``LoadStatsResponse.FromString`` for load reporting."""
        return cls(
            method=method,
            request_serializer=request_serializer,
            response_deserializer=response_deserializer,
            discovery=False,
        )

    def __str__(self) -> str:
        if not self.discovery:
            return self.method.rsplit("/", 1)[-1]
        kind = "ADS" if self.type_url is None else self.type_url.rsplit(".", 1)[-1]
        return f"{kind} {'Delta' if self.delta else 'SotW'}"


class Stream(Protocol):
    """One established stream. Requests and responses are the messages of its `StreamSpec`
    (protobuf; discovery messages on a discovery stream)."""

    async def write(self, request: Any) -> None:
        """Send one request; raises `TransportError` when the stream has failed."""
        ...

    async def read(self) -> Any:
        """The next response; raises `TransportError` when the stream fails or ends."""
        ...

    def close(self) -> None:
        """End the stream from our side (idempotent, never raises)."""
        ...


class Transport(Protocol):
    """A connection to one management server, on which streams are opened."""

    async def open(self, spec: StreamSpec) -> Stream:
        """Open a stream and return once it is established; raises `TransportError`."""
        ...

    async def close(self) -> None:
        """Release the connection; open streams end."""
        ...


class TransportFactory(Protocol):
    """Makes the transport to one server or source (the client calls it once per server it
    uses; ``server.uri`` names it)."""

    def __call__(self, server: Source, options: ClientOptions) -> Transport: ...
