"""Envoy's HTTP routing rules over decoded route configurations: virtual host by authority, route
match, rewrites and redirect Location, with the examples of Envoy's route configuration docs."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2

from xdsclient.resources import (
    PathMatch,
    Route,
    RouteMatch,
    VirtualHost,
    http_route_matches,
    match_http_route,
    redirect_location,
    rewrite_authority,
    rewrite_path,
    select_http_virtual_host,
    select_virtual_host,
)
from xdsclient.resources._http_routing import query_parameters, strip_port
from xdsclient.resources._route import RouteConfigurationView, decode_route_configuration


def decoded(message: Any) -> tuple[VirtualHost, ...]:
    return decode_route_configuration(message.SerializeToString())[1].virtual_hosts


def hosts(*domain_lists: list[str]) -> tuple[VirtualHost, ...]:
    """One virtual host per domain list, named by its first domain."""
    message = route_pb2.RouteConfiguration(name="rc")
    for domains in domain_lists:
        vhost = message.virtual_hosts.add(name=domains[0], domains=domains)
        vhost.routes.add(match=rc.RouteMatch(prefix="/"), route=rc.RouteAction(cluster="c"))
    return decoded(message)


def chosen(virtual_hosts: tuple[VirtualHost, ...], authority: str, **kw: Any) -> str | None:
    vhost = select_http_virtual_host(virtual_hosts, authority, **kw)
    return None if vhost is None else vhost.name


def test_domain_precedence_is_exact_then_suffix_then_prefix_then_any() -> None:
    """Envoy's domain search order: exact, suffix wildcards, prefix wildcards, ``*``."""
    table = hosts(["*"], ["foo.*"], ["*.foo.com"], ["www.foo.com"])
    assert chosen(table, "www.foo.com") == "www.foo.com"
    assert chosen(table, "api.foo.com") == "*.foo.com"
    assert chosen(table, "foo.org") == "foo.*"
    assert chosen(table, "bar.org") == "*"
    assert chosen(table, "WWW.Foo.COM") == "www.foo.com"  # host names are case-insensitive


def test_the_longest_wildcard_wins() -> None:
    """``foo-bar.baz.com`` matches ``*-bar.baz.com`` before ``*.baz.com`` (Envoy's example), and
    the longer prefix wildcard before the shorter."""
    table = hosts(["*.baz.com"], ["*-bar.baz.com"], ["api.*"], ["api.v2.*"])
    assert chosen(table, "foo-bar.baz.com") == "*-bar.baz.com"
    assert chosen(table, "foo.baz.com") == "*.baz.com"
    assert chosen(table, "api.v2.example") == "api.v2.*"
    assert chosen(table, "api.v1.example") == "api.*"


def test_a_wildcard_never_matches_the_empty_string_as_grpc_does() -> None:
    """``*.foo.com`` does not match ``.foo.com`` in Envoy (gRPC's rule matches it)."""
    table = hosts(["*.foo.com"], ["foo.*"])
    assert chosen(table, ".foo.com") is None
    assert chosen(table, "foo.") is None
    assert select_virtual_host(table, ".foo.com") is not None


def test_the_port_is_part_of_the_match_unless_ignored() -> None:
    """``www.host.com:443`` does not match ``www.host.com`` unless the route configuration
    ignores ports; a domain with the port matches it exactly."""
    table = hosts(["www.host.com"], ["www.host.com:8443"])
    assert chosen(table, "www.host.com:443") is None
    assert chosen(table, "www.host.com:443", ignore_port=True) == "www.host.com"
    assert chosen(table, "www.host.com:8443") == "www.host.com:8443"


def test_the_route_configuration_says_whether_ports_are_ignored() -> None:
    """ignore_port_in_host_matching is read, with the configuration's own headers to add and
    remove, and `http_virtual_host_for` follows it; gRPC's `virtual_host_for` is unchanged."""
    message = route_pb2.RouteConfiguration(name="rc", ignore_port_in_host_matching=True)
    message.virtual_hosts.add(name="vh", domains=["www.host.com"])
    message.request_headers_to_add.add().header.key = "X-Mesh"
    message.request_headers_to_remove.append("X-Secret")
    config_view = RouteConfigurationView.from_proto(message)
    assert config_view.ignore_port_in_host_matching
    assert [h.name for h in config_view.request_headers_to_add] == ["x-mesh"]
    assert config_view.request_headers_to_remove == ("x-secret",)
    found = config_view.http_virtual_host_for("www.host.com:443")
    assert found is not None
    assert found.name == "vh"
    assert config_view.virtual_host_for("www.host.com:443") is None
    message.ignore_port_in_host_matching = False
    assert (
        RouteConfigurationView.from_proto(message).http_virtual_host_for("www.host.com:1") is None
    )


