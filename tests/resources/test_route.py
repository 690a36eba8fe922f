"""RouteConfiguration view: gRPC's RDS validation, virtual host selection and route matching."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from google.protobuf import any_pb2, duration_pb2
from xds.type.v3 import typed_struct_pb2

from xdsclient import ResourceDecodeError
from xdsclient.resources import _route
from xdsclient.resources._regex import compile_regex
from xdsclient.resources._route import RouteConfigurationView, decode_route_configuration
from xdsclient.resources._route_values import (
    ClusterWeight,
    DirectResponse,
    HashPolicy,
    HashPolicyKind,
    HeaderMatcher,
    HeaderMatchKind,
    HeaderToAdd,
    PathMatch,
    QueryParameterMatcher,
    RedirectAction,
    RegexRewrite,
    RetryPolicy,
    Route,
    RouteAction,
    RouteActionType,
    RouteMatch,
    VirtualHost,
)
from xdsclient.resources._routing import match_route, select_virtual_host


def config(*routes: Any, domains: tuple[str, ...] = ("*",)) -> Any:
    message = route_pb2.RouteConfiguration(name="rc")
    vhost = message.virtual_hosts.add(name="vh", domains=list(domains))
    vhost.routes.extend(routes)
    return message


def route(prefix: str = "/", cluster: str = "c") -> Any:
    message = rc.Route()
    message.match.prefix = prefix
    message.route.cluster = cluster
    return message


def view(message: Any) -> RouteConfigurationView:
    return decode_route_configuration(message.SerializeToString())[1]


def reason(message: Any) -> str:
    with pytest.raises(ResourceDecodeError) as caught:
        decode_route_configuration(message.SerializeToString())
    assert caught.value.name == "rc"
    return caught.value.message


R0 = "virtual_hosts[0].routes[0]"

RLS = "grpc.lookup.v1.RouteLookupClusterSpecifier"


def rls() -> Any:
    """An RLS plugin config (its contents are not read)."""
    packed = any_pb2.Any(type_url=f"type.googleapis.com/{RLS}", value=b"\x0a\x00")
    return packed


def plugin(m: Any, name: str, config: Any, *, optional: bool = False) -> None:
    entry = m.cluster_specifier_plugins.add(is_optional=optional)
    entry.extension.name = name
    if isinstance(config, any_pb2.Any):
        entry.extension.typed_config.CopyFrom(config)
    else:
        entry.extension.typed_config.Pack(config)


def test_a_route_configuration_decodes_with_matchers_actions_and_policies() -> None:
    r = route("/svc.Echo/")
    r.match.case_sensitive.value = False
    header = r.match.headers.add(name="X-Env")
    header.string_match.exact = "prod"
    header.string_match.ignore_case = True
    r.match.runtime_fraction.default_value.numerator = 50  # 50 %
    r.route.max_stream_duration.grpc_timeout_header_max.seconds = 3
    r.route.retry_policy.retry_on = "unavailable, cancelled,5xx"
    r.route.retry_policy.num_retries.value = 3
    r.route.retry_policy.retry_back_off.base_interval.nanos = 100_000_000
    policy = r.route.hash_policy.add(terminal=True)
    policy.header.header_name = "User-Id"
    r.route.hash_policy.add().filter_state.key = "io.grpc.channel_id"
    v = view(config(r))
    (vhost,) = v.virtual_hosts
    (parsed,) = vhost.routes
    assert parsed.match.path_match is PathMatch.PREFIX
    assert not parsed.match.case_sensitive
    assert parsed.match.runtime_fraction_ppm == 500_000
    assert parsed.action_type is RouteActionType.ROUTE
    assert parsed.action is not None
    assert parsed.action.cluster == "c"
    assert parsed.action.max_stream_duration == 3.0
    assert parsed.action.retry_policy == RetryPolicy(
        retry_on=frozenset({"unavailable", "cancelled"}),
        num_retries=3,
        base_interval=0.1,
        max_interval=1.0,
        http_retry_on=frozenset({"5xx"}),  # Envoy's HTTP condition, apart from gRPC's codes
    )
    assert parsed.action.hash_policies == (
        HashPolicy(kind=HashPolicyKind.HEADER, header_name="user-id", terminal=True),
        HashPolicy(kind=HashPolicyKind.CHANNEL_ID),
    )
    assert v.clusters == {"c"}


def test_weighted_clusters_and_typed_per_filter_config() -> None:
    r = rc.Route()
    r.match.path = "/svc.Echo/Call"
    a = r.route.weighted_clusters.clusters.add(name="a")
    a.weight.value = 3
    r.route.weighted_clusters.clusters.add(name="b").weight.value = 1
    r.route.weighted_clusters.clusters.add(name="zero").weight.value = 0
    wrapper = rc.FilterConfig(is_optional=True)
    wrapper.config.Pack(fault_pb2.HTTPFault())
    r.typed_per_filter_config["envoy.filters.http.fault"].Pack(wrapper)
    unknown = rc.FilterConfig(is_optional=True)
    unknown.config.Pack(duration_pb2.Duration(seconds=1))
    r.typed_per_filter_config["x.unknown"].Pack(unknown)
    (parsed,) = view(config(r)).virtual_hosts[0].routes
    assert parsed.action is not None
    assert parsed.action.weighted_clusters == (
        ClusterWeight(name="a", weight=3),
        ClusterWeight(name="b", weight=1),
    )
    assert parsed.typed_per_filter_config["envoy.filters.http.fault"][0] == (
        "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault"
    )
    assert parsed.typed_per_filter_config["envoy.filters.http.fault"][2] is True
    assert "x.unknown" not in parsed.typed_per_filter_config  # optional and unknown: dropped


def test_routes_gRPC_cannot_use_are_skipped_and_other_actions_kept_as_unsupported() -> None:
    query = route("/q")
    query.match.query_parameters.add(name="debug")
    header_pick = rc.Route()
    header_pick.match.prefix = "/h"
    header_pick.route.cluster_header = "x-cluster"
    redirect = rc.Route()
    redirect.match.prefix = "/r"
    redirect.redirect.host_redirect = "elsewhere"
    local = rc.Route()
    local.match.prefix = "/local"
    local.non_forwarding_action.SetInParent()
    routes = view(config(query, header_pick, redirect, local)).virtual_hosts[0].routes
    assert [(r.match.path, r.action_type) for r in routes] == [
        ("/r", RouteActionType.UNSUPPORTED),
        ("/local", RouteActionType.NON_FORWARDING),
    ]


def _with(change: Callable[[Any], None]) -> Any:
    message = config(route())
    change(message)
    return message


def bad_regex(m: Any) -> None:
    m.virtual_hosts[0].routes[0].match.safe_regex.regex = "("


def separated_prefix(m: Any) -> None:
    m.virtual_hosts[0].routes[0].match.path_separated_prefix = "/a"


def no_path(m: Any) -> None:
    m.virtual_hosts[0].routes[0].match.ClearField("prefix")


def inverted_range(m: Any) -> None:
    header = m.virtual_hosts[0].routes[0].match.headers.add(name="n")
    header.range_match.start, header.range_match.end = 5, 4


def bad_header_regex(m: Any) -> None:
    m.virtual_hosts[0].routes[0].match.headers.add(name="n").safe_regex_match.regex = "[z-a]"


def bad_fraction(m: Any) -> None:
    m.virtual_hosts[0].routes[0].match.runtime_fraction.default_value.denominator = 9


def empty_cluster(m: Any) -> None:
    m.virtual_hosts[0].routes[0].route.cluster = ""


def no_cluster_bad_retry(m: Any) -> None:
    action = m.virtual_hosts[0].routes[0].route
    action.ClearField("cluster")
    action.retry_policy.num_retries.SetInParent()


def empty_plugin_name(m: Any) -> None:
    action = m.virtual_hosts[0].routes[0].route
    action.cluster_specifier_plugin = "x"
    action.cluster_specifier_plugin = ""  # set, and empty
    plugin(m, "", rls())


def unknown_plugin_type(m: Any) -> None:
    plugin(m, "p", duration_pb2.Duration())


def plugin_without_extension(m: Any) -> None:
    m.cluster_specifier_plugins.add()


def plugin_without_config(m: Any) -> None:
    m.cluster_specifier_plugins.add().extension.name = "p"


def plugin_type_url_without_slash(m: Any) -> None:
    m.cluster_specifier_plugins.add().extension.typed_config.type_url = "grpc.lookup.v1.X"


def rls_in_typed_struct(m: Any) -> None:
    plugin(m, "p", typed_struct_pb2.TypedStruct(type_url=f"type.googleapis.com/{RLS}"))


def duplicate_plugin(m: Any) -> None:
    plugin(m, "p", rls())
    plugin(m, "p", rls())


def zero_total(m: Any) -> None:
    m.virtual_hosts[0].routes[0].route.weighted_clusters.clusters.add(name="a")


def nameless_weighted(m: Any) -> None:
    m.virtual_hosts[0].routes[0].route.weighted_clusters.clusters.add().weight.value = 1


def weight_overflow(m: Any) -> None:
    clusters = m.virtual_hosts[0].routes[0].route.weighted_clusters.clusters
    clusters.add(name="a").weight.value = 2**32 - 1
    clusters.add(name="b").weight.value = 1


def missing_plugin(m: Any) -> None:
    m.virtual_hosts[0].routes[0].route.cluster_specifier_plugin = "rls"


def zero_retries(m: Any) -> None:
    m.virtual_hosts[0].routes[0].route.retry_policy.num_retries.SetInParent()


def backoff_without_base(m: Any) -> None:
    m.virtual_hosts[0].routes[0].route.retry_policy.retry_back_off.max_interval.seconds = 1


def backoff_negative_base(m: Any) -> None:
    backoff = m.virtual_hosts[0].routes[0].route.retry_policy.retry_back_off
    backoff.base_interval.seconds = -2


def no_domains(m: Any) -> None:
    del m.virtual_hosts[0].domains[:]


def bad_domain(m: Any) -> None:
    m.virtual_hosts[0].domains.append("a*b.com")


def untyped_filter_config(m: Any) -> None:
    m.virtual_hosts[0].routes[0].typed_per_filter_config["f"].CopyFrom(any_pb2.Any())


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            bad_regex,
            f"{R0}.match.safe_regex.regex: invalid regex '(': "
            "not a valid RE2 pattern: missing ): (",
        ),
        (separated_prefix, f"{R0}.match: unsupported path specifier path_separated_prefix"),
        (no_path, f"{R0}.match: unsupported path specifier (none)"),
        (inverted_range, f"{R0}.match.headers[0].range_match: start must not be above end"),
        (
            bad_header_regex,
            f"{R0}.match.headers[0].safe_regex_match.regex: "
            "invalid regex '[z-a]': not a valid RE2 pattern: invalid character class range: z-a",
        ),
        (
            bad_fraction,
            f"{R0}.match.runtime_fraction.default_value.denominator: unknown denominator",
        ),
        (empty_cluster, f"{R0}.route.cluster: must not be empty"),
        (no_cluster_bad_retry, f"{R0}.route.retry_policy.num_retries: must be at least 1"),
        (zero_total, f"{R0}.route.weighted_clusters: total weight must be greater than 0"),
        (nameless_weighted, f"{R0}.route.weighted_clusters.clusters[0].name: must not be empty"),
        (weight_overflow, f"{R0}.route.weighted_clusters: total weight must fit in 32 bits"),
        (missing_plugin, f"{R0}.route.cluster_specifier_plugin: no plugin named 'rls'"),
        (empty_plugin_name, f"{R0}.route.cluster_specifier_plugin: must not be empty"),
        (
            unknown_plugin_type,
            "cluster_specifier_plugins[0].extension.typed_config: "
            "unsupported cluster specifier plugin type google.protobuf.Duration",
        ),
        (plugin_without_extension, "cluster_specifier_plugins[0].extension: required"),
        (plugin_without_config, "cluster_specifier_plugins[0].extension.typed_config: required"),
        (
            plugin_type_url_without_slash,
            "cluster_specifier_plugins[0].extension.typed_config.type_url: "
            "invalid type URL 'grpc.lookup.v1.X'",
        ),
        (
            rls_in_typed_struct,
            f"cluster_specifier_plugins[0].extension.typed_config: {RLS} must not be a TypedStruct",
        ),
        (duplicate_plugin, "cluster_specifier_plugins[1].extension.name: duplicate name 'p'"),
        (zero_retries, f"{R0}.route.retry_policy.num_retries: must be at least 1"),
        (backoff_without_base, f"{R0}.route.retry_policy.retry_back_off.base_interval: required"),
        (
            backoff_negative_base,
            f"{R0}.route.retry_policy.retry_back_off.base_interval: "
            "must be a non-negative duration within range",
        ),
        (no_domains, "virtual_hosts[0].domains: must not be empty"),
        (bad_domain, "virtual_hosts[0].domains[1]: invalid pattern 'a*b.com'"),
        (untyped_filter_config, f"{R0}.typed_per_filter_config['f']: needs a typed config"),
    ],
)
def test_invalid_route_configurations_name_the_field(
    change: Callable[[Any], None], expected: str
) -> None:
    assert reason(_with(change)) == expected


def test_a_route_to_an_rls_plugin_is_accepted_and_keeps_the_plugin() -> None:
    """A plugin of the one type gRPC knows (RLS) is kept, and a route naming it is kept."""
    message = config(route())
    message.virtual_hosts[0].routes[0].route.cluster_specifier_plugin = "rls"
    plugin(message, "rls", rls())
    v = view(message)
    assert v.cluster_specifier_plugins["rls"] == (f"type.googleapis.com/{RLS}", b"\x0a\x00")
    action = v.virtual_hosts[0].routes[0].action
    assert action is not None
    assert action.cluster_specifier_plugin == "rls"


def test_a_route_naming_an_optional_plugin_of_an_unknown_type_is_ignored() -> None:
    """An optional plugin of a type gRPC lacks is accepted; routes naming it are ignored, and
    the plugin is not in the view."""
    named = route("/p")
    named.route.cluster_specifier_plugin = "opt"
    message = config(named, route("/c"))
    plugin(message, "opt", duration_pb2.Duration(), optional=True)
    v = view(message)
    assert [r.match.path for r in v.virtual_hosts[0].routes] == ["/c"]
    assert v.cluster_specifier_plugins == {}


def test_an_optional_plugin_in_a_typed_struct_of_an_unknown_type_is_accepted() -> None:
    """A TypedStruct stands for the type it names: optional and unknown is accepted."""
    message = config(route())
    plugin(message, "", typed_struct_pb2.TypedStruct(type_url="x/y.Unknown"), optional=True)
    assert view(message).cluster_specifier_plugins == {}


def test_an_unused_plugin_with_an_empty_name_is_accepted() -> None:
    """An empty plugin name is a name, as in C-core: only a route naming no plugin fails."""
    message = config(route())
    plugin(message, "", rls())
    assert "" in view(message).cluster_specifier_plugins


def test_a_route_without_a_cluster_specifier_is_ignored() -> None:
    """An action with no cluster specifier (or a cluster_header) ignores the route, and the
    route's typed_per_filter_config is not read, as C-core does."""
    bare = route("/none")
    bare.route.ClearField("cluster")
    bare.typed_per_filter_config["f"].CopyFrom(any_pb2.Any())  # would be invalid if read
    header_pick = route("/h")
    header_pick.route.cluster_header = "x-cluster"
    v = view(config(bare, header_pick, route("/c")))
    assert [r.match.path for r in v.virtual_hosts[0].routes] == ["/c"]


