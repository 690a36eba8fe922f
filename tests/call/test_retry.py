"""Retry decisions (gRFC A44 over A6): codes, commitment, attempts, backoff, pushback and the
deadline."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdsclient._call import (
    AttemptOutcome,
    Code,
    Finish,
    RetryAt,
    RetryState,
    RouteChoice,
    route_call,
)
from xdsclient._call._retry import DEADLINE_EXCEEDED
from xdsclient.resources import RetryPolicy

from .builders import add_route, call, config, route_config


def _policy(
    retry_on: str = "unavailable",
    num_retries: int | None = None,
    backoff: tuple[int, int | None] | None = None,
) -> RetryPolicy:
    """The RetryPolicy view the decoder builds from a real route's retry_policy."""
    routes = route_config()
    route = add_route(routes.virtual_hosts[0], "", "c")
    route.route.retry_policy.retry_on = retry_on
    if num_retries is not None:
        route.route.retry_policy.num_retries.value = num_retries
    if backoff is not None:
        base, maximum = backoff
        route.route.retry_policy.retry_back_off.base_interval.FromMilliseconds(base)
        if maximum is not None:
            route.route.retry_policy.retry_back_off.max_interval.FromMilliseconds(maximum)
    cfg = config(routes)
    choice = route_call(cfg.hcm, call(), random.Random(0), listener_name="svc")
    assert isinstance(choice, RouteChoice)
    assert choice.action.retry_policy is not None
    return choice.action.retry_policy


UNAVAILABLE = AttemptOutcome(code=Code.UNAVAILABLE, details="down")


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("cancelled", Code.CANCELLED),
        ("deadline-exceeded", Code.DEADLINE_EXCEEDED),
        ("internal", Code.INTERNAL),
        ("resource-exhausted", Code.RESOURCE_EXHAUSTED),
        ("unavailable", Code.UNAVAILABLE),
    ],
)
def test_each_retry_on_code_is_retried(name: str, code: Code) -> None:
    """Each of A44's ``retry_on`` names retries its status code, and only that one."""
    state = RetryState(_policy(name), None)
    assert isinstance(
        state.on_attempt_done(AttemptOutcome(code=code), 0.0, random.Random(0)), RetryAt
    )
    other = Code.ABORTED
    state = RetryState(_policy(name), None)
    decision = state.on_attempt_done(AttemptOutcome(code=other), 0.0, random.Random(0))
    assert decision == Finish(status=AttemptOutcome(code=other).status, at=0.0)


def test_ok_finishes() -> None:
    """An OK attempt ends the call with OK."""
    state = RetryState(_policy(), None)
    decision = state.on_attempt_done(AttemptOutcome(code=Code.OK), 1.0, random.Random(0))
    assert isinstance(decision, Finish)
    assert decision.status.code is Code.OK


def test_committed_attempt_is_not_retried() -> None:
    """An attempt whose response reached the caller is final, whatever its code."""
    state = RetryState(_policy(), None)
    outcome = AttemptOutcome(code=Code.UNAVAILABLE, details="x", committed=True)
    assert state.on_attempt_done(outcome, 0.0, random.Random(0)) == Finish(
        status=outcome.status, at=0.0
    )


@given(st.integers(min_value=1, max_value=20))
def test_attempts_are_num_retries_plus_one_capped_at_five(num_retries: int) -> None:
    """A call makes num_retries + 1 attempts, at most 5, then finishes with the last status."""
    state = RetryState(_policy(num_retries=num_retries), None)
    rng = random.Random(0)
    now, attempts = 0.0, 1
    while True:
        decision = state.on_attempt_done(UNAVAILABLE, now, rng)
        if isinstance(decision, Finish):
            break
        assert decision.attempt == attempts + 1
        attempts += 1
        now = decision.at
    assert attempts == min(num_retries + 1, 5)
    assert decision.status == UNAVAILABLE.status


def test_no_policy_never_retries() -> None:
    """Without a retry policy the first attempt's status is final."""
    state = RetryState(None, None)
    assert isinstance(state.on_attempt_done(UNAVAILABLE, 0.0, random.Random(0)), Finish)


