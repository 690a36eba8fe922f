"""One call's plan: the order of decisions and the state table that drives it."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdsclient._call import (
    ActiveFaults,
    Attempt,
    AttemptOutcome,
    CallPlan,
    CallRequest,
    CallState,
    Code,
    Delay,
    Finish,
    RetryAt,
    Status,
)
from xdsclient._call._plan import _TRANSITIONS
from xdsclient._call._retry import DEADLINE_EXCEEDED
from xdsclient._call._route import NO_ROUTE
from xdsclient._errors import ProtocolError

from .builders import add_route, call, config, fault, route_config

OK = AttemptOutcome(code=Code.OK)
UNAVAILABLE = AttemptOutcome(code=Code.UNAVAILABLE, details="down")


def _routes(retry_on: str | None = None, num_retries: int = 2, msd_ms: int | None = None) -> Any:
    routes = route_config()
    route = add_route(routes.virtual_hosts[0], "/pkg.Svc/", "backend")
    if retry_on:
        route.route.retry_policy.retry_on = retry_on
        route.route.retry_policy.num_retries.value = num_retries
    if msd_ms is not None:
        route.route.max_stream_duration.max_stream_duration.FromMilliseconds(msd_ms)
    return routes


def _plan(
    routes: Any = None,
    *,
    faults: tuple[Any, ...] = (),
    active: ActiveFaults | None = None,
    request: CallRequest | None = None,
    now: float = 0.0,
    seed: int = 0,
) -> CallPlan:
    return CallPlan.begin(
        request or call(),
        config(routes or _routes(), faults=faults),
        now=now,
        rng=random.Random(seed),
        faults=active if active is not None else ActiveFaults(),
    )


def test_plain_call_is_one_attempt_then_done() -> None:
    """Without faults or retries: one attempt to the route's cluster, then its status."""
    plan = _plan()
    step = plan.start(0.0)
    assert isinstance(step, Attempt)
    assert (step.number, step.cluster, step.previous_attempts) == (1, "backend", 0)
    assert plan.attempt_done(OK, 0.1) == Finish(status=Status(code=Code.OK), at=0.1)
    assert plan.state is CallState.DONE
    assert [record.outcome for record in plan.attempts] == [OK]


def test_route_failure_finishes_at_start() -> None:
    """A call no route matches finishes at start with the routing status, no attempt."""
    plan = _plan(request=call("/other.Svc/M"))
    assert plan.failure == Status(code=Code.UNAVAILABLE, details=NO_ROUTE)
    assert plan.start(1.0) == Finish(status=plan.failure, at=1.0)
    assert plan.attempts == []


def test_retries_make_new_attempts_until_ok() -> None:
    """A retried call makes attempt 2 after the backoff, with the same cluster and hash."""
    plan = _plan(_routes("unavailable"))
    first = plan.start(0.0)
    assert isinstance(first, Attempt)
    retry = plan.attempt_done(UNAVAILABLE, 0.01)
    assert isinstance(retry, RetryAt)
    assert retry.attempt == 2
    assert plan.state is CallState.BACKOFF
    second = plan.backoff_elapsed(retry.at)
    assert isinstance(second, Attempt)
    assert second.number == 2
    assert second.previous_attempts == 1
    assert second.request_hash == first.request_hash
    assert isinstance(plan.attempt_done(OK, retry.at + 0.01), Finish)
    assert [r.number for r in plan.attempts] == [1, 2]


def test_max_stream_duration_caps_attempt_deadline() -> None:
    """Attempts carry the call's deadline capped by the route's max_stream_duration."""
    plan = _plan(_routes(msd_ms=500), request=call(deadline=100.0), now=10.0)
    step = plan.start(10.0)
    assert isinstance(step, Attempt)
    assert step.deadline == 10.5


def test_no_attempt_after_the_deadline() -> None:
    """A backoff that ends at the deadline ends the call with DEADLINE_EXCEEDED."""
    plan = _plan(_routes("unavailable"), request=call(deadline=1.0))
    plan.start(0.0)
    retry = plan.attempt_done(UNAVAILABLE, 0.5)
    assert isinstance(retry, RetryAt)
    assert plan.backoff_elapsed(1.0) == Finish(status=DEADLINE_EXCEEDED, at=1.0)


def test_delay_then_abort() -> None:
    """A call both delayed and aborted is delayed first, then fails with the abort."""
    active = ActiveFaults()
    plan = _plan(
        faults=(fault(delay_s=2.0, delay_percent=(100, 0), abort_grpc=8, abort_percent=(100, 0)),),
        active=active,
    )
    assert plan.start(0.0) == Delay(until=2.0)
    assert active.active == 1
    step = plan.delay_elapsed(2.0)
    assert step == Finish(
        status=Status(code=Code.RESOURCE_EXHAUSTED, details="Fault injected"), at=2.0
    )
    assert active.active == 0


