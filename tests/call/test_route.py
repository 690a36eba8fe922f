"""Routing one call over validated views (gRFC A28, C-core's config selector)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from envoy.config.route.v3 import route_pb2
from google.protobuf import any_pb2

from xdsclient._call import CallConfig, CallRequest, Code, RouteChoice, Status, route_call
from xdsclient._call._route import NO_ROUTE, WRONG_ACTION

from .builders import RLS_TYPE, add_route, call, config, route_config


def _route(cfg: CallConfig, request: CallRequest, seed: int = 0) -> RouteChoice | Status:
    return route_call(
        cfg.hcm,
        request,
        random.Random(seed),
        listener_name=cfg.listener_name,
        route_config=cfg.route_config,
    )


def test_single_cluster_route_is_chosen() -> None:
    """A call matching a route with one cluster goes to that cluster."""
    routes = route_config()
    add_route(routes.virtual_hosts[0], "/pkg.Svc/", "backend")
    choice = _route(config(routes), call())
    assert isinstance(choice, RouteChoice)
    assert choice.cluster == "backend"
    assert choice.cluster_weight is None


def test_no_virtual_host_inline_names_the_listener() -> None:
    """Without a virtual host for the authority, inline routes fail with C-core's LDS wording."""
    routes = route_config(domains=("other",))
    add_route(routes.virtual_hosts[0])
    result = _route(config(routes), call(authority="svc"))
    assert result == Status(
        code=Code.UNAVAILABLE,
        details="empty address list (LDS resource svc: could not find VirtualHost for svc in "
        "RouteConfiguration)",
    )


def test_no_virtual_host_rds_names_the_route_configuration() -> None:
    """Without a virtual host for the authority, RDS routes fail naming the RouteConfiguration."""
    routes = route_config("my-routes", domains=("other",))
    add_route(routes.virtual_hosts[0])
    result = _route(config(routes, inline=False), call(authority="svc.example"))
    assert result == Status(
        code=Code.UNAVAILABLE,
        details="empty address list (RDS resource my-routes: could not find VirtualHost for "
        "svc.example in RouteConfiguration)",
    )


def test_no_matching_route_is_unavailable() -> None:
    """A call no route matches fails with UNAVAILABLE and C-core's details."""
    routes = route_config()
    add_route(routes.virtual_hosts[0], "/other.Svc/")
    assert _route(config(routes), call()) == Status(code=Code.UNAVAILABLE, details=NO_ROUTE)


def test_redirect_route_is_an_inappropriate_action() -> None:
    """A matched route that redirects fails the call; the next route is not tried."""
    routes = route_config()
    route = add_route(routes.virtual_hosts[0], "/pkg.Svc/", cluster=None)
    route.redirect.host_redirect = "elsewhere"
    add_route(routes.virtual_hosts[0], "", "fallback")
    assert _route(config(routes), call()) == Status(code=Code.UNAVAILABLE, details=WRONG_ACTION)


def test_non_forwarding_route_is_an_inappropriate_action() -> None:
    """A non-forwarding action fails a client call with UNAVAILABLE, as C-core."""
    routes = route_config()
    route = add_route(routes.virtual_hosts[0], "", cluster=None)
    route.non_forwarding_action.SetInParent()
    assert _route(config(routes), call()) == Status(code=Code.UNAVAILABLE, details=WRONG_ACTION)


def test_rls_cluster_specifier_plugin_fails_naming_it() -> None:
    """A route to an RLS cluster specifier plugin fails with UNAVAILABLE naming plugin and type."""
    routes = route_config("rc")
    plugin = routes.cluster_specifier_plugins.add()
    plugin.extension.name = "rls"
    plugin.extension.typed_config.CopyFrom(any_pb2.Any(type_url=RLS_TYPE, value=b""))
    route = add_route(routes.virtual_hosts[0], "", cluster=None)
    route.route.cluster_specifier_plugin = "rls"
    result = _route(config(routes, inline=False), call())
    assert isinstance(result, Status)
    assert result.code is Code.UNAVAILABLE
    assert "rc" in result.details
    assert "'rls'" in result.details
    assert "grpc.lookup.v1.RouteLookupClusterSpecifier" in result.details


