"""An integration test of a control plane, written with xdsclient's pytest plugin.

Control-plane teams point the plugin's ``xds_client`` at their server and assert what a real
data-plane client gets: a complete configuration, no NACKs, the right endpoints, and that
changes arrive in time. Without options the embedded ``xds_control_plane`` (loaded here with
the demo configuration) is the server under test; run against yours with

    pytest examples/control_plane_test.py --xds-server cp.example:18000 --xds-variant ads-delta

(the tests that change the configuration skip themselves then: they need a server they can
change).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from xdsclient import XdsClient, XdsConfig
from xdsclient.resources import ENDPOINT
from xdsclient.testing import ControlPlane, ProtocolRecorder, builders, demo_resources
from xdsclient.testing.pytest_plugin import XdsTestSettings

LISTENER = "shop.example.com"


@pytest.fixture(autouse=True)
def demo(xds_settings: XdsTestSettings, request: pytest.FixtureRequest) -> None:
    """The embedded control plane serves the demo configuration (none is started when the
    tests run against another server)."""
    if not xds_settings.external:
        control_plane: ControlPlane = request.getfixturevalue("xds_control_plane")
        control_plane.set_all(demo_resources(LISTENER))


@pytest.fixture
def changeable(xds_settings: XdsTestSettings, request: pytest.FixtureRequest) -> ControlPlane:
    """The server under test, when it is one this test can change."""
    if xds_settings.external:
        pytest.skip("needs a control plane this test can change")
    control_plane: ControlPlane = request.getfixturevalue("xds_control_plane")
    return control_plane


async def first_config(client: XdsClient) -> XdsConfig:
    async with asyncio.timeout(10), client.watch_config(LISTENER) as updates:
        async for update in updates:
            assert isinstance(update, XdsConfig), f"the listener is unusable: {update}"
            return update
    raise AssertionError("no configuration")


async def test_the_listener_resolves_completely_without_nacks(
    xds_client: XdsClient, xds_recorder: ProtocolRecorder
) -> None:
    config = await first_config(xds_client)
    broken = {name: str(c.error) for name, c in config.clusters.items() if c.error is not None}
    assert broken == {}, "clusters the client cannot use"
    assert config.clusters["api"].leaves == ("api-primary", "api-secondary")
    xds_recorder.assert_no_nacks()  # every resource passes gRPC's validation


async def test_every_leaf_cluster_has_healthy_endpoints(xds_client: XdsClient) -> None:
    config = await first_config(xds_client)
    for name, cluster in config.clusters.items():
        if cluster.endpoints is not None:
            healthy = [
                e for loc in cluster.endpoints.localities for e in loc.endpoints if e.healthy
            ]
            assert healthy, f"{name} has no healthy endpoint"


async def test_a_new_endpoint_set_is_delivered_within_a_second(
    xds_client: XdsClient, xds_recorder: ProtocolRecorder, changeable: ControlPlane
) -> None:
    await xds_client.wait_for(ENDPOINT, "web", timeout=10)
    pushed = asyncio.get_running_loop().time()  # the client's clock is the loop's
    changeable.set(builders.cluster_load_assignment("web", [("10.8.8.8", 80), ("10.8.8.9", 80)]))
    wanted = ["10.8.8.8", "10.8.8.9"]
    view = await xds_client.wait_for(
        ENDPOINT,
        "web",
        lambda v: [e.address for e in v.priorities[0][0].endpoints] == wanted,
        timeout=1,
    )
    assert view.name == "web"
    latency = xds_recorder.first_update(ENDPOINT.type_url, "web", after=pushed) - pushed
    assert 0 <= latency < 1.0
    xds_recorder.assert_no_nacks()


async def test_the_server_passes_the_conformance_rules(xds_check: Any) -> None:
    report = await xds_check(variants=["ads-sotw", "ads-delta"], quiet=0.3, timeout=2)
    assert report.ok, report.table()  # no MUST rule failed
