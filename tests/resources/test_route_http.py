"""RouteConfiguration view: the parts Envoy's HTTP router reads, decoded beside gRPC's, which
stay as gRPC reads them (query parameter routes skipped, redirects unsupported, gRPC's retry
codes and hash policies only)."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2

from xdsclient import ResourceDecodeError
from xdsclient.resources import (
    DirectResponse,
    HashPolicy,
    HashPolicyKind,
    HeaderAppendAction,
    HeaderMatchKind,
    HeaderToAdd,
    QueryParameterMatcher,
    RedirectAction,
    RouteActionType,
    RouteConfigurationView,
    match_route,
)
from xdsclient.resources._route import decode_route_configuration

R0 = "virtual_hosts[0].routes[0]"
PREVIOUS_HOSTS = (
    "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"
)


def config(*routes: Any) -> Any:
    message = route_pb2.RouteConfiguration(name="rc")
    message.virtual_hosts.add(name="vh", domains=["*"]).routes.extend(routes)
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
        view(message)
    return caught.value.message


def test_a_route_keeps_its_name() -> None:
    """A route's name is in its value, on the lean path (a prefix and a cluster) too."""
    lean = route("/a")
    lean.name = "lean"
    rich = route("/b")
    rich.name = "rich"
    rich.match.case_sensitive.value = False
    (vhost,) = view(config(lean, rich)).virtual_hosts
    assert [r.name for r in vhost.routes] == ["lean", "rich"]


def query_route(prefix: str = "/q", cluster: str = "debug") -> Any:
    message = route(prefix, cluster)
    message.match.query_parameters.add(name="debug").string_match.exact = "1"
    return message


def test_a_query_parameter_route_is_kept_for_http_and_skipped_by_grpc() -> None:
    """The route is in http_routes in its place, not in routes; gRPC's match never takes it and
    its cluster is not one the configuration needs (gRPC would not watch it)."""
    config_view = view(config(route("/a"), query_route(), route("/", "last")))
    (vhost,) = config_view.virtual_hosts
    assert [r.match.path for r in vhost.routes] == ["/a", "/"]
    assert [r.match.path for r in vhost.http_routes] == ["/a", "/q", "/"]
    (condition,) = vhost.http_routes[1].match.query_parameters
    assert condition == QueryParameterMatcher(name="debug", kind=HeaderMatchKind.EXACT, value="1")
    assert not vhost.http_routes[1].match.matches("/q?debug=1", {})
    assert match_route(vhost, "/q?debug=1").action.cluster == "last"  # type: ignore[union-attr]
    assert config_view.clusters == {"c", "last"}


def test_without_query_parameter_routes_http_routes_are_the_routes() -> None:
    """No second tuple is built when gRPC skips nothing."""
    (vhost,) = view(config(route("/a"), route("/b"))).virtual_hosts
    assert vhost.http_routes is vhost.routes


def test_an_invalid_query_parameter_route_is_left_out_and_the_resource_accepted() -> None:
    """gRPC never reads a route it skips, so an invalid part of it (a regex RE2 rejects, here in
    a query matcher and in a header matcher) leaves it out of http_routes, as gRPC accepts."""
    bad_query = query_route()
    bad_query.match.query_parameters.add(name="x").string_match.safe_regex.regex = "("
    bad_header = query_route("/h")
    bad_header.match.headers.add(name="x").safe_regex_match.regex = "a**"
    (vhost,) = view(config(bad_query, bad_header, route())).virtual_hosts
    assert [r.match.path for r in vhost.http_routes] == ["/"]


def test_query_parameter_matchers_of_every_kind() -> None:
    """Presence (also when neither a pattern nor present_match is given), string patterns with
    ignore_case, and RE2 regexes."""
    message = query_route()
    queries = message.match.query_parameters
    queries.add(name="p").present_match = True
    queries.add(name="n")
    regex = queries.add(name="r")
    regex.string_match.safe_regex.regex = "[0-9]+"
    prefix = queries.add(name="s")
    prefix.string_match.prefix = "Ab"
    prefix.string_match.ignore_case = True
    (vhost,) = view(config(message)).virtual_hosts
    _, present, neither, by_regex, by_prefix = vhost.http_routes[0].match.query_parameters
    assert present.kind is neither.kind is HeaderMatchKind.PRESENT
    assert by_regex.matches({"r": "42"})
    assert not by_regex.matches({"r": "4x"})
    assert by_prefix.matches({"s": "abc"})
    assert not by_prefix.matches({})