@pytest.mark.parametrize(
    ("authority", "host"),
    [
        ("a.example:80", "a.example"),
        ("a.example", "a.example"),
        ("[::1]:8080", "[::1]"),
        ("[::1]", "[::1]"),
        ("::1", "::1"),
        ("a.example:http", "a.example:http"),
    ],
)
def test_strip_port_removes_only_a_numeric_port(authority: str, host: str) -> None:
    """IPv6 literals keep their colons; a port must be digits."""
    assert strip_port(authority) == host


def routes(*messages: Any) -> VirtualHost:
    """A virtual host of the given routes, decoded."""
    message = route_pb2.RouteConfiguration(name="rc")
    message.virtual_hosts.add(name="vh", domains=["*"]).routes.extend(messages)
    (vhost,) = decoded(message)
    return vhost


def to(cluster: str, **match: Any) -> Any:
    """A route forwarding to ``cluster`` on a match built from ``match``'s fields."""
    return rc.Route(
        name=cluster, match=rc.RouteMatch(**match), route=rc.RouteAction(cluster=cluster)
    )


def picked(vhost: VirtualHost, path: str, headers: dict[str, str] | None = None) -> str | None:
    found = match_http_route(vhost, path, headers, roll_ppm=0)
    return None if found is None else found.name


def test_routes_are_tried_in_order_and_the_first_match_wins() -> None:
    """Envoy's example: a regex route before a prefix ``/`` catch-all takes what it matches;
    the catch-all after a more specific prefix never hides it, one before it does."""
    regex = rc.RouteMatch(safe_regex={"regex": "/api/v[0-9]+/.*"})
    vhost = routes(
        rc.Route(name="versioned", match=regex, route=rc.RouteAction(cluster="v")),
        to("static", prefix="/static/"),
        to("all", prefix="/"),
        to("never", prefix="/late/"),
    )
    assert picked(vhost, "/api/v2/items") == "versioned"
    assert picked(vhost, "/static/a.css") == "static"
    assert picked(vhost, "/api/latest") == "all"
    assert picked(vhost, "/late/x") == "all"


def test_prefix_tests_the_whole_path_and_path_or_regex_the_path_without_its_query() -> None:
    """A prefix sees the query string; path and safe_regex do not (nor the fragment)."""
    vhost = routes(
        to("exact", path="/exact"),
        rc.Route(
            name="regex",
            match=rc.RouteMatch(safe_regex={"regex": "/r/[a-z]+"}),
            route=rc.RouteAction(cluster="r"),
        ),
        to("query-prefix", prefix="/p?x=1"),
    )
    assert picked(vhost, "/exact?debug=1") == "exact"
    assert picked(vhost, "/exact#top") == "exact"
    assert picked(vhost, "/r/abc?x=1") == "regex"
    assert picked(vhost, "/p?x=1&y=2") == "query-prefix"
    assert picked(vhost, "/p") is None


def test_case_insensitive_prefix_and_path_but_a_regex_stays_case_sensitive() -> None:
    """case_sensitive false applies to prefix and path; Envoy ignores it for safe_regex (gRPC
    does not: its rule matches)."""
    regex = rc.Route(
        name="regex",
        match=rc.RouteMatch(safe_regex={"regex": "/r/[a-z]+"}),
        route=rc.RouteAction(cluster="r"),
    )
    prefix = to("prefix", prefix="/Pre/")
    for message in (regex, prefix):
        message.match.case_sensitive.value = False
    vhost = routes(regex, prefix)
    assert picked(vhost, "/pre/x") == "prefix"
    assert picked(vhost, "/r/abc") == "regex"
    assert picked(vhost, "/R/ABC") is None
    assert vhost.routes[0].match.matches("/R/ABC", {})  # gRPC's rule


def separated(prefix: str, case_sensitive: bool = True) -> RouteMatch:
    return RouteMatch(
        path_match=PathMatch.PATH_SEPARATED_PREFIX, path=prefix, case_sensitive=case_sensitive
    )


@pytest.mark.parametrize(
    ("path", "matches"),
    [
        ("/api", True),
        ("/api/", True),
        ("/api/v1?x=1", True),
        ("/api?x=1", True),
        ("/apiv1", False),
        ("/ap", False),
        ("/API/x", False),
    ],
)
def test_path_separated_prefix_needs_the_prefix_then_a_slash_or_the_end(
    path: str, matches: bool
) -> None:
    """Envoy's path_separated_prefix, on the path without its query (the decoder rejects the
    field as gRPC does; the rule is for values built otherwise)."""
    assert http_route_matches(separated("/api"), path, {}, 0) is matches


