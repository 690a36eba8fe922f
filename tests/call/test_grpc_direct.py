"""`direct_cluster`: the cluster of a gRPC call whose whole plan is its one attempt (one
cluster no draw chooses, no retry policy, max stream duration, hash policy or fault filter,
and for a call with metadata no header test on the way to its route), which the channel sends
without a plan; None for every route that decides more, and for a call that fails at
routing."""

from __future__ import annotations

import random
from typing import Any

import pytest

from xdsclient._call import (
    ActiveFaults,
    Attempt,
    CallPlan,
    CallRequest,
    LazyHeaderView,
    RouteChoice,
    direct_cluster,
    grpc_header_view,
)

from .builders import add_route, call, config, fault, route_config


def _table() -> Any:
    """A route of each kind that must not be direct, then a plain one for the rest."""
    routes = route_config()
    vh = routes.virtual_hosts[0]
    add_route(vh, "/retry.Svc/", "retried").route.retry_policy.retry_on = "unavailable"
    add_route(vh, "/hash.Svc/", "hashed").route.hash_policy.add().header.header_name = "x-u"
    timed = add_route(vh, "/slow.Svc/", "slow")
    timed.route.max_stream_duration.max_stream_duration.FromMilliseconds(2500)
    split = add_route(vh, "/split.Svc/", None)
    for name in ("a", "b"):
        split.route.weighted_clusters.clusters.add(name=name).weight.value = 1
    add_route(vh, "/none.Svc/", None).non_forwarding_action.SetInParent()
    add_route(vh, "/", "plain")
    return routes


@pytest.mark.parametrize(
    "path", ["/retry.Svc/M", "/hash.Svc/M", "/slow.Svc/M", "/split.Svc/M", "/none.Svc/M"]
)
def test_a_route_that_decides_more_is_not_direct(path: str) -> None:
    """A retry policy, hash policy, max stream duration, weighted split or a route that does
    not forward: the call needs its plan."""
    assert direct_cluster(config(_table()), "svc", path, True) is None


def test_a_plain_route_is_direct() -> None:
    """A route to one cluster with nothing else to decide is direct, to its cluster."""
    assert direct_cluster(config(_table()), "svc", "/pkg.Svc/M", True) == "plain"


def test_retries_off_make_a_retried_route_direct() -> None:
    """With retries off (``grpc.enable_retries`` 0) a retry policy decides nothing."""
    assert direct_cluster(config(_table()), "svc", "/retry.Svc/M", False) == "retried"


def test_a_virtual_host_retry_policy_is_not_direct() -> None:
    """The virtual host's retry policy applies to every route in it."""
    routes = _table()
    routes.virtual_hosts[0].retry_policy.retry_on = "unavailable"
    assert direct_cluster(config(routes), "svc", "/pkg.Svc/M", True) is None


def test_a_runtime_fraction_on_the_way_is_not_direct() -> None:
    """A route with a runtime fraction before the call's route draws per call whether it
    takes the call: the call needs its plan (and its draw)."""
    routes = route_config()
    vh = routes.virtual_hosts[0]
    sometimes = add_route(vh, "/pkg.Svc/", "sometimes")
    sometimes.match.runtime_fraction.default_value.numerator = 50
    add_route(vh, "/", "plain")
    for _ in range(20):  # whichever way `direct_cluster`'s own draw goes
        assert direct_cluster(config(routes), "svc", "/pkg.Svc/M", True) is None


def test_a_fault_filter_or_a_listener_max_stream_duration_is_not_direct() -> None:
    """The listener's fault filter and its max stream duration apply to every route."""
    assert direct_cluster(config(_table(), faults=(fault(),)), "svc", "/pkg.Svc/M", True) is None
    timed = config(_table(), max_stream_duration_s=2.0)
    assert direct_cluster(timed, "svc", "/pkg.Svc/M", True) is None


def test_no_virtual_host_or_no_route_is_not_direct() -> None:
    """A call that fails at routing needs its plan (which gives the failure's status)."""
    routes = route_config(domains=("other",))
    add_route(routes.virtual_hosts[0], "/", "plain")
    assert direct_cluster(config(routes), "svc", "/pkg.Svc/M", True) is None
    routes = route_config()
    add_route(routes.virtual_hosts[0], "/only.Svc/", "plain")
    assert direct_cluster(config(routes), "svc", "/pkg.Svc/M", True) is None


