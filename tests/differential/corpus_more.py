"""More one-change variants: the client-side rules of gRPC's xDS gRFCs, type by type.

Why a second module: `corpus.py` holds the chain, the helpers and the first variants; these
extend the corpus past 200 with the rules of A27 (LDS/RDS/CDS/EDS basics), A28 (routing and
matchers), A29 (security: transport sockets), A31 (timeouts), A36 (filters), A37 (aggregate and
logical DNS clusters), A39 (filter registry), A42 (ring hash), A44 (retries), A48 (least
request), A50 (outlier detection), A52 (load_balancing_policy), A53 (deletion), A58 (WRR),
A61 (additional addresses), A62 (pick first) and A76 (ring hash keys). Each changes one thing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, base_pb2, health_check_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.gcp_authn.v3 import gcp_authn_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2
from envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3 import (
    client_side_weighted_round_robin_pb2 as wrr_pb2,
)
from envoy.extensions.load_balancing_policies.least_request.v3 import least_request_pb2
from envoy.extensions.load_balancing_policies.pick_first.v3 import pick_first_pb2
from envoy.extensions.load_balancing_policies.ring_hash.v3 import ring_hash_pb2
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.extensions.load_balancing_policies.wrr_locality.v3 import wrr_locality_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from envoy.type.v3 import percent_pb2
from xds.type.v3 import typed_struct_pb2

from .corpus import CDS, EDS, LDS, RDS, Chain, Variant, _hcm, _lb_endpoint, _route
from .corpus import VARIANTS as BASE_VARIANTS
from .corpus_parity import VARIANTS as PARITY_VARIANTS

Change = Callable[[Chain], object]


def _filter_first(name: str, config: Any, *, optional: bool = False) -> Change:
    """Insert an HTTP filter with ``config`` (a message) before the router."""

    def edit(manager: Any) -> None:
        router = manager.http_filters.pop()
        extra = manager.http_filters.add(name=name, is_optional=optional)
        extra.typed_config.Pack(config)
        manager.http_filters.append(router)

    return _hcm(edit)


def _fault(edit: Callable[[Any], object]) -> Any:
    config = fault_pb2.HTTPFault()
    edit(config)
    return config


def _per_route(filter_name: str, config: Any, *, wrap_optional: bool = False) -> Change:
    def change(chain: Chain) -> None:
        packed = chain.routes.virtual_hosts[0].routes[0].typed_per_filter_config[filter_name]
        if wrap_optional:
            from envoy.config.route.v3 import route_components_pb2 as rc

            wrapper = rc.FilterConfig(is_optional=True)
            wrapper.config.Pack(config)
            packed.Pack(wrapper)
        else:
            packed.Pack(config)

    return change


def _vhost(edit: Callable[[Any], object]) -> Change:
    return lambda chain: edit(chain.routes.virtual_hosts[0])


def _header(edit: Callable[[Any], object]) -> Change:
    return _route(lambda r: edit(r.match.headers.add(name="x-h")))


def _action(edit: Callable[[Any], object]) -> Change:
    return _route(lambda r: edit(r.route))


def _weighted(*pairs: tuple[str, int]) -> Change:
    def edit(route: Any) -> None:
        route.route.ClearField("cluster")
        for name, weight in pairs:
            route.route.weighted_clusters.clusters.add(name=name).weight.value = weight

    return _route(edit)


def _retry(edit: Callable[[Any], object]) -> Change:
    return _action(lambda a: edit(a.retry_policy))


def _hash(edit: Callable[[Any], object]) -> Change:
    return _action(lambda a: edit(a.hash_policy.add()))


def _cluster(edit: Callable[[Any], object]) -> Change:
    return lambda chain: edit(chain.cluster)


def _policy(config: Any) -> Change:
    """load_balancing_policy with one policy: ``config``."""

    def edit(cluster: Any) -> None:
        cluster.load_balancing_policy.policies.add().typed_extension_config.typed_config.Pack(
            config
        )
        cluster.load_balancing_policy.policies[-1].typed_extension_config.name = "p"

    return _cluster(edit)


def _typed_struct_policy(type_url: str) -> Change:
    def edit(cluster: Any) -> None:
        struct = typed_struct_pb2.TypedStruct(type_url=type_url)
        entry = cluster.load_balancing_policy.policies.add().typed_extension_config
        entry.name = "custom"
        entry.typed_config.Pack(struct)

    return _cluster(edit)


def _ring(minimum: int | None = None, maximum: int | None = None, **fields: Any) -> Change:
    def edit(cluster: Any) -> None:
        cluster.lb_policy = cluster_pb2.Cluster.RING_HASH
        config = cluster.ring_hash_lb_config
        if minimum is not None:
            config.minimum_ring_size.value = minimum
        if maximum is not None:
            config.maximum_ring_size.value = maximum
        for key, value in fields.items():
            setattr(config, key, value)

    return _cluster(edit)


def _outlier(edit: Callable[[Any], object]) -> Change:
    return _cluster(lambda c: edit(c.outlier_detection))


def _aggregate(*children: str) -> Change:
    def edit(cluster: Any) -> None:
        cluster.ClearField("type")
        cluster.ClearField("eds_cluster_config")
        cluster.cluster_type.name = "envoy.clusters.aggregate"
        cluster.cluster_type.typed_config.Pack(aggregate_pb2.ClusterConfig(clusters=children))

    return _cluster(edit)


def _logical_dns(*addresses: tuple[str, int]) -> Change:
    def edit(cluster: Any) -> None:
        cluster.type = cluster_pb2.Cluster.LOGICAL_DNS
        cluster.ClearField("eds_cluster_config")
        group = cluster.load_assignment.endpoints.add()
        for host, port in addresses:
            socket = group.lb_endpoints.add().endpoint.address.socket_address
            socket.address, socket.port_value = host, port

    return _cluster(edit)


def _tls(edit: Callable[[Any], object]) -> Change:
    def change(chain: Chain) -> None:
        context = tls_pb2.UpstreamTlsContext()
        edit(context)
        chain.cluster.transport_socket.name = "envoy.transport_sockets.tls"
        chain.cluster.transport_socket.typed_config.Pack(context)

    return change


def _locality(edit: Callable[[Any], object]) -> Change:
    return lambda chain: edit(chain.endpoints.endpoints[0])


def _second_locality(edit: Callable[[Any], object]) -> Change:
    def change(chain: Chain) -> None:
        group = chain.endpoints.endpoints.add()
        group.load_balancing_weight.value = 1
        group.locality.region = "r2"
        socket = group.lb_endpoints.add().endpoint.address.socket_address
        socket.address, socket.port_value = "127.0.0.2", 2
        edit(group)

    return change


def _drop(numerator: int, denominator: int = 0, category: str = "lb") -> Change:
    def change(chain: Chain) -> None:
        drop = chain.endpoints.policy.drop_overloads.add(category=category)
        drop.drop_percentage.numerator = numerator
        drop.drop_percentage.denominator = denominator

    return change


def _health(status: int) -> Change:
    return _lb_endpoint(lambda e: setattr(e, "health_status", status))


def _address(address: str, port: int = 1) -> Change:
    def edit(endpoint: Any) -> None:
        socket = endpoint.endpoint.address.socket_address
        socket.address, socket.port_value = address, port

    return _lb_endpoint(edit)


def _set_duration(
    getter: Callable[[Any], Any], seconds: int, nanos: int = 0
) -> Callable[[Any], None]:
    def edit(message: Any) -> None:
        duration = getter(message)
        duration.seconds, duration.nanos = seconds, nanos

    return edit


def _wrr_locality() -> Any:
    config = wrr_locality_pb2.WrrLocality()
    child = config.endpoint_picking_policy.policies.add().typed_extension_config
    child.name = "rr"
    child.typed_config.Pack(round_robin_pb2.RoundRobin())
    return config


LISTENER_VARIANTS = [
    Variant(
        LDS,
        "api_listener packs a Cluster instead of an HCM",
        lambda c: c.listener.api_listener.api_listener.Pack(cluster_pb2.Cluster(name="x")),
    ),
    Variant(
        LDS,
        "api_listener with an empty Any",
        lambda c: c.listener.api_listener.api_listener.Clear(),
    ),
    Variant(
        LDS,
        "listener with an address as well",
        lambda c: setattr(c.listener.address.socket_address, "address", "127.0.0.1"),
    ),
    Variant(
        LDS, "rds route_config_name empty", _hcm(lambda m: setattr(m.rds, "route_config_name", ""))
    ),
    Variant(
        LDS,
        "scoped_routes instead of rds",
        _hcm(lambda m: (m.ClearField("rds"), m.scoped_routes.SetInParent())),
    ),
    Variant(
        LDS,
        "inline route_config with a vhost",
        _hcm(lambda m: m.route_config.virtual_hosts.add(name="v", domains=["*"])),
    ),
    Variant(
        LDS,
        "inline route_config with a bad route",
        _hcm(
            lambda m: (
                m.route_config.virtual_hosts.add(name="v", domains=["*"])
                .routes.add()
                .match.safe_regex.SetInParent()
            )
        ),
    ),
    Variant(
        LDS,
        "fault filter with abort percentage",
        _filter_first(
            "fault",
            _fault(
                lambda f: (
                    setattr(f.abort, "http_status", 503),
                    setattr(f.abort.percentage, "numerator", 50),
                )
            ),
        ),
    ),
    Variant(
        LDS,
        "fault filter abort with an invalid http_status",
        _filter_first("fault", _fault(lambda f: setattr(f.abort, "http_status", 99))),
    ),
    Variant(
        LDS,
        "fault filter abort with grpc_status",
        _filter_first("fault", _fault(lambda f: setattr(f.abort, "grpc_status", 14))),
    ),
    Variant(
        LDS,
        "fault filter with header-controlled abort",
        _filter_first("fault", _fault(lambda f: f.abort.header_abort.SetInParent())),
    ),
    Variant(
        LDS,
        "fault filter with fixed delay",
        _filter_first("fault", _fault(lambda f: f.delay.fixed_delay.FromSeconds(1))),
    ),
    Variant(
        LDS,
        "fault filter with a negative fixed delay",
        _filter_first("fault", _fault(lambda f: setattr(f.delay.fixed_delay, "seconds", -1))),
    ),
    Variant(
        LDS,
        "fault filter with max_active_faults",
        _filter_first("fault", _fault(lambda f: setattr(f.max_active_faults, "value", 3))),
    ),
    Variant(
        LDS,
        "fault filter delay percentage with unknown denominator",
        _filter_first(
            "fault",
            _fault(
                lambda f: (
                    f.delay.fixed_delay.FromSeconds(1),
                    setattr(f.delay.percentage, "denominator", 7),
                )
            ),
        ),
    ),
    Variant(
        LDS,
        "stateful session filter without session_state",
        _filter_first("session", stateful_session_pb2.StatefulSession()),
    ),
    Variant(LDS, "gcp authn filter", _filter_first("authn", gcp_authn_pb2.GcpAuthnFilterConfig())),
    Variant(
        LDS,
        "rbac filter marked optional on a client listener",
        _filter_first("rbac", rbac_pb2.RBAC(), optional=True),
    ),
    Variant(
        LDS,
        "router packed in a TypedStruct",
        _hcm(
            lambda m: m.http_filters[0].typed_config.Pack(
                typed_struct_pb2.TypedStruct(
                    type_url="type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
                )
            )
        ),
    ),
    Variant(
        LDS,
        "unknown filter in a TypedStruct",
        _filter_first("x", typed_struct_pb2.TypedStruct(type_url="type.googleapis.com/x.Y")),
    ),
    Variant(
        LDS,
        "unknown optional filter in a TypedStruct",
        _filter_first(
            "x", typed_struct_pb2.TypedStruct(type_url="type.googleapis.com/x.Y"), optional=True
        ),
    ),
    Variant(LDS, "filter with empty name", _hcm(lambda m: setattr(m.http_filters[0], "name", ""))),
    Variant(
        LDS,
        "filter with config_discovery",
        _hcm(
            lambda m: (
                m.http_filters[0].ClearField("typed_config"),
                m.http_filters[0].config_discovery.SetInParent(),
            )
        ),
    ),
    Variant(
        LDS,
        "two routers",
        _hcm(lambda m: m.http_filters.add(name="router2").typed_config.Pack(router_pb2.Router())),
    ),
    Variant(
        LDS,
        "max_stream_duration with nanos only",
        _hcm(_set_duration(lambda m: m.common_http_protocol_options.max_stream_duration, 0, 5)),
    ),
    Variant(
        LDS,
        "max_stream_duration with negative nanos",
        _hcm(_set_duration(lambda m: m.common_http_protocol_options.max_stream_duration, 0, -5)),
    ),
    Variant(
        LDS,
        "max_stream_duration over the Duration range",
        _hcm(
            _set_duration(
                lambda m: m.common_http_protocol_options.max_stream_duration, 400_000_000_000
            )
        ),
    ),
    Variant(LDS, "xff_num_trusted_hops set", _hcm(lambda m: setattr(m, "xff_num_trusted_hops", 2))),
    Variant(
        LDS,
        "original_ip_detection_extensions set",
        _hcm(lambda m: m.original_ip_detection_extensions.add(name="x")),
    ),
    Variant(
        LDS,
        "rds config_source with api_config_source",
        _hcm(lambda m: m.rds.config_source.api_config_source.SetInParent()),
    ),
]

ROUTE_VARIANTS = [
    Variant(RDS, "domain suffix wildcard", _vhost(lambda v: v.domains.append("*.example.com"))),
    Variant(RDS, "domain prefix wildcard", _vhost(lambda v: v.domains.append("example.*"))),
    Variant(RDS, "domain with a wildcard in the middle", _vhost(lambda v: v.domains.append("a*b"))),
    Variant(RDS, "domain empty string", _vhost(lambda v: v.domains.append(""))),
    Variant(
        RDS,
        "two virtual hosts with the same domain",
        lambda c: c.routes.virtual_hosts.add(name="vh2", domains=["*"]),
    ),
    Variant(RDS, "virtual host without routes", _vhost(lambda v: v.ClearField("routes"))),
    Variant(
        RDS,
        "route match path_separated_prefix",
        _route(lambda r: setattr(r.match, "path_separated_prefix", "/a")),
    ),
    Variant(
        RDS,
        "route match path_match_policy",
        _route(lambda r: r.match.path_match_policy.SetInParent()),
    ),
    Variant(
        RDS, "route match connect_matcher", _route(lambda r: r.match.connect_matcher.SetInParent())
    ),
    Variant(
        RDS,
        "route match with query parameter",
        _route(lambda r: r.match.query_parameters.add(name="q")),
    ),
    Variant(RDS, "route match grpc", _route(lambda r: r.match.grpc.SetInParent())),
    Variant(RDS, "route match tls_context", _route(lambda r: r.match.tls_context.SetInParent())),
    Variant(RDS, "route with empty prefix", _route(lambda r: setattr(r.match, "prefix", ""))),
    Variant(RDS, "path without leading slash", _route(lambda r: setattr(r.match, "path", "a"))),
    Variant(RDS, "header exact_match", _header(lambda h: setattr(h, "exact_match", "v"))),
    Variant(RDS, "header present_match", _header(lambda h: setattr(h, "present_match", True))),
    Variant(RDS, "header prefix_match", _header(lambda h: setattr(h, "prefix_match", "v"))),
    Variant(RDS, "header suffix_match", _header(lambda h: setattr(h, "suffix_match", "v"))),
    Variant(RDS, "header contains_match", _header(lambda h: setattr(h, "contains_match", "v"))),
    Variant(
        RDS,
        "header range_match valid",
        _header(lambda h: (setattr(h.range_match, "start", 1), setattr(h.range_match, "end", 5))),
    ),
    Variant(
        RDS,
        "header range_match start after end",
        _header(lambda h: (setattr(h.range_match, "start", 5), setattr(h.range_match, "end", 1))),
    ),
    Variant(
        RDS,
        "header range_match empty (start equals end)",
        _header(lambda h: (setattr(h.range_match, "start", 3), setattr(h.range_match, "end", 3))),
    ),
    Variant(
        RDS,
        "header string_match exact ignore_case",
        _header(
            lambda h: (
                setattr(h.string_match, "exact", "v"),
                setattr(h.string_match, "ignore_case", True),
            )
        ),
    ),
    Variant(
        RDS,
        "header string_match safe_regex",
        _header(lambda h: setattr(h.string_match.safe_regex, "regex", "v.*")),
    ),
    Variant(
        RDS,
        "header string_match invalid regex",
        _header(lambda h: setattr(h.string_match.safe_regex, "regex", "v(")),
    ),
    Variant(
        RDS,
        "header with invert_match",
        _header(lambda h: (setattr(h, "exact_match", "v"), setattr(h, "invert_match", True))),
    ),
    Variant(RDS, "header matcher with no match specifier", _header(lambda h: None)),
    Variant(
        RDS,
        "header matcher on a binary header",
        _header(lambda h: (setattr(h, "name", "x-bin"), setattr(h, "exact_match", "v"))),
    ),
    Variant(
        RDS,
        "header matcher on :path pseudo-header",
        _header(lambda h: (setattr(h, "name", ":path"), setattr(h, "exact_match", "/"))),
    ),
    Variant(
        RDS,
        "header matcher with an empty name",
        _header(lambda h: (setattr(h, "name", ""), setattr(h, "exact_match", "v"))),
    ),
    Variant(
        RDS,
        "runtime_fraction TEN_THOUSAND",
        _route(
            lambda r: (
                setattr(r.match.runtime_fraction.default_value, "numerator", 50),
                setattr(
                    r.match.runtime_fraction.default_value,
                    "denominator",
                    percent_pb2.FractionalPercent.TEN_THOUSAND,
                ),
            )
        ),
    ),
    Variant(
        RDS,
        "runtime_fraction with unknown denominator",
        _route(lambda r: setattr(r.match.runtime_fraction.default_value, "denominator", 9)),
    ),
    Variant(RDS, "weighted clusters summing to 100", _weighted(("a", 60), ("b", 40))),
    Variant(RDS, "weighted clusters with one at weight 0", _weighted(("a", 1), ("b", 0))),
    Variant(RDS, "weighted cluster with empty name", _weighted(("", 1))),
    Variant(
        RDS,
        "weighted clusters summing over uint32",
        _weighted(("a", 4_000_000_000), ("b", 4_000_000_000)),
    ),
    Variant(
        RDS,
        "weighted clusters with total_weight set",
        lambda c: (
            _weighted(("a", 1))(c),
            setattr(
                c.routes.virtual_hosts[0].routes[0].route.weighted_clusters.total_weight, "value", 1
            ),
        ),
    ),
    Variant(
        RDS,
        "cluster_specifier_plugin unknown",
        _action(lambda a: setattr(a, "cluster_specifier_plugin", "p")),
    ),
    Variant(
        RDS,
        "route action max_stream_duration",
        _action(lambda a: a.max_stream_duration.max_stream_duration.FromSeconds(3)),
    ),
    Variant(
        RDS,
        "route action grpc_timeout_header_max",
        _action(lambda a: a.max_stream_duration.grpc_timeout_header_max.FromSeconds(3)),
    ),
    Variant(
        RDS,
        "route action negative max_stream_duration",
        _action(lambda a: setattr(a.max_stream_duration.max_stream_duration, "seconds", -3)),
    ),
    Variant(RDS, "route action timeout (ignored)", _action(lambda a: a.timeout.FromSeconds(2))),
    Variant(
        RDS,
        "route action prefix_rewrite (ignored)",
        _action(lambda a: setattr(a, "prefix_rewrite", "/x")),
    ),
    Variant(RDS, "hash policy on a header", _hash(lambda h: setattr(h.header, "header_name", "x"))),
    Variant(
        RDS,
        "hash policy header with regex rewrite",
        _hash(
            lambda h: (
                setattr(h.header, "header_name", "x"),
                setattr(h.header.regex_rewrite.pattern, "regex", "a+"),
                setattr(h.header.regex_rewrite, "substitution", "b"),
            )
        ),
    ),
    Variant(
        RDS,
        "hash policy header with invalid regex rewrite",
        _hash(
            lambda h: (
                setattr(h.header, "header_name", "x"),
                setattr(h.header.regex_rewrite.pattern, "regex", "a("),
            )
        ),
    ),
    Variant(
        RDS,
        "hash policy on filter_state io.grpc.channel_id",
        _hash(lambda h: setattr(h.filter_state, "key", "io.grpc.channel_id")),
    ),
    Variant(
        RDS,
        "hash policy on connection properties",
        _hash(lambda h: setattr(h.connection_properties, "source_ip", True)),
    ),
    Variant(RDS, "hash policy on a cookie", _hash(lambda h: setattr(h.cookie, "name", "c"))),
    Variant(
        RDS,
        "hash policy terminal",
        _hash(lambda h: (setattr(h.header, "header_name", "x"), setattr(h, "terminal", True))),
    ),
    Variant(
        RDS,
        "retry policy on cancelled,unavailable",
        _retry(lambda p: setattr(p, "retry_on", "cancelled,unavailable")),
    ),
    Variant(
        RDS,
        "retry policy with unsupported codes only",
        _retry(lambda p: setattr(p, "retry_on", "5xx,reset")),
    ),
    Variant(
        RDS, "retry policy with num_retries 0", _retry(lambda p: setattr(p.num_retries, "value", 0))
    ),
    Variant(
        RDS, "retry policy with num_retries 5", _retry(lambda p: setattr(p.num_retries, "value", 5))
    ),
    Variant(
        RDS,
        "retry back-off without base_interval",
        _retry(lambda p: p.retry_back_off.max_interval.FromSeconds(1)),
    ),
    Variant(
        RDS,
        "retry back-off max below base",
        _retry(
            lambda p: (
                p.retry_back_off.base_interval.FromSeconds(2),
                p.retry_back_off.max_interval.FromSeconds(1),
            )
        ),
    ),
    Variant(
        RDS,
        "retry back-off negative base",
        _retry(lambda p: setattr(p.retry_back_off.base_interval, "seconds", -1)),
    ),
    Variant(
        RDS,
        "retry back-off valid",
        _retry(
            lambda p: (
                p.retry_back_off.base_interval.FromMilliseconds(10),
                p.retry_back_off.max_interval.FromMilliseconds(100),
            )
        ),
    ),
    Variant(
        RDS,
        "retry policy on the virtual host",
        _vhost(lambda v: setattr(v.retry_policy, "retry_on", "unavailable")),
    ),
    Variant(
        RDS,
        "virtual host retry policy with num_retries 0",
        _vhost(lambda v: setattr(v.retry_policy.num_retries, "value", 0)),
    ),
    Variant(
        RDS,
        "typed_per_filter_config for an unknown filter type",
        _per_route("x", typed_struct_pb2.TypedStruct(type_url="type.googleapis.com/x.Y")),
    ),
    Variant(
        RDS,
        "typed_per_filter_config unknown but optional",
        _per_route(
            "x",
            typed_struct_pb2.TypedStruct(type_url="type.googleapis.com/x.Y"),
            wrap_optional=True,
        ),
    ),
    Variant(
        RDS,
        "typed_per_filter_config fault override",
        _per_route("fault", _fault(lambda f: setattr(f.abort, "http_status", 503))),
    ),
    Variant(
        RDS,
        "typed_per_filter_config with the router's type",
        _per_route("router", router_pb2.Router()),
    ),
    Variant(
        RDS,
        "typed_per_filter_config on the virtual host",
        lambda c: (
            c.routes.virtual_hosts[0]
            .typed_per_filter_config["fault"]
            .Pack(_fault(lambda f: setattr(f.abort, "http_status", 503)))
        ),
    ),
    Variant(
        RDS,
        "typed_per_filter_config with an empty Any",
        lambda c: c.routes.virtual_hosts[0].routes[0].typed_per_filter_config["x"].Clear(),
    ),
    Variant(
        RDS,
        "request_mirror_policies (ignored)",
        _action(lambda a: a.request_mirror_policies.add(cluster="m")),
    ),
    Variant(RDS, "route name set", _route(lambda r: setattr(r, "name", "first"))),
    Variant(
        RDS, "auto_host_rewrite set", _action(lambda a: setattr(a.auto_host_rewrite, "value", True))
    ),
    Variant(RDS, "route config with vhds", lambda c: c.routes.vhds.SetInParent()),
    Variant(
        RDS,
        "cluster_not_found_response_code set",
        _action(lambda a: setattr(a, "cluster_not_found_response_code", 1)),
    ),
]

CLUSTER_VARIANTS = [
    Variant(
        CDS,
        "EDS cluster without service_name",
        _cluster(lambda c: c.eds_cluster_config.ClearField("service_name")),
    ),
    Variant(CDS, "aggregate cluster of two", _aggregate("a", "b")),
    Variant(CDS, "aggregate cluster without children", _aggregate()),
    Variant(
        CDS,
        "unknown custom cluster type",
        _cluster(
            lambda c: (
                c.ClearField("eds_cluster_config"),
                setattr(c.cluster_type, "name", "x.custom"),
            )
        ),
    ),
    Variant(CDS, "LOGICAL_DNS with one endpoint", _logical_dns(("example.com", 80))),
    Variant(CDS, "LOGICAL_DNS with two endpoints", _logical_dns(("a.com", 80), ("b.com", 80))),
    Variant(CDS, "LOGICAL_DNS with port 0", _logical_dns(("example.com", 0))),
    Variant(
        CDS,
        "cluster type ORIGINAL_DST",
        _cluster(lambda c: setattr(c, "type", cluster_pb2.Cluster.ORIGINAL_DST)),
    ),
    Variant(
        CDS,
        "lb_policy CLUSTER_PROVIDED",
        _cluster(lambda c: setattr(c, "lb_policy", cluster_pb2.Cluster.CLUSTER_PROVIDED)),
    ),
    Variant(
        CDS,
        "lb_policy LOAD_BALANCING_POLICY_CONFIG without policies",
        _cluster(
            lambda c: setattr(c, "lb_policy", cluster_pb2.Cluster.LOAD_BALANCING_POLICY_CONFIG)
        ),
    ),
    Variant(CDS, "ring hash defaults", _ring()),
    Variant(CDS, "ring hash minimum over 8M", _ring(minimum=8_388_609)),
    Variant(CDS, "ring hash maximum over 8M", _ring(maximum=8_388_609)),
    Variant(
        CDS,
        "ring hash with MURMUR_HASH_2",
        _ring(hash_function=cluster_pb2.Cluster.RingHashLbConfig.MURMUR_HASH_2),
    ),
    Variant(CDS, "load_balancing_policy round_robin", _policy(round_robin_pb2.RoundRobin())),
    Variant(CDS, "load_balancing_policy ring_hash", _policy(ring_hash_pb2.RingHash())),
    Variant(
        CDS,
        "load_balancing_policy ring_hash with min over max",
        _policy(
            ring_hash_pb2.RingHash(
                minimum_ring_size={"value": 100}, maximum_ring_size={"value": 10}
            )
        ),
    ),
    Variant(CDS, "load_balancing_policy least_request", _policy(least_request_pb2.LeastRequest())),
    Variant(
        CDS,
        "load_balancing_policy least_request choice_count 1",
        _policy(least_request_pb2.LeastRequest(choice_count={"value": 1})),
    ),
    Variant(CDS, "load_balancing_policy pick_first", _policy(pick_first_pb2.PickFirst())),
    Variant(CDS, "load_balancing_policy wrr_locality of round_robin", _policy(_wrr_locality())),
    Variant(
        CDS,
        "load_balancing_policy client-side WRR",
        _policy(wrr_pb2.ClientSideWeightedRoundRobin()),
    ),
    Variant(
        CDS,
        "load_balancing_policy client-side WRR with negative blackout",
        _policy(wrr_pb2.ClientSideWeightedRoundRobin(blackout_period={"seconds": -1})),
    ),
    Variant(
        CDS,
        "load_balancing_policy unknown typed struct",
        _typed_struct_policy("type.googleapis.com/x.Unknown"),
    ),
    Variant(
        CDS,
        "load_balancing_policy unknown then round_robin",
        lambda c: (
            _typed_struct_policy("type.googleapis.com/x.Unknown")(c),
            _policy(round_robin_pb2.RoundRobin())(c),
        ),
    ),
    Variant(
        CDS,
        "load_balancing_policy with an empty list",
        _cluster(lambda c: c.load_balancing_policy.SetInParent()),
    ),
    Variant(CDS, "outlier detection valid defaults", _outlier(lambda o: o.SetInParent())),
    Variant(
        CDS,
        "outlier base_ejection_time negative",
        _outlier(lambda o: setattr(o.base_ejection_time, "seconds", -1)),
    ),
    Variant(
        CDS,
        "outlier max_ejection_time negative",
        _outlier(lambda o: setattr(o.max_ejection_time, "seconds", -1)),
    ),
    Variant(
        CDS,
        "outlier max_ejection_percent over 100",
        _outlier(lambda o: setattr(o.max_ejection_percent, "value", 101)),
    ),
    Variant(
        CDS,
        "outlier failure_percentage_threshold over 100",
        _outlier(lambda o: setattr(o.failure_percentage_threshold, "value", 101)),
    ),
    Variant(
        CDS,
        "outlier enforcing_failure_percentage over 100",
        _outlier(lambda o: setattr(o.enforcing_failure_percentage, "value", 101)),
    ),
    Variant(
        CDS,
        "outlier success_rate_minimum_hosts 0",
        _outlier(lambda o: setattr(o.success_rate_minimum_hosts, "value", 0)),
    ),
    Variant(
        CDS,
        "circuit breaker max_requests",
        _cluster(lambda c: setattr(c.circuit_breakers.thresholds.add().max_requests, "value", 5)),
    ),
    Variant(
        CDS,
        "circuit breaker for HIGH priority only",
        _cluster(
            lambda c: setattr(
                c.circuit_breakers.thresholds.add(priority=base_pb2.HIGH).max_requests, "value", 5
            )
        ),
    ),
    Variant(CDS, "upstream TLS without a certificate provider", _tls(lambda t: None)),
    Variant(
        CDS,
        "upstream TLS with a certificate provider instance",
        _tls(
            lambda t: setattr(
                t.common_tls_context.validation_context.ca_certificate_provider_instance,
                "instance_name",
                "x",
            )
        ),
    ),
    Variant(
        CDS,
        "transport socket of an unknown type",
        lambda c: (
            setattr(c.cluster.transport_socket, "name", "x"),
            c.cluster.transport_socket.typed_config.Pack(router_pb2.Router()),
        ),
    ),
    Variant(
        CDS,
        "common_lb_config locality_weighted_lb_config",
        _cluster(lambda c: c.common_lb_config.locality_weighted_lb_config.SetInParent()),
    ),
    Variant(
        CDS,
        "connect_timeout negative",
        _cluster(lambda c: setattr(c.connect_timeout, "seconds", -1)),
    ),
    Variant(
        CDS,
        "dns_lookup_family V4_ONLY",
        _cluster(lambda c: setattr(c, "dns_lookup_family", cluster_pb2.Cluster.V4_ONLY)),
    ),
    Variant(
        CDS,
        "health_checks configured (ignored)",
        _cluster(lambda c: c.health_checks.add().timeout.FromSeconds(1)),
    ),
    Variant(
        CDS,
        "metadata with filter_metadata",
        _cluster(lambda c: c.metadata.filter_metadata["x"].SetInParent()),
    ),
    Variant(
        CDS,
        "upstream http protocol options (ignored)",
        _cluster(lambda c: c.typed_extension_protocol_options["x"].Pack(router_pb2.Router())),
    ),
]


def _additional_address(endpoint: Any) -> None:
    socket = endpoint.endpoint.additional_addresses.add().address.socket_address
    socket.address, socket.port_value = "127.0.0.3", 3


def _add_endpoint(chain: Chain, address: str, weight: int | None) -> None:
    lb = chain.endpoints.endpoints[0].lb_endpoints.add()
    socket = lb.endpoint.address.socket_address
    socket.address, socket.port_value = address, 1
    if weight is not None:
        lb.load_balancing_weight.value = weight


ENDPOINT_VARIANTS = [
    Variant(EDS, "endpoint UNHEALTHY", _health(health_check_pb2.UNHEALTHY)),
    Variant(EDS, "endpoint DRAINING", _health(health_check_pb2.DRAINING)),
    Variant(EDS, "endpoint DEGRADED", _health(health_check_pb2.DEGRADED)),
    Variant(EDS, "endpoint TIMEOUT", _health(health_check_pb2.TIMEOUT)),
    Variant(EDS, "endpoint HEALTHY explicitly", _health(health_check_pb2.HEALTHY)),
    Variant(EDS, "IPv6 endpoint address", _address("::1")),
    Variant(EDS, "IPv6 address in brackets", _address("[::1]")),
    Variant(EDS, "endpoint address with a zone", _address("fe80::1%eth0")),
    Variant(EDS, "endpoint port above 65535", _address("127.0.0.1", 70000)),
    Variant(
        EDS,
        "endpoint with a named port",
        _lb_endpoint(
            lambda e: (
                e.endpoint.address.socket_address.ClearField("port_value"),
                setattr(e.endpoint.address.socket_address, "named_port", "x"),
            )
        ),
    ),
    Variant(
        EDS,
        "endpoint with a pipe address",
        _lb_endpoint(lambda e: setattr(e.endpoint.address.pipe, "path", "/tmp/s")),
    ),
    Variant(EDS, "endpoint with additional address", _lb_endpoint(_additional_address)),
    Variant(
        EDS,
        "endpoint with a hostname field",
        _lb_endpoint(lambda e: setattr(e.endpoint, "hostname", "h.example.com")),
    ),
    Variant(
        EDS,
        "endpoint with health_check_config",
        _lb_endpoint(lambda e: setattr(e.endpoint.health_check_config, "port_value", 9)),
    ),
    Variant(
        EDS,
        "endpoint weight set",
        _lb_endpoint(lambda e: setattr(e.load_balancing_weight, "value", 7)),
    ),
    Variant(
        EDS,
        "endpoint weights summing over uint32",
        lambda c: (
            setattr(
                c.endpoints.endpoints[0].lb_endpoints[0].load_balancing_weight,
                "value",
                4_000_000_000,
            ),
            _add_endpoint(c, "127.0.0.9", 4_000_000_000),
        ),
    ),
    Variant(EDS, "duplicate endpoint address", lambda c: _add_endpoint(c, "127.0.0.1", None)),
    Variant(EDS, "endpoint_name set", _lb_endpoint(lambda e: setattr(e, "endpoint_name", "n"))),
    Variant(
        EDS,
        "endpoint metadata",
        _lb_endpoint(lambda e: e.metadata.filter_metadata["x"].SetInParent()),
    ),
    Variant(
        EDS, "locality without lb_endpoints", _locality(lambda g: g.ClearField("lb_endpoints"))
    ),
    Variant(
        EDS, "locality with empty region", _locality(lambda g: setattr(g.locality, "region", ""))
    ),
    Variant(
        EDS,
        "locality with zone and sub_zone",
        _locality(
            lambda g: (setattr(g.locality, "zone", "z"), setattr(g.locality, "sub_zone", "s"))
        ),
    ),
    Variant(
        EDS, "locality weight absent", _locality(lambda g: g.ClearField("load_balancing_weight"))
    ),
    Variant(EDS, "two localities at priority 0", _second_locality(lambda g: None)),
    Variant(
        EDS, "second locality at priority 1", _second_locality(lambda g: setattr(g, "priority", 1))
    ),
    Variant(
        EDS,
        "second locality at priority 2 (gap)",
        _second_locality(lambda g: setattr(g, "priority", 2)),
    ),
    Variant(
        EDS,
        "duplicate locality at one priority",
        _second_locality(lambda g: setattr(g.locality, "region", "r")),
    ),
    Variant(
        EDS,
        "same locality at two priorities",
        _second_locality(lambda g: (setattr(g.locality, "region", "r"), setattr(g, "priority", 1))),
    ),
    Variant(
        EDS,
        "locality weights summing over uint32",
        _second_locality(lambda g: setattr(g.load_balancing_weight, "value", 4_294_967_295)),
    ),
    Variant(EDS, "locality with proximity", _locality(lambda g: setattr(g.proximity, "value", 3))),
    Variant(EDS, "drop overload 10 per hundred", _drop(10)),
    Variant(
        EDS, "drop overload per TEN_THOUSAND", _drop(10, percent_pb2.FractionalPercent.TEN_THOUSAND)
    ),
    Variant(EDS, "drop overload per MILLION", _drop(10, percent_pb2.FractionalPercent.MILLION)),
    Variant(EDS, "drop overload over 100%", _drop(200)),
    Variant(EDS, "drop overload with empty category", _drop(10, category="")),
    Variant(
        EDS, "two drop overloads", lambda c: (_drop(10, category="a")(c), _drop(5, category="b")(c))
    ),
    Variant(
        EDS,
        "overprovisioning_factor set",
        lambda c: setattr(c.endpoints.policy.overprovisioning_factor, "value", 140),
    ),
    Variant(
        EDS,
        "endpoint_stale_after set",
        lambda c: c.endpoints.policy.endpoint_stale_after.FromSeconds(5),
    ),
    Variant(
        EDS,
        "named_endpoints set",
        lambda c: c.endpoints.named_endpoints["x"].address.socket_address.SetInParent(),
    ),
    Variant(EDS, "endpoint address 0.0.0.0", _address("0.0.0.0")),
    Variant(EDS, "endpoint address with leading zeros", _address("127.000.000.001")),
    Variant(EDS, "endpoint address with a trailing space", _address("127.0.0.1 ")),
    Variant(
        EDS,
        "endpoint protocol UDP",
        _lb_endpoint(
            lambda e: setattr(
                e.endpoint.address.socket_address, "protocol", address_pb2.SocketAddress.UDP
            )
        ),
    ),
    Variant(
        EDS,
        "endpoint with resolver_name",
        _lb_endpoint(lambda e: setattr(e.endpoint.address.socket_address, "resolver_name", "r")),
    ),
    Variant(
        EDS,
        "health check config hostname",
        _lb_endpoint(lambda e: setattr(e.endpoint.health_check_config, "hostname", "h")),
    ),
]


VARIANTS = LISTENER_VARIANTS + ROUTE_VARIANTS + CLUSTER_VARIANTS + ENDPOINT_VARIANTS
#: the whole corpus: the first variants, these, and those of the last disagreements with C-core
ALL = [*BASE_VARIANTS, *VARIANTS, *PARITY_VARIANTS]
