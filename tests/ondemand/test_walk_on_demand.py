"""The dependency walk and request-time clusters: ``cluster_header`` routes and routes Envoy's
on-demand filter covers are not walked ahead (the snapshot says how long to resolve them), and
dynamic clusters are walked without ever withholding a snapshot. Pure: no server."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.on_demand.v3 import on_demand_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from tests.builders import cluster, duration, endpoints, listener, routes
from tests.test_dependencies import Cache, aggregate, full
from xdsclient import ResourceDecodeError, XdsConfig
from xdsclient._watch._dependencies import walk
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION, ListenerView

C, E = CLUSTER.type_url, ENDPOINT.type_url


def on_demand_listener(
    name: str = "l", *, odcds: bool = True, timeout: float | None = None, filter_name: str = "od"
) -> Any:
    """An API listener running Envoy's on-demand filter before the router."""
    manager = hcm_pb2.HttpConnectionManager()
    manager.rds.route_config_name = "routes"
    manager.rds.config_source.ads.SetInParent()
    config = on_demand_pb2.OnDemand()
    if odcds:
        config.odcds.source.ads.SetInParent()
        if timeout is not None:
            config.odcds.timeout.CopyFrom(duration(timeout))
    manager.http_filters.add(name=filter_name).typed_config.Pack(config)
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    message = listener_pb2.Listener(name=name)
    message.api_listener.api_listener.Pack(manager)
    return message


def per_route(odcds: bool, timeout: float | None = None) -> Any:
    config = on_demand_pb2.PerRouteConfig()
    if odcds:
        config.odcds.source.ads.SetInParent()
        if timeout is not None:
            config.odcds.timeout.CopyFrom(duration(timeout))
    return config


def header_routes() -> Any:
    """A route to cluster ``a`` and a ``cluster_header`` route."""
    message = route_pb2.RouteConfiguration(name="routes")
    vhost = message.virtual_hosts.add(name="vh", domains=["*"])
    vhost.routes.add(route=route_components_pb2.RouteAction(cluster="a")).match.prefix = "/a/"
    by_header = vhost.routes.add(route=route_components_pb2.RouteAction(cluster_header="X-C"))
    by_header.match.prefix = "/"
    return message


def complete(cache: Cache, *dynamic: str) -> XdsConfig:
    config = walk("l", "svc", cache.lookup, dynamic=dynamic).config
    assert isinstance(config, XdsConfig)
    return config


def test_a_cluster_header_route_resolves_at_request_time_with_envoys_default() -> None:
    """A ``cluster_header`` route names no cluster to walk; the snapshot says to resolve it at
    request time within Envoy's 5 s, while the other route's cluster is walked."""
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, header_routes())
    full(cache, "a")
    config = complete(cache)
    assert list(config.clusters) == ["a"]
    assert len(config.virtual_host.routes) == 1  # gRPC ignores the header route
    by_cluster, by_header = config.virtual_host.http_routes
    assert by_header.action is not None
    assert (by_header.action.cluster_header, by_header.action.clusters) == ("x-c", ())
    assert config.on_demand_timeout(by_cluster) is None
    assert config.on_demand_timeout(by_header) == 5.0


def test_routes_the_on_demand_filter_covers_are_not_walked_ahead() -> None:
    """The listener runs the on-demand filter with ``odcds``: no route's cluster is walked,
    the snapshot is complete at once, and each route resolves within the filter's timeout."""
    cache = Cache()
    cache.put(LISTENER, on_demand_listener(timeout=2.5))
    cache.put(ROUTE_CONFIGURATION, routes("a", "b"))
    result = walk("l", "svc", cache.lookup)
    assert not any(type_url in (C, E) for type_url, _ in result.wanted)
    config = result.config
    assert isinstance(config, XdsConfig)
    assert dict(config.clusters) == {}
    assert [config.on_demand_timeout(r) for r in config.virtual_host.routes] == [2.5, 2.5]


def test_an_on_demand_filter_without_odcds_walks_every_route() -> None:
    """The filter without ``odcds`` (VHDS only, in Envoy) changes nothing for clusters."""
    cache = Cache()
    cache.put(LISTENER, on_demand_listener(odcds=False))
    cache.put(ROUTE_CONFIGURATION, routes("a"))
    full(cache, "a")
    config = complete(cache)
    assert list(config.clusters) == ["a"]
    assert config.on_demand_timeout(config.virtual_host.routes[0]) is None


def test_the_most_specific_per_filter_config_decides() -> None:
    """The route's config beats the virtual host's, which beats the filter's own: a route
    turning ODCDS off is walked; a virtual host turning it on covers its other routes."""
    message = routes("a", "b")
    vhost = message.virtual_hosts[0]
    vhost.typed_per_filter_config["od"].Pack(per_route(True, timeout=1.0))
    vhost.routes[0].typed_per_filter_config["od"].Pack(per_route(False))
    cache = Cache()
    cache.put(LISTENER, on_demand_listener(odcds=False))
    cache.put(ROUTE_CONFIGURATION, message)
    full(cache, "a")
    config = complete(cache)
    assert list(config.clusters) == ["a"]
    assert [config.on_demand_timeout(r) for r in config.virtual_host.routes] == [None, 1.0]