def test_path_separated_prefix_may_ignore_case() -> None:
    """case_sensitive false applies to it too."""
    assert http_route_matches(separated("/api", case_sensitive=False), "/API/x", {}, 0)


def header_route(name: str, **header: Any) -> Any:
    message = to(name, prefix="/")
    message.match.headers.add(name="X-H", **header)
    return message


def test_header_matchers_of_every_kind_with_invert() -> None:
    """exact, prefix, suffix, contains, regex, range, present and absent; inverted; a missing
    header matches only an absent (or inverted present) condition."""
    cases: list[tuple[dict[str, Any], str | None, bool]] = [
        ({"exact_match": "v"}, "v", True),
        ({"exact_match": "v", "invert_match": True}, "v", False),
        ({"exact_match": "v", "invert_match": True}, None, False),
        ({"prefix_match": "ab"}, "abc", True),
        ({"suffix_match": "bc"}, "abc", True),
        ({"contains_match": "b"}, "abc", True),
        ({"safe_regex_match": {"regex": "[0-9]{3}"}}, "1234", False),
        ({"safe_regex_match": {"regex": "[0-9]{3}"}, "invert_match": True}, "1234", True),
        ({"range_match": {"start": -10, "end": 0}}, "-1", True),
        ({"range_match": {"start": -10, "end": 0}, "invert_match": True}, "-1", False),
        ({"range_match": {"start": 0, "end": 10}}, "x", False),
        ({"present_match": True}, None, False),
        ({"present_match": False}, None, True),
        ({"present_match": True, "invert_match": True}, None, True),
        ({"string_match": {"exact": "V", "ignore_case": True}}, "v", True),
    ]
    for header, value, expected in cases:
        vhost = routes(header_route("h", **header))
        headers = {} if value is None else {"x-h": value}
        assert (picked(vhost, "/", headers) == "h") is expected, (header, value)


def test_header_names_match_in_any_case() -> None:
    """The request's header names are lower-cased before matching."""
    vhost = routes(header_route("h", exact_match="v"))
    assert picked(vhost, "/", {"X-H": "v"}) == "h"


def test_query_parameter_routes_match_by_their_parameters() -> None:
    """Exact, regex and presence conditions on the first value of each parameter, decoded; the
    route gRPC skips is the first HTTP match when they hold."""
    debug = to("debug", prefix="/")
    debug.match.query_parameters.add(name="debug").string_match.exact = "on air"
    user = to("user", prefix="/")
    user.match.query_parameters.add(name="user").string_match.safe_regex.regex = "[0-9]+"
    flag = to("flag", prefix="/")
    flag.match.query_parameters.add(name="flag").present_match = True
    vhost = routes(debug, user, flag, to("rest", prefix="/"))
    assert picked(vhost, "/x?debug=on%20air") == "debug"
    assert picked(vhost, "/x?user=42&user=x") == "user"
    assert picked(vhost, "/x?user=x&user=42") == "rest"  # the first value decides
    assert picked(vhost, "/x?flag") == "flag"
    assert picked(vhost, "/x?other=1") == "rest"
    assert match_http_route(vhost, "/x?debug=on%20air") is not None
    assert query_parameters("/p?a=1&b=&a=2#f") == {"a": "1", "b": ""}


def test_a_runtime_fraction_is_decided_by_one_roll_per_request() -> None:
    """A 25 % route matches rolls below 250 000 ppm; the same roll decides every route."""
    quarter = to("quarter", prefix="/")
    quarter.match.runtime_fraction.default_value.numerator = 25
    half = to("half", prefix="/")
    half.match.runtime_fraction.default_value.numerator = 50
    vhost = routes(quarter, half, to("rest", prefix="/"))
    found = [match_http_route(vhost, "/", roll_ppm=roll) for roll in (0, 249_999, 250_000)]
    assert [r.name if r else None for r in found] == ["quarter", "quarter", "half"]
    assert picked_with(vhost, 499_999) == "half"
    assert picked_with(vhost, 500_000) == "rest"


def picked_with(vhost: VirtualHost, roll: int) -> str | None:
    found = match_http_route(vhost, "/", roll_ppm=roll)
    return None if found is None else found.name


def rewritten(match: dict[str, Any], action: dict[str, Any], path: str) -> str:
    message = rc.Route(match=rc.RouteMatch(**match), route=rc.RouteAction(cluster="c", **action))
    (route,) = routes(message).routes
    return rewrite_path(route, path)