# ------------------------------------------------------------------ selection and matching


def vhosts(*domain_lists: tuple[str, ...]) -> tuple[VirtualHost, ...]:
    return tuple(
        VirtualHost(name=f"vh{i}", domains=d, routes=()) for i, d in enumerate(domain_lists)
    )


@pytest.mark.parametrize(
    ("authority", "expected"),
    [
        ("foo.example.com", "vh0"),  # exact beats every wildcard
        ("bar.example.com", "vh2"),  # the longest suffix wildcard
        ("x.com", "vh1"),  # a shorter suffix wildcard
        ("foo.other", "vh3"),  # a prefix wildcard beats the universal one
        ("unrelated", "vh4"),
        ("FOO.EXAMPLE.COM", "vh0"),  # case-insensitive
    ],
)
def test_virtual_host_selection_follows_grpc_precedence(authority: str, expected: str) -> None:
    hosts = vhosts(("foo.example.com",), ("*.com",), ("*.example.com",), ("foo.*",), ("*",))
    chosen = select_virtual_host(hosts, authority)
    assert chosen is not None
    assert chosen.name == expected


def test_no_virtual_host_matches_without_a_universal_domain() -> None:
    assert select_virtual_host(vhosts(("a.com",)), "b.com") is None


def test_route_matching_takes_the_first_match_by_path_headers_and_fraction() -> None:
    exact = rc.Route()
    exact.match.path = "/svc/Exact"
    exact.route.cluster = "exact"
    header = route("/svc/", "canary")
    header.match.headers.add(name="x-canary").present_match = True
    regex = rc.Route()
    regex.match.safe_regex.regex = "/svc/[a-z]+"
    regex.route.cluster = "regex"
    fraction = route("/svc/", "half")
    fraction.match.runtime_fraction.default_value.numerator = 50
    fallback = route("/", "default")
    vhost = view(config(exact, header, regex, fraction, fallback)).virtual_hosts[0]

    def target(path: str, headers: dict[str, str] | None = None, roll: int | None = None) -> str:
        chosen = match_route(vhost, path, headers, roll)
        assert chosen is not None
        assert chosen.action is not None
        return chosen.action.cluster

    assert target("/svc/Exact") == "exact"
    assert target("/svc/Call", {"X-Canary": "1"}) == "canary"
    assert target("/svc/call") == "regex"
    assert target("/svc/Call", roll=100) == "half"
    assert target("/svc/Call", roll=600_000) == "default"
    assert target("/otherwise") == "default"


