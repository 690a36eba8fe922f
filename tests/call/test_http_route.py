"""Envoy's HTTP router in the call path (`HTTP_RULES`): virtual host and route choice, local
answers, clusters, rewrites and request header changes, over real route configurations."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_pb2

from xdsclient._call import (
    ERROR_HEADER,
    Attempt,
    CallPlan,
    CallRequest,
    Finish,
    LocalReply,
    apply_header_changes,
)

from .builders import add_route, http, http_plan


def _first(plan: CallPlan) -> Attempt | Finish:
    step = plan.start(0.0)
    assert isinstance(step, Attempt | Finish)
    return step


def _attempt(routes: Any, request: CallRequest, **kwargs: Any) -> Attempt:
    step = _first(http_plan(routes, request, **kwargs))
    assert isinstance(step, Attempt), step
    return step


def _reply(routes: Any, request: CallRequest, **kwargs: Any) -> LocalReply:
    plan = http_plan(routes, request, **kwargs)
    step = _first(plan)
    assert isinstance(step, Finish), step
    assert step.reply is not None
    assert plan.attempts == []
    return step.reply


def _domains_table() -> Any:
    """Envoy's documented domain search order, one virtual host per kind of domain."""
    routes = route_pb2.RouteConfiguration(name="routes")
    for name, domains in (
        ("any", ["*"]),
        ("prefix", ["foo.*"]),
        ("short-suffix", ["*.com"]),
        ("long-suffix", ["*-bar.foo.com"]),
        ("suffix", ["*.foo.com"]),
        ("exact", ["www.foo.com", "www.foo.com:8080"]),
    ):
        add_route(routes.virtual_hosts.add(name=name, domains=domains), "/", name)
    return routes


@pytest.mark.parametrize(
    ("authority", "cluster"),
    [
        ("www.foo.com", "exact"),  # 1. exact
        ("WWW.Foo.com", "exact"),  # domains are case-insensitive
        ("www.foo.com:8080", "exact"),  # the port is part of the match
        ("api-bar.foo.com", "long-suffix"),  # 2. suffix wildcards, longest first
        ("api.foo.com", "suffix"),
        ("bar.com", "short-suffix"),
        ("foo.org", "prefix"),  # 3. prefix wildcards
        ("other.net", "any"),  # 4. the special wildcard
        ("api.foo.com:9000", "any"),  # a port no domain names: only * matches
    ],
)
def test_virtual_host_by_envoys_domain_search_order(authority: str, cluster: str) -> None:
    """Exact domains, then suffix wildcards (longest first), then prefix wildcards, then
    ``*``, as Envoy's route configuration reference orders them; the port counts."""
    assert _attempt(_domains_table(), http(authority=authority)).cluster == cluster


def test_ignore_port_in_host_matching_matches_without_the_port() -> None:
    """With ``ignore_port_in_host_matching`` the authority's port is not part of the match."""
    routes = _domains_table()
    routes.ignore_port_in_host_matching = True
    assert _attempt(routes, http(authority="api.foo.com:9000")).cluster == "suffix"


def _ordered_routes() -> Any:
    """Routes in Envoy's first-match order: an exact path, a regex, a prefix, a catch-all."""
    routes = route_pb2.RouteConfiguration(name="routes")
    vhost = routes.virtual_hosts.add(name="api", domains=["*"])
    add_route(vhost, cluster="exact").match.ClearField("prefix")
    vhost.routes[-1].match.path = "/api/v1/health"
    regex = vhost.routes.add()
    regex.match.safe_regex.regex = "/api/v[12]/products/[0-9]+"
    regex.route.cluster = "regex"
    by_query = add_route(vhost, "/api/", "by-query")
    by_query.match.query_parameters.add(name="debug").string_match.exact = "1"
    by_header = add_route(vhost, "/api/", "by-header")
    by_header.match.headers.add(name="x-canary").string_match.exact = "yes"
    insensitive = add_route(vhost, "/API/v3", "insensitive")
    insensitive.match.case_sensitive.value = False
    add_route(vhost, "/api/", "prefix")
    add_route(vhost, "/", "default")
    return routes


