"""The route's timeout and the retry policy's per-try timeout under `HTTP_RULES`: Envoy's 15 s
default, 0 for none, the request's own deadline, and the 504 when one passes (fake times)."""

from __future__ import annotations

from typing import Any

from envoy.config.route.v3 import route_pb2

from xdsclient._call import (
    UPSTREAM_TIMEOUT,
    Attempt,
    AttemptOutcome,
    Delay,
    Finish,
    LocalReply,
    RetryAt,
)

from .builders import add_route, fault, http, http_plan, override

TIMED_OUT = AttemptOutcome(timed_out=True)
GATEWAY_TIMEOUT = LocalReply(status=504, body=UPSTREAM_TIMEOUT)


def _routes(
    timeout_ms: int | None = None,
    per_try_ms: int | None = None,
    retry_on: str = "",
    num_retries: int = 1,
) -> Any:
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", "backend")
    if timeout_ms is not None:
        route.route.timeout.FromMilliseconds(timeout_ms)
    if per_try_ms is not None or retry_on:
        policy = route.route.retry_policy
        policy.retry_on = retry_on
        policy.num_retries.value = num_retries
        if per_try_ms is not None:
            policy.per_try_timeout.FromMilliseconds(per_try_ms)
    return routes


def _first(routes: Any, now: float = 100.0, deadline: float | None = None) -> Attempt:
    step = http_plan(routes, http(deadline=deadline), now=now).start(now)
    assert isinstance(step, Attempt)
    return step


def test_a_route_without_timeout_gets_envoys_15_seconds() -> None:
    """No ``timeout``: Envoy's default of 15 s from the request's start."""
    assert _first(_routes()).deadline == 115.0


def test_the_routes_timeout_and_zero_for_none() -> None:
    """``timeout`` sets the request's deadline; 0 disables it."""
    assert _first(_routes(timeout_ms=2500)).deadline == 102.5
    assert _first(_routes(timeout_ms=0)).deadline is None


def test_the_requests_own_deadline_when_earlier() -> None:
    """The request's deadline wins when it is earlier than the route's timeout, and applies
    alone when the route has none."""
    assert _first(_routes(timeout_ms=2500), deadline=101.0).deadline == 101.0
    assert _first(_routes(timeout_ms=2500), deadline=200.0).deadline == 102.5
    assert _first(_routes(timeout_ms=0), deadline=150.0).deadline == 150.0


def test_per_try_timeout_caps_each_attempt_from_its_own_start() -> None:
    """``per_try_timeout`` bounds each attempt from when it starts, never past the route's
    timeout."""
    plan = http_plan(_routes(timeout_ms=1000, per_try_ms=300, retry_on="5xx", num_retries=3))
    first = plan.start(0.0)
    assert isinstance(first, Attempt)
    assert first.deadline == 0.3
    retry = plan.attempt_done(TIMED_OUT, 0.3)
    assert isinstance(retry, RetryAt)
    second = plan.backoff_elapsed(retry.at)
    assert isinstance(second, Attempt)
    assert second.deadline == retry.at + 0.3
    retry = plan.attempt_done(TIMED_OUT, second.deadline)
    assert isinstance(retry, RetryAt)
    third = plan.backoff_elapsed(0.9)
    assert isinstance(third, Attempt)
    assert third.deadline == 1.0  # the route's timeout comes first


def test_a_per_try_timeout_not_retried_is_a_504() -> None:
    """A per-try timeout the policy does not retry (no reset-like condition) ends the
    request with Envoy's 504 ``upstream request timeout``."""
    plan = http_plan(_routes(per_try_ms=300, retry_on="retriable-4xx"))
    assert isinstance(plan.start(0.0), Attempt)
    finish = plan.attempt_done(TIMED_OUT, 0.3)
    assert isinstance(finish, Finish)
    assert finish.reply == GATEWAY_TIMEOUT
    assert len(plan.attempts) == 1


def test_the_routes_timeout_is_never_retried() -> None:
    """The route's timeout passing during an attempt ends the request with 504, retries
    left or not."""
    plan = http_plan(_routes(timeout_ms=500, retry_on="5xx", num_retries=5))
    assert isinstance(plan.start(0.0), Attempt)
    finish = plan.attempt_done(TIMED_OUT, 0.5)
    assert isinstance(finish, Finish)
    assert (finish.at, finish.reply) == (0.5, GATEWAY_TIMEOUT)


def test_a_retry_that_would_start_after_the_timeout_is_a_504_at_the_timeout() -> None:
    """A back-off ending at or after the route's timeout is not waited out: the request ends
    with 504 at the timeout."""
    plan = http_plan(_routes(timeout_ms=20, retry_on="5xx", num_retries=5), seed=3)
    assert isinstance(plan.start(0.0), Attempt)
    step = plan.attempt_done(AttemptOutcome(http_status=503), 0.019)
    assert isinstance(step, Finish)
    assert step.reply == GATEWAY_TIMEOUT
    assert step.at == 0.02


def test_a_fault_delay_past_the_timeout_is_a_504() -> None:
    """An injected delay is cut at the route's timeout, and the request ends with 504."""
    routes = _routes(timeout_ms=1000)
    delay = fault(delay_s=5.0, delay_percent=(100, 0))
    routes.virtual_hosts[0].routes[0].typed_per_filter_config["fault0"].Pack(override(delay))
    plan = http_plan(routes, faults=(fault(),))
    step = plan.start(0.0)
    assert step == Delay(until=1.0)
    finish = plan.delay_elapsed(1.0)
    assert isinstance(finish, Finish)
    assert finish.reply == GATEWAY_TIMEOUT
    assert plan.attempts == []
