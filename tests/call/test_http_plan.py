"""One state machine for both front ends: `CallPlan` under `HTTP_RULES` takes the same inputs
in the same states as under `GRPC_RULES`, which stays the default."""

from __future__ import annotations

import random
from typing import Any

import pytest
from envoy.config.route.v3 import route_pb2
from hypothesis import given
from hypothesis import strategies as st

from xdsclient._call import (
    GRPC_RULES,
    HTTP_RULES,
    ActiveFaults,
    Attempt,
    AttemptOutcome,
    CallPlan,
    CallState,
    Delay,
    Finish,
    RetryAt,
)
from xdsclient._errors import ProtocolError

from .builders import add_route, call, config, fault, http, http_plan


def _routes(retry_on: str = "5xx,unavailable") -> Any:
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", "backend")
    route.route.retry_policy.retry_on = retry_on
    route.route.retry_policy.num_retries.value = 2
    return routes


def _steps(plan: CallPlan, fail: AttemptOutcome, ok: AttemptOutcome) -> list[str]:
    """The kinds of steps and states of a plan whose first attempt fails, then succeeds."""
    seen = []
    step = plan.start(0.0)
    failed = False
    while True:
        seen.append(f"{type(step).__name__}:{plan.state.value}")
        if isinstance(step, Delay):
            step = plan.delay_elapsed(step.until)
        elif isinstance(step, Attempt):
            step = plan.attempt_done(ok if failed else fail, 0.01)
            failed = True
        elif isinstance(step, RetryAt):
            step = plan.backoff_elapsed(step.at)
        else:
            return seen


def test_grpc_rules_are_the_default() -> None:
    """`CallPlan.begin` without rules decides by gRPC's rules, step for step."""
    cfg = config(_routes(), faults=(fault(delay_s=0.1, delay_percent=(100, 0)),))

    def steps(**rules: Any) -> list[Any]:
        plan = CallPlan.begin(
            call(), cfg, now=0.0, rng=random.Random(3), faults=ActiveFaults(), **rules
        )
        first = plan.start(0.0)
        return [first, plan.delay_elapsed(0.1)]

    assert steps() == steps(rules=GRPC_RULES)


def test_both_rules_walk_the_same_states() -> None:
    """A delayed call retried once walks Delay, Attempt, RetryAt, Attempt, Finish through the
    same states under either rules."""
    faults = (fault(delay_s=0.1, delay_percent=(100, 0)),)
    grpc_plan = CallPlan.begin(
        call(),
        config(_routes(), faults=faults),
        now=0.0,
        rng=random.Random(0),
        faults=ActiveFaults(),
    )
    grpc = _steps(
        grpc_plan,
        AttemptOutcome(code=AttemptOutcome(http_status=503).code),
        AttemptOutcome(code=AttemptOutcome(http_status=200).code),
    )
    web = _steps(
        http_plan(_routes(), faults=faults),
        AttemptOutcome(http_status=503),
        AttemptOutcome(http_status=200),
    )
    assert (
        grpc
        == web
        == [
            "Delay:delaying",
            "Attempt:attempting",
            "RetryAt:backoff",
            "Attempt:attempting",
            "Finish:done",
        ]
    )


@pytest.mark.parametrize("event", ["start", "delay_elapsed", "backoff_elapsed"])
def test_http_plans_refuse_inputs_their_state_does_not_take(event: str) -> None:
    """The transitions table holds under HTTP's rules too: an input out of order raises."""
    plan = http_plan(_routes())
    assert isinstance(plan.start(0.0), Attempt)
    with pytest.raises(ProtocolError):
        getattr(plan, event)(0.1)


def test_cancel_gives_back_the_active_fault() -> None:
    """A request cancelled during its injected delay ends and frees its fault slot."""
    active = ActiveFaults()
    plan = http_plan(_routes(), faults=(fault(delay_s=1.0, delay_percent=(100, 0)),), active=active)
    assert isinstance(plan.start(0.0), Delay)
    assert active.active == 1
    plan.cancel()
    assert (plan.state, active.active) == (CallState.DONE, 0)


def test_http_requests_are_matched_on_their_headers_as_sent() -> None:
    """Under HTTP's rules the matchers see the request's own content-type and binary-named
    headers (gRPC's view fixes the first and hides the second)."""
    routes = route_pb2.RouteConfiguration(name="routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=["*"])
    json = add_route(vhost, "/", "json")
    json.match.headers.add(name="content-type").string_match.exact = "application/json"
    binary = add_route(vhost, "/", "binary")
    binary.match.headers.add(name="x-trace-bin").present_match = True
    add_route(vhost, "/", "other")
    for headers, cluster in (
        ((("content-type", "application/json"),), "json"),
        ((("x-trace-bin", "AAE="),), "binary"),
        ((), "other"),
    ):
        step = http_plan(routes, http(headers=headers)).start(0.0)
        assert isinstance(step, Attempt)
        assert step.cluster == cluster


def test_a_local_answer_ends_the_plan_at_start() -> None:
    """A request answered locally (no route here) finishes at start with its reply and no
    attempt; the plan records why."""
    plan = CallPlan.begin(
        http(authority="nowhere"),
        config(_domains_only()),
        now=2.0,
        rng=random.Random(0),
        faults=ActiveFaults(),
        rules=HTTP_RULES,
    )
    step = plan.start(2.0)
    assert isinstance(step, Finish)
    assert step.at == 2.0
    assert step.reply is not None
    assert step.reply.status == 404
    assert plan.failure is not None
    assert plan.choice is None
    assert plan.attempts == []


def _domains_only() -> Any:
    routes = route_pb2.RouteConfiguration(name="routes")
    add_route(routes.virtual_hosts.add(name="vh", domains=["reviews"]), "/", "c")
    return routes


_OUTCOMES = st.sampled_from(
    [
        AttemptOutcome(http_status=200),
        AttemptOutcome(http_status=409),
        AttemptOutcome(http_status=503),
        AttemptOutcome(reset=True, endpoint=("10.0.0.1", 80)),
        AttemptOutcome(connect_failure=True, endpoint=("10.0.0.2", 80)),
        AttemptOutcome(timed_out=True),
    ]
)


@given(
    st.lists(_OUTCOMES, min_size=6, max_size=6),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=0, max_value=2**32),
)
def test_any_outcomes_end_within_the_policy(
    outcomes: list[AttemptOutcome], retries: int, seed: int
) -> None:
    """Whatever the attempts' outcomes, a request ends with at most ``num_retries + 1``
    attempts, never waits past its timeout, and answers either the last response (a status
    came back) or a local reply (none did)."""
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", "backend")
    route.route.timeout.FromSeconds(2)
    route.route.retry_policy.retry_on = "5xx,retriable-4xx"
    route.route.retry_policy.num_retries.value = retries
    route.route.retry_policy.per_try_timeout.FromMilliseconds(500)
    plan = http_plan(routes, seed=seed)
    step = plan.start(0.0)
    now = 0.0
    while not isinstance(step, Finish):
        assert plan.deadline is not None
        if isinstance(step, RetryAt):
            assert now <= step.at < plan.deadline
            now = step.at
            step = plan.backoff_elapsed(now)
            continue
        assert isinstance(step, Attempt)
        assert step.deadline is not None
        assert step.deadline <= min(now + 0.5, plan.deadline)
        outcome = outcomes[step.number - 1]
        now = step.deadline if outcome.timed_out else now + 0.01
        step = plan.attempt_done(outcome, now)
    assert 1 <= len(plan.attempts) <= retries + 1
    last = plan.attempts[-1].outcome
    assert (step.reply is None) == (last.http_status is not None)
