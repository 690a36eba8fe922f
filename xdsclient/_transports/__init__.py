"""Transports: how messages reach a management server, behind one small interface.

The gRPC implementation is imported only when a client first needs it, so the protocol core
and the rest of the package import without grpc.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._base import Stream, StreamSpec, Transport, TransportFactory

if TYPE_CHECKING:
    from .._config import ServerConfig
    from .._options import ClientOptions

__all__ = ["Stream", "StreamSpec", "Transport", "TransportFactory", "default_factory"]


def default_factory() -> Callable[[ServerConfig, ClientOptions], Transport]:
    """The gRPC transport factory (imports grpc)."""
    from ._grpc import GrpcTransport

    return GrpcTransport.for_server
