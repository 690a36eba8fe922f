"""`Router`, a configuration's routing remembered: the same answers and the same random draws
as `route_call`, per-call draws kept for runtime fractions and weighted clusters, and the
configuration's own virtual host (VHDS) used as it is."""

from __future__ import annotations

import random
from collections import Counter

from xdsclient._call import CallConfig, RouteChoice, Status, route_call
from xdsclient._call._route import Router
from xdsclient.resources import RouteConfigurationView

from .builders import add_route, call, config, route_config


def _mixed_routes() -> object:
    """Routes of every kind the memory treats apart: by header, a runtime fraction after
    them, weighted clusters, a redirect, and no match for the rest."""
    routes = route_config()
    vhost = routes.virtual_hosts[0]
    canary = add_route(vhost, "/pkg.Svc/", "canary")
    canary.match.headers.add(name="x-env").string_match.exact = "canary"
    add_route(vhost, "/pkg.Svc/Fixed", "fixed")
    split = add_route(vhost, "/pkg.Svc/Split", cluster=None)
    for name, weight in (("a", 1), ("b", 3)):
        split.route.weighted_clusters.clusters.add(name=name).weight.value = weight
    add_route(vhost, "/pkg.Redirect/", cluster=None).redirect.host_redirect = "elsewhere"
    half = add_route(vhost, "/pkg.Svc/", "half")
    half.match.runtime_fraction.default_value.numerator = 50
    add_route(vhost, "/pkg.Svc/", "rest")
    return routes


def _calls() -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    paths = ["/pkg.Svc/Fixed", "/pkg.Svc/Split", "/pkg.Svc/Other", "/pkg.Redirect/x", "/none"]
    headers = [(), (("x-env", "canary"),), (("x-env", "prod"),)]
    return [(path, metadata) for path in paths for metadata in headers] * 20


def test_the_router_answers_and_draws_as_route_call_does() -> None:
    """Over repeated calls of every kind, one router and `route_call` with the same seed give
    equal answers in the same order (the memory never skips or adds a draw)."""
    cfg = config(_mixed_routes())
    router = Router(cfg.hcm, listener_name="svc")
    ours, reference = random.Random(5), random.Random(5)
    for path, metadata in _calls():
        request = call(path, metadata=metadata)
        expected = route_call(cfg.hcm, request, reference, listener_name="svc")
        assert router.route(request, ours) == expected, (path, metadata)
    assert ours.random() == reference.random()


def test_a_fixed_route_is_remembered_for_its_path_and_tested_headers() -> None:
    """The second call with the same path and the same values of the tested headers gets the
    same answer object; another value of a tested header is routed on its own."""
    cfg = config(_mixed_routes())
    rng = random.Random(0)
    first = cfg.router.route(call("/pkg.Svc/Fixed", metadata=(("x-env", "prod"),)), rng)
    again = cfg.router.route(call("/pkg.Svc/Fixed", metadata=(("x-env", "prod"),)), rng)
    canary = cfg.router.route(call("/pkg.Svc/Fixed", metadata=(("x-env", "canary"),)), rng)
    assert isinstance(first, RouteChoice)
    assert isinstance(canary, RouteChoice)
    assert first is again
    assert (first.cluster, canary.cluster) == ("fixed", "canary")


def test_runtime_fractions_and_weights_are_still_drawn_per_call() -> None:
    """A 50% route takes about half of the calls it is tried for, and a 1:3 split about a
    quarter, call after call on one router (seeded, 4,000 calls each)."""
    cfg = config(_mixed_routes())
    rng = random.Random(3)
    other: Counter[str] = Counter()
    split: Counter[str] = Counter()
    for _ in range(4000):
        for path, counts in (("/pkg.Svc/Other", other), ("/pkg.Svc/Split", split)):
            choice = cfg.router.route(call(path), rng)
            assert isinstance(choice, RouteChoice)
            counts[choice.cluster] += 1
    assert abs(other["half"] / 4000 - 0.5) < 0.04, other
    assert abs(split["a"] / 4000 - 0.25) < 0.04, split


def test_a_new_configuration_routes_by_its_own_routes() -> None:
    """What one configuration's router remembers is not another's: the same call routed by a
    configuration that changed the route's cluster goes to the new cluster."""
    old_routes = route_config()
    add_route(old_routes.virtual_hosts[0], "", "old")
    new_routes = route_config()
    add_route(new_routes.virtual_hosts[0], "", "new")
    rng = random.Random(0)
    old = config(old_routes).router.route(call(), rng)
    new = config(new_routes).router.route(call(), rng)
    assert isinstance(old, RouteChoice)
    assert isinstance(new, RouteChoice)
    assert (old.cluster, new.cluster) == ("old", "new")


def test_the_configurations_virtual_host_routes_whatever_the_route_configuration_holds() -> None:
    """A virtual host the configuration carries (one VHDS brought) routes the call, though
    the route configuration has none for the call's authority."""
    routes = route_config(domains=("elsewhere",))
    add_route(routes.virtual_hosts[0], "", "local")
    on_demand = route_config(domains=("svc",))
    add_route(on_demand.virtual_hosts[0], "", "vhds")
    vhost = RouteConfigurationView.from_proto(on_demand).virtual_hosts[0]
    plain = config(routes)
    given = CallConfig(
        listener_name=plain.listener_name, hcm=plain.hcm, route_config=None, virtual_host=vhost
    )
    rng = random.Random(0)
    assert isinstance(plain.router.route(call(authority="svc"), rng), Status)
    choice = given.router.route(call(authority="svc"), rng)
    assert isinstance(choice, RouteChoice)
    assert choice.cluster == "vhds"
    assert route_call(plain.hcm, call(), rng, listener_name="svc", virtual_host=vhost) == choice
