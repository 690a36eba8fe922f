"""Transports: how messages reach a management server or source, behind one small interface.

Why the choice lives here: which transport serves a server or source (grpc.aio for a
management server, REST-JSON polling for a `RestSource`, a watched file for a `FileSource`, or
the factory a caller gave, such as `xdsclient.testing.FakeTransport`) is a fact about the
source, not about the pool that routes subscriptions to it. The gRPC, REST and file
implementations are imported only when a client first needs one, so the protocol core and the
rest of the package import without grpc, aiohttp or watchfiles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._base import Stream, StreamSpec, Transport, TransportFactory

if TYPE_CHECKING:
    from .._runtime._clock import Clock
    from .._settings._config import ServerConfig
    from .._settings._options import ClientOptions
    from .._settings._sources import Source

__all__ = [
    "Stream",
    "StreamSpec",
    "Transport",
    "TransportFactory",
    "default_factory",
    "transport_for",
]


def default_factory() -> Callable[[ServerConfig, ClientOptions], Transport]:
    """The gRPC transport factory (imports grpc)."""
    from ._grpc import GrpcTransport

    return GrpcTransport.for_server


def transport_for(
    server: Source,
    options: ClientOptions,
    *,
    clock: Clock,
    factory: TransportFactory | None = None,
) -> Transport:
    """The transport to ``server``: ``factory``'s when given (it serves every kind of source),
    else a watched file, REST-JSON polling or grpc.aio by the kind of source."""
    from .._settings._sources import FileSource, RestSource

    if factory is not None:
        return factory(server, options)
    if isinstance(server, FileSource):
        from ._file import FileTransport

        return FileTransport(server, options, clock=clock)
    if isinstance(server, RestSource):
        from ._rest import RestTransport

        return RestTransport(server, options)
    return default_factory()(server, options)
