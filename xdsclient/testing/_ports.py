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
"""

from __future__ import annotations

import socket

__all__ = ["KeptPort"]


class KeptPort:
    """Keeps one port of 127.0.0.1 from `keep` until `release` (both idempotent)."""

    def __init__(self) -> None:
        self._socket: socket.socket | None = None

    @property
    def kept(self) -> bool:
        """Whether a port is kept now."""
        return self._socket is not None

    def keep(self, port: int) -> None:
        """Bind a socket to ``port`` (call it while the server still listens there)."""
        if self._socket is not None:
            return
        kept = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            kept.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            kept.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            kept.bind(("127.0.0.1", port))
        except BaseException:
            kept.close()
            raise
        self._socket = kept

    def release(self) -> None:
        """Give the port back (once the server listens on it again, or for good)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
