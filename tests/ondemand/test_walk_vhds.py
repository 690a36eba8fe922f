"""The dependency walk over a route configuration with ``vhds``: the virtual host of the
authority is asked for on demand, the snapshot waits for it, and a host the server does not
know is "no virtual host"; end to end, `watch_config` yields the configuration once VHDS
resolved it."""

from __future__ import annotations

from typing import Any

from envoy.config.route.v3 import route_components_pb2, route_pb2

from tests.builders import cluster, endpoints, listener
from tests.test_dependencies import Cache, _state, full
from xdsclient import ResourceStatus, XdsClient, XdsConfig, XdsError
from xdsclient._watch._dependencies import walk
from xdsclient.resources import LISTENER, ROUTE_CONFIGURATION, VIRTUAL_HOST
from xdsclient.testing import ControlPlane

VH = VIRTUAL_HOST.type_url
ACKED = ResourceStatus.ACKED


def vhds_routes(name: str = "ns/routes", *local_domains: str) -> Any:
    message = route_pb2.RouteConfiguration(name=name)
    message.vhds.config_source.ads.SetInParent()
    if local_domains:
        vhost = message.virtual_hosts.add(name="local", domains=list(local_domains))
        vhost.routes.add(route=route_components_pb2.RouteAction(cluster="local")).match.prefix = "/"
    return message


def vhost(name: str, target: str, *domains: str) -> Any:
    message = route_components_pb2.VirtualHost(name=name, domains=list(domains))
    route = message.routes.add()
    route.match.prefix = "/"
    route.route.cluster = target
    return message


def test_a_vhds_route_configuration_waits_for_the_authoritys_virtual_host() -> None:
    """No local virtual host matches: the walk asks for ``<route configuration>/<authority>``
    and publishes nothing until it comes; then its clusters are walked."""
    cache = Cache()
    cache.put(LISTENER, listener("l", route="ns/routes"))
    cache.put(ROUTE_CONFIGURATION, vhds_routes())
    pending = walk("l", "api.io", cache.lookup)
    assert pending.config is None
    assert (VH, "ns/routes/api.io") in pending.wanted
    _, view = VIRTUAL_HOST.decode(vhost("ns/routes/vh", "a", "api.io").SerializeToString())
    cache.states[(VH, "ns/routes/api.io")] = _state(VH, "ns/routes/api.io", ACKED, view)
    full(cache, "a")
    config = walk("l", "api.io", cache.lookup).config
    assert isinstance(config, XdsConfig)
    assert config.virtual_host.name == "ns/routes/vh"
    assert sorted(config.clusters) == ["a"]


def test_a_host_the_vhds_server_does_not_know_is_no_virtual_host() -> None:
    """Missing from VHDS: the configuration is the error "no virtual host"."""
    cache = Cache()
    cache.put(LISTENER, listener("l", route="ns/routes"))
    cache.put(ROUTE_CONFIGURATION, vhds_routes())
    cache.missing(VH, "ns/routes/nope.io")
    config = walk("l", "nope.io", cache.lookup).config
    assert isinstance(config, XdsError)
    assert "no virtual host" in str(config)


def test_a_local_virtual_host_that_matches_needs_no_vhds() -> None:
    """The route configuration's own virtual hosts come first: one that matches is used."""
    cache = Cache()
    cache.put(LISTENER, listener("l", route="ns/routes"))
    cache.put(ROUTE_CONFIGURATION, vhds_routes("ns/routes", "here.io"))
    full(cache, "local")
    result = walk("l", "here.io", cache.lookup)
    assert isinstance(result.config, XdsConfig)
    assert all(type_url != VH for type_url, _ in result.wanted)


async def test_watch_config_yields_the_configuration_vhds_resolves() -> None:
    """End to end over Delta: the listener's route configuration carries ``vhds``; the
    configuration arrives once the server answered the authority's virtual host."""
    async with ControlPlane() as control_plane:
        control_plane.set_all(
            [
                listener("svc", route="ns/routes"),
                vhds_routes(),
                vhost("ns/routes/vh", "a", "svc"),
                cluster("a"),
                endpoints("a"),
            ]
        )
        async with XdsClient(control_plane.address, node_id="n", delta=True) as client:
            config = await client.wait_for_config("svc", timeout=5.0)
    assert config.virtual_host.name == "ns/routes/vh"
    assert list(config.clusters) == ["a"]


async def test_a_vhds_route_configuration_on_a_sotw_per_type_client_is_no_virtual_host() -> None:
    """No per-type SotW service carries VHDS: the walk's virtual host is a data error, so the
    configuration is "no virtual host" (the walk does not raise)."""
    async with ControlPlane() as control_plane:
        control_plane.set_all([listener("svc", route="ns/routes"), vhds_routes()])
        async with (
            XdsClient(control_plane.address, node_id="n", ads=False, delta=False) as client,
            client.watch_config("svc") as updates,
        ):
            update = await anext(updates)
    assert isinstance(update, XdsError)
    assert "no virtual host" in str(update)