@pytest.mark.parametrize(
    ("path", "headers", "cluster"),
    [
        ("/api/v1/health", (), "exact"),
        ("/api/v1/health?full=1", (), "exact"),  # path matches ignore the query
        ("/api/v2/products/7", (), "regex"),
        ("/api/v2/products/7?x=1", (), "regex"),
        ("/api/v3/products/7", (), "insensitive"),  # case_sensitive false
        ("/api/v2/products/x", (), "prefix"),  # the regex matches the whole path only
        ("/api/items?debug=1", (), "by-query"),  # a route gRPC skips: HTTP reads it
        ("/api/items?debug=2", (("x-canary", "yes"),), "by-header"),
        ("/api/items", (), "prefix"),
        ("/other", (), "default"),
    ],
)
def test_routes_match_in_order_first_match_wins(
    path: str, headers: tuple[tuple[str, str], ...], cluster: str
) -> None:
    """Envoy tries the routes in order and takes the first that matches path, headers and
    query parameters."""
    assert _attempt(_ordered_routes(), http(path, headers=headers)).cluster == cluster


def test_no_virtual_host_is_a_404_naming_the_route_configuration_and_authority() -> None:
    """No virtual host for the authority: Envoy's 404, the reason in the body and in
    ``x-xdsclient-error`` (the RDS resource and the authority)."""
    routes = route_pb2.RouteConfiguration(name="shop-routes")
    add_route(routes.virtual_hosts.add(name="vh", domains=["reviews"]), "/", "c")
    reply = _reply(routes, http(authority="ratings:8080"))
    assert reply.status == 404
    reason = dict(reply.headers)[ERROR_HEADER]
    assert "RDS resource shop-routes" in reason
    assert "ratings:8080" in reason
    assert reply.body == reason.encode() + b"\n"


def test_inline_routes_are_named_by_the_listener() -> None:
    """Routes inline in the listener are named as ``LDS resource <listener>``."""
    routes = route_pb2.RouteConfiguration(name="")
    add_route(routes.virtual_hosts.add(name="vh", domains=["reviews"]), "/", "c")
    reply = _reply(routes, http(authority="ratings"), inline=True)
    assert "LDS resource svc" in dict(reply.headers)[ERROR_HEADER]


def test_no_route_is_a_404_naming_the_path() -> None:
    """No route of the virtual host matches: 404 naming the configuration, virtual host and
    path."""
    routes = route_pb2.RouteConfiguration(name="routes")
    add_route(routes.virtual_hosts.add(name="reviews", domains=["*"]), "/api/", "c")
    reply = _reply(routes, http("/static/app.js"))
    assert reply.status == 404
    reason = dict(reply.headers)[ERROR_HEADER]
    assert "RDS resource routes" in reason
    assert "reviews" in reason
    assert "/static/app.js" in reason


def test_a_non_forwarding_route_is_a_404() -> None:
    """A matched route that neither forwards, redirects nor answers has no route entry in
    Envoy's router: 404."""
    routes = route_pb2.RouteConfiguration(name="routes")
    route = routes.virtual_hosts.add(name="vh", domains=["*"]).routes.add()
    route.match.prefix = "/"
    route.non_forwarding_action.SetInParent()
    reply = _reply(routes, http("/x"))
    assert reply.status == 404
    assert "does not forward" in dict(reply.headers)[ERROR_HEADER]


def test_direct_response_answers_locally() -> None:
    """``direct_response``: its status and inline body, no attempt."""
    routes = route_pb2.RouteConfiguration(name="routes")
    route = routes.virtual_hosts.add(name="vh", domains=["*"]).routes.add()
    route.match.prefix = "/healthz"
    route.direct_response.status = 200
    route.direct_response.body.inline_string = "ok"
    assert _reply(routes, http("/healthz")) == LocalReply(status=200, body=b"ok")


_REDIRECTS = [  # (the redirect's fields, the route's prefix, request path, Location, status)
    ({"https_redirect": True}, "/", "/a?b=1", "https://example.com/a?b=1", 301),
    ({"host_redirect": "new.example"}, "/", "/a", "http://new.example/a", 301),
    ({"path_redirect": "/new"}, "/", "/old?x=1", "http://example.com/new?x=1", 301),
    ({"prefix_rewrite": "/v2/"}, "/v1/", "/v1/items", "http://example.com/v2/items", 301),
    ({"response_code": 3}, "/", "/a", "http://example.com/a", 307),
    ({"strip_query": True}, "/", "/a?b=1", "http://example.com/a", 301),
]