def test_a_direct_calls_plan_is_its_one_attempt_with_the_same_draw() -> None:
    """What the channel sends for a direct call is the plan's first step: an attempt to the
    direct cluster under the call's deadline, with the request hash of the plan's one draw
    (`getrandbits(64)` from the same source), and no second attempt after a failure."""
    routes = config(_table())
    cluster = direct_cluster(routes, "svc", "/pkg.Svc/M", True)
    rng = random.Random(5)
    plan = CallPlan.begin(
        call("/pkg.Svc/M", deadline=9.0), routes, now=1.0, rng=rng, faults=ActiveFaults()
    )
    step = plan.start(1.0)
    assert isinstance(step, Attempt)
    assert (step.number, step.cluster, step.deadline) == (1, cluster, 9.0)
    assert step.request_hash == random.Random(5).getrandbits(64)
    assert plan.max_attempts == 1


def _header_table() -> Any:
    """Routes by path, one of them (``/who.Svc/``) chosen by the ``x-user`` header, with a
    header test after it and one on ``content-type`` (which gRPC fixes) on its own path."""
    routes = route_config()
    vh = routes.virtual_hosts[0]
    add_route(vh, "/first.Svc/", "first")
    who = add_route(vh, "/who.Svc/", "alice")
    who.match.headers.add(name="x-user").string_match.exact = "alice"
    typed = add_route(vh, "/typed.Svc/", "typed")
    typed.match.headers.add(name="content-type").string_match.exact = "application/grpc"
    add_route(vh, "/who.Svc/", "anyone")
    later = add_route(vh, "/later.Svc/", "later-by-header")
    later.match.headers.add(name="x-user").present_match = True
    add_route(vh, "/", "rest")
    return routes


@pytest.mark.parametrize(
    ("path", "without", "with_metadata"),
    [
        ("/first.Svc/M", "first", "first"),  # header tests only after its route
        ("/who.Svc/M", "anyone", None),  # a header test before its route
        ("/typed.Svc/M", "typed", None),  # its own route tests a header
        ("/later.Svc/M", "rest", None),  # header tests before the route it falls through to
    ],
)
def test_a_call_with_metadata_is_direct_only_when_no_header_test_comes_first(
    path: str, without: str, with_metadata: str | None
) -> None:
    """A route tested for a header before or at the path's route makes a call with metadata
    planned (its metadata may choose another route); one after it does not, and a call
    without metadata keeps its own answer."""
    cfg = config(_header_table())
    assert direct_cluster(cfg, "svc", path, True) == without
    assert direct_cluster(cfg, "svc", path, True, True) == with_metadata


@pytest.mark.parametrize(
    "metadata",
    [
        (("x-user", "alice"),),
        (("X-User", "al"), ("x-user", "ice")),
        (("x-user-bin", b"alice"), ("content-type", "text/plain")),
        (("content-type", "application/grpc+proto"),),
    ],
)
@pytest.mark.parametrize(
    "path", ["/first.Svc/M", "/who.Svc/M", "/typed.Svc/M", "/later.Svc/M", "/x.Y/M"]
)
def test_a_direct_call_with_metadata_goes_where_routing_it_would(
    path: str, metadata: tuple[tuple[str, Any], ...]
) -> None:
    """Whatever its metadata (repeated, ``-bin``, its own ``content-type``), a call that is
    direct goes to the cluster routing it with that metadata chooses."""
    cfg = config(_header_table())
    direct = direct_cluster(cfg, "svc", path, True, True)
    routed = cfg.router.route(call(path, metadata=metadata), random.Random(0))
    assert isinstance(routed, RouteChoice)
    assert direct in (None, routed.cluster)


def test_the_direct_calls_lazy_header_view_is_the_plans() -> None:
    """The headers a direct call's pick sees are the ones a planned call's pick sees: the
    lower-cased, comma-joined metadata without ``-bin``, ``content-type`` gRPC's."""
    metadata = (("X-A", "1"), ("x-a", "2"), ("k-bin", b"\x00"), ("content-type", "text/x"))
    lazy = LazyHeaderView(metadata)
    planned = CallRequest(authority="svc", path="/p", metadata=metadata).headers
    assert dict(lazy) == dict(grpc_header_view(metadata)) == dict(planned)
    assert lazy.get("x-a") == "1,2"
    assert lazy["content-type"] == "application/grpc"
    assert "k-bin" not in lazy
    assert len(lazy) == 2