def test_delay_then_attempt_releases_the_active_fault() -> None:
    """After a delay without abort, the attempt starts and the fault no longer counts."""
    active = ActiveFaults()
    plan = _plan(faults=(fault(delay_s=0.5, delay_percent=(100, 0)),), active=active)
    assert plan.start(0.0) == Delay(until=0.5)
    step = plan.delay_elapsed(0.5)
    assert isinstance(step, Attempt)
    assert active.active == 0


def test_delay_past_deadline_is_deadline_exceeded() -> None:
    """A delay longer than the deadline waits until the deadline and fails there."""
    plan = _plan(faults=(fault(delay_s=5.0, delay_percent=(100, 0)),), request=call(deadline=1.0))
    assert plan.start(0.0) == Delay(until=1.0)
    assert plan.delay_elapsed(1.0) == Finish(status=DEADLINE_EXCEEDED, at=1.0)


def test_max_active_faults_skips_delay_and_abort() -> None:
    """At max_active_faults a new call is neither delayed nor aborted (C-core's quota)."""
    active = ActiveFaults()
    config_ = (fault(delay_s=1.0, delay_percent=(100, 0), max_active=1),)
    first = _plan(faults=config_, active=active)
    assert isinstance(first.start(0.0), Delay)
    second = _plan(faults=config_, active=active)
    assert isinstance(second.start(0.0), Attempt)
    aborting = _plan(
        faults=(fault(abort_grpc=8, abort_percent=(100, 0), max_active=1),), active=active
    )
    assert isinstance(aborting.start(0.0), Attempt)
    first.cancel()
    assert active.active == 0
    aborting = _plan(
        faults=(fault(abort_grpc=8, abort_percent=(100, 0), max_active=1),), active=active
    )
    assert isinstance(aborting.start(0.0), Finish)


def test_abort_after_a_delay_denied_by_quota_still_applies() -> None:
    """A delay refused by the quota does not cancel that filter's abort (C-core's rule)."""
    active = ActiveFaults()
    holder = _plan(faults=(fault(delay_s=1.0, delay_percent=(100, 0)),), active=active)
    assert isinstance(holder.start(0.0), Delay)
    both = fault(
        delay_s=1.0, delay_percent=(100, 0), abort_grpc=8, abort_percent=(100, 0), max_active=1
    )
    plan = _plan(faults=(both,), active=active)
    step = plan.start(0.0)
    assert isinstance(step, Finish)
    assert step.status.code is Code.RESOURCE_EXHAUSTED
    assert active.active == 1  # only the holder's


def test_two_fault_filters_delay_in_turn() -> None:
    """Two fault filters delay one after the other before the attempt."""
    plan = _plan(
        faults=(
            fault(delay_s=1.0, delay_percent=(100, 0)),
            fault(delay_s=2.0, delay_percent=(100, 0)),
        )
    )
    assert plan.start(0.0) == Delay(until=1.0)
    assert plan.delay_elapsed(1.0) == Delay(until=3.0)
    assert plan.state is CallState.DELAYING
    assert isinstance(plan.delay_elapsed(3.0), Attempt)


def test_cancel_during_delay_gives_back_the_fault() -> None:
    """Cancelling a delayed call ends it and releases its active fault."""
    active = ActiveFaults()
    plan = _plan(faults=(fault(delay_s=1.0, delay_percent=(100, 0)),), active=active)
    plan.start(0.0)
    plan.cancel()
    assert plan.state is CallState.DONE
    assert active.active == 0


_INPUTS = ["start", "delay_elapsed", "attempt_done", "backoff_elapsed", "cancel"]


def _drive(plan: CallPlan, name: str) -> object:
    if name == "attempt_done":
        return plan.attempt_done(UNAVAILABLE, 0.0)
    if name == "cancel":
        return plan.cancel()
    return getattr(plan, name)(0.0)


def _plan_in(state: CallState) -> CallPlan:
    if state is CallState.DELAYING:
        plan = _plan(faults=(fault(delay_s=1.0, delay_percent=(100, 0)),))
        plan.start(0.0)
    else:
        plan = _plan(_routes("unavailable"))
        if state is not CallState.START:
            plan.start(0.0)
        if state in (CallState.BACKOFF, CallState.DONE):
            plan.attempt_done(UNAVAILABLE, 0.0)
        if state is CallState.DONE:
            plan.cancel()
    assert plan.state is state
    return plan


@given(st.sampled_from(list(CallState)), st.sampled_from(_INPUTS))
def test_every_state_and_input_follows_the_table(state: CallState, name: str) -> None:
    """Each (state, input) either is in the table and lands in an allowed state, or raises."""
    plan = _plan_in(state)
    allowed = _TRANSITIONS.get((state, name))
    if allowed is None:
        with pytest.raises(ProtocolError):
            _drive(plan, name)
        assert plan.state is state
    else:
        _drive(plan, name)
        assert plan.state in allowed
