"""The demo: embedded control plane, a bootstrap file, and the command line."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import cluster, endpoints, listener
from xdsclient._demo import run
from xdsclient.testing import ControlPlane


@pytest.mark.parametrize("source", ["grpc", "file", "rest"])
async def test_the_embedded_demo_prints_complete_snapshots_as_endpoints_change(
    source: str,
) -> None:
    out = io.StringIO()
    assert await run(updates=2, out=out, source=source) == 0
    assert f"over {source}" in out.getvalue()
    text = out.getvalue()
    assert text.count("--- snapshot") == 2
    assert "cluster api: aggregate, in order api-primary > api-secondary" in text
    assert "route prefix '/api/' -> web 10, api 90" in text
    first, second = text.split("--- snapshot 2")
    assert first.split("--- snapshot 1")[1] != second  # the endpoints changed


async def test_the_demo_watches_a_real_control_plane_from_a_bootstrap(tmp_path: Path) -> None:
    from envoy.config.route.v3 import route_pb2

    async with ControlPlane() as cp:
        cp.set(listener("svc", route="r"))
        routes = route_pb2.RouteConfiguration(name="r")
        route = routes.virtual_hosts.add(name="vh", domains=["*"]).routes.add()
        route.match.prefix = "/"
        route.route.cluster = "c"
        cp.set(routes)
        cp.set(cluster("c"))
        cp.set(endpoints("c", port=7000))
        bootstrap = tmp_path / "bootstrap.json"
        bootstrap.write_text(
            json.dumps(
                {
                    "xds_servers": [
                        {"server_uri": cp.address, "channel_creds": [{"type": "insecure"}]}
                    ]
                }
            )
        )
        out = io.StringIO()
        await run(updates=1, bootstrap=str(bootstrap), listener="svc", out=out)
    assert "cluster c: 1 endpoints 10.0.0.1:7000" in out.getvalue()


def test_python_m_xdsclient_demo_stops_after_the_updates_asked_for() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "xdsclient", "demo", "--updates", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--- snapshot 1" in done.stdout
    assert "--- snapshot 2" not in done.stdout


async def test_the_demo_says_why_when_the_server_cannot_be_reached(tmp_path: Path) -> None:
    from tests.reliability.test_fault_matrix import free_port

    bootstrap = tmp_path / "bootstrap.json"
    server = {"server_uri": f"127.0.0.1:{free_port()}", "channel_creds": [{"type": "insecure"}]}
    bootstrap.write_text(json.dumps({"xds_servers": [server]}))
    out = io.StringIO()
    async with asyncio.timeout(10):
        await run(updates=1, bootstrap=str(bootstrap), listener="svc", out=out)
    assert "configuration unusable: xDS stream to 127.0.0.1:" in out.getvalue()