def test_header_matchers_and_inversion() -> None:
    r = route("/")
    r.match.headers.add(name="version").prefix_match = "v2"
    r.match.headers.add(name="region", invert_match=True).exact_match = "eu"
    r.match.headers.add(name="size").range_match.CopyFrom(
        rc.HeaderMatcher().range_match.__class__(start=1, end=10)
    )
    vhost = view(config(r)).virtual_hosts[0]
    assert match_route(vhost, "/", {"version": "v2.1", "region": "us", "size": "5"}) is not None
    assert match_route(vhost, "/", {"version": "v2.1", "region": "eu", "size": "5"}) is None
    assert (
        match_route(vhost, "/", {"version": "v2.1", "size": "5"}) is None
    )  # missing never matches
    assert match_route(vhost, "/", {"version": "v2.1", "region": "us", "size": "50"}) is None


def _header(setup: Callable[[Any], None]) -> HeaderMatcher:
    r = route("/")
    setup(r.match.headers.add(name="H"))
    return view(config(r)).virtual_hosts[0].routes[0].match.headers[0]


@pytest.mark.parametrize(
    ("setup", "kind"),
    [
        pytest.param(
            lambda h: setattr(h, "exact_match", "v"), HeaderMatchKind.EXACT, id="exact_match"
        ),
        pytest.param(
            lambda h: setattr(h, "prefix_match", "v"), HeaderMatchKind.PREFIX, id="prefix_match"
        ),
        pytest.param(
            lambda h: setattr(h, "suffix_match", "v"), HeaderMatchKind.SUFFIX, id="suffix_match"
        ),
        pytest.param(
            lambda h: setattr(h, "contains_match", "v"),
            HeaderMatchKind.CONTAINS,
            id="contains_match",
        ),
        pytest.param(
            lambda h: setattr(h.safe_regex_match, "regex", "v+"),
            HeaderMatchKind.SAFE_REGEX,
            id="safe_regex_match.regex",
        ),
        pytest.param(
            lambda h: setattr(h.range_match, "end", 3), HeaderMatchKind.RANGE, id="range_match.end"
        ),
        pytest.param(
            lambda h: setattr(h, "present_match", True), HeaderMatchKind.PRESENT, id="present_match"
        ),
        pytest.param(
            lambda h: setattr(h.string_match, "exact", "v"),
            HeaderMatchKind.EXACT,
            id="string_match.exact",
        ),
        pytest.param(
            lambda h: setattr(h.string_match, "prefix", "v"),
            HeaderMatchKind.PREFIX,
            id="string_match.prefix",
        ),
        pytest.param(
            lambda h: setattr(h.string_match, "suffix", "v"),
            HeaderMatchKind.SUFFIX,
            id="string_match.suffix",
        ),
        pytest.param(
            lambda h: setattr(h.string_match, "contains", "v"),
            HeaderMatchKind.CONTAINS,
            id="string_match.contains",
        ),
        pytest.param(
            lambda h: setattr(h.string_match.safe_regex, "regex", "v+"),
            HeaderMatchKind.SAFE_REGEX,
            id="string_match.safe_regex.regex",
        ),
    ],
)
def test_every_header_matcher_form_decodes_to_its_kind_member(
    setup: Callable[[Any], None], kind: HeaderMatchKind
) -> None:
    """Each header_match_specifier (and each StringMatcher pattern) decodes to the
    `HeaderMatchKind` member that names its test, and the matcher applies that test."""
    header = _header(setup)
    assert header.kind is kind
    assert header.name == "h"
    value = "2" if kind is HeaderMatchKind.RANGE else "v"
    assert header.matches({"h": value})


