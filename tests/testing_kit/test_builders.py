"""The public builders produce resources our validating views (gRPC's rules) accept."""

from __future__ import annotations

import pytest

from xdsclient.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE_CONFIGURATION,
    ClusterType,
    HealthStatus,
    RingHash,
)
from xdsclient.testing import builders


def test_api_listener_takes_routes_from_rds_by_default() -> None:
    name, view = LISTENER.decode(builders.api_listener("svc").SerializeToString())
    assert name == "svc"
    assert view.api_listener is not None
    assert view.api_listener.route_config_name == "svc-routes"
    assert view.api_listener.route_config is None


def test_api_listener_inlines_routes_when_given() -> None:
    routes = builders.route_configuration("inline", "backend")
    _, view = LISTENER.decode(builders.api_listener("svc", routes=routes).SerializeToString())
    assert view.api_listener is not None
    assert view.api_listener.route_config is not None
    route = view.api_listener.route_config.virtual_hosts[0].routes[0]
    assert route.action is not None
    assert route.action.cluster == "backend"


def test_api_listener_refuses_both_rds_and_inline_routes() -> None:
    routes = builders.route_configuration("inline", "backend")
    with pytest.raises(ValueError, match="not both"):
        builders.api_listener("svc", route_config_name="r", routes=routes)


def test_route_configuration_maps_prefixes_to_clusters_and_weights() -> None:
    table: dict[str, builders.Target] = {"/api/": {"a": 10, "b": 90}, "/": "web"}
    message = builders.route_configuration("routes", table, domains=("svc", "*"))
    _, view = ROUTE_CONFIGURATION.decode(message.SerializeToString())
    (vhost,) = view.virtual_hosts
    assert vhost.domains == ("svc", "*")
    api, web = vhost.routes
    assert api.match.path == "/api/"
    assert api.action is not None
    assert [(w.name, w.weight) for w in api.action.weighted_clusters] == [("a", 10), ("b", 90)]
    assert web.action is not None
    assert web.action.cluster == "web"


def test_route_configuration_sends_every_path_to_one_weighted_target() -> None:
    _, view = ROUTE_CONFIGURATION.decode(
        builders.route_configuration("routes", {"a": 1, "b": 3}).SerializeToString()
    )
    (route,) = view.virtual_hosts[0].routes
    assert route.match.path == "/"
    assert route.action is not None
    assert [w.weight for w in route.action.weighted_clusters] == [1, 3]


def test_eds_cluster_with_ring_hash_and_service_name() -> None:
    message = builders.cluster("c", eds_service_name="c-eds", lb_policy="ring_hash")
    _, view = CLUSTER.decode(message.SerializeToString())
    assert view.type is ClusterType.EDS
    assert view.eds_service_name == "c-eds"
    assert isinstance(view.lb_policy, RingHash)


def test_cluster_refuses_an_unknown_lb_policy() -> None:
    with pytest.raises(ValueError, match="lb_policy"):
        builders.cluster("c", lb_policy="random")


def test_aggregate_cluster_keeps_children_in_priority_order() -> None:
    _, view = CLUSTER.decode(builders.aggregate_cluster("agg", ["p", "s"]).SerializeToString())
    assert view.type is ClusterType.AGGREGATE
    assert view.aggregate_children == ("p", "s")


def test_aggregate_cluster_needs_a_child() -> None:
    with pytest.raises(ValueError, match="at least one child"):
        builders.aggregate_cluster("agg", [])


def test_logical_dns_cluster_resolves_one_host() -> None:
    _, view = CLUSTER.decode(
        builders.logical_dns_cluster("dns", "example.com", 443).SerializeToString()
    )
    assert view.type is ClusterType.LOGICAL_DNS
    assert (view.dns_host, view.dns_port) == ("example.com", 443)


def test_load_assignment_from_plain_addresses_is_one_healthy_locality() -> None:
    message = builders.cluster_load_assignment("c", [("10.0.0.1", 80), ("10.0.0.2", 80)])
    _, view = ENDPOINT.decode(message.SerializeToString())
    ((locality,),) = view.priorities
    assert [(e.address, e.port) for e in locality.endpoints] == [
        ("10.0.0.1", 80),
        ("10.0.0.2", 80),
    ]
    assert {e.health_status for e in locality.endpoints} == {HealthStatus.HEALTHY}


def test_load_assignment_with_priorities_weights_and_health() -> None:
    spec = builders.EndpointSpec
    message = builders.cluster_load_assignment(
        "c",
        [
            builders.LocalitySpec(
                [spec("10.0.0.1", 80, weight=3), spec("10.0.0.2", 80, health="unhealthy")],
                zone="a",
                weight=2,
            ),
            builders.LocalitySpec([("10.0.1.1", 80)], zone="b", priority=1),
        ],
    )
    _, view = ENDPOINT.decode(message.SerializeToString())
    (first,), (second,) = view.priorities
    assert (first.locality.zone, first.weight, first.priority) == ("a", 2, 0)
    assert [e.weight for e in first.endpoints] == [3, 1]
    assert first.endpoints[1].health_status is HealthStatus.UNHEALTHY
    assert (second.locality.zone, second.priority) == ("b", 1)


def test_load_assignment_refuses_an_unknown_health() -> None:
    with pytest.raises(ValueError, match="health"):
        builders.cluster_load_assignment("c", [builders.EndpointSpec("10.0.0.1", 80, "sick")])
