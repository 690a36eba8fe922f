"""The test echo backend's restart on its own port: stopped with ``keep_port``, no other socket
takes the port in between (another test's server or connection would answer in its place or
fail the restart)."""

from __future__ import annotations

import errno
import socket

import grpc
import pytest

from .echo import EchoBackend, EchoStub, Text

pytestmark = pytest.mark.timeout(30)


def _binds(port: int) -> bool:
    """Whether another server could take ``port`` now (a plain socket binds to it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        try:
            other.bind(("127.0.0.1", port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            return False
    return True


async def test_an_echo_backend_stopped_keeping_its_port_serves_there_again() -> None:
    """Stopped with ``keep_port``, the port refuses calls and no other socket can bind it;
    started again, the backend serves on it; stopped without, the port is free."""
    backend = EchoBackend("e")
    await backend.start()
    port = backend.port
    try:
        await backend.stop(keep_port=True)
        assert not _binds(port)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await EchoStub(channel).Say(Text(value="hi"), timeout=5)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            await backend.start()
            reply = await EchoStub(channel).Say(Text(value="hi"), timeout=5, wait_for_ready=True)
        assert (backend.port, reply.value) == (port, "e:hi")
    finally:
        await backend.stop()
    assert _binds(port)
