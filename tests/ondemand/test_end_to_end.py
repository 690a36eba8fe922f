"""On demand over grpc.aio against the test control plane: clusters resolved by name (an
unknown one Missing through ``removed_resources``), and VHDS virtual hosts by host (an unknown
host Missing through a body-less answer, the table sent again after a route configuration
change)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from envoy.config.route.v3 import route_components_pb2, route_pb2

from tests.builders import cluster
from tests.helpers import eventually
from xdsclient import Available, ClientOptions, Missing, XdsClient
from xdsclient.resources import CLUSTER, ROUTE_CONFIGURATION, VIRTUAL_HOST
from xdsclient.testing import ControlPlane


@pytest.fixture
async def control_plane() -> AsyncIterator[ControlPlane]:
    async with ControlPlane() as cp:
        yield cp


def route_config(name: str, marker: str = "v1") -> Any:
    message = route_pb2.RouteConfiguration(name=name)
    message.vhds.config_source.ads.SetInParent()
    message.request_headers_to_add.add().header.key = marker
    return message


def vhost(name: str, *domains: str) -> Any:
    message = route_components_pb2.VirtualHost(name=name, domains=list(domains))
    route = message.routes.add()
    route.match.prefix = "/"
    route.route.cluster = "backend"
    return message


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
async def test_a_served_cluster_resolves_available(
    control_plane: ControlPlane, delta: bool
) -> None:
    """A cluster the server has is Available, in both variants."""
    control_plane.set(cluster("a"))
    async with XdsClient(control_plane.address, node_id="n", delta=delta) as client:
        outcome = await client.resolve(CLUSTER, "a", timeout=5.0)
    assert isinstance(outcome, Available)
    assert outcome.view.name == "a"


async def test_an_unknown_cluster_is_missing_through_removed_resources(
    control_plane: ControlPlane,
) -> None:
    """The server names a cluster it does not have in ``removed_resources``: Missing."""
    async with XdsClient(control_plane.address, node_id="n", delta=True) as client:
        outcome = await client.resolve(CLUSTER, "ghost", timeout=5.0)
    assert isinstance(outcome, Missing)
    [response] = [r for r in control_plane.responses if r.type_url == CLUSTER.type_url]
    assert response.removed == ("ghost",)


async def test_virtual_hosts_resolve_by_host_and_an_unknown_host_is_missing(
    control_plane: ControlPlane,
) -> None:
    """A host resolves to the virtual host whose domains match it; a host none matches is
    Missing; after the route configuration changes the server sends the table again and a
    resolve waits for it."""
    control_plane.set(route_config("ns/routes"))
    control_plane.set(vhost("ns/routes/vh", "x.io", "*.x.io"))
    options = ClientOptions(on_demand_grace=60.0)
    async with XdsClient(control_plane.address, node_id="n", delta=True, options=options) as c:
        found = await c.resolve(VIRTUAL_HOST, "ns/routes/api.x.io", timeout=5.0)
        assert isinstance(found, Available)
        assert found.view.name == "ns/routes/vh"
        assert isinstance(await c.resolve(VIRTUAL_HOST, "ns/routes/y.io", timeout=5.0), Missing)
        sent = len(control_plane.responses)
        control_plane.set(route_config("ns/routes", "v2"))
        await c.wait_for(
            ROUTE_CONFIGURATION,
            "ns/routes",
            lambda view: view.proto.request_headers_to_add[0].header.key == "v2",
            timeout=5.0,
        )
        again = await c.resolve(VIRTUAL_HOST, "ns/routes/api.x.io", timeout=5.0)
        assert isinstance(again, Available)
        resent = await eventually(
            lambda: [
                r.names
                for r in control_plane.responses[sent:]
                if r.type_url == VIRTUAL_HOST.type_url
            ]
        )
        assert resent == [("ns/routes/vh", "ns/routes/y.io")]  # every host asked for, again
        assert c.resource_state(ROUTE_CONFIGURATION, "ns/routes") is not None
