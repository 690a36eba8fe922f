"""Least request (A48) and pick first (A62) alone, with seeded random sources."""

from __future__ import annotations

import random
from collections import Counter

from xdsclient.lb import (
    LeastRequestPicker,
    PickFirstPicker,
    PickOutcome,
    PickRequest,
    WeightedTarget,
    child_policy_for,
)
from xdsclient.resources import (
    LeastRequest,
    PickFirst,
    RoundRobin,
    WeightedRoundRobin,
    WrrLocality,
)

from .test_pickers import CONNECTING, FAILED, IDLE, READY, REQUEST, all_ready, ep, loc

K1, K2, K3 = ("127.0.0.1", 1), ("127.0.0.1", 2), ("127.0.0.1", 3)


def test_least_request_prefers_the_endpoint_with_fewer_outstanding_calls():
    """Of the random choices, the one with the fewest calls in progress wins."""
    picker = LeastRequestPicker(choice_count=2)
    picker.update([ep(1), ep(2)], 0.0)
    all_ready(picker, [ep(1), ep(2)])
    for _ in range(5):
        picker.call_started(K1)
    rand = random.Random(1)
    counts = Counter(picker.pick(REQUEST, rand, 0.0).endpoint.port for _ in range(1000))  # type: ignore[union-attr]
    assert 0.70 < counts[2] / 1000 < 0.80  # picked unless both draws were endpoint 1 (1/4)


def test_least_request_counts_go_up_and_down_and_never_below_zero():
    """call_started and call_finished keep the count; finishing more than started stays 0."""
    picker = LeastRequestPicker()
    picker.update([ep(1)], 0.0)
    picker.call_started(K1)
    picker.call_started(K1)
    picker.call_finished(K1)
    assert picker.outstanding(K1) == 1
    picker.call_finished(K1)
    picker.call_finished(K1)
    assert picker.outstanding(K1) == 0


def test_least_request_with_ten_choices_almost_always_finds_the_idlest():
    """choice_count above 10 is 10; with 10 draws among 2 the idle one nearly always wins."""
    picker = LeastRequestPicker(choice_count=50)
    picker.update([ep(1), ep(2)], 0.0)
    all_ready(picker, [ep(1), ep(2)])
    picker.call_started(K2)
    rand = random.Random(2)
    counts = Counter(picker.pick(REQUEST, rand, 0.0).endpoint.port for _ in range(2048))  # type: ignore[union-attr]
    assert counts[2] <= 8  # (1/2)**10 of 2048 is 2


def test_least_request_with_nothing_ready_queues_or_fails():
    """No READY endpoint: queue while any may connect, fail when all failed."""
    picker = LeastRequestPicker()
    picker.update([ep(1)], 0.0)
    assert picker.pick(REQUEST, random.Random(0), 0.0).outcome is PickOutcome.QUEUE
    picker.set_endpoint_state(K1, FAILED, 0.0)
    assert picker.pick(REQUEST, random.Random(0), 0.0).outcome is PickOutcome.FAIL


def test_pick_first_tries_one_endpoint_at_a_time_in_order():
    """The first endpoint is tried; when it fails the next one; the first READY is used."""
    picker = PickFirstPicker()
    picker.update([ep(1), ep(2), ep(3)], 0.0)
    assert picker.state() is CONNECTING
    assert picker.wanted_connections() == (ep(1),)
    picker.set_endpoint_state(K1, FAILED, 0.0)
    assert picker.wanted_connections() == (ep(2),)
    picker.set_endpoint_state(K2, READY, 0.0)
    assert picker.state() is READY
    assert picker.pick(REQUEST, random.Random(0), 0.0).endpoint == ep(2)
    assert picker.wanted_connections() == (ep(2),)


def test_pick_first_is_sticky_in_transient_failure_until_one_is_ready():
    """After a failed pass: TRANSIENT_FAILURE, all endpoints retried, until one is READY."""
    picker = PickFirstPicker()
    picker.update([ep(1), ep(2)], 0.0)
    picker.set_endpoint_state(K1, FAILED, 0.0)
    picker.set_endpoint_state(K2, FAILED, 0.0)
    assert picker.state() is FAILED
    assert picker.wanted_connections() == (ep(1), ep(2))
    picker.set_endpoint_state(K1, CONNECTING, 0.0)
    assert picker.state() is FAILED
    assert picker.pick(REQUEST, random.Random(0), 0.0).outcome is PickOutcome.FAIL
    picker.set_endpoint_state(K2, READY, 0.0)
    assert picker.pick(REQUEST, random.Random(0), 0.0).endpoint == ep(2)