def test_select_virtual_host_on_the_view() -> None:
    v = view(config(route(), domains=("api.example.com",)))
    assert v.virtual_host_for("api.example.com") is v.virtual_hosts[0]
    assert v.proto.virtual_hosts[0].domains == ["api.example.com"]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("(a)\\1", "invalid escape sequence: \\1"), ("a(?=b)", "invalid perl operator: (?="),
     ("a(?<=b)", "invalid perl operator: (?<=")],
)  # fmt: skip
def test_patterns_re2_rejects_are_nacked_with_the_field_even_if_python_accepts_them(
    pattern: str, why: str
) -> None:
    message = config(route())
    message.virtual_hosts[0].routes[0].match.safe_regex.regex = pattern
    assert reason(message) == (
        f"virtual_hosts[0].routes[0].match.safe_regex.regex: invalid regex {pattern!r}: "
        f"not a valid RE2 pattern: {why}"
    )


def test_regex_routes_match_with_re2_semantics_not_pythons() -> None:
    message = config(route())
    message.virtual_hosts[0].routes[0].match.safe_regex.regex = r"/\d+"
    match = view(message).virtual_hosts[0].routes[0].match
    assert match.matches("/123", {})
    assert not match.matches("/\u0663", {})  # an Arabic-Indic digit: \d in Python's re, not RE2


