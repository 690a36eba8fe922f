"""The test control plane's own accessors."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import sys

import pytest

from tests.builders import cluster
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
