"""A port a stopped test server keeps until it starts again on it.

Why: a test that stops a server and starts it again on the same port (to see a client reconnect)
leaves the port free in between, and any other socket on the machine can take it: another
test's server bound to port 0, or an outgoing connection's ephemeral port. The restart then
fails, or another server answers in the backend's place. A socket bound to the port and never
listening keeps it: the kernel gives the port to no one else, connections to it are refused as
to a stopped server, and the server binds beside it again. The socket sets ``SO_REUSEPORT`` so
it can be bound while the server still listens (the server's socket sets it too: gRPC's servers
do by default, `HttpBackend` does), closing the window between stop and keep; and
``SO_REUSEADDR`` so a server that sets only that can bind beside it on restart.

A server whose socket sets ``SO_REUSEPORT`` would also share a port another such server listens
on (clients then land on either at random); `refuse_listeners` is the check, before it binds, that
nothing listens there (a kept port, never listening, passes).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

__all__ = ["KeptPort", "refuse_listeners"]


class KeptPort:
    """Keeps one port of a host (127.0.0.1 by default) from `keep` until `release` (both
    idempotent)."""

    def __init__(self) -> None:
        self._sockets: list[socket.socket] = []

    @property
    def kept(self) -> bool:
        """Whether a port is kept now."""
        return bool(self._sockets)

    def keep(self, port: int, host: str = "127.0.0.1") -> None:
        """Bind a socket to ``port`` of each address of ``host`` (call it while the server still
        listens there)."""
        if self._sockets:
            return
        self._sockets = _bound(host, port, reuse_port=True)

    def release(self) -> None:
        """Give the port back (once the server listens on it again, or for good)."""
        sockets, self._sockets = self._sockets, []
        for kept in sockets:
            kept.close()


@contextlib.contextmanager
def refuse_listeners(host: str, port: int) -> Iterator[None]:
    """Raise ``OSError`` (``EADDRINUSE``) when a socket listens on ``port`` of ``host``; else
    hold the port, bound as servers bind (``SO_REUSEADDR``), while the block binds a server
    beside it. A socket without ``SO_REUSEPORT`` cannot bind beside a listener, whatever its
    options; it can beside a kept port and the connections a stop left in TIME_WAIT."""
    probes = _bound(host, port, reuse_port=False)
    try:
        yield
    finally:
        for probe in probes:
            probe.close()


def _bound(host: str, port: int, *, reuse_port: bool) -> list[socket.socket]:
    """Sockets bound (not listening) to ``port`` of every address ``host`` resolves to."""
    sockets: list[socket.socket] = []
    try:
        for family, address in _addresses(host, port):
            bound = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(bound)
            bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            bound.bind(address)
    except BaseException:
        for bound in sockets:
            bound.close()
        raise
    return sockets


def _addresses(host: str, port: int) -> list[tuple[socket.AddressFamily, Any]]:
    """The distinct addresses a server given ``host:port`` binds (``[::1]`` spelt as in URLs)."""
    found = socket.getaddrinfo(
        host.strip("[]") or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    return list(dict.fromkeys((family, address) for family, _, _, _, address in found))
