"""An integration test of a control plane, written with pytest and xdsclient.

Control-plane teams point `XdsClient` at their server and assert what a real data-plane client
gets: a complete configuration, no NACKs, the right endpoints, and that changes arrive. Here
the embedded `xdsclient.testing.ControlPlane` stands in for the server under test; set
``CONTROL_PLANE`` (host:port) to test yours instead.

    pytest examples/control_plane_test.py
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest

from xdsclient import ClientOptions, XdsClient, XdsConfig
from xdsclient.resources import ENDPOINT
from xdsclient.testing import ControlPlane, assignment, builders, demo_resources

LISTENER = "shop.example.com"


@pytest.fixture
async def server() -> AsyncIterator[ControlPlane | str]:
    """The control plane under test: ``CONTROL_PLANE`` if set, else the embedded one."""
    address = os.environ.get("CONTROL_PLANE")
    if address:
        yield address
        return
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources(LISTENER))
        yield control_plane


@pytest.fixture
async def client(server: ControlPlane | str) -> AsyncIterator[XdsClient]:
    address = server if isinstance(server, str) else server.address
    async with XdsClient(
        address, node_id="control-plane-test", options=ClientOptions(does_not_exist_timeout=5)
    ) as xds:
        yield xds


async def first_config(client: XdsClient) -> XdsConfig:
    async with asyncio.timeout(10), client.watch_config(LISTENER) as updates:
        async for update in updates:
            assert isinstance(update, XdsConfig), f"the listener is unusable: {update}"
            return update
    raise AssertionError("no configuration")


async def test_the_listener_resolves_completely_without_nacks(
    client: XdsClient, server: ControlPlane | str
) -> None:
    config = await first_config(client)
    broken = {name: str(c.error) for name, c in config.clusters.items() if c.error is not None}
    assert broken == {}, "clusters the client cannot use"
    assert config.clusters["api"].leaves == ("api-primary", "api-secondary")
    if isinstance(server, ControlPlane):
        assert server.nacks() == [], "every resource passes gRPC's validation"


async def test_every_leaf_cluster_has_healthy_endpoints(client: XdsClient) -> None:
    config = await first_config(client)
    for name, cluster in config.clusters.items():
        if cluster.endpoints is not None:
            healthy = [
                e for loc in cluster.endpoints.localities for e in loc.endpoints if e.healthy
            ]
            assert healthy, f"{name} has no healthy endpoint"


async def test_an_endpoint_change_reaches_the_client(
    client: XdsClient, server: ControlPlane | str
) -> None:
    if not isinstance(server, ControlPlane):
        pytest.skip("needs a control plane this test can change")
    async with asyncio.timeout(10), client.watch_config(LISTENER) as watch:
        await anext(watch)
        server.set(assignment("web", [("10.9.9.9", 9090, True)]))
        update = await anext(watch)
        assert isinstance(update, XdsConfig)
        web = update.clusters["web"].endpoints
        assert web is not None
        assert [(e.address, e.port) for loc in web.localities for e in loc.endpoints] == [
            ("10.9.9.9", 9090)
        ]


async def test_a_new_endpoint_set_is_delivered_within_a_second(
    client: XdsClient, server: ControlPlane | str
) -> None:
    if not isinstance(server, ControlPlane):
        pytest.skip("needs a control plane this test can change")
    await client.wait_for(ENDPOINT, "web", timeout=10)
    server.set(builders.cluster_load_assignment("web", [("10.8.8.8", 80), ("10.8.8.9", 80)]))
    wanted = ["10.8.8.8", "10.8.8.9"]
    view = await client.wait_for(
        ENDPOINT,
        "web",
        lambda v: [e.address for e in v.priorities[0][0].endpoints] == wanted,
        timeout=1,
    )
    assert view.name == "web"