@pytest.mark.parametrize(("fields", "prefix", "path", "location", "status"), _REDIRECTS)
def test_redirect_answers_with_its_location(
    fields: dict[str, Any], prefix: str, path: str, location: str, status: int
) -> None:
    """``redirect``: its response code (301 by default) and the Location built from the
    request and the parts the redirect replaces, no body."""
    routes = route_pb2.RouteConfiguration(name="routes")
    route = routes.virtual_hosts.add(name="vh", domains=["*"]).routes.add()
    route.match.prefix = prefix
    for name, value in fields.items():
        setattr(route.redirect, name, value)
    assert _reply(routes, http(path)) == LocalReply(
        status=status, headers=(("location", location),)
    )


def _weighted(clusters: dict[str, int]) -> Any:
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", cluster=None)
    for name, weight in clusters.items():
        route.route.weighted_clusters.clusters.add(name=name).weight.value = weight
    return routes


def test_weighted_clusters_split_requests_by_weight() -> None:
    """Each request draws its cluster once by weight: 4,000 seeded requests split 10/30/60
    within four standard deviations."""
    routes = _weighted({"a": 10, "b": 30, "c": 60})
    counts = dict.fromkeys("abc", 0)
    n = 4000
    for seed in range(n):
        counts[_attempt(routes, http(), seed=seed).cluster] += 1
    for name, share in (("a", 0.1), ("b", 0.3), ("c", 0.6)):
        sigma = (n * share * (1 - share)) ** 0.5
        assert abs(counts[name] - n * share) < 4 * sigma, counts


def test_cluster_header_names_the_cluster() -> None:
    """``cluster_header``: the cluster is the request header's value (a route gRPC ignores)."""
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", cluster=None)
    route.route.cluster_header = "X-Target-Cluster"
    step = _attempt(routes, http(headers=(("x-target-cluster", "reviews-v2"),)))
    assert step.cluster == "reviews-v2"


def test_absent_cluster_header_is_a_503() -> None:
    """No such header (or an empty one): Envoy's 503 for a cluster not found, the header
    named in ``x-xdsclient-error``."""
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", cluster=None)
    route.route.cluster_header = "x-target-cluster"
    for request in (http(), http(headers=(("x-target-cluster", ""),))):
        reply = _reply(routes, request)
        assert reply.status == 503
        assert "x-target-cluster" in dict(reply.headers)[ERROR_HEADER]


@pytest.mark.parametrize(
    ("match", "rewrite", "path", "forwarded"),
    [
        ("/prefix/", "/", "/prefix/etc", "/etc"),  # Envoy's prefix_rewrite example
        ("/prefix", "/", "/prefix/etc", "//etc"),  # ...and its trailing-slash caveat
        ("/api/", "/v2/", "/api/items?x=1", "/v2/items?x=1"),
    ],
)
def test_prefix_rewrite_replaces_the_matched_prefix(
    match: str, rewrite: str, path: str, forwarded: str
) -> None:
    """``prefix_rewrite`` replaces the matched prefix of the path the attempts send."""
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), match, "c")
    route.route.prefix_rewrite = rewrite
    assert _attempt(routes, http(path)).path == forwarded


@pytest.mark.parametrize(
    ("pattern", "substitution", "path", "forwarded"),
    [  # the examples of Envoy's RouteAction.regex_rewrite reference
        (
            "^/service/([^/]+)(/.*)$",
            r"\2/instance/\1",
            "/service/foo/v1/api",
            "/v1/api/instance/foo",
        ),
        ("one", "two", "/xxx/one/yyy/one/zzz", "/xxx/two/yyy/two/zzz"),
        ("^(.*?)one(.*)$", r"\1two\2", "/xxx/one/yyy/one/zzz", "/xxx/two/yyy/one/zzz"),
        ("(?i)/xxx/", "/yyy/", "/aaa/XxX/bbb", "/aaa/yyy/bbb"),
    ],
)
def test_regex_rewrite_follows_envoys_examples(
    pattern: str, substitution: str, path: str, forwarded: str
) -> None:
    """``regex_rewrite`` replaces every match in the path, as Envoy's documented examples."""
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", "c")
    route.route.regex_rewrite.pattern.regex = pattern
    route.route.regex_rewrite.substitution = substitution
    assert _attempt(routes, http(path)).path == forwarded


