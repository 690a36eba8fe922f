"""Envoy's retry policy under `HTTP_RULES`: the ``retry_on`` conditions, retries counted, the
back-off's bounds, the retry headers, the previous hosts avoided and the final answer."""

from __future__ import annotations

from typing import Any

import pytest
from envoy.config.route.v3 import route_pb2

from xdsclient._call import (
    Attempt,
    AttemptOutcome,
    CallPlan,
    CallRequest,
    Finish,
    LocalReply,
    RetryAt,
)

from .builders import add_route, http, http_plan


def _routes(retry_on: str = "", num_retries: int | None = None, **policy: Any) -> Any:
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", "backend")
    if retry_on or num_retries is not None or policy:
        retry = route.route.retry_policy
        retry.retry_on = retry_on
        if num_retries is not None:
            retry.num_retries.value = num_retries
        for name, value in policy.items():
            value(retry) if callable(value) else setattr(retry, name, value)
    return routes


def _run(
    routes: Any, outcomes: list[AttemptOutcome], request: CallRequest | None = None, seed: int = 0
) -> tuple[CallPlan, list[Attempt], Finish]:
    """Drive a plan, answering its attempts with ``outcomes`` in turn (the last repeats)."""
    plan = http_plan(routes, request, seed=seed)
    step = plan.start(0.0)
    attempts: list[Attempt] = []
    now = 0.0
    while not isinstance(step, Finish):
        if isinstance(step, RetryAt):
            now = step.at
            step = plan.backoff_elapsed(now)
            continue
        assert isinstance(step, Attempt)
        attempts.append(step)
        now += 0.001
        step = plan.attempt_done(outcomes[min(len(attempts), len(outcomes)) - 1], now)
    return plan, attempts, step


def _status(status: int, *headers: tuple[str, str]) -> AttemptOutcome:
    return AttemptOutcome(http_status=status, headers=headers)


RESET = AttemptOutcome(reset=True)
CONNECT_FAILURE = AttemptOutcome(connect_failure=True)
PER_TRY_TIMEOUT = AttemptOutcome(timed_out=True)


@pytest.mark.parametrize(
    ("retry_on", "outcome", "retried"),
    [
        ("5xx", _status(500), True),
        ("5xx", _status(503), True),
        ("5xx", _status(404), False),
        ("5xx", RESET, True),
        ("5xx", CONNECT_FAILURE, True),
        ("5xx", PER_TRY_TIMEOUT, True),
        ("gateway-error", _status(502), True),
        ("gateway-error", _status(504), True),
        ("gateway-error", _status(500), False),
        ("gateway-error", RESET, True),
        ("reset", RESET, True),
        ("reset", CONNECT_FAILURE, True),
        ("reset", _status(503), False),
        ("connect-failure", CONNECT_FAILURE, True),
        ("connect-failure", RESET, False),
        ("connect-failure", _status(503), False),
        ("retriable-4xx", _status(409), True),
        ("retriable-4xx", _status(404), False),
        ("retriable-status-codes", _status(418), True),
        ("retriable-status-codes", _status(419), False),
        ("retriable-headers", _status(200, ("x-upstream-retry", "yes")), True),
        ("retriable-headers", _status(200, ("x-upstream-retry", "no")), False),
        ("5xx", _status(503, ("x-envoy-ratelimited", "true")), False),
        ("envoy-ratelimited", _status(429, ("x-envoy-ratelimited", "true")), True),
        ("unavailable", _status(200, ("grpc-status", "14")), True),
        ("unavailable", _status(200, ("grpc-status", "13")), False),
        ("", _status(503), False),
    ],
)
def test_retry_on_conditions_follow_envoys_router(
    retry_on: str, outcome: AttemptOutcome, retried: bool
) -> None:
    """Each ``retry_on`` condition retries what Envoy's ``RetryStateImpl`` retries, and
    nothing else."""

    def retriable(policy: Any) -> None:
        policy.retriable_status_codes.append(418)
        policy.retriable_headers.add(name="x-upstream-retry").string_match.exact = "yes"

    routes = _routes(retry_on, num_retries=1, retriable=retriable)
    _, attempts, _ = _run(routes, [outcome, _status(200)])
    assert len(attempts) == (2 if retried else 1)


def test_retries_are_counted_and_the_last_response_is_the_answer() -> None:
    """``num_retries`` 3: four attempts, each a new one (a new pick) in the same cluster with
    the same hash; the fourth's response is the answer."""
    plan, attempts, finish = _run(_routes("5xx", num_retries=3), [_status(503)])
    assert [a.number for a in attempts] == [1, 2, 3, 4]
    assert {(a.cluster, a.request_hash) for a in attempts} == {
        ("backend", attempts[0].request_hash)
    }
    assert len(plan.attempts) == 4
    assert finish.reply is None  # the upstream's 503 is the answer
    assert plan.attempts[-1].outcome.http_status == 503


def test_a_policy_without_num_retries_retries_once() -> None:
    """Envoy's default ``num_retries`` is 1."""
    _, attempts, _ = _run(_routes("5xx"), [_status(503)])
    assert len(attempts) == 2


