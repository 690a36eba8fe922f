"""One-change variants of a valid Listener -> Route -> Cluster -> endpoints chain.

Why: the differential harness serves each variant to grpcio's C-core xDS client and to our
decoders and compares ACK/NACK per type; every variant changes one thing and says what in one
line, so a disagreement points at one rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

LDS, RDS, CDS, EDS = "listener", "route", "cluster", "endpoint"


@attrs.frozen
class Chain:
    """The four resources of one variant, named after it so variants can be served together."""

    listener: Any
    routes: Any
    cluster: Any
    endpoints: Any

    def resources(self) -> list[Any]:
        return [self.listener, self.routes, self.cluster, self.endpoints]


def base_chain(tag: str) -> Chain:
    """A chain C-core and we both accept; names are ``<tag>.<kind>``."""
    manager = hcm_pb2.HttpConnectionManager()
    manager.rds.route_config_name = f"{tag}.route"
    manager.rds.config_source.ads.SetInParent()
    manager.http_filters.add(name="router").typed_config.Pack(router_pb2.Router())
    listener = listener_pb2.Listener(name=f"{tag}.listener")
    listener.api_listener.api_listener.Pack(manager)
    routes = route_pb2.RouteConfiguration(name=f"{tag}.route")
    vhost = routes.virtual_hosts.add(name="vh", domains=["*"])
    route = vhost.routes.add()
    route.match.prefix = "/"
    route.route.cluster = f"{tag}.cluster"
    cluster = cluster_pb2.Cluster(name=f"{tag}.cluster", type=cluster_pb2.Cluster.EDS)
    cluster.eds_cluster_config.eds_config.ads.SetInParent()
    cluster.eds_cluster_config.service_name = f"{tag}.endpoint"
    endpoints = endpoint_pb2.ClusterLoadAssignment(cluster_name=f"{tag}.endpoint")
    group = endpoints.endpoints.add()
    group.load_balancing_weight.value = 1
    group.locality.region = "r"  # C-core requires a locality
    lb = group.lb_endpoints.add()
    lb.endpoint.address.socket_address.address = "127.0.0.1"
    lb.endpoint.address.socket_address.port_value = 1
    return Chain(listener, routes, cluster, endpoints)


@attrs.frozen
class Variant:
    kind: str  #: which resource the change is in (LDS/RDS/CDS/EDS)
    description: str
    change: Callable[[Chain], object]


def _manager(chain: Chain) -> Any:
    manager = hcm_pb2.HttpConnectionManager()
    chain.listener.api_listener.api_listener.Unpack(manager)
    return manager


def _hcm(edit: Callable[[Any], object]) -> Callable[[Chain], None]:
    def change(chain: Chain) -> None:
        manager = _manager(chain)
        edit(manager)
        chain.listener.api_listener.api_listener.Pack(manager)

    return change


def _route(edit: Callable[[Any], object]) -> Callable[[Chain], object]:
    return lambda chain: edit(chain.routes.virtual_hosts[0].routes[0])


def _set(path: str, value: Any) -> Callable[[Any], None]:
    def edit(message: Any) -> None:
        *parents, last = path.split(".")
        for part in parents:
            message = getattr(message, part)
        setattr(message, last, value)

    return edit


def _clear(field: str) -> Callable[[Any], None]:
    return lambda message: message.ClearField(field)


def _add_filter_first(name: str, packed_type: str, *, optional: bool = False) -> Any:
    def edit(manager: Any) -> None:
        router = manager.http_filters.pop()
        extra = manager.http_filters.add(name=name, is_optional=optional)
        extra.typed_config.type_url = packed_type
        manager.http_filters.append(router)

    return edit


def _lb_endpoint(edit: Callable[[Any], object]) -> Callable[[Chain], object]:
    return lambda chain: edit(chain.endpoints.endpoints[0].lb_endpoints[0])


def _regex(pattern: str) -> Callable[[Any], None]:
    def edit(route: Any) -> None:
        route.match.safe_regex.regex = pattern

    return edit


VARIANTS: list[Variant] = [
    Variant(LDS, "base chain unchanged", lambda c: None),
    Variant(LDS, "listener without api_listener", lambda c: c.listener.ClearField("api_listener")),
    Variant(LDS, "hcm without http_filters", _hcm(_clear("http_filters"))),
    Variant(LDS, "hcm with inline route_config", _hcm(lambda m: m.route_config.SetInParent())),
    Variant(LDS, "hcm with neither rds nor route_config", _hcm(_clear("rds"))),
    Variant(
        LDS, "rds config_source is self", _hcm(lambda m: m.rds.config_source.self.SetInParent())
    ),
    Variant(LDS, "rds config_source empty", _hcm(lambda m: m.rds.ClearField("config_source"))),
    Variant(
        LDS,
        "router not last filter",
        _hcm(lambda m: m.http_filters.add(name="extra").typed_config.Pack(router_pb2.Router())),
    ),
    Variant(
        LDS, "duplicate filter names", _hcm(lambda m: m.http_filters.insert(0, m.http_filters[0]))
    ),
    Variant(
        LDS,
        "unknown required filter before router",
        _hcm(_add_filter_first("x", "type.googleapis.com/x.Unknown")),
    ),
    Variant(
        LDS,
        "unknown optional filter before router",
        _hcm(_add_filter_first("x", "type.googleapis.com/x.Unknown", optional=True)),
    ),
    Variant(
        LDS,
        "RBAC filter on client listener",
        _hcm(
            _add_filter_first(
                "rbac", "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"
            )
        ),
    ),
    Variant(
        LDS,
        "fault filter on client listener",
        _hcm(
            _add_filter_first(
                "fault", "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"
            )
        ),
    ),
    Variant(
        LDS,
        "router filter without typed_config",
        _hcm(lambda m: m.http_filters[0].ClearField("typed_config")),
    ),
    Variant(
        LDS,
        "max_stream_duration set",
        _hcm(lambda m: m.common_http_protocol_options.max_stream_duration.FromSeconds(5)),
    ),
    Variant(
        LDS,
        "negative max_stream_duration",
        _hcm(lambda m: setattr(m.common_http_protocol_options.max_stream_duration, "seconds", -1)),
    ),
    Variant(RDS, "no virtual hosts", lambda c: c.routes.ClearField("virtual_hosts")),
    Variant(
        RDS,
        "virtual host without domains",
        lambda c: c.routes.virtual_hosts[0].ClearField("domains"),
    ),
    Variant(
        RDS, "domain with two wildcards", lambda c: c.routes.virtual_hosts[0].domains.append("*a*")
    ),
    Variant(RDS, "route without action", _route(_clear("route"))),
    Variant(RDS, "route with redirect action", _route(lambda r: r.redirect.SetInParent())),
    Variant(
        RDS,
        "route with non_forwarding_action",
        _route(lambda r: r.non_forwarding_action.SetInParent()),
    ),
    Variant(RDS, "route match path", _route(lambda r: setattr(r.match, "path", "/a/b"))),
    Variant(RDS, "valid safe_regex", _route(_regex("/a.*"))),
    Variant(RDS, "safe_regex with bad syntax", _route(_regex("(unclosed"))),
    Variant(RDS, "safe_regex with backreference (not RE2)", _route(_regex("(a)\\1"))),
    Variant(RDS, "safe_regex with lookahead (not RE2)", _route(_regex("a(?=b)"))),
    Variant(RDS, "empty cluster name", _route(_set("route.cluster", ""))),
    Variant(RDS, "cluster_header action", _route(_set("route.cluster_header", "x-c"))),
    Variant(
        RDS,
        "weighted clusters all weight 0",
        _route(lambda r: r.route.weighted_clusters.clusters.add(name="a").weight.SetInParent()),
    ),
    Variant(
        RDS,
        "runtime_fraction over 100%",
        _route(lambda r: setattr(r.match.runtime_fraction.default_value, "numerator", 2000000)),
    ),
    Variant(
        RDS,
        "header matcher with invalid regex",
        _route(lambda r: setattr(r.match.headers.add(name="a").safe_regex_match, "regex", "(x")),
    ),
    Variant(
        RDS,
        "case-insensitive prefix",
        _route(lambda r: setattr(r.match.case_sensitive, "value", False)),
    ),
    Variant(
        RDS,
        "retry policy with zero base interval",
        _route(lambda r: r.route.retry_policy.retry_back_off.base_interval.SetInParent()),
    ),
    Variant(
        CDS, "cluster type STATIC", lambda c: setattr(c.cluster, "type", cluster_pb2.Cluster.STATIC)
    ),
    Variant(
        CDS,
        "cluster type LOGICAL_DNS without endpoints",
        lambda c: setattr(c.cluster, "type", cluster_pb2.Cluster.LOGICAL_DNS),
    ),
    Variant(
        CDS,
        "eds_config self source",
        lambda c: c.cluster.eds_cluster_config.eds_config.self.SetInParent(),
    ),
    Variant(
        CDS, "eds_config empty", lambda c: c.cluster.eds_cluster_config.ClearField("eds_config")
    ),
    Variant(
        CDS,
        "lb_policy RING_HASH",
        lambda c: setattr(c.cluster, "lb_policy", cluster_pb2.Cluster.RING_HASH),
    ),
    Variant(
        CDS,
        "lb_policy LEAST_REQUEST",
        lambda c: setattr(c.cluster, "lb_policy", cluster_pb2.Cluster.LEAST_REQUEST),
    ),
    Variant(
        CDS,
        "lb_policy RANDOM",
        lambda c: setattr(c.cluster, "lb_policy", cluster_pb2.Cluster.RANDOM),
    ),
    Variant(
        CDS,
        "lb_policy MAGLEV",
        lambda c: setattr(c.cluster, "lb_policy", cluster_pb2.Cluster.MAGLEV),
    ),
    Variant(
        CDS,
        "ring hash max below min",
        lambda c: (
            setattr(c.cluster, "lb_policy", cluster_pb2.Cluster.RING_HASH),
            setattr(c.cluster.ring_hash_lb_config.minimum_ring_size, "value", 100),
            setattr(c.cluster.ring_hash_lb_config.maximum_ring_size, "value", 10),
        ),
    ),
    Variant(
        CDS,
        "outlier detection interval negative",
        lambda c: setattr(c.cluster.outlier_detection.interval, "seconds", -1),
    ),
    Variant(
        CDS,
        "outlier enforcing_success_rate over 100",
        lambda c: setattr(c.cluster.outlier_detection.enforcing_success_rate, "value", 101),
    ),
    Variant(CDS, "lrs_server self", lambda c: c.cluster.lrs_server.self.SetInParent()),
    Variant(CDS, "lrs_server ads", lambda c: c.cluster.lrs_server.ads.SetInParent()),
    Variant(
        EDS,
        "endpoint port 0",
        _lb_endpoint(lambda e: setattr(e.endpoint.address.socket_address, "port_value", 0)),
    ),
    Variant(
        EDS,
        "endpoint weight 0",
        _lb_endpoint(lambda e: setattr(e.load_balancing_weight, "value", 0)),
    ),
    Variant(
        EDS, "endpoint without address", _lb_endpoint(lambda e: e.endpoint.ClearField("address"))
    ),
    Variant(
        EDS,
        "locality weight 0 (skipped)",
        lambda c: setattr(c.endpoints.endpoints[0].load_balancing_weight, "value", 0),
    ),
    Variant(EDS, "no localities", lambda c: c.endpoints.ClearField("endpoints")),
    Variant(EDS, "priority gap", lambda c: setattr(c.endpoints.endpoints[0], "priority", 1)),
    Variant(
        EDS,
        "drop overload with unknown denominator",
        lambda c: setattr(
            c.endpoints.policy.drop_overloads.add(category="x").drop_percentage, "denominator", 9
        ),
    ),
    Variant(
        EDS, "locality field absent", lambda c: c.endpoints.endpoints[0].ClearField("locality")
    ),
    Variant(
        EDS,
        "hostname endpoint address",
        _lb_endpoint(
            lambda e: setattr(e.endpoint.address.socket_address, "address", "example.com")
        ),
    ),
]