def test_pick_first_goes_idle_when_its_endpoint_drops_and_reconnects_on_a_pick():
    """The used endpoint leaving READY makes pick first IDLE; a pick starts a new pass."""
    picker = PickFirstPicker()
    picker.update([ep(1), ep(2)], 0.0)
    picker.set_endpoint_state(K1, READY, 0.0)
    picker.set_endpoint_state(K1, IDLE, 0.0)
    assert picker.state() is IDLE
    assert picker.wanted_connections() == ()
    result = picker.pick(REQUEST, random.Random(0), 0.0)
    assert (result.outcome, result.connect) == (PickOutcome.QUEUE, (ep(1),))
    assert picker.state() is CONNECTING


def test_pick_first_keeps_its_endpoint_across_an_update_that_lists_it():
    """An update still listing the endpoint in use keeps using it."""
    picker = PickFirstPicker()
    picker.update([ep(1), ep(2)], 0.0)
    picker.set_endpoint_state(K2, READY, 0.0)
    picker.update([ep(3), ep(2)], 0.0)
    assert picker.pick(REQUEST, random.Random(0), 0.0).endpoint == ep(2)


def test_pick_first_shuffles_with_the_given_random_source():
    """shuffle_address_list: the order is a shuffle drawn from the given source."""
    endpoints = [ep(p) for p in range(1, 9)]
    firsts = set()
    for seed in range(10):
        picker = PickFirstPicker(shuffle=True, rand=random.Random(seed))
        picker.update(endpoints, 0.0)
        firsts.add(picker.wanted_connections()[0])
        again = PickFirstPicker(shuffle=True, rand=random.Random(seed))
        again.update(endpoints, 0.0)
        assert again.wanted_connections() == picker.wanted_connections()
    assert len(firsts) > 3


def test_pick_first_with_no_endpoints_fails():
    """No endpoints: TRANSIENT_FAILURE and picks fail."""
    picker = PickFirstPicker()
    picker.update([], 0.0)
    assert picker.state() is FAILED
    assert picker.pick(REQUEST, random.Random(0), 0.0).outcome is PickOutcome.FAIL


def test_child_policy_for_every_endpoint_policy_is_a_weighted_target():
    """Least request, WRR and pick first (bare or under WrrLocality) balance per locality."""
    for policy in (
        LeastRequest(choice_count=3),
        WeightedRoundRobin(),
        WrrLocality(child=PickFirst(shuffle_address_list=True)),
    ):
        child = child_policy_for(policy, cluster="c", rand=random.Random(0))
        assert isinstance(child, WeightedTarget)
        child.update([loc("a", 1, ep(1)), loc("b", 2, ep(2))], 0.0)
        all_ready(child, [ep(1), ep(2)])
        got = {child.pick(PickRequest(), random.Random(s), 0.0).endpoint for s in range(20)}
        assert got == {ep(1), ep(2)}


def test_only_a_least_request_weighted_target_has_call_hooks():
    """Of the endpoint policies only least request counts calls: the weighted target of any
    other has no ``call_started`` or ``call_finished`` hook, so a priority makes no call per
    pick for it."""
    for policy, counts in (
        (LeastRequest(choice_count=2), True),
        (RoundRobin(), False),
        (WeightedRoundRobin(), False),
        (WrrLocality(child=PickFirst()), False),
    ):
        child = child_policy_for(policy, cluster="c", rand=random.Random(0))
        assert isinstance(child, WeightedTarget)
        assert (child.call_started is not None) is counts
        assert (child.call_finished is not None) is counts


def test_weighted_target_passes_call_hooks_to_its_least_request_pickers():
    """A weighted target of least request pickers hands each started and finished call to the
    picker of the endpoint's locality; unknown endpoints are ignored."""
    pickers: list[LeastRequestPicker] = []

    def factory() -> LeastRequestPicker:
        pickers.append(LeastRequestPicker())
        return pickers[-1]

    target = WeightedTarget(factory)
    target.update([loc("a", 1, ep(1)), loc("b", 1, ep(2))], 0.0)
    assert target.call_started is not None
    assert target.call_finished is not None
    target.call_started(K1)
    target.call_started(K1)
    target.call_started(K2)
    target.call_started(K3)
    target.call_finished(K1, False)
    assert [p.outstanding(K1) for p in pickers] == [1, 0]
    assert [p.outstanding(K2) for p in pickers] == [0, 1]
