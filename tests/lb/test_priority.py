"""Priority failover alone, with time passed in: init timer, fall-through, release, retention."""

from __future__ import annotations

import random

from xdsclient.lb import (
    CHILD_RETENTION,
    FAILOVER_TIMEOUT,
    ConnectivityState,
    PickOutcome,
    PickRequest,
    PriorityPolicy,
    child_policy_for,
    key_of,
)
from xdsclient.resources import Endpoint, LeastRequest, Locality, LocalityEndpoints, RoundRobin

READY = ConnectivityState.READY
IDLE = ConnectivityState.IDLE
CONNECTING = ConnectivityState.CONNECTING
FAILED = ConnectivityState.TRANSIENT_FAILURE
RAND = random.Random(7)


def loc(zone: str, *ports: int, priority: int = 0) -> LocalityEndpoints:
    """A locality of ``zone`` with endpoints on 127.0.0.1:``ports``."""
    endpoints = tuple(Endpoint("127.0.0.1", port) for port in ports)
    return LocalityEndpoints(Locality(zone=zone), 1, priority, endpoints)


def policy() -> PriorityPolicy:
    return PriorityPolicy(lambda: child_policy_for(RoundRobin(), cluster="c"))


P0 = (loc("a", 1, 2),)
P1 = (loc("b", 3, priority=1),)
P2 = (loc("c", 4, priority=2),)


def set_all(p: PriorityPolicy, ports, state, now: float) -> None:
    for port in ports:
        p.set_endpoint_state(("127.0.0.1", port), state, now)


def picked_port(p: PriorityPolicy, now: float) -> int | None:
    result = p.pick(PickRequest(), RAND, now)
    return result.endpoint.port if result.endpoint is not None else None


def test_only_the_first_priority_is_created_while_it_is_usable() -> None:
    """A lower priority costs no child (and no connection) while the first one is usable."""
    p = policy()
    p.update([P0, P1], 0.0)
    set_all(p, (1, 2), READY, 0.1)
    assert p.current_priority == 0
    assert len(p.children) == 1
    assert {key_of(e) for e in p.wanted_connections()} == {("127.0.0.1", 1), ("127.0.0.1", 2)}
    assert picked_port(p, 0.2) in (1, 2)


def test_a_connecting_priority_keeps_serving_until_its_init_timer_fires() -> None:
    """Priority 0 CONNECTING holds for 10 s (the failover timer); then priority 1 is tried."""
    p = policy()
    p.update([P0, P1], 0.0)
    set_all(p, (1, 2), CONNECTING, 0.0)
    p.poll(FAILOVER_TIMEOUT - 0.001)
    assert p.current_priority == 0
    assert p.next_deadline() == FAILOVER_TIMEOUT
    p.poll(FAILOVER_TIMEOUT)
    assert p.current_priority == 1
    set_all(p, (3,), READY, FAILOVER_TIMEOUT + 1)
    assert picked_port(p, FAILOVER_TIMEOUT + 1) == 3


def test_transient_failure_falls_through_at_once() -> None:
    """A priority in TRANSIENT_FAILURE is skipped without waiting for its timer."""
    p = policy()
    p.update([P0, P1], 0.0)
    set_all(p, (1, 2), FAILED, 1.0)
    assert p.current_priority == 1
    assert len(p.children) == 2


def test_a_higher_priority_back_to_ready_takes_over_and_releases_the_lower() -> None:
    """Priority 0 READY again serves, and priority 1 is deactivated (kept, then deleted)."""
    p = policy()
    p.update([P0, P1], 0.0)
    set_all(p, (1, 2), FAILED, 1.0)
    set_all(p, (3,), READY, 1.0)
    assert picked_port(p, 1.0) == 3
    set_all(p, (1,), READY, 5.0)
    assert p.current_priority == 0
    assert picked_port(p, 5.0) == 1
    assert len(p.children) == 2  # retained
    assert p.next_deadline() == 5.0 + CHILD_RETENTION
    p.poll(5.0 + CHILD_RETENTION)
    assert len(p.children) == 1