def test_routes_without_per_filter_configs_share_one_read_only_empty_mapping() -> None:
    r = route()
    r.route.weighted_clusters.clusters.add(name="a").weight.value = 1
    (vhost,) = view(config(r, route("/b/"))).virtual_hosts
    first, second = vhost.routes
    assert first.action is not None
    mappings = [
        vhost.typed_per_filter_config,
        first.typed_per_filter_config,
        second.typed_per_filter_config,
        first.action.weighted_clusters[0].typed_per_filter_config,
    ]
    assert all(mapping == {} and mapping is mappings[0] for mapping in mappings)
    with pytest.raises(TypeError):
        first.typed_per_filter_config["k"] = 1  # type: ignore[index]


def test_the_decoders_builders_set_every_field_as_the_classes_init_does() -> None:
    """The decoder builds routes without attrs' keyword parsing: each builder takes every field
    of its class in declaration order and gives the value ``__init__`` gives."""
    header = HeaderMatcher(name="h", kind=HeaderMatchKind.PRESENT)
    match: dict[str, Any] = {
        "path_match": PathMatch.SAFE_REGEX,
        "path": "/a.*",
        "case_sensitive": False,
        "headers": (header,),
        "runtime_fraction_ppm": 5,
        "regex": compile_regex("/a.*"),
        "query_parameters": (QueryParameterMatcher(name="q", kind=HeaderMatchKind.PRESENT),),
    }
    action: dict[str, Any] = {
        "cluster": "",
        "weighted_clusters": (ClusterWeight(name="w", weight=2),),
        "cluster_specifier_plugin": "p",
        "max_stream_duration": 1.5,
        "retry_policy": RetryPolicy(retry_on=frozenset({"cancelled"})),
        "hash_policies": (HashPolicy(kind=HashPolicyKind.CHANNEL_ID),),
        "prefix_rewrite": "/b/",
        "regex_rewrite": RegexRewrite(pattern="a", substitution="b", regex=compile_regex("a")),
        "host_rewrite_literal": "h",
        "timeout": 2.5,
        "http_hash_policies": (HashPolicy(kind=HashPolicyKind.SOURCE_IP),),
        "cluster_header": "x-cluster",
    }
    built_match = _route._new_route_match(*match.values())
    grpc_part = list(action.values())[:6]
    http_part = dict(list(action.items())[6:])
    built_action = _route._new_route_action(
        grpc_part[0],
        grpc_part[1],
        grpc_part[2],
        grpc_part[3],
        grpc_part[4],
        grpc_part[5],
        http_part,
    )
    routed: dict[str, Any] = {
        "match": built_match,
        "action_type": RouteActionType.ROUTE,
        "action": built_action,
        "typed_per_filter_config": {"f": ("t", b"", False)},
        "name": "r",
        "redirect": RedirectAction(host="h"),
        "direct_response": DirectResponse(status=200),
        "request_headers_to_add": (HeaderToAdd(name="x", value="1"),),
        "request_headers_to_remove": ("y",),
    }
    cases = [
        (RouteMatch, built_match, match),
        (RouteAction, built_action, action),
        (Route, _route._new_route(*routed.values()), routed),
    ]
    for cls, built, fields in cases:
        assert [field.name for field in attrs.fields(cls)] == list(fields)
        assert type(built) is cls
        assert all(getattr(built, name) is value for name, value in fields.items())
        assert built == cls(**fields)
        assert repr(built) == repr(cls(**fields))
        assert hash(built) == hash(cls(**fields))