def test_backoff_is_uniform_below_the_exponential_ceiling() -> None:
    """The n-th retry waits uniform(0, min(base * 2**(n-1), max)) (A6), defaults 25/250 ms."""
    ceilings = [0.025, 0.05, 0.1, 0.2]
    rng = random.Random(5)
    seen: list[list[float]] = [[] for _ in ceilings]
    for _ in range(2000):
        state = RetryState(_policy(num_retries=4), None)
        now = 0.0
        for i in range(4):
            decision = state.on_attempt_done(UNAVAILABLE, now, rng)
            assert isinstance(decision, RetryAt)
            seen[i].append(decision.at - now)
            now = decision.at
    for waits, ceiling in zip(seen, ceilings, strict=True):
        assert min(waits) >= 0
        assert max(waits) <= ceiling
        assert abs(sum(waits) / len(waits) - ceiling / 2) < ceiling * 0.05  # full jitter


def test_backoff_stops_growing_at_max_interval() -> None:
    """With base 100 ms and max 150 ms, later retries wait at most 150 ms."""
    rng = random.Random(6)
    longest = 0.0
    for _ in range(500):
        state = RetryState(_policy(num_retries=4, backoff=(100, 150)), None)
        now = 0.0
        for _ in range(4):
            decision = state.on_attempt_done(UNAVAILABLE, now, rng)
            assert isinstance(decision, RetryAt)
            longest = max(longest, decision.at - now)
            now = decision.at
    assert 0.14 < longest <= 0.15


def test_server_pushback_sets_the_delay_and_resets_backoff() -> None:
    """A valid pushback retries after exactly that long; the next backoff starts from base."""
    state = RetryState(_policy(num_retries=4, backoff=(1000, 8000)), None)
    rng = random.Random(0)
    state.on_attempt_done(UNAVAILABLE, 0.0, rng)  # backoff step 1 used
    state.on_attempt_done(UNAVAILABLE, 0.0, rng)  # step 2
    pushed = state.on_attempt_done(AttemptOutcome(code=Code.UNAVAILABLE, pushback="300"), 10.0, rng)
    assert pushed == RetryAt(at=10.3, attempt=4)
    after = state.on_attempt_done(UNAVAILABLE, 20.0, rng)
    assert isinstance(after, RetryAt)
    assert after.at - 20.0 <= 1.0  # base again, not 8 s


@pytest.mark.parametrize("pushback", ["-1", "abc", "", "1.5"])
def test_negative_or_malformed_pushback_stops_retrying(pushback: str) -> None:
    """A pushback that is not a non-negative integer means: do not retry (A6)."""
    state = RetryState(_policy(), None)
    outcome = AttemptOutcome(code=Code.UNAVAILABLE, pushback=pushback)
    assert state.on_attempt_done(outcome, 0.0, random.Random(0)) == Finish(
        status=outcome.status, at=0.0
    )


def test_no_retry_at_or_after_the_deadline() -> None:
    """A retry that would start at or after the deadline waits for it and is
    DEADLINE_EXCEEDED."""
    state = RetryState(_policy(), deadline=5.0)
    outcome = AttemptOutcome(code=Code.UNAVAILABLE, pushback="2000")
    assert state.on_attempt_done(outcome, 4.0, random.Random(0)) == Finish(
        status=DEADLINE_EXCEEDED, at=5.0
    )


def test_virtual_host_policy_applies_when_the_route_has_none() -> None:
    """The route's retry policy wins; without one the virtual host's applies (A44)."""
    from xdsclient._call import ActiveFaults, CallPlan

    routes = route_config()
    vhost = routes.virtual_hosts[0]
    vhost.retry_policy.retry_on = "internal"
    add_route(vhost, "/a/", "c")
    with_own = add_route(vhost, "/b/", "c")
    with_own.route.retry_policy.retry_on = "unavailable"
    cfg = config(routes)
    for path, code, retried in (
        ("/a/x", Code.INTERNAL, True),
        ("/a/x", Code.UNAVAILABLE, False),
        ("/b/x", Code.UNAVAILABLE, True),
        ("/b/x", Code.INTERNAL, False),
    ):
        plan = CallPlan.begin(call(path), cfg, now=0.0, rng=random.Random(0), faults=ActiveFaults())
        plan.start(0.0)
        step = plan.attempt_done(AttemptOutcome(code=code), 0.0)
        assert isinstance(step, RetryAt) is retried, (path, code)