def test_a_success_ends_the_retries() -> None:
    """A response the conditions do not retry ends the request with it."""
    _, attempts, finish = _run(_routes("5xx", num_retries=5), [_status(503), _status(201)])
    assert len(attempts) == 2
    assert finish.reply is None


def test_the_virtual_hosts_policy_applies_when_the_route_has_none() -> None:
    """The virtual host's retry policy when the route's action has none."""
    routes = _routes()
    vhost = routes.virtual_hosts[0]
    vhost.retry_policy.retry_on = "gateway-error"
    vhost.retry_policy.num_retries.value = 2
    _, attempts, _ = _run(routes, [_status(502)])
    assert len(attempts) == 3


def test_retry_headers_add_conditions_and_set_the_count() -> None:
    """``x-envoy-retry-on`` adds conditions (with Envoy's default of one retry without a
    policy); ``x-envoy-max-retries`` replaces the count."""
    request = http(headers=(("x-envoy-retry-on", "gateway-error, retriable-4xx"),))
    _, attempts, _ = _run(_routes(), [_status(409)], request)
    assert len(attempts) == 2
    request = http(headers=(("x-envoy-retry-on", "5xx"), ("x-envoy-max-retries", "3")))
    _, attempts, _ = _run(_routes(), [_status(500)], request)
    assert len(attempts) == 4
    request = http(headers=(("x-envoy-max-retries", "3"),))  # no condition: no retry
    _, attempts, _ = _run(_routes(), [_status(500)], request)
    assert len(attempts) == 1


@pytest.mark.parametrize(
    ("names", "response", "retried"),
    [
        ("x-retry-me", ("x-retry-me", "anything"), True),
        (" X-Other , X-Retry-Me ", ("x-retry-me", ""), True),  # any case, spaces, a list
        ("x-retry-me", ("x-something-else", "1"), False),
        ("", ("x-retry-me", "1"), False),
    ],
)
def test_retriable_header_names_from_the_request_retry_a_response_carrying_one(
    names: str, response: tuple[str, str], retried: bool
) -> None:
    """``x-envoy-retriable-header-names`` lists response headers whose mere presence makes a
    response retriable under ``retriable-headers`` (Envoy's name-only matchers), beside the
    policy's own matchers."""

    def matcher(policy: Any) -> None:
        policy.retriable_headers.add(name="x-upstream-retry").string_match.exact = "yes"

    routes = _routes("retriable-headers", num_retries=1, retriable=matcher)
    request = http(headers=(("x-envoy-retriable-header-names", names),))
    _, attempts, _ = _run(routes, [_status(200, response), _status(200)], request)
    assert len(attempts) == (2 if retried else 1)
    assert "x-envoy-retriable-header-names" in attempts[0].headers_to_remove  # consumed
    policy_header = _status(200, ("x-upstream-retry", "yes"))
    _, attempts, _ = _run(routes, [policy_header, _status(200)], request)
    assert len(attempts) == 2  # the policy's matchers still apply


def test_retriable_status_codes_from_the_request_add_to_the_policys() -> None:
    """``x-envoy-retriable-status-codes`` adds statuses (a comma-separated list; what is not a
    number is skipped) to the policy's under ``retriable-status-codes``, and is consumed."""

    def teapot(policy: Any) -> None:
        policy.retriable_status_codes.append(418)

    routes = _routes("retriable-status-codes", num_retries=1, teapot=teapot)
    request = http(headers=(("x-envoy-retriable-status-codes", "429, nope ,451"),))
    for status, retried in ((429, True), (451, True), (418, True), (404, False)):
        _, attempts, _ = _run(routes, [_status(status), _status(200)], request)
        assert len(attempts) == (2 if retried else 1), status
    assert "x-envoy-retriable-status-codes" in attempts[0].headers_to_remove
    _, attempts, _ = _run(_routes("5xx"), [_status(429), _status(200)], request)
    assert len(attempts) == 1  # not without the condition


def test_retriable_header_names_need_the_retriable_headers_condition() -> None:
    """Without ``retriable-headers`` in ``retry_on`` (the policy's or ``x-envoy-retry-on``)
    the named headers retry nothing; added by ``x-envoy-retry-on`` they do."""
    names = ("x-envoy-retriable-header-names", "x-retry-me")
    request = http(headers=(names,))
    _, attempts, _ = _run(_routes("5xx"), [_status(200, ("x-retry-me", "1"))], request)
    assert len(attempts) == 1
    request = http(headers=(names, ("x-envoy-retry-on", "retriable-headers")))
    outcomes = [_status(200, ("x-retry-me", "1")), _status(200)]
    _, attempts, _ = _run(_routes(), outcomes, request)
    assert len(attempts) == 2


def _backoffs(routes: Any, seed: int) -> list[float]:
    plan = http_plan(routes, seed=seed)
    step = plan.start(0.0)
    waits = []
    now = 0.0
    while isinstance(step, Attempt):
        step = plan.attempt_done(_status(503), now)
        if isinstance(step, RetryAt):
            waits.append(step.at - now)
            now = step.at
            step = plan.backoff_elapsed(now)
    return waits


