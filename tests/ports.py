"""Whether another socket could take a port now: the check of the tests that stop a backend
keeping its port (`xdsclient.testing._ports.KeptPort`)."""

from __future__ import annotations

import errno
import socket


def binds(port: int, *, reuse_addr: bool = False) -> bool:
    """Whether a socket binds to ``port`` of 127.0.0.1 now: a plain one, or with
    ``reuse_addr`` one bound as servers bind, which the connections a stop leaves in TIME_WAIT
    do not stop (a plain bind fails on those, so it can only show a port is taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        if reuse_addr:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            other.bind(("127.0.0.1", port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            return False
    return True