def test_a_redirect_is_decoded_and_still_unsupported_for_grpc() -> None:
    """Every part of RedirectAction; the action type stays UNSUPPORTED (gRPC fails the RPC)."""
    message = rc.Route(name="moved")
    message.match.prefix = "/old/"
    redirect = message.redirect
    redirect.https_redirect = True
    redirect.host_redirect = "new.example"
    redirect.port_redirect = 8443
    redirect.prefix_rewrite = "/new/"
    redirect.response_code = rc.RedirectAction.TEMPORARY_REDIRECT
    redirect.strip_query = True
    (parsed,) = view(config(message)).virtual_hosts[0].routes
    assert parsed.action_type is RouteActionType.UNSUPPORTED
    assert parsed.action is None
    assert parsed.redirect == RedirectAction(
        scheme="https",
        host="new.example",
        port=8443,
        prefix_rewrite="/new/",
        response_code=307,
        strip_query=True,
    )


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (rc.RedirectAction.MOVED_PERMANENTLY, 301),
        (rc.RedirectAction.FOUND, 302),
        (rc.RedirectAction.SEE_OTHER, 303),
        (rc.RedirectAction.PERMANENT_REDIRECT, 308),
    ],
)
def test_redirect_response_codes_map_to_http_statuses(code: int, status: int) -> None:
    """Each RedirectResponseCode is the status Envoy answers with."""
    message = rc.Route()
    message.match.prefix = "/"
    message.redirect.response_code = code
    message.redirect.scheme_redirect = "HTTP"
    (parsed,) = view(config(message)).virtual_hosts[0].routes
    assert parsed.redirect == RedirectAction(scheme="http", response_code=status)


def test_an_unknown_redirect_code_or_an_invalid_rewrite_regex_names_the_field() -> None:
    """A response code outside the enum and a regex_rewrite RE2 rejects are errors."""
    unknown = rc.Route()
    unknown.match.prefix = "/"
    unknown.redirect.response_code = 9
    assert reason(config(unknown)) == f"{R0}.redirect.response_code: unknown response code 9"
    bad = rc.Route()
    bad.match.prefix = "/"
    bad.redirect.regex_rewrite.pattern.regex = "a{1001}"
    assert reason(config(bad)).startswith(
        f"{R0}.redirect.regex_rewrite.pattern.regex: invalid regex 'a{{1001}}'"
    )


def test_a_direct_response_keeps_its_status_and_inline_body() -> None:
    """Inline strings and bytes are the body; a body read from a file is left empty."""
    text, raw, filed = rc.Route(), rc.Route(), rc.Route()
    for message, prefix in ((text, "/t"), (raw, "/r"), (filed, "/f")):
        message.match.prefix = prefix
        message.direct_response.status = 410
    text.direct_response.body.inline_string = "gone"
    raw.direct_response.body.inline_bytes = b"\x00gone"
    filed.direct_response.body.filename = "/etc/hostname"
    routes = view(config(text, raw, filed)).virtual_hosts[0].routes
    assert [r.action_type for r in routes] == [RouteActionType.UNSUPPORTED] * 3
    assert [r.direct_response for r in routes] == [
        DirectResponse(status=410, body=b"gone"),
        DirectResponse(status=410, body=b"\x00gone"),
        DirectResponse(status=410),
    ]


@pytest.mark.parametrize("status", [0, 199, 600])
def test_a_direct_response_status_outside_envoys_range_names_the_field(status: int) -> None:
    """Envoy requires 200 <= status < 600."""
    message = rc.Route()
    message.match.prefix = "/"
    message.direct_response.status = status
    assert reason(config(message)) == f"{R0}.direct_response.status: must be in [200, 600)"