def test_backoff_is_envoys_jittered_exponential_backoff() -> None:
    """The n-th retry waits whole milliseconds in [0, min(25 ms * 2^(n-1), 250 ms)), the
    bound reached: Envoy's base 25 ms, max 10 x base, full jitter, doubling per retry."""
    routes = _routes("5xx", num_retries=6)
    bounds = [25, 50, 100, 200, 250, 250]
    highest = [0.0] * 6
    for seed in range(300):
        waits = _backoffs(routes, seed)
        assert len(waits) == 6
        for n, (wait, bound) in enumerate(zip(waits, bounds, strict=True)):
            millis = round(wait * 1000, 6)
            assert millis == int(millis)
            assert 0 <= millis < bound
            highest[n] = max(highest[n], millis)
    assert all(top >= bound * 0.9 for top, bound in zip(highest, bounds, strict=True)), highest


def test_backoff_follows_the_policys_intervals() -> None:
    """``retry_back_off``: its base interval doubles up to its max interval."""

    def backoff(policy: Any) -> None:
        policy.retry_back_off.base_interval.FromMilliseconds(100)
        policy.retry_back_off.max_interval.FromMilliseconds(300)

    routes = _routes("5xx", num_retries=4, backoff=backoff)
    highest = [0.0] * 4
    for seed in range(200):
        for n, wait in enumerate(_backoffs(routes, seed)):
            assert wait < [0.1, 0.2, 0.3, 0.3][n]
            highest[n] = max(highest[n], wait)
    assert highest[2] > 0.25  # the third retry reaches past 200 ms, capped at 300 ms


def test_previous_hosts_predicate_avoids_the_endpoints_tried() -> None:
    """With the ``previous_hosts`` retry host predicate each attempt avoids the endpoints
    already tried; without it, none."""

    def predicate(policy: Any) -> None:
        policy.retry_host_predicate.add(name="envoy.retry_host_predicates.previous_hosts")
        policy.retry_host_predicate[-1].typed_config.type_url = (
            "type.googleapis.com/"
            "envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"
        )

    outcomes = [
        AttemptOutcome(http_status=503, endpoint=("10.0.0.1", 80)),
        AttemptOutcome(connect_failure=True, endpoint=("10.0.0.2", 80)),
        _status(200),
    ]
    _, attempts, _ = _run(_routes("5xx", num_retries=2, predicate=predicate), outcomes)
    assert [a.avoid for a in attempts] == [
        frozenset(),
        {("10.0.0.1", 80)},
        {("10.0.0.1", 80), ("10.0.0.2", 80)},
    ]
    _, attempts, _ = _run(_routes("5xx", num_retries=2), outcomes)
    assert {a.avoid for a in attempts} == {frozenset()}


def test_a_failure_without_a_response_answers_envoys_503() -> None:
    """A reset or connect failure not retried answers Envoy's 503 ``upstream connect
    error...``, the reason in ``x-xdsclient-error``."""
    _, _, finish = _run(_routes(), [AttemptOutcome(connect_failure=True, details="refused")])
    assert finish.reply is not None
    assert finish.reply.status == 503
    assert finish.reply.body == (
        b"upstream connect error or disconnect/reset before headers. "
        b"reset reason: connection failure"
    )
    assert dict(finish.reply.headers)["x-xdsclient-error"] == "refused"
    _, _, finish = _run(_routes("connect-failure", num_retries=1), [RESET])
    assert finish.reply is not None
    assert finish.reply.body.endswith(b"reset reason: remote reset")


def test_a_local_answer_of_the_front_end_is_never_retried() -> None:
    """An attempt the front end answered itself (no healthy upstream) ends the request with
    that answer, whatever the policy."""
    no_upstream = LocalReply.error(503, "no healthy upstream", b"no healthy upstream")
    _, attempts, finish = _run(_routes("5xx", num_retries=3), [AttemptOutcome(reply=no_upstream)])
    assert len(attempts) == 1
    assert finish.reply == no_upstream


def test_a_committed_attempt_is_never_retried() -> None:
    """An attempt whose response already reached the caller is not retried."""
    outcome = AttemptOutcome(http_status=503, committed=True)
    _, attempts, _ = _run(_routes("5xx", num_retries=3), [outcome])
    assert len(attempts) == 1


def test_outcome_codes_are_derived_for_load_reports() -> None:
    """An HTTP outcome's code: OK below 500, an error for a 5xx or no response."""
    assert AttemptOutcome(http_status=404).code.name == "OK"
    assert AttemptOutcome(http_status=503).code.name == "UNAVAILABLE"
    assert AttemptOutcome(http_status=500).code.name == "UNKNOWN"
    assert AttemptOutcome(reset=True).code.name == "UNAVAILABLE"
    assert AttemptOutcome(timed_out=True).code.name == "DEADLINE_EXCEEDED"