def test_binary_header_never_matches_but_content_type_is_grpc() -> None:
    """Header matchers see no ``-bin`` header and ``content-type: application/grpc`` always."""
    routes = route_config()
    vhost = routes.virtual_hosts[0]
    bin_route = add_route(vhost, "", "bin")
    bin_route.match.headers.add(name="x-token-bin", present_match=True)
    ct_route = add_route(vhost, "", "grpc")
    ct_route.match.headers.add(name="content-type")
    ct_route.match.headers[0].string_match.exact = "application/grpc"
    request = call(metadata=(("x-token-bin", "AAAA"), ("content-type", "text/plain")))
    choice = _route(config(routes), request)
    assert isinstance(choice, RouteChoice)
    assert choice.cluster == "grpc"


def test_repeated_metadata_is_joined_with_commas_for_matching() -> None:
    """Repeated metadata values are matched as one value joined with ``,``."""
    routes = route_config()
    route = add_route(routes.virtual_hosts[0], "", "joined")
    route.match.headers.add(name="x-user")
    route.match.headers[0].string_match.exact = "a,b"
    add_route(routes.virtual_hosts[0], "", "other")
    choice = _route(config(routes), call(metadata=(("X-User", "a"), ("x-user", "b"))))
    assert isinstance(choice, RouteChoice)
    assert choice.cluster == "joined"


def test_weighted_clusters_split_by_weight() -> None:
    """Weighted clusters are chosen in proportion to their weights (seeded, 20 000 calls)."""
    routes = route_config()
    route = add_route(routes.virtual_hosts[0], "", cluster=None)
    for name, weight in (("a", 1), ("b", 3), ("c", 6)):
        route.route.weighted_clusters.clusters.add(name=name).weight.value = weight
    cfg = config(routes)
    rng = random.Random(1)
    counts: Counter[str] = Counter()
    n = 20_000
    for _ in range(n):
        choice = route_call(cfg.hcm, call(), rng, listener_name="svc")
        assert isinstance(choice, RouteChoice)
        assert choice.cluster_weight is not None
        assert choice.cluster_weight.name == choice.cluster
        counts[choice.cluster] += 1
    for name, share in (("a", 0.1), ("b", 0.3), ("c", 0.6)):
        assert abs(counts[name] / n - share) < 0.015, counts


def test_runtime_fraction_routes_that_share_of_calls_with_a_fresh_roll_per_route() -> None:
    """Two 50% routes in a row take 50% and 25% of calls: each route rolls its own draw."""
    routes = route_config()
    vhost = routes.virtual_hosts[0]
    for name in ("first", "second"):
        route = add_route(vhost, "", name)
        route.match.runtime_fraction.default_value.numerator = 50
    add_route(vhost, "", "rest")
    cfg = config(routes)
    rng = random.Random(2)
    counts: Counter[str] = Counter()
    n = 20_000
    for _ in range(n):
        choice = route_call(cfg.hcm, call(), rng, listener_name="svc")
        assert isinstance(choice, RouteChoice)
        counts[choice.cluster] += 1
    assert abs(counts["first"] / n - 0.5) < 0.015
    assert abs(counts["second"] / n - 0.25) < 0.015
    assert abs(counts["rest"] / n - 0.25) < 0.015


def test_missing_rds_routes_is_a_caller_error() -> None:
    """Routing before the RDS resource arrived is the front end's bug, not a call status."""
    routes = route_pb2.RouteConfiguration(name="routes")
    cfg = config(routes, inline=False)
    with pytest.raises(ValueError, match="routes"):
        route_call(cfg.hcm, call(), random.Random(0), listener_name="svc")
