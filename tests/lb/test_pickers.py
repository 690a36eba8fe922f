"""Round robin and the locality-weighted target, each alone: seeded random, no time needed."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from xdsclient.lb import (
    ConnectivityState,
    PickOutcome,
    PickRequest,
    RoundRobinPicker,
    WeightedTarget,
    child_policy_for,
    key_of,
)
from xdsclient.resources import (
    Endpoint,
    HealthStatus,
    Locality,
    LocalityEndpoints,
    RoundRobin,
    WrrLocality,
)

READY = ConnectivityState.READY
IDLE = ConnectivityState.IDLE
CONNECTING = ConnectivityState.CONNECTING
FAILED = ConnectivityState.TRANSIENT_FAILURE
REQUEST = PickRequest()


def ep(port: int, *, weight: int = 1, health=HealthStatus.UNKNOWN, metadata=None) -> Endpoint:
    """An endpoint on 127.0.0.1:``port``."""
    return Endpoint("127.0.0.1", port, weight=weight, health_status=health, metadata=metadata or {})


def loc(zone: str, weight: int, *endpoints: Endpoint, priority: int = 0) -> LocalityEndpoints:
    """A locality of zone ``zone``."""
    return LocalityEndpoints(Locality(region="r", zone=zone), weight, priority, tuple(endpoints))


def all_ready(picker, endpoints) -> None:
    for endpoint in endpoints:
        picker.set_endpoint_state(key_of(endpoint), READY, 0.0)


def picks(picker, n: int, seed: int = 1, request: PickRequest = REQUEST) -> list[int]:
    rand = random.Random(seed)
    out = []
    for _ in range(n):
        result = picker.pick(request, rand, 0.0)
        assert result.outcome is PickOutcome.COMPLETE, result
        out.append(result.endpoint.port)
    return out


# --- round robin ---


def test_round_robin_goes_in_order_from_a_random_start():
    """Round robin starts at a random READY endpoint and then takes them in list order."""
    endpoints = [ep(p) for p in (1, 2, 3, 4)]
    starts = set()
    for seed in range(20):
        picker = RoundRobinPicker()
        picker.update(endpoints, 0.0)
        all_ready(picker, endpoints)
        got = picks(picker, 8, seed)
        starts.add(got[0])
        assert all(b == a % 4 + 1 for a, b in itertools.pairwise(got))
    assert starts == {1, 2, 3, 4}


def test_round_robin_skips_endpoints_that_are_not_ready():
    """Only READY endpoints are picked; a new READY set draws a new start."""
    endpoints = [ep(p) for p in (1, 2, 3)]
    picker = RoundRobinPicker()
    picker.update(endpoints, 0.0)
    picker.set_endpoint_state(("127.0.0.1", 1), READY, 0.0)
    picker.set_endpoint_state(("127.0.0.1", 3), READY, 0.0)
    assert set(picks(picker, 10)) == {1, 3}
    assert picker.state() is READY


def test_round_robin_with_nothing_ready_queues_and_asks_idle_endpoints_to_connect():
    """No READY endpoint: the pick queues and names the IDLE endpoints to connect."""
    endpoints = [ep(1), ep(2)]
    picker = RoundRobinPicker()
    picker.update(endpoints, 0.0)
    assert picker.state() is IDLE
    picker.set_endpoint_state(("127.0.0.1", 1), CONNECTING, 0.0)
    result = picker.pick(REQUEST, random.Random(0), 0.0)
    assert result.outcome is PickOutcome.QUEUE
    assert result.connect == (ep(2),)
    assert picker.state() is CONNECTING
    assert picker.wanted_connections() == tuple(endpoints)


def test_round_robin_fails_when_every_endpoint_failed_and_stays_failed_while_reconnecting():
    """All endpoints TRANSIENT_FAILURE: picks fail, and an endpoint reconnecting (CONNECTING,
    IDLE) still counts as failed until it is READY (sticky TRANSIENT_FAILURE)."""
    endpoints = [ep(1), ep(2)]
    picker = RoundRobinPicker()
    picker.update(endpoints, 0.0)
    for endpoint in endpoints:
        picker.set_endpoint_state(key_of(endpoint), FAILED, 0.0)
    assert picker.state() is FAILED
    assert picker.pick(REQUEST, random.Random(0), 0.0).outcome is PickOutcome.FAIL
    picker.set_endpoint_state(("127.0.0.1", 1), CONNECTING, 0.0)
    picker.set_endpoint_state(("127.0.0.1", 2), IDLE, 0.0)
    assert picker.state() is FAILED
    picker.set_endpoint_state(("127.0.0.1", 2), READY, 0.0)
    assert picker.state() is READY
    assert picks(picker, 3) == [2, 2, 2]


def test_round_robin_with_no_endpoints_fails():
    """An empty list (or only unhealthy endpoints) is TRANSIENT_FAILURE and picks fail."""
    picker = RoundRobinPicker()
    picker.update([ep(1, health=HealthStatus.UNHEALTHY), ep(2, health=HealthStatus.DRAINING)], 0.0)
    assert picker.state() is FAILED
    result = picker.pick(REQUEST, random.Random(0), 0.0)
    assert result.outcome is PickOutcome.FAIL
    assert "no endpoints" in result.error


def test_round_robin_keeps_states_by_key_across_updates():
    """An update keeps the state of endpoints whose key stays; new ones start IDLE."""
    picker = RoundRobinPicker()
    picker.update([ep(1), ep(2)], 0.0)
    all_ready(picker, [ep(1), ep(2)])
    picker.update([ep(2, weight=5), ep(3)], 0.0)
    assert set(picks(picker, 6)) == {2}
    picker.set_endpoint_state(("127.0.0.1", 1), READY, 0.0)  # gone: ignored
    assert set(picks(picker, 6)) == {2}


def test_round_robin_with_one_endpoint_always_picks_it():
    """One READY endpoint is every pick."""
    picker = RoundRobinPicker()
    picker.update([ep(7)], 0.0)
    all_ready(picker, [ep(7)])
    assert picks(picker, 5) == [7] * 5


# --- weighted target ---


def weighted(*localities: LocalityEndpoints, cluster: str = "c") -> WeightedTarget:
    target = WeightedTarget(RoundRobinPicker, cluster=cluster)
    target.update(localities, 0.0)
    return target


def test_weighted_target_picks_localities_in_proportion_to_their_weights():
    """READY localities are chosen at random in proportion to their weights."""
    a, b = loc("a", 1, ep(1)), loc("b", 3, ep(2))
    target = weighted(a, b)
    all_ready(target, [ep(1), ep(2)])
    counts = Counter(picks(target, 4000, seed=7))
    assert 0.72 < counts[2] / 4000 < 0.78


def test_weighted_target_says_where_each_pick_went():
    """A pick carries its cluster and locality (for load reports)."""
    a = loc("a", 1, ep(1))
    target = weighted(a, cluster="cluster-x")
    all_ready(target, [ep(1)])
    result = target.pick(REQUEST, random.Random(0), 0.0)
    assert result.cluster == "cluster-x"
    assert result.locality == a


def test_weighted_target_picks_only_among_ready_localities():
    """A locality that is not READY is never picked while another is READY."""
    target = weighted(loc("a", 100, ep(1)), loc("b", 1, ep(2)))
    target.set_endpoint_state(("127.0.0.1", 2), READY, 0.0)
    target.set_endpoint_state(("127.0.0.1", 1), CONNECTING, 0.0)
    assert set(picks(target, 50)) == {2}
    assert target.state() is READY


def test_weighted_target_skips_zero_weight_localities():
    """A locality of weight 0 is neither picked nor counted in the state."""
    target = weighted(loc("a", 0, ep(1)), loc("b", 1, ep(2)))
    target.set_endpoint_state(("127.0.0.1", 1), READY, 0.0)
    assert target.state() is IDLE
    target.set_endpoint_state(("127.0.0.1", 2), FAILED, 0.0)
    assert target.state() is FAILED
    assert target.pick(REQUEST, random.Random(0), 0.0).outcome is PickOutcome.FAIL


def test_weighted_target_queues_while_connecting_and_fails_when_all_failed():
    """CONNECTING anywhere (nothing READY): picks queue; every locality failed: picks fail."""
    target = weighted(loc("a", 1, ep(1)), loc("b", 1, ep(2)))
    target.set_endpoint_state(("127.0.0.1", 1), CONNECTING, 0.0)
    target.set_endpoint_state(("127.0.0.1", 2), FAILED, 0.0)
    assert target.state() is CONNECTING
    assert target.pick(REQUEST, random.Random(0), 0.0).outcome is PickOutcome.QUEUE
    target.set_endpoint_state(("127.0.0.1", 1), FAILED, 0.0)
    assert target.state() is FAILED
    result = target.pick(REQUEST, random.Random(0), 0.0)
    assert result.outcome is PickOutcome.FAIL
    assert "failed" in result.error


def test_weighted_target_in_idle_queues_and_asks_for_connections():
    """Everything IDLE: the pick queues and names the endpoints to connect."""
    target = weighted(loc("a", 1, ep(1)), loc("b", 1, ep(2)))
    assert target.state() is IDLE
    result = target.pick(REQUEST, random.Random(0), 0.0)
    assert result.outcome is PickOutcome.QUEUE
    assert set(result.connect) == {ep(1), ep(2)}
    assert set(target.wanted_connections()) == {ep(1), ep(2)}


def test_weighted_target_with_no_localities_fails():
    """No localities: TRANSIENT_FAILURE, picks fail."""
    target = weighted()
    assert target.state() is FAILED
    assert target.pick(REQUEST, random.Random(0), 0.0).outcome is PickOutcome.FAIL


def test_weighted_target_keeps_locality_state_across_updates():
    """An update keeps each locality's picker (and its endpoint states) by locality name."""
    target = weighted(loc("a", 1, ep(1)), loc("b", 1, ep(2)))
    all_ready(target, [ep(1), ep(2)])
    target.update([loc("b", 5, ep(2)), loc("c", 1, ep(3))], 0.0)
    assert set(picks(target, 20)) == {2}


def test_child_policy_for_round_robin_is_locality_weighted_round_robin():
    """RoundRobin and WrrLocality(RoundRobin) give a weighted target of round robin pickers."""
    for policy in (RoundRobin(), WrrLocality(child=RoundRobin())):
        child = child_policy_for(policy, cluster="c")
        child.update([loc("a", 1, ep(1), ep(2))], 0.0)
        all_ready(child, [ep(1), ep(2)])
        got = picks(child, 4)
        assert sorted(got) == [1, 1, 2, 2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seeded_picks_replay_exactly(seed):
    """The same seed gives the same picks."""

    def run() -> list[int]:
        target = weighted(loc("a", 2, ep(1), ep(2)), loc("b", 3, ep(3)))
        all_ready(target, [ep(1), ep(2), ep(3)])
        return picks(target, 50, seed)

    assert run() == run()