def common_route(prefix: str = "/svc/", cluster: str = "c", name: str = "") -> Any:
    route = rc.Route(name=name)
    route.match.prefix = prefix
    route.route.cluster = cluster
    return route


def path_route() -> Any:
    route = rc.Route()
    route.match.path = "/svc/Method"
    route.route.cluster = "c"
    return route


def with_unknown_field(route: Any) -> Any:
    """``route`` with a field this protobuf does not know (number 999, a varint) after it."""
    return rc.Route.FromString(route.SerializeToString() + b"\xb8\x3e\x01")


def full_reading(route: Any) -> Route | None:
    return _route._route("rc", "virtual_hosts[0]", 0, route, {})


@pytest.mark.parametrize(
    "route",
    [
        common_route(),
        common_route(name="named"),
        path_route(),
        common_route("/" + "p" * 124, "c" * 125, "n" * 127),  # lengths of one byte
    ],
)
def test_a_common_route_takes_the_short_path_and_reads_as_in_full(route: Any) -> None:
    """A route of the common shape is built by the short path, field for field as the full
    reading and attrs' __init__ build it."""
    fast = _route._common_route(route)
    full = full_reading(route)
    assert type(fast) is Route
    assert full is not None
    for field in attrs.fields(Route):
        assert getattr(fast, field.name) == getattr(full, field.name), field.name
    assert repr(fast) == repr(full)
    assert fast == full


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r.match.case_sensitive.SetInParent(),
        lambda r: r.match.headers.add(name="h", present_match=True),
        lambda r: r.match.runtime_fraction.default_value.SetInParent(),
        lambda r: r.match.query_parameters.add(name="q", present_match=True),
        lambda r: r.match.grpc.SetInParent(),
        lambda r: r.route.max_stream_duration.SetInParent(),
        lambda r: r.route.retry_policy.SetInParent(),
        lambda r: setattr(r.route, "prefix_rewrite", "/x/"),
        lambda r: r.route.timeout.SetInParent(),
        lambda r: r.route.hash_policy.add().header.header_name.__len__(),
        lambda r: r.typed_per_filter_config["f"].SetInParent(),
        lambda r: r.request_headers_to_add.add().header.key.__len__(),
        lambda r: r.request_headers_to_remove.append("x-gone"),
        lambda r: r.decorator.SetInParent(),
        lambda r: r.metadata.SetInParent(),
    ],
)
def test_a_route_with_more_than_the_common_fields_is_read_in_full(
    mutate: Callable[[Any], None],
) -> None:
    """Any field the short path does not read, even an empty one, sends the route through the
    full reading."""
    route = common_route()
    mutate(route)
    assert _route._common_route(route) is None