def test_a_per_route_config_without_the_filter_in_the_listener_does_nothing() -> None:
    """As in Envoy, a per-route config matters only when the listener runs the filter."""
    message = routes("a")
    message.virtual_hosts[0].routes[0].typed_per_filter_config["od"].Pack(per_route(True))
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, message)
    full(cache, "a")
    assert list(complete(cache).clusters) == ["a"]


def test_a_pending_dynamic_cluster_withholds_nothing() -> None:
    """A dynamic cluster not yet resolved is asked for and left out; the snapshot of the
    walked clusters is published without it."""
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a"))
    full(cache, "a")
    result = walk("l", "svc", cache.lookup, dynamic=["d"])
    assert (C, "d") in result.wanted
    assert isinstance(result.config, XdsConfig)
    assert list(result.config.clusters) == ["a"]
    assert result.config.dynamic_clusters == frozenset()


def test_a_resolved_dynamic_cluster_is_walked_with_its_endpoints() -> None:
    """Once its cluster and endpoints are in the cache, a dynamic cluster is in ``clusters``
    and named in ``dynamic_clusters``; one a route reaches too is not dynamic."""
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a"))
    full(cache, "a", "d")
    config = complete(cache, "d", "a")
    assert list(config.clusters) == ["a", "d"]
    assert config.clusters["d"].endpoints is not None
    assert config.dynamic_clusters == {"d"}


def test_a_dynamic_cluster_the_server_does_not_have_is_its_error() -> None:
    """A dynamic cluster known not to exist is in ``clusters`` as its error."""
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a"))
    full(cache, "a")
    cache.missing(C, "ghost")
    config = complete(cache, "ghost")
    assert not config.clusters["ghost"].ok


def test_a_half_resolved_dynamic_aggregate_leaves_nothing_behind() -> None:
    """An aggregate dynamic cluster with a pending child is left out whole: none of its
    resolved children appear as entries of their own."""
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a"))
    full(cache, "a", "x")
    cache.put(CLUSTER, aggregate("agg", "x", "y"))
    config = complete(cache, "agg")
    assert list(config.clusters) == ["a"]
    full(cache, "y")
    config = complete(cache, "agg")
    assert config.clusters["agg"].leaves == ("x", "y")
    assert config.dynamic_clusters == {"agg"}


def test_the_on_demand_filter_and_its_per_route_config_are_validated() -> None:
    """The on-demand filter is a client filter this library runs: accepted, and an ODCDS
    timeout out of range is NACKed naming the field."""
    view = ListenerView.from_proto(on_demand_listener(timeout=3.0))
    assert view.api_listener is not None
    assert [f.name for f in view.api_listener.http_filters] == ["od", "router"]
    bad = on_demand_listener()
    manager = hcm_pb2.HttpConnectionManager()
    bad.api_listener.api_listener.Unpack(manager)
    config = on_demand_pb2.OnDemand()
    config.odcds.timeout.seconds = -1
    manager.http_filters[0].typed_config.Pack(config)
    bad.api_listener.api_listener.Pack(manager)
    with pytest.raises(ResourceDecodeError, match=r"http_filters\[0\].typed_config.odcds.timeout"):
        ListenerView.from_proto(bad)
    message = routes("a")
    message.virtual_hosts[0].routes[0].typed_per_filter_config["od"].Pack(per_route(True, 0.5))
    _, view_routes = ROUTE_CONFIGURATION.decode(message.SerializeToString())
    assert "od" in view_routes.virtual_hosts[0].routes[0].typed_per_filter_config


def test_endpoints_of_the_walked_cluster_are_unchanged_by_a_dynamic_one() -> None:
    """A snapshot's walked clusters are the same entries with and without dynamic ones."""
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a"))
    full(cache, "a", "d")
    cache.put(ENDPOINT, endpoints("d", port=9))
    before = complete(cache)
    after = walk("l", "svc", cache.lookup, before, dynamic=["d"]).config
    assert isinstance(after, XdsConfig)
    assert after.clusters["a"] is before.clusters["a"]


def test_a_dynamic_cluster_pending_again_keeps_its_previous_entry() -> None:
    """A dynamic cluster the server adds after its error waits for its endpoints: the
    snapshot keeps the entry it had rather than dropping the cluster meanwhile."""
    cache = Cache()
    cache.put(LISTENER, listener("l"))
    cache.put(ROUTE_CONFIGURATION, routes("a"))
    full(cache, "a")
    cache.missing(C, "late")
    before = complete(cache, "late")
    cache.put(CLUSTER, cluster("late"))  # its endpoints not yet in
    during = walk("l", "svc", cache.lookup, before, dynamic=["late"]).config
    assert isinstance(during, XdsConfig)
    assert during.clusters["late"] is before.clusters["late"]
    assert during == before
