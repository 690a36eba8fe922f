"""A whole configuration from the public builders is served, accepted and walked end to end."""

from __future__ import annotations

import asyncio

from xdsclient import XdsClient, XdsConfig
from xdsclient.testing import ControlPlane, builders


async def test_a_configuration_from_builders_arrives_complete_and_nothing_is_nacked(
    control_plane: ControlPlane, client: XdsClient
) -> None:
    control_plane.set_all(
        [
            builders.api_listener("svc"),
            builders.route_configuration("svc-routes", {"/api/": {"api": 9, "web": 1}, "/": "web"}),
            builders.aggregate_cluster("api", ["api-a", "api-b"]),
            builders.cluster("web", lb_policy="ring_hash"),
            builders.cluster("api-a"),
            builders.cluster("api-b", eds_service_name="api-b-eds"),
            builders.cluster_load_assignment("web", [("10.0.0.1", 80)]),
            builders.cluster_load_assignment("api-a", [("10.0.1.1", 80)]),
            builders.cluster_load_assignment(
                "api-b-eds",
                [
                    builders.LocalitySpec([("10.0.2.1", 80)], zone="a"),
                    builders.LocalitySpec([("10.0.3.1", 80)], zone="b", priority=1),
                ],
            ),
        ]
    )
    async with client.watch_config("svc") as watch, asyncio.timeout(5):
        config = await anext(watch)
    assert isinstance(config, XdsConfig)
    assert sorted(config.clusters) == ["api", "api-a", "api-b", "web"]
    assert all(c.endpoints is not None for name, c in config.clusters.items() if name != "api")
    assert control_plane.nacks() == []
