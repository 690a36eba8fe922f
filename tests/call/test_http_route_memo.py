"""The route memo of `HttpRules.memoized`: a request routed from the memo goes exactly where
the router's full walk sends it, and only choices that depend on the authority and path alone
are kept (a header matcher, a runtime fraction or weighted clusters are decided per request)."""

from __future__ import annotations

import random
from typing import Any

from envoy.config.core.v3 import base_pb2

from xdsclient._call import (
    HTTP_RULES,
    ActiveFaults,
    Attempt,
    CallConfig,
    CallPlan,
    CallRequest,
    HttpRules,
)
from xdsclient._call._http_route import RouteMemo, route_http
from xdsclient.resources import RouteConfigurationView

from .builders import add_route, config, http, route_config


def _step(rules: Any, routes: CallConfig, request: CallRequest, seed: int = 0) -> Any:
    plan = CallPlan.begin(
        request,
        routes,
        now=0.0,
        rng=random.Random(seed),
        faults=ActiveFaults(),
        rules=rules,
    )
    step = plan.start(0.0)
    if isinstance(step, Attempt):
        return (
            step.cluster,
            step.path,
            step.authority,
            step.headers_to_remove,
            step.headers_to_add,
        )
    return step


def _config() -> CallConfig:
    """`_table` by RDS, validated once (a memo holds to one route configuration)."""
    return config(_table(), inline=False)


def _table() -> Any:
    """Routes of every kind the memo must tell apart, in Envoy's first-match order."""
    routes = route_config(domains=("*",))
    vh = routes.virtual_hosts[0]
    by_header = add_route(vh, "/h", "by-header")
    by_header.match.headers.add(name="x-canary", exact_match="1")
    add_route(vh, "/h", "after-header")
    fraction = add_route(vh, "/f", "fraction")
    fraction.match.runtime_fraction.default_value.numerator = 50
    add_route(vh, "/f", "after-fraction")
    weighted = add_route(vh, "/w", None)
    for name, weight in (("w1", 1), ("w2", 1)):
        weighted.route.weighted_clusters.clusters.add(name=name).weight.value = weight
    rewritten = add_route(vh, "/old/", "rewritten")
    rewritten.route.prefix_rewrite = "/new/"
    mutated = add_route(vh, "/m", "mutated")
    mutated.request_headers_to_add.add(
        header=base_pb2.HeaderValue(key="x-added", value="v"),
        append_action=base_pb2.HeaderValueOption.ADD_IF_ABSENT,
    )
    add_route(vh, "/", "plain")
    return routes


_REQUESTS = [
    http("/h"),
    http("/h", headers=(("x-canary", "1"),)),
    http("/h"),
    http("/f/1"),
    http("/w/1"),
    http("/old/x?q=1"),
    http("/old/x?q=2"),
    http("/m"),
    http("/m", headers=(("x-added", "mine"),)),
    http("/m", headers=(("x-envoy-max-retries", "2"),)),
    http("/p", headers=(("x-envoy-retry-on", "5xx"),)),
    http("/p"),
    http("/p", authority="other.example"),
]


def test_requests_routed_from_the_memo_go_where_the_full_walk_sends_them() -> None:
    """Every request of a mixed table, asked twice in a row and in any order, gets the same
    cluster, path, authority and header changes from memoized rules as from the plain
    router (same seed)."""
    routes = _config()
    rules = HttpRules().memoized()
    for seed in range(20):
        order = random.Random(seed).sample(_REQUESTS, len(_REQUESTS))
        for request in order + order:
            assert _step(rules, routes, request, seed) == _step(HTTP_RULES, routes, request, seed)


def test_a_route_after_a_header_matcher_is_not_kept_for_its_path() -> None:
    """``/h`` without the header goes past the header-matching route; kept by path, it
    would send the next ``/h`` with the header to the wrong route: it is not kept."""
    routes = _config()
    rules = HttpRules().memoized()
    assert _step(rules, routes, http("/h"))[0] == "after-header"
    assert _step(rules, routes, http("/h", headers=(("x-canary", "1"),)))[0] == "by-header"
    assert _step(rules, routes, http("/h"))[0] == "after-header"


def test_runtime_fractions_and_weighted_clusters_are_drawn_per_request() -> None:
    """A path behind a runtime fraction, and a weighted route, reach both of their
    clusters over many requests through the memo (one rng)."""
    routes = _config()
    rules = HttpRules().memoized()
    rng = random.Random(3)
    seen = {_step(rules, routes, http(path), rng.randrange(1 << 30))[0] for path in ["/f/1"] * 60}
    assert seen == {"fraction", "after-fraction"}
    seen = {_step(rules, routes, http("/w/1"), rng.randrange(1 << 30))[0] for _ in range(60)}
    assert seen == {"w1", "w2"}


def test_the_memo_keeps_stable_choices_up_to_its_limit_and_forgets_another_table() -> None:
    """Only the choices that depend on the path alone are kept, the oldest dropped at the
    limit; given another route configuration, the memo starts again."""
    view = RouteConfigurationView.from_proto(_table())
    memo = RouteMemo(limit=2)
    rng = random.Random(0)
    for path in ("/h", "/f/1", "/w/1", "/h/x"):  # none stable: a header or roll decides
        route_http(view, http(path), rng, source="RDS resource routes", memo=memo)
    assert len(memo) == 0
    for path in ("/p/1", "/p/2", "/p/3"):
        route_http(view, http(path), rng, source="RDS resource routes", memo=memo)
    assert len(memo) == 2
    assert memo.get(("example.com", "/p/1")) is None
    assert memo.get(("example.com", "/p/3")) is not None
    other = RouteConfigurationView.from_proto(_table())
    route_http(other, http("/p/4"), rng, source="RDS resource routes", memo=memo)
    assert len(memo) == 1
    assert memo.get(("example.com", "/p/3")) is None