def test_host_rewrite_literal_replaces_the_authority() -> None:
    """``host_rewrite_literal`` is the authority the attempts send; without it, the
    request's."""
    routes = route_pb2.RouteConfiguration(name="routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=["*"])
    add_route(vhost, "/internal", "c").route.host_rewrite_literal = "backend.internal"
    add_route(vhost, "/", "c")
    assert _attempt(routes, http("/internal/x", authority="api.example")).authority == (
        "backend.internal"
    )
    assert _attempt(routes, http("/x", authority="api.example")).authority == "api.example"


def _add(options: Any, name: str, value: str, action: int | None = None, **kwargs: Any) -> None:
    option = options.add(header=base_pb2.HeaderValue(key=name, value=value), **kwargs)
    if action is not None:
        option.append_action = action


_APPEND = base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD
_ADD_IF_ABSENT = base_pb2.HeaderValueOption.ADD_IF_ABSENT
_OVERWRITE = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
_OVERWRITE_IF_EXISTS = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS


def test_request_headers_route_then_virtual_host_then_configuration() -> None:
    """Envoy's order: the route's changes, then the virtual host's, then the route
    configuration's (the later wins an overwrite); at each level removals first, then
    overwrites, then appends, presence judged before the level's changes."""
    routes = route_pb2.RouteConfiguration(name="routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=["*"])
    route = add_route(vhost, "/", "c")
    route.request_headers_to_remove.append("x-drop")
    _add(route.request_headers_to_add, "x-level", "route", _OVERWRITE)
    _add(route.request_headers_to_add, "x-list", "route")  # append by default
    _add(route.request_headers_to_add, "x-absent", "route", _ADD_IF_ABSENT)
    _add(route.request_headers_to_add, "x-user", "route", _ADD_IF_ABSENT)  # present: no
    _add(route.request_headers_to_add, "x-missing", "route", _OVERWRITE_IF_EXISTS)  # absent: no
    _add(route.request_headers_to_add, "x-empty", "")  # empty: not added
    _add(route.request_headers_to_add, "x-kept-empty", "", keep_empty_value=True)
    _add(vhost.request_headers_to_add, "x-level", "vhost", _OVERWRITE)
    _add(vhost.request_headers_to_add, "x-list", "vhost", _APPEND)
    vhost.request_headers_to_remove.append("x-absent")  # removes what the route added
    _add(routes.request_headers_to_add, "x-level", "config", _OVERWRITE)
    _add(routes.request_headers_to_add, "x-user", "config", _OVERWRITE_IF_EXISTS)
    sent = (("x-user", "42"), ("x-drop", "1"), ("accept", "*/*"), ("x-list", "caller"))
    step = _attempt(routes, http(headers=sent))
    headers = apply_header_changes(sent, step.headers_to_remove, step.headers_to_add)
    assert sorted(headers) == sorted(
        [
            ("accept", "*/*"),
            ("x-user", "config"),
            ("x-level", "config"),
            ("x-list", "caller"),
            ("x-list", "route"),
            ("x-list", "vhost"),
            ("x-kept-empty", ""),
        ]
    )
    assert [value for name, value in headers if name == "x-list"] == ["caller", "route", "vhost"]
    assert "accept" not in step.headers_to_remove  # untouched headers are left alone


def test_the_router_consumes_the_retry_headers() -> None:
    """``x-envoy-retry-on`` and ``x-envoy-max-retries`` are read, never forwarded."""
    routes = route_pb2.RouteConfiguration(name="routes")
    add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", "c")
    sent = (("x-envoy-retry-on", "5xx"), ("x-envoy-max-retries", "2"), ("x-user", "1"))
    step = _attempt(routes, http(headers=sent))
    assert apply_header_changes(sent, step.headers_to_remove, step.headers_to_add) == [
        ("x-user", "1")
    ]


def test_a_plain_route_changes_no_header() -> None:
    """A route without header changes leaves the request's headers as sent."""
    routes = route_pb2.RouteConfiguration(name="routes")
    add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", "c")
    step = _attempt(routes, http(headers=(("x-user", "1"),)))
    assert (step.headers_to_remove, step.headers_to_add) == ((), ())
