"""The test control plane's own accessors."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import sys

import grpc
import pytest

from tests.builders import cluster
from tests.ports import binds
from xdsclient import XdsClient, XdsError
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane


async def test_resources_versions_and_the_request_log() -> None:
    async with ControlPlane() as cp:
        first = cp.set(cluster("a"))
        second = cp.set(cluster("a", timeout_s=9))
        assert int(second) > int(first)
        assert cp.version(CLUSTER.type_url, "a") == second
        assert cp.version(CLUSTER.type_url, "missing") is None
        packed = cp.resources(CLUSTER.type_url)["a"]
        assert packed.type_url == CLUSTER.type_url
        cp.remove(CLUSTER.type_url, "a")
        assert cp.resources(CLUSTER.type_url) == {}
        async with XdsClient(cp.address, node_id="n", delta=True) as client:
            watch = client.watch(CLUSTER, "a")  # kept: dropping a watch unsubscribes
            request = await cp.wait_for_request(lambda r: r.type_url == CLUSTER.type_url)
            assert request.is_delta
            assert request.stream >= 1
            watch.cancel()


async def test_a_second_control_plane_on_a_port_in_use_fails_to_start() -> None:
    """A port another server listens on is refused ("address in use"), not shared."""
    async with ControlPlane() as first:
        second = ControlPlane(port=first.port)
        with pytest.raises(OSError, match="address already in use") as raised:
            await second.start()
        assert raised.value.errno == errno.EADDRINUSE
        assert isinstance(raised.value, XdsError)
        assert first.address in str(raised.value)


async def test_a_port_held_by_a_plain_socket_is_refused_too() -> None:
    """Any listener on the port, not only another gRPC server, stops the control plane."""
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        with pytest.raises(OSError, match="address already in use"):
            await ControlPlane(port=port).start()


async def test_restart_binds_the_same_port_again() -> None:
    """Refusing a port in use does not stop a control plane restarting on its own port."""
    async with ControlPlane() as cp:
        port = cp.port
        await cp.restart()
        assert cp.port == port


async def test_a_grpc_server_sharing_ports_is_refused_too() -> None:
    """A gRPC server listening with SO_REUSEPORT (gRPC's default) is not joined either."""
    other = grpc.aio.server()
    port = other.add_insecure_port("127.0.0.1:0")
    await other.start()
    try:
        with pytest.raises(OSError, match="address already in use"):
            await ControlPlane(port=port).start()
    finally:
        await other.stop(None)


async def test_a_control_plane_stopped_keeping_its_port_serves_there_again() -> None:
    """Stopped with ``keep_port``, the port refuses connections and no other socket can bind
    it; started again, the control plane serves there; stopped without, the port is free."""
    cp = ControlPlane()
    await cp.start()
    port = cp.port
    try:
        cp.set(cluster("a"))
        await cp.stop(keep_port=True)
        assert not binds(port)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        await cp.start()
        assert cp.port == port
        async with XdsClient(cp.address, node_id="n") as client:
            await client.wait_for(CLUSTER, "a", timeout=10)
    finally:
        await cp.stop()
    assert binds(port, reuse_addr=True)


async def test_restart_keeps_the_port_and_a_plain_stop_gives_a_kept_one_back() -> None:
    """`restart` keeps the port while stopped, so it serves there again; a plain `stop` after a
    kept one frees it."""
    cp = ControlPlane()
    await cp.start()
    port = cp.port
    try:
        await cp.restart()
        assert cp.port == port
        await cp.stop(keep_port=True)
        assert not binds(port)
    finally:
        await cp.stop()
    assert binds(port, reuse_addr=True)


async def test_serve_on_a_port_in_use_is_one_line_and_the_configuration_status() -> None:
    """``xdsclient serve --port P`` with P taken exits 3 with one line, no traceback."""
    async with ControlPlane() as first:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "xdsclient", "serve", "--port", str(first.port),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "GRPC_VERBOSITY": "NONE"},
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 3, (out, err)
    assert out == b""
    assert err.decode() == (
        f"xdsclient: cannot listen on {first.address}: address already in use\n"
    )