@pytest.mark.parametrize(
    "route",
    [
        with_unknown_field(common_route()),
        common_route(prefix=""),
        common_route(cluster=""),
        common_route(cluster="é"),
        common_route(prefix="/é/"),
        common_route(name="é"),
        common_route(cluster="c" * 126),  # the RouteAction's length takes two bytes
        common_route(prefix="/" + "p" * 125),  # the RouteMatch's
        common_route(name="n" * 128),  # the name's
        rc.Route(match=rc.RouteMatch(prefix="/"), redirect=rc.RedirectAction(host_redirect="h")),
        rc.Route(
            match=rc.RouteMatch(safe_regex={"regex": "/a.*"}), route=rc.RouteAction(cluster="c")
        ),
    ],
)
def test_a_route_the_short_path_cannot_size_is_read_in_full(route: Any) -> None:
    """An unknown field, an empty value, a non-ASCII value, a length of two bytes, another
    action or path matcher: the short path declines, and the full reading decides."""
    assert _route._common_route(route) is None
    config = route_pb2.RouteConfiguration(
        name="rc", virtual_hosts=[rc.VirtualHost(domains=["*"], routes=[route])]
    ).SerializeToString()
    assert outcome(lambda: decode_route_configuration(config)[1].virtual_hosts[0].routes) == (
        outcome(lambda: tuple(r for r in [full_reading(route)] if r is not None))
    )


def outcome(read: Callable[[], Any]) -> Any:
    """What ``read`` returns, or the message of the `ResourceDecodeError` it raises."""
    try:
        return read()
    except ResourceDecodeError as exc:
        return exc.message
