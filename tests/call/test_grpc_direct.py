"""`direct_cluster`: the cluster of a gRPC call without metadata whose whole plan is its one
attempt (one cluster no draw chooses, no retry policy, max stream duration, hash policy or
fault filter), which the channel sends without a plan; None for every route that decides
more, and for a call that fails at routing."""

from __future__ import annotations

import random
from typing import Any

import pytest

from xdsclient._call import ActiveFaults, Attempt, CallPlan, direct_cluster

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
