"""The RouteConfiguration decoder gives the verdicts of the reference one.

The reference (tests/resources/reference_route.py) is the decoder as it was before the lean
changes. For generated configurations built from few distinct values so rules collide (domains,
path and header matchers with valid and invalid RE2, runtime fractions, every route action and
cluster specifier, weighted clusters, durations, retry and hash policies, per-filter configs,
cluster specifier plugins; and what Envoy's HTTP router reads besides: route names, redirects,
direct responses, request headers to add and remove, query parameter matchers, rewrites,
timeouts, HTTP retry conditions, cookie / query / source-IP hashing) and for random mutations
of real ones, both must accept with
field-for-field equal views, or both reject with the same name and message. The same holds for
a route configuration inline in a Listener, whose paths carry the listener's prefix.
"""

from __future__ import annotations

from typing import Any

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf import any_pb2, duration_pb2
from hypothesis import example, given
from hypothesis import strategies as st
from xds.type.v3 import typed_struct_pb2

from tests.resources import reference_route
from tests.resources.differential import FUZZ_SETTINGS, plain, verdict
from tests.resources.test_mutations import _mutate, _route_config
from xdsclient import ResourceDecodeError
from xdsclient.resources import HashPolicyKind, ListenerView, RouteConfigurationView
from xdsclient.testing.builders import api_listener, route_configuration


def assert_same_verdict(message: Any) -> None:
    ours = verdict(RouteConfigurationView, message)
    assert ours == verdict(reference_route.RouteConfigurationView, message)