def test_a_retained_priority_reached_again_keeps_its_state() -> None:
    """Within the retention period a deactivated child comes back READY, with no new timer."""
    p = policy()
    p.update([P0, P1], 0.0)
    set_all(p, (1, 2), FAILED, 1.0)
    set_all(p, (3,), READY, 1.0)
    set_all(p, (1,), READY, 2.0)
    assert p.current_priority == 0
    set_all(p, (1,), FAILED, 60.0)
    assert p.current_priority == 1
    assert picked_port(p, 60.0) == 3


def test_all_priorities_failing_leaves_the_last_one() -> None:
    """With every priority failed, the last one serves (its picker fails the calls)."""
    p = policy()
    p.update([P0, P1, P2], 0.0)
    set_all(p, (1, 2), FAILED, 0.0)
    set_all(p, (3,), FAILED, 0.0)
    set_all(p, (4,), FAILED, 0.0)
    assert p.current_priority == 2
    assert p.state() is FAILED
    assert p.pick(PickRequest(), RAND, 0.0).outcome is PickOutcome.FAIL


def test_a_timed_out_priority_that_becomes_ready_takes_over_again() -> None:
    """A priority skipped by its timer serves again once it reports READY."""
    p = policy()
    p.update([P0, P1], 0.0)
    set_all(p, (1, 2), CONNECTING, 0.0)
    p.poll(FAILOVER_TIMEOUT)
    set_all(p, (3,), FAILED, FAILOVER_TIMEOUT)
    assert p.current_priority == 1  # the last one: nothing usable, nothing CONNECTING
    set_all(p, (2,), READY, 11.0)
    assert p.current_priority == 0
    assert picked_port(p, 11.0) == 2


def test_connecting_after_ready_restarts_the_timer_but_not_after_failure() -> None:
    """READY then CONNECTING arms a new 10 s timer; FAILURE then CONNECTING does not."""
    p = policy()
    p.update([P0, P1], 0.0)
    set_all(p, (1, 2), READY, 1.0)
    assert p.next_deadline() is None  # READY cancelled the init timer
    set_all(p, (1, 2), CONNECTING, 20.0)
    assert p.current_priority == 0
    p.poll(20.0 + FAILOVER_TIMEOUT)
    assert p.current_priority == 1


def test_an_update_keeps_children_by_locality_when_priorities_move() -> None:
    """A locality moving from priority 1 to 0 keeps its child (and its endpoints' states)."""
    p = policy()
    p.update([P0, P1], 0.0)
    set_all(p, (1, 2), FAILED, 0.0)
    set_all(p, (3,), READY, 0.0)
    names = set(p.children)
    p.update([(loc("b", 3),)], 1.0)  # zone b is now priority 0, zone a gone
    assert set(p.children) == names  # a is retained, b kept
    assert p.current_priority == 0
    assert picked_port(p, 1.0) == 3  # READY without any new report


def test_endpoint_states_reported_early_reach_a_child_created_later() -> None:
    """A state reported before its priority's child exists is applied when it is created."""
    p = policy()
    p.update([P0, P1], 0.0)
    set_all(p, (3,), READY, 0.0)
    set_all(p, (1, 2), FAILED, 0.5)
    assert picked_port(p, 0.5) == 3


def test_no_priorities_fail_picks() -> None:
    """An empty assignment is TRANSIENT_FAILURE and fails every pick."""
    p = policy()
    p.update([], 0.0)
    assert p.state() is FAILED
    assert p.pick(PickRequest(), RAND, 0.0).outcome is PickOutcome.FAIL


def test_hooked_says_whether_some_child_hears_calls_start_and_end() -> None:
    """Round robin children hear no call's start or end (`hooked` stays False, and the
    composed picker skips telling them); a least request child counts calls in flight, so
    its priority is `hooked` once the child is made."""
    p = policy()
    assert not p.hooked
    p.update([P0, P1], 0.0)
    assert not p.hooked
    counted = PriorityPolicy(lambda: child_policy_for(LeastRequest(), cluster="c"))
    assert not counted.hooked  # no child yet
    counted.update([P0], 0.0)
    assert counted.hooked