def test_request_headers_to_add_and_remove_on_routes_and_virtual_hosts() -> None:
    """Names lower-case; append_action, the deprecated append (true appends, false overwrites)
    and keep_empty_value as given."""
    message = route()
    plain = message.request_headers_to_add.add()
    plain.header.key, plain.header.value = "X-Team", "core"
    absent = message.request_headers_to_add.add(append_action=1, keep_empty_value=True)
    absent.header.key = "x-empty"
    legacy = message.request_headers_to_add.add()
    legacy.header.key, legacy.header.value = "x-old", "1"
    legacy.append.value = False
    message.request_headers_to_remove.append("X-Internal")
    full = config(message)
    full.virtual_hosts[0].request_headers_to_add.add().header.key = "x-vh"
    full.virtual_hosts[0].request_headers_to_remove.append("Cookie")
    (vhost,) = view(full).virtual_hosts
    (parsed,) = vhost.routes
    assert parsed.request_headers_to_add == (
        HeaderToAdd(name="x-team", value="core"),
        HeaderToAdd(
            name="x-empty",
            value="",
            append_action=HeaderAppendAction.ADD_IF_ABSENT,
            keep_empty_value=True,
        ),
        HeaderToAdd(
            name="x-old", value="1", append_action=HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD
        ),
    )
    assert parsed.request_headers_to_remove == ("x-internal",)
    assert vhost.request_headers_to_add == (HeaderToAdd(name="x-vh", value=""),)
    assert vhost.request_headers_to_remove == ("cookie",)


def test_a_route_action_keeps_its_rewrites_and_timeout() -> None:
    """prefix_rewrite, regex_rewrite (compiled with RE2), host_rewrite_literal and timeout."""
    message = route("/api/")
    action = message.route
    action.prefix_rewrite = "/v2/"
    action.regex_rewrite.pattern.regex = "^/api/(.*)$"
    action.regex_rewrite.substitution = "/\\1"
    action.host_rewrite_literal = "backend.internal"
    action.timeout.seconds, action.timeout.nanos = 2, 500_000_000
    (parsed,) = view(config(message)).virtual_hosts[0].routes
    assert parsed.action is not None
    assert parsed.action.prefix_rewrite == "/v2/"
    assert parsed.action.regex_rewrite is not None
    assert parsed.action.regex_rewrite.pattern == "^/api/(.*)$"
    assert parsed.action.regex_rewrite.regex.fullmatch("/api/x") is not None
    assert parsed.action.host_rewrite_literal == "backend.internal"
    assert parsed.action.timeout == 2.5
    (lean,) = view(config(route())).virtual_hosts[0].routes
    assert lean.action is not None
    assert lean.action.timeout is None  # unset: Envoy's default applies


def test_an_invalid_regex_rewrite_or_timeout_names_the_field() -> None:
    """A regex_rewrite RE2 rejects and a negative timeout are errors naming the field."""
    bad_regex = route()
    bad_regex.route.regex_rewrite.pattern.regex = "x(?=y)"  # lookahead: not RE2
    assert reason(config(bad_regex)).startswith(
        f"{R0}.route.regex_rewrite.pattern.regex: invalid regex"
    )
    negative = route()
    negative.route.timeout.seconds = -1
    assert reason(config(negative)) == (
        f"{R0}.route.timeout: must be a non-negative duration within range"
    )


