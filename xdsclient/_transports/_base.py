"""The transport interface: open a stream, write, read, close; errors are ours at this line.

Why so small: everything the protocol needs from a transport is a bidirectional stream of
discovery messages. The drive loop (`xdsclient._shell`) runs the sans-I/O session over any
implementation: grpc.aio here, an in-memory fake in `xdsclient.testing`, REST and files later.
Every failure crosses this boundary as a `TransportError` (foreign exceptions are mapped inside
the implementation), and `open` returns only once the stream is established, which is when
does-not-exist timers may start (gRFC A57).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    from .._options import ClientOptions
    from .._sources import Source

__all__ = ["Stream", "StreamSpec", "Transport", "TransportFactory"]


@attrs.frozen(kw_only=True)
class StreamSpec:
    """Which stream to open: ADS or the per-type service of ``type_url``, SotW or Delta."""

    type_url: str | None  # None: the aggregated (ADS) stream, which carries every type
    delta: bool

    def __str__(self) -> str:
        kind = "ADS" if self.type_url is None else self.type_url.rsplit(".", 1)[-1]
        return f"{kind} {'Delta' if self.delta else 'SotW'}"


class Stream(Protocol):
    """One established stream. Requests and responses are discovery protobuf messages."""

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
