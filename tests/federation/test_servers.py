"""Federation and fallback end to end: real control planes on loopback, every variant."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from envoy.config.route.v3 import route_pb2

from tests.builders import cluster, endpoints, listener
from tests.client.conftest import FAST_BACKOFF, Variant
from tests.helpers import eventually
from xdsclient import (
    ClientOptions,
    ConfigUpdate,
    ResourceState,
    XdsClient,
    XdsConfig,
    load_bootstrap,
)
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane, bootstrap

CDS_B = "xdstp://b.example/envoy.config.cluster.v3.Cluster/backend"
EDS_B = "xdstp://b.example/envoy.config.endpoint.v3.ClusterLoadAssignment/backend"
OPTIONS = ClientOptions(does_not_exist_timeout=2.0, backoff=FAST_BACKOFF)


def routes(cluster_name: str) -> Any:
    message = route_pb2.RouteConfiguration(name="routes")
    vhost = message.virtual_hosts.add(name="vh", domains=["*"])
    route = vhost.routes.add()
    route.match.prefix = "/"
    route.route.cluster = cluster_name
    return message


def federated_cluster() -> Any:
    message = cluster(CDS_B)
    message.eds_cluster_config.service_name = EDS_B  # required for xdstp names (gRFC A47)
    return message


def chain(cp: ControlPlane, *, port: int) -> None:
    """A whole old-style chain on one control plane; ``port`` tells which server it came from."""
    cp.set(listener("l"))
    cp.set(routes("c"))
    cp.set(cluster("c"))
    cp.set(endpoints("c", port=port))


async def next_config(watch: AsyncIterator[ConfigUpdate], timeout: float = 5.0) -> XdsConfig:
    async with asyncio.timeout(timeout):
        while True:
            update = await anext(watch)
            if isinstance(update, XdsConfig):
                return update


def port_of(config: XdsConfig, cluster_name: str = "c") -> int:
    endpoints_view = config.clusters[cluster_name].endpoints
    assert endpoints_view is not None
    port: int = endpoints_view.localities[0].endpoints[0].port
    return port


@pytest.fixture
async def two() -> AsyncIterator[tuple[ControlPlane, ControlPlane]]:
    async with ControlPlane() as first, ControlPlane() as second:
        yield first, second


async def test_a_route_in_one_authority_resolves_a_cluster_served_by_another(
    two: tuple[ControlPlane, ControlPlane], variant: Variant
) -> None:
    top, other = two
    top.set(listener("l"))
    top.set(routes(CDS_B))
    other.set(federated_cluster())
    other.set(endpoints(EDS_B, port=7000))
    config = load_bootstrap(bootstrap([top], authorities={"b.example": [other]}))
    async with (
        XdsClient(bootstrap=config, options=OPTIONS, **variant) as client,
        client.watch_config("l") as watch,
    ):
        snapshot = await next_config(watch)
        assert port_of(snapshot, CDS_B) == 7000
    assert {r.type_url.rsplit(".", 1)[-1] for r in other.requests} >= {
        "Cluster",
        "ClusterLoadAssignment",
    }
    assert all(EDS_B not in str(r.message) for r in top.requests)  # each from its own server


async def test_a_primary_down_at_start_is_replaced_then_resumed_when_it_returns(
    two: tuple[ControlPlane, ControlPlane], variant: Variant
) -> None:
    primary, fallback = two
    chain(primary, port=1001)
    chain(fallback, port=2002)
    await primary.stop(keep_port=True)
    config = load_bootstrap(bootstrap([primary, fallback]))
    async with (
        XdsClient(bootstrap=config, options=OPTIONS, **variant) as client,
        client.watch_config("l") as watch,
    ):
        assert port_of(await next_config(watch)) == 2002
        await primary.start()
        assert port_of(await next_config(watch)) == 1001
        await eventually(lambda: fallback.stream_count == 0)  # the fallback channel is closed


async def test_a_primary_lost_after_the_config_is_complete_is_not_replaced(
    two: tuple[ControlPlane, ControlPlane], variant: Variant
) -> None:
    primary, fallback = two
    chain(primary, port=1001)
    chain(fallback, port=2002)
    config = load_bootstrap(bootstrap([primary, fallback]))
    async with (
        XdsClient(bootstrap=config, options=OPTIONS, **variant) as client,
        client.watch_config("l") as watch,
    ):
        assert port_of(await next_config(watch)) == 1001
        await primary.stop()
        await eventually(lambda: _cluster_state(client).error is not None)
        assert fallback.requests == []
        assert _cluster_state(client).value is not None


def _cluster_state(client: XdsClient) -> ResourceState:
    state = client.resource_state(CLUSTER, "c")
    assert state is not None
    return state


LDS_A = "xdstp://a.example/envoy.config.listener.v3.Listener/client/svc%20one?project=1"
RDS_A = "xdstp://a.example/envoy.config.route.v3.RouteConfiguration/routes"
CDS_A = "xdstp://a.example/envoy.config.cluster.v3.Cluster/c"
EDS_A = "xdstp://a.example/envoy.config.endpoint.v3.ClusterLoadAssignment/c"


def xdstp_chain(cp: ControlPlane, *, cluster_name: str = CDS_A) -> None:
    cp.set(listener(LDS_A, route=RDS_A))
    message = routes(cluster_name)
    message.name = RDS_A
    cp.set(message)
    federated = cluster(CDS_A)
    federated.eds_cluster_config.service_name = EDS_A
    cp.set(federated)
    cp.set(endpoints(EDS_A, port=4242))


async def test_the_default_listener_template_resolves_a_service_to_an_xdstp_chain(
    control_plane: ControlPlane, variant: Variant
) -> None:
    xdstp_chain(control_plane)
    config = bootstrap(
        [control_plane],
        authorities={"a.example": []},
        client_default_listener_resource_name_template=(
            "xdstp://a.example/envoy.config.listener.v3.Listener/client/%s?project=1"
        ),
    )
    async with (
        XdsClient(bootstrap=config, options=OPTIONS, **variant) as client,
        client.watch_config("svc one") as watch,
    ):
        snapshot = await next_config(watch)
        assert port_of(snapshot, CDS_A) == 4242
        assert snapshot.virtual_host.domains == ("*",)


async def test_a_route_to_a_cluster_of_an_unconfigured_authority_is_that_cluster_s_error(
    control_plane: ControlPlane, variant: Variant
) -> None:
    stray = "xdstp://nowhere.example/envoy.config.cluster.v3.Cluster/c"
    xdstp_chain(control_plane, cluster_name=stray)
    config = bootstrap([control_plane], authorities={"a.example": []})
    async with (
        XdsClient(bootstrap=config, options=OPTIONS, **variant) as client,
        client.watch_config(LDS_A) as watch,
    ):
        async with asyncio.timeout(5):
            update = await anext(watch)
        assert isinstance(update, XdsConfig)
        error = update.clusters[stray].error
        assert error is not None
        assert "does not configure the authority 'nowhere.example'" in str(error)


async def test_a_route_to_a_malformed_xdstp_name_is_that_cluster_s_error(
    control_plane: ControlPlane, variant: Variant
) -> None:
    malformed = "xdstp://a.example/envoy.config.cluster.v3.Cluster"  # no id
    xdstp_chain(control_plane, cluster_name=malformed)
    config = bootstrap([control_plane], authorities={"a.example": []})
    async with (
        XdsClient(bootstrap=config, options=OPTIONS, **variant) as client,
        client.watch_config(LDS_A) as watch,
    ):
        async with asyncio.timeout(5):
            update = await anext(watch)
        assert isinstance(update, XdsConfig)
        error = update.clusters[malformed].error
        assert error is not None
        assert "no resource id" in str(error)