def test_a_retry_policy_keeps_envoys_http_conditions_beside_grpcs_codes() -> None:
    """retry_on is split: gRPC's status names in retry_on, Envoy's HTTP conditions in
    http_retry_on; the other HTTP parts as given."""
    message = route()
    policy = message.route.retry_policy
    policy.retry_on = "5xx,gateway-error, reset,connect-failure,retriable-4xx,unavailable,bogus"
    policy.retry_on += ",retriable-status-codes,retriable-headers"
    policy.retriable_status_codes.extend([409, 503])
    policy.retriable_headers.add(name="X-Retry").present_match = True
    policy.per_try_timeout.seconds = 1
    policy.retry_host_predicate.add(name="previous").typed_config.type_url = PREVIOUS_HOSTS
    policy.host_selection_retry_max_attempts = 3
    (parsed,) = view(config(message)).virtual_hosts[0].routes
    assert parsed.action is not None
    retry = parsed.action.retry_policy
    assert retry is not None
    assert retry.retry_on == frozenset({"unavailable"})
    assert retry.http_retry_on == frozenset(
        {
            "5xx",
            "gateway-error",
            "reset",
            "connect-failure",
            "retriable-4xx",
            "retriable-status-codes",
            "retriable-headers",
        }
    )
    assert retry.retriable_status_codes == (409, 503)
    (header,) = retry.retriable_headers
    assert header.name == "x-retry"
    assert header.kind is HeaderMatchKind.PRESENT
    assert retry.per_try_timeout == 1.0
    assert retry.avoids_previous_hosts
    assert retry.host_selection_retry_max_attempts == 3


def test_a_retriable_header_without_a_specifier_tests_presence() -> None:
    """Envoy reads a HeaderMatcher with a name alone as "present"; it is not an error here,
    though a route's header matcher needs a specifier (gRPC's rule)."""
    message = route()
    message.route.retry_policy.retriable_headers.add(name="X-Retry-Me")
    (parsed,) = view(config(message)).virtual_hosts[0].routes
    assert parsed.action is not None
    assert parsed.action.retry_policy is not None
    (header,) = parsed.action.retry_policy.retriable_headers
    assert (header.name, header.kind, header.present) == (
        "x-retry-me",
        HeaderMatchKind.PRESENT,
        True,
    )


def test_invalid_http_retry_parts_name_the_field() -> None:
    """A retriable header's regex RE2 rejects and a negative per-try timeout are errors."""
    bad_header = route()
    bad_header.route.retry_policy.retriable_headers.add(name="x").safe_regex_match.regex = "("
    assert reason(config(bad_header)).startswith(
        f"{R0}.route.retry_policy.retriable_headers[0].safe_regex_match.regex: invalid regex"
    )
    negative = route()
    negative.route.retry_policy.per_try_timeout.nanos = -5
    assert reason(config(negative)) == (
        f"{R0}.route.retry_policy.per_try_timeout: must be a non-negative duration within range"
    )


def test_envoys_hash_policies_are_kept_apart_from_grpcs() -> None:
    """http_hash_policies has every kind Envoy hashes in order; hash_policies stays gRPC's."""
    message = route()
    policies = message.route.hash_policy
    policies.add().header.header_name = "User-Id"
    cookie = policies.add().cookie
    cookie.name, cookie.path = "session", "/"
    cookie.ttl.seconds = 60
    policies.add(terminal=True).query_parameter.name = "user"
    policies.add().connection_properties.source_ip = True
    policies.add().filter_state.key = "io.grpc.channel_id"
    (parsed,) = view(config(message)).virtual_hosts[0].routes
    assert parsed.action is not None
    assert parsed.action.hash_policies == (
        HashPolicy(kind=HashPolicyKind.HEADER, header_name="user-id"),
        HashPolicy(kind=HashPolicyKind.CHANNEL_ID),
    )
    assert parsed.action.http_hash_policies == (
        HashPolicy(kind=HashPolicyKind.HEADER, header_name="user-id"),
        HashPolicy(kind=HashPolicyKind.COOKIE, name="session", cookie_ttl=60.0, cookie_path="/"),
        HashPolicy(kind=HashPolicyKind.QUERY_PARAMETER, name="user", terminal=True),
        HashPolicy(kind=HashPolicyKind.SOURCE_IP),
    )


def test_a_negative_cookie_ttl_names_the_field() -> None:
    """The cookie's ttl is a duration like any other."""
    message = route()
    message.route.hash_policy.add().cookie.ttl.seconds = -1
    assert reason(config(message)) == (
        f"{R0}.route.hash_policy[0].cookie.ttl: must be a non-negative duration within range"
    )