def test_prefix_rewrite_replaces_the_matched_prefix_as_envoys_docs_show() -> None:
    """Envoy's example: prefix ``/prefix/`` rewritten to ``/`` turns ``/prefix/etc`` into
    ``/etc``; a path match replaces the whole path and keeps the query."""
    assert rewritten({"prefix": "/prefix/"}, {"prefix_rewrite": "/"}, "/prefix/etc") == "/etc"
    assert rewritten({"prefix": "/prefix"}, {"prefix_rewrite": "/"}, "/prefix/etc") == "//etc"
    assert rewritten({"prefix": "/Old/"}, {"prefix_rewrite": "/new/"}, "/Old/a?x=1") == (
        "/new/a?x=1"
    )
    assert rewritten({"path": "/exact"}, {"prefix_rewrite": "/other"}, "/exact?q=1") == (
        "/other?q=1"
    )
    assert rewritten({"prefix": "/"}, {}, "/unchanged?x") == "/unchanged?x"


@pytest.mark.parametrize(
    ("pattern", "substitution", "path", "expected"),
    [
        (
            "^/service/([^/]+)(/.*)$",
            "\\2/instance/\\1",
            "/service/foo/v1/api",
            "/v1/api/instance/foo",
        ),
        ("one", "two", "/xxx/one/yyy/one/zzz", "/xxx/two/yyy/two/zzz"),
        ("^(.*?)one(.*)$", "\\1two\\2", "/xxx/one/yyy/one/zzz", "/xxx/two/yyy/one/zzz"),
        ("(?i)/xxx/", "/yyy/", "/aaa/XxX/bbb", "/aaa/yyy/bbb"),
        ("one", "two", "/one?one=1", "/two?one=1"),
    ],
)
def test_regex_rewrite_follows_envoys_documented_examples(
    pattern: str, substitution: str, path: str, expected: str
) -> None:
    """The examples of RouteAction.regex_rewrite, and the query string left as it was."""
    action = {"regex_rewrite": {"pattern": {"regex": pattern}, "substitution": substitution}}
    assert rewritten({"prefix": "/"}, action, path) == expected


def test_host_rewrite_literal_replaces_the_authority() -> None:
    """The literal when set, else the request's authority."""
    message = to("c", prefix="/")
    message.route.host_rewrite_literal = "backend.internal"
    (route,) = routes(message, to("d", prefix="/d")).routes[:1]
    plain = routes(to("d", prefix="/d")).routes[0]
    assert route.action is not None
    assert plain.action is not None
    assert rewrite_authority(route.action, "front.example") == "backend.internal"
    assert rewrite_authority(plain.action, "front.example") == "front.example"


def redirect_route(**redirect: Any) -> Route:
    message = rc.Route(match=rc.RouteMatch(prefix="/old/"), redirect=rc.RedirectAction(**redirect))
    (route,) = routes(message).routes
    return route


def location(route: Route, scheme: str, authority: str, path: str) -> str:
    assert route.redirect is not None
    return redirect_location(route.redirect, route.match, scheme, authority, path)


def test_redirect_location_replaces_what_the_redirect_sets() -> None:
    """Scheme (dropping the old scheme's port and the new scheme's default one), host, port,
    path (its own query replaces the request's), prefix rewrite and strip_query."""
    upgrade = redirect_route(https_redirect=True)
    assert location(upgrade, "http", "a.example:80", "/old/x?q=1") == "https://a.example/old/x?q=1"
    moved = redirect_route(host_redirect="b.example", port_redirect=8443)
    assert location(moved, "https", "a.example", "/old/x") == "https://b.example:8443/old/x"
    default_port = redirect_route(port_redirect=443)
    assert location(default_port, "https", "a.example:8443", "/old/") == "https://a.example/old/"
    fixed = redirect_route(path_redirect="/new")
    assert location(fixed, "http", "a.example", "/old/x?q=1") == "http://a.example/new?q=1"
    fixed_query = redirect_route(path_redirect="/new?z=2")
    assert location(fixed_query, "http", "a", "/old/x?q=1") == "http://a/new?z=2"
    prefix = redirect_route(prefix_rewrite="/new/", strip_query=True)
    assert location(prefix, "http", "a", "/old/x?q=1") == "http://a/new/x"
    regex = redirect_route(regex_rewrite={"pattern": {"regex": "old"}, "substitution": "v2"})
    assert location(regex, "http", "a", "/old/x?q=1") == "http://a/v2/x?q=1"
