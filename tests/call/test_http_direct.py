"""`HttpRules.direct`: the fixed plan of a request whose route decides everything by its
authority and path (one cluster, no retry policy, hash policy, fault filter, rewrite or header
change), kept once an earlier request found it so; and `HttpRules.direct_plan`, the plan
`CallPlan.begin` would have made for such a request, the same attempt from the same draws."""

from __future__ import annotations

import random
from typing import Any

from envoy.config.core.v3 import base_pb2

from xdsclient._call import ActiveFaults, Attempt, CallConfig, CallPlan, CallRequest, HttpRules
from xdsclient._call._http_route import DirectRoute

from .builders import add_route, config, fault, http, route_config


def _table() -> Any:
    """A route of each kind that must not be direct, then a plain one for the rest."""
    routes = route_config(domains=("*",))
    vh = routes.virtual_hosts[0]
    add_route(vh, "/retry", "retried").route.retry_policy.retry_on = "5xx"
    add_route(vh, "/hash", "hashed").route.hash_policy.add().header.header_name = "x-user"
    add_route(vh, "/old/", "rewritten").route.prefix_rewrite = "/new/"
    add_route(vh, "/host", "host-rewritten").route.host_rewrite_literal = "elsewhere"
    add_route(vh, "/m", "mutated").request_headers_to_add.add(
        header=base_pb2.HeaderValue(key="x-added", value="v")
    )
    timed = add_route(vh, "/slow", "slow")
    timed.route.timeout.FromMilliseconds(2500)
    add_route(vh, "/", "plain")
    return routes


def _begin(rules: HttpRules, routes: CallConfig, request: CallRequest, seed: int) -> Any:
    rng = random.Random(seed)
    plan = CallPlan.begin(request, routes, now=10.0, rng=rng, faults=ActiveFaults(), rules=rules)
    return plan, plan.start(10.0), rng


def _direct(rules: HttpRules, routes: CallConfig, request: CallRequest) -> DirectRoute | None:
    return rules.direct(routes, request.authority, request.path)


def test_only_a_route_that_fixes_the_whole_plan_is_direct_after_its_first_request() -> None:
    """Before any request nothing is direct; after one request each, only the plain routes
    (with the route's timeout kept) are, and not for another configuration."""
    routes = config(_table(), inline=False)
    rules = HttpRules().memoized()
    paths = ("/retry", "/hash", "/old/x", "/host", "/m", "/slow", "/p?q=1")
    assert all(_direct(rules, routes, http(path)) is None for path in paths)
    for path in paths:
        _begin(rules, routes, http(path), 0)
    found = {path: _direct(rules, routes, http(path)) for path in paths}
    assert {path for path, direct in found.items() if direct is not None} == {"/slow", "/p?q=1"}
    slow, plain = found["/slow"], found["/p?q=1"]
    assert slow is not None
    assert (slow.cluster, slow.timeout) == ("slow", 2.5)
    assert plain is not None
    assert (plain.cluster, plain.timeout) == ("plain", 15.0)
    other = config(_table(), inline=False)
    assert _direct(rules, other, http("/p?q=1")) is None


def test_a_request_with_the_routers_retry_headers_does_not_make_its_route_direct() -> None:
    """``x-envoy-retry-on`` is read and removed by the router: that request's plan is its
    own, and its path becomes direct only with a request without it."""
    routes = config(_table(), inline=False)
    rules = HttpRules().memoized()
    _begin(rules, routes, http("/p", headers=(("x-envoy-retry-on", "5xx"),)), 0)
    assert _direct(rules, routes, http("/p")) is None
    _begin(rules, routes, http("/p"), 0)
    assert _direct(rules, routes, http("/p")) is not None


def test_a_fault_filter_or_a_virtual_host_retry_policy_makes_no_route_direct() -> None:
    """The fault filter decides per request, and a virtual host's retry policy covers the
    plain route: neither configuration has a direct route."""
    for routes in (
        config(_table(), inline=False, faults=(fault(abort_http=503, abort_percent=(0, 0)),)),
        _with_vhost_retries(),
    ):
        rules = HttpRules().memoized()
        _begin(rules, routes, http("/p"), 0)
        _begin(rules, routes, http("/p"), 0)
        assert _direct(rules, routes, http("/p")) is None


def _with_vhost_retries() -> CallConfig:
    table = _table()
    table.virtual_hosts[0].retry_policy.retry_on = "5xx"
    return config(table, inline=False)


def test_the_direct_plan_is_the_plan_begin_makes_from_the_same_draws() -> None:
    """For direct requests, `direct_plan` with the deadline and the request hash drawn as
    the rules draw them gives the same first attempt, deadline and retries as
    `CallPlan.begin`, and leaves the random source where begin leaves it."""
    routes = config(_table(), inline=False)
    rules = HttpRules().memoized()
    for path in ("/slow", "/p?q=1"):
        _begin(rules, routes, http(path), 0)
        for seed in range(5):
            request = http(path, headers=(("x-user", "7"),))
            planned, step, after = _begin(rules, routes, request, seed)
            direct = _direct(rules, routes, request)
            assert direct is not None
            assert direct.timeout is not None
            rng = random.Random(seed)
            plan, first = rules.direct_plan(
                direct,
                request.headers,
                now=10.0,
                deadline=10.0 + direct.timeout,
                request_hash=rng.getrandbits(64),
                rng=rng,
                faults=ActiveFaults(),
            )
            assert isinstance(step, Attempt)
            assert first == step
            assert (plan.deadline, plan.max_attempts, plan.state) == (
                planned.deadline,
                planned.max_attempts,
                planned.state,
            )
            assert rng.getstate() == after.getstate()
