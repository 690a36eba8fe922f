"""A config walk names each cluster's error once: the message carries its own resource prefix
(``Cluster "name": ...``) a single time, however the walk found the cluster unusable."""

from __future__ import annotations

import asyncio

from tests.builders import listener
from tests.federation.test_servers import OPTIONS, routes
from xdsclient import XdsClient, XdsConfig
from xdsclient.testing import ControlPlane

STRAY = "xdstp://nowhere.example/envoy.config.cluster.v3.Cluster/c"


async def test_a_cluster_of_an_unconfigured_authority_is_named_once_in_its_error() -> None:
    """The walk's error for a cluster whose authority the bootstrap lacks says
    ``Cluster "<name>": <reason>``, not the prefix twice."""
    async with ControlPlane() as plane:
        plane.set(listener("l"))
        plane.set(routes(STRAY))
        async with (
            XdsClient(plane.address, node_id="n", options=OPTIONS) as client,
            client.watch_config("l") as watch,
        ):
            async with asyncio.timeout(5):
                update = await anext(watch)
    assert isinstance(update, XdsConfig)
    assert str(update.clusters[STRAY].error) == (
        f"Cluster \"{STRAY}\": the bootstrap does not configure the authority 'nowhere.example'"
    )