class _Pick:
    """Draws a configuration's values: one of the ``common`` ones (valid, or edges gRPC
    accepts), or, ``rare_percent`` times in a hundred, one of the ``rare`` ones that break a
    rule. The rate is drawn per configuration, so some are valid throughout (every accepted part
    is compared) and some fail deep inside, not always at the first plugin or domain."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.rare_percent = draw(st.sampled_from([0, 0, 2, 5, 20]))

    def __call__(self, common: list[Any], rare: list[Any] | None = None) -> Any:
        if rare and self.draw(st.integers(0, 99)) < self.rare_percent:
            return self.draw(st.sampled_from(rare))
        return self.draw(st.sampled_from(common))

    def flag(self) -> bool:
        return self.draw(st.booleans())

    def count(self, most: int) -> int:
        return self.draw(st.integers(0, most))

    def regex(self) -> str:
        return str(self(["/svc/.*", "", "[a-z]+"], ["(", "a{1001}", "a**"]))

    def duration(self, duration: Any) -> None:
        duration.seconds, duration.nanos = self(
            [(0, 0), (1, 500)], [(-1, 0), (0, -1), (315_576_000_001, 0)]
        )


def _packed(pick: _Pick, wrapped: bool = False) -> Any:
    """A per-filter config: an override type gRPC knows (a fault's delay may be invalid), or
    rarely the router (known, not an override), an unknown type or an empty Any; sometimes in a
    FilterConfig wrapper (disabled, optional), rarely one that does not parse or whose type URL
    has another host."""
    kind = pick(["fault", "rbac", "session"], ["router", "unknown", "empty"])
    packed = any_pb2.Any()
    if kind == "fault":
        fault = fault_pb2.HTTPFault()
        if pick.flag():
            pick.duration(fault.delay.fixed_delay)
        packed.Pack(fault)
    elif kind != "empty":
        payloads = {
            "rbac": rbac_pb2.RBACPerRoute(),
            "session": stateful_session_pb2.StatefulSessionPerRoute(),
            "router": router_pb2.Router(),
            "unknown": duration_pb2.Duration(seconds=1),
        }
        packed.Pack(payloads[kind])
    if not wrapped and pick.count(2) == 0:
        wrapper = rc.FilterConfig(disabled=pick.flag(), is_optional=pick.flag())
        wrapper.config.CopyFrom(_packed(pick, wrapped=True))
        packed.Pack(wrapper)
        flaw = pick(["none"], ["garbage", "other host"])
        if flaw == "garbage":
            packed.value = b"\xff"
        elif flaw == "other host":
            packed.type_url = "other.host/envoy.config.route.v3.FilterConfig"
    return packed


def _filter_configs(pick: _Pick, configs: Any) -> None:
    for _ in range(pick.count(2)):
        configs[pick(["fault", "f"], [""])].CopyFrom(_packed(pick))


def _retry_policy(pick: _Pick, policy: Any) -> None:
    policy.retry_on = pick(
        [
            "",
            "unavailable",
            "cancelled, 5xx,internal",
            " deadline-exceeded ,x",
            "reset,retriable-4xx",
        ]
    )
    if pick.flag():
        policy.retriable_status_codes.extend(pick([[503], [502, 504]]))
    if pick.count(3) == 0:
        _header(pick, policy.retriable_headers.add())
    if pick.count(2) == 0:
        pick.duration(policy.per_try_timeout)
    if pick.count(2) == 0:
        predicate = policy.retry_host_predicate.add(
            name="envoy.retry_host_predicates.previous_hosts"
        )
        predicate.typed_config.type_url = pick([_PREVIOUS_HOSTS, ""])
        policy.host_selection_retry_max_attempts = pick([0, 3])
    retries = pick([None, 1, 5], [0])
    if retries is not None:
        policy.num_retries.value = retries
    backoff = pick(["none", "base", "both"], ["empty", "max"])
    if backoff != "none":
        policy.retry_back_off.SetInParent()
    if backoff in ("base", "both"):
        pick.duration(policy.retry_back_off.base_interval)
    if backoff in ("both", "max"):
        pick.duration(policy.retry_back_off.max_interval)


def _header(pick: _Pick, header: Any) -> None:
    header.name = pick(["X-Env", ""])
    header.invert_match = pick.flag()
    kinds = ["exact", "prefix", "suffix", "contains", "regex", "range", "present", "string"]
    kind = pick(kinds, ["none"])
    if kind in ("exact", "prefix", "suffix", "contains"):
        setattr(header, f"{kind}_match", pick(["prod", ""]))
    elif kind == "regex":
        header.safe_regex_match.regex = pick.regex()
    elif kind == "range":
        start, end = pick([(0, 10), (10, 10), (-5, 0)], [(10, 0)])
        header.range_match.start, header.range_match.end = start, end
    elif kind == "present":
        header.present_match = pick.flag()
    elif kind == "string":
        matcher = header.string_match
        matcher.ignore_case = pick.flag()
        pattern = pick(["exact", "prefix", "suffix", "contains", "regex"], ["none"])
        if pattern == "regex":
            matcher.safe_regex.regex = pick.regex()
        elif pattern != "none":
            setattr(matcher, pattern, pick(["Prod", ""]))


def _query_parameter(pick: _Pick, matcher: Any) -> None:
    """A query parameter condition: presence, a string matcher (rarely an invalid regex or no
    pattern), or neither."""
    matcher.name = pick(["q", ""])
    kind = pick(["present", "exact", "regex", "neither"], ["no_pattern"])
    if kind == "present":
        matcher.present_match = pick.flag()
    elif kind == "exact":
        matcher.string_match.exact = pick(["1", ""])
        matcher.string_match.ignore_case = pick.flag()
    elif kind == "regex":
        matcher.string_match.safe_regex.regex = pick.regex()
    elif kind == "no_pattern":
        matcher.string_match.SetInParent()


def _headers_to_add(pick: _Pick, owner: Any) -> None:
    for _ in range(pick.count(2)):
        option = owner.request_headers_to_add.add(keep_empty_value=pick.flag())
        option.header.key = pick(["X-Added", "x-b"])
        option.header.value = pick(["v", ""])
        shape = pick(["action", "append", "none"])
        if shape == "action":
            option.append_action = pick([0, 1, 2, 3])
        elif shape == "append":
            option.append.value = pick.flag()
    for _ in range(pick.count(2)):
        owner.request_headers_to_remove.append(pick(["X-Gone", "x-c"]))


def _match(pick: _Pick, match: Any) -> None:
    kind = pick(["prefix", "path", "safe_regex"], ["separated", "none"])
    if kind in ("prefix", "path"):
        setattr(match, kind, pick(["/svc/", "", "/"]))
    elif kind == "safe_regex":
        match.safe_regex.regex = pick.regex()
    elif kind == "separated":
        match.path_separated_prefix = "/svc"
    case_sensitive = pick([None, True, False])
    if case_sensitive is not None:
        match.case_sensitive.value = case_sensitive
    if pick.count(5) == 0:  # gRPC skips the route; HTTP keeps it when it is valid
        for _ in range(pick([1, 2])):
            _query_parameter(pick, match.query_parameters.add())
    for _ in range(pick.count(2)):
        _header(pick, match.headers.add())
    if pick.flag():
        match.runtime_fraction.SetInParent()
        fraction = match.runtime_fraction.default_value
        fraction.numerator = pick([0, 50, 1_000_001, 2**32 - 1])
        fraction.denominator = pick([0, 1, 2], [3])  # 3: unknown


def _cluster_specifier(pick: _Pick, action: Any) -> None:
    kind = pick(["cluster", "weighted", "plugin", "header"], ["none"])
    if kind == "cluster":
        action.cluster = pick(["c", "d"], [""])
    elif kind == "weighted":
        action.weighted_clusters.SetInParent()
        for _ in range(pick([1, 2, 3], [0])):
            entry = action.weighted_clusters.clusters.add(name=pick(["a", "b"], [""]))
            weight = pick([1, 3, 2**31], [None, 0, 2**32 - 1])
            if weight is not None:
                entry.weight.value = weight
            _filter_configs(pick, entry.typed_per_filter_config)
    elif kind == "plugin":
        action.cluster_specifier_plugin = pick(["p", "opt"], ["missing", ""])
    elif kind == "header":
        action.cluster_header = "x-cluster"


def _route_action(pick: _Pick, action: Any) -> None:
    _cluster_specifier(pick, action)
    durations = pick(["none", "empty", "header_max", "max", "both"])
    if durations != "none":
        action.max_stream_duration.SetInParent()
    if durations in ("header_max", "both"):
        pick.duration(action.max_stream_duration.grpc_timeout_header_max)
    if durations in ("max", "both"):
        pick.duration(action.max_stream_duration.max_stream_duration)
    if pick.flag():
        _retry_policy(pick, action.retry_policy)
    _http_action(pick, action)
    for _ in range(pick.count(2)):
        policy = action.hash_policy.add(terminal=pick.flag())
        kind = pick(
            ["header", "rewrite", "channel_id", "other_state", "cookie", "query", "source_ip"]
        )
        if kind in ("header", "rewrite"):
            policy.header.header_name = pick(["User-Id", ""])
        if kind == "rewrite":
            policy.header.regex_rewrite.pattern.regex = pick.regex()
            policy.header.regex_rewrite.substitution = pick(["", "x"])
        elif kind in ("channel_id", "other_state"):
            key = "io.grpc.channel_id" if kind == "channel_id" else "other"
            policy.filter_state.key = key
        elif kind == "cookie":
            policy.cookie.name = "session"
            if pick.flag():
                pick.duration(policy.cookie.ttl)
                policy.cookie.path = pick(["/", ""])
        elif kind == "query":
            policy.query_parameter.name = "user"
        elif kind == "source_ip":
            policy.connection_properties.source_ip = pick.flag()


def _http_action(pick: _Pick, action: Any) -> None:
    """A route action's rewrites and timeout (a rewrite regex may be invalid)."""
    rewrite = pick(["none", "none", "prefix", "regex"])
    if rewrite == "prefix":
        action.prefix_rewrite = pick(["/v2/", ""])
    elif rewrite == "regex":
        action.regex_rewrite.pattern.regex = pick.regex()
        action.regex_rewrite.substitution = pick(["/x/\\1", ""])
    if pick.count(2) == 0:
        action.host_rewrite_literal = "upstream.example"
    if pick.count(2) == 0:
        pick.duration(action.timeout)


def _redirect(pick: _Pick, redirect: Any) -> None:
    """A redirect: scheme, host, port and path parts; rarely a code out of the enum or an
    invalid rewrite regex."""
    redirect.response_code = pick([0, 1, 4], [9])
    scheme = pick(["none", "https", "http"])
    if scheme == "https":
        redirect.https_redirect = True
    elif scheme == "http":
        redirect.scheme_redirect = "HTTP"
    redirect.host_redirect = pick(["", "other.example"])
    redirect.port_redirect = pick([0, 8443])
    path = pick(["path", "prefix", "regex", "none"])
    if path == "path":
        redirect.path_redirect = "/"
    elif path == "prefix":
        redirect.prefix_rewrite = "/new/"
    elif path == "regex":
        redirect.regex_rewrite.pattern.regex = pick.regex()
        redirect.regex_rewrite.substitution = "/r"
    redirect.strip_query = pick.flag()


def _direct_response(pick: _Pick, response: Any) -> None:
    response.status = pick([200, 404, 503], [0, 199, 600])
    body = pick(["none", "string", "bytes", "file"])
    if body == "string":
        response.body.inline_string = "gone"
    elif body == "bytes":
        response.body.inline_bytes = b"\x00gone"
    elif body == "file":
        response.body.filename = "/nonexistent"


def _route(pick: _Pick, route: Any) -> None:
    route.name = pick(["", "r1"])
    _match(pick, route.match)
    kind = pick(["route", "route", "route", "non_forwarding", "redirect", "direct", "none"])
    if kind == "route":
        _route_action(pick, route.route)
    elif kind == "non_forwarding":
        route.non_forwarding_action.SetInParent()
    elif kind == "redirect":
        _redirect(pick, route.redirect)
    elif kind == "direct":
        _direct_response(pick, route.direct_response)
    _filter_configs(pick, route.typed_per_filter_config)
    _headers_to_add(pick, route)


_RLS = "type.googleapis.com/grpc.lookup.v1.RouteLookupClusterSpecifier"
_PREVIOUS_HOSTS = (
    "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"
)


def _plugins(pick: _Pick, message: Any) -> None:
    """Plugins "p" and "opt" (optional or not) of the RLS type gRPC knows or of a type it lacks
    (plain or in a TypedStruct); rarely one without a name, a duplicate, one without an
    extension or a config, or with a type URL that names no type."""
    names = [name for name in ("p", "opt") if pick.flag()]
    names += [name for name in [pick([None], ["", "p"])] if name is not None]
    for name in names:
        plugin = message.cluster_specifier_plugins.add(is_optional=pick.flag())
        shape = pick(["rls", "rls", "unknown", "struct"], ["none", "no_extension", "bad_url"])
        if shape == "no_extension":
            continue
        plugin.extension.name = name
        packed = plugin.extension.typed_config
        if shape == "rls":
            packed.type_url, packed.value = _RLS, b"\x0a\x00"
        elif shape == "unknown":
            packed.Pack(duration_pb2.Duration(seconds=2))
        elif shape == "struct":
            packed.Pack(typed_struct_pb2.TypedStruct(type_url=pick(["x/y.Unknown", _RLS])))
        elif shape == "bad_url":
            packed.type_url = pick(["y.Unknown", "type.googleapis.com/"])


@st.composite
def route_configurations(draw: st.DrawFn) -> Any:
    """A RouteConfiguration made of few distinct values, so rules collide often."""
    pick = _Pick(draw)
    message = route_pb2.RouteConfiguration(name=pick(["rc", ""]))
    message.ignore_port_in_host_matching = pick.flag()
    _headers_to_add(pick, message)
    _plugins(pick, message)
    for _ in range(pick.count(2)):
        vhost = message.virtual_hosts.add(name=pick(["vh", ""]))
        for _ in range(pick([1, 2, 3], [0])):
            vhost.domains.append(pick(["*", "*.a", "a.*", "a", "*.*"], ["a*b", ""]))
        for _ in range(pick.count(4)):
            _route(pick, vhost.routes.add())
        if pick.flag():
            _retry_policy(pick, vhost.retry_policy)
        _filter_configs(pick, vhost.typed_per_filter_config)
        _headers_to_add(pick, vhost)
    return message


def _weights_summing_to(total: int) -> Any:
    return route_configuration("rc", {"a": total - 1, "b": 1})


def _inverted_range() -> Any:
    message = route_configuration("rc", "c")
    header = message.virtual_hosts[0].routes[0].match.headers.add(name="x")
    header.range_match.start, header.range_match.end = 10, 0
    return message


def _optional_plugin_route() -> Any:
    """A route naming an optional plugin the configuration does not define."""
    message = route_configuration("rc", "c")
    message.cluster_specifier_plugins.add(is_optional=True).extension.name = "opt"
    message.virtual_hosts[0].routes[0].route.cluster_specifier_plugin = "gone"
    return message


@FUZZ_SETTINGS
@given(message=route_configurations())
@example(message=_weights_summing_to(2**32 - 1))
@example(message=_weights_summing_to(2**32))
@example(message=_inverted_range())
@example(message=_optional_plugin_route())
def test_generated_route_configurations_get_the_reference_verdict(message: Any) -> None:
    assert_same_verdict(message)


def _rich() -> Any:
    """One virtual host using every part the view reads, all valid."""
    message = _route_config()
    plugin = message.cluster_specifier_plugins.add().extension
    plugin.name = "p"
    plugin.typed_config.type_url, plugin.typed_config.value = _RLS, b"\x0a\x00"
    vhost = message.virtual_hosts[0]
    vhost.retry_policy.retry_on = "cancelled"
    vhost.typed_per_filter_config["fault"].Pack(fault_pb2.HTTPFault())
    regex = vhost.routes.add()
    regex.match.safe_regex.regex = "/svc/.*"
    regex.match.case_sensitive.value = False
    regex.match.headers.add(name="r").safe_regex_match.regex = "[a-z]+"
    regex.match.runtime_fraction.default_value.numerator = 5
    regex.route.cluster_specifier_plugin = "p"
    regex.route.max_stream_duration.max_stream_duration.seconds = 2
    policy = regex.route.hash_policy.add(terminal=True)
    policy.header.header_name = "User-Id"
    policy.header.regex_rewrite.pattern.regex = "u-(.*)"
    regex.route.hash_policy.add().filter_state.key = "io.grpc.channel_id"
    wrapper = rc.FilterConfig(is_optional=True)
    wrapper.config.Pack(rbac_pb2.RBACPerRoute())
    regex.typed_per_filter_config["rbac"].Pack(wrapper)
    vhost.routes.add(non_forwarding_action=rc.NonForwardingAction()).match.path = "/local"
    _add_http_parts(vhost)
    return message


def _add_http_parts(vhost: Any) -> None:
    """What Envoy's router reads besides: a route gRPC skips for its query parameters, a
    redirect, a direct response, rewrites, a timeout, HTTP retry conditions and hashing."""
    query = vhost.routes.add(name="by-query")
    query.match.prefix = "/q"
    query.match.query_parameters.add(name="debug").string_match.exact = "1"
    query.route.cluster = "debug"
    query.route.regex_rewrite.pattern.regex = "^/q/(.*)$"
    query.route.regex_rewrite.substitution = "/\\1"
    query.route.timeout.seconds = 3
    query.route.retry_policy.retry_on = "5xx,reset"
    query.route.retry_policy.per_try_timeout.seconds = 1
    query.route.hash_policy.add().cookie.name = "session"
    query.request_headers_to_add.add().header.key = "X-Debug"
    moved = vhost.routes.add(name="moved")
    moved.match.prefix = "/old/"
    moved.redirect.prefix_rewrite = "/new/"
    moved.redirect.response_code = rc.RedirectAction.PERMANENT_REDIRECT
    gone = vhost.routes.add(name="gone")
    gone.match.path = "/gone"
    gone.direct_response.status = 410
    gone.direct_response.body.inline_string = "gone"


SEEDS = [_route_config(), _rich(), route_configuration("rc", {"/a/": "a", "/b/": {"x": 1}})]


@FUZZ_SETTINGS
@given(seed=st.sampled_from(SEEDS), data=st.data())
def test_mutated_route_configurations_get_the_reference_verdict(
    seed: Any, data: st.DataObject
) -> None:
    message = route_pb2.RouteConfiguration()
    message.CopyFrom(seed)
    for _ in range(data.draw(st.integers(1, 4))):
        _mutate(message, data)
    assert_same_verdict(message)


def test_every_seed_and_a_50_route_configuration_are_accepted_by_both_with_equal_views() -> None:
    """The comparison is not vacuous: the seeds and the bench's shape of configuration (one
    virtual host, prefix -> cluster routes) are accepted, with every part filled in."""
    big = route_configuration("bench-route", {f"/svc{i}/": f"cluster-{i}" for i in range(50)})
    for message in [*SEEDS, big]:
        outcome, fields = verdict(RouteConfigurationView, message)
        assert outcome == "accepted", fields
        assert_same_verdict(message)
    assert len(RouteConfigurationView.from_proto(big).virtual_hosts[0].routes) == 50
    (vhost,) = RouteConfigurationView.from_proto(_rich()).virtual_hosts
    assert vhost.retry_policy is not None
    assert set(vhost.typed_per_filter_config) == {"fault"}
    route = vhost.routes[1]
    assert route.action is not None
    assert route.action.max_stream_duration == 2.0
    kinds = [policy.kind for policy in route.action.hash_policies]
    assert kinds == [HashPolicyKind.HEADER, HashPolicyKind.CHANNEL_ID]
    assert route.match.runtime_fraction_ppm == 50_000
    assert set(route.typed_per_filter_config) == {"rbac"}
    assert [r.name for r in vhost.http_routes[3:]] == ["by-query", "moved", "gone"]
    assert [r.name for r in vhost.routes[3:]] == ["moved", "gone"]


_HCM = "api_listener.api_listener"


@FUZZ_SETTINGS
@given(message=route_configurations())
def test_inline_route_configurations_in_a_listener_get_the_reference_verdict(
    message: Any,
) -> None:
    """A Listener with the routes inline reports them under its own path, as the reference's
    ``route_fields`` does with that prefix (given the inline message as the listener parses it:
    map order, so which of two bad filter configs is named, can change with a reparse)."""
    listener = api_listener("l", routes=message)
    inline = hcm_pb2.HttpConnectionManager.FromString(listener.api_listener.api_listener.value)
    try:
        expected: Any = reference_route.route_fields(
            "l", f"{_HCM}.route_config.", inline.route_config
        )
    except ResourceDecodeError as exc:
        expected = (exc.name, exc.message)
    outcome, fields = verdict(ListenerView, listener)
    if outcome == "rejected":
        assert fields == expected
        return
    assert isinstance(expected, dict)
    manager = ListenerView.from_proto(listener).api_listener
    assert manager is not None
    assert manager.route_config is not None
    assert plain(manager.route_config.virtual_hosts) == plain(expected["virtual_hosts"])
    assert manager.route_config.cluster_specifier_plugins == expected["cluster_specifier_plugins"]
