"""The HTTP fault filter under `HTTP_RULES`: aborts answer their HTTP status, delays come
first, header control, percentages within a statistical bound, ``max_active_faults`` and the
per-route overrides (the same fault policies as gRPC's)."""

from __future__ import annotations

import random
from typing import Any

from envoy.config.route.v3 import route_pb2

from xdsclient._call import (
    FAULT_ABORT_BODY,
    ActiveFaults,
    Attempt,
    CallPlan,
    Code,
    Delay,
    Finish,
    LocalReply,
    Status,
)

from .builders import add_route, call, config, fault, http, http_plan, override


def _routes() -> Any:
    routes = route_pb2.RouteConfiguration(name="routes")
    add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", "backend")
    return routes


def _abort_reply(plan: CallPlan, now: float = 0.0) -> LocalReply | None:
    step = plan.start(now)
    if isinstance(step, Delay):
        step = plan.delay_elapsed(step.until)
    if isinstance(step, Attempt):
        return None
    assert isinstance(step, Finish)
    return step.reply


def test_an_http_status_abort_answers_that_status() -> None:
    """An ``http_status`` abort answers it with Envoy's ``fault filter abort`` body, before
    any attempt."""
    faults = (fault(abort_http=503, abort_percent=(100, 0)),)
    plan = http_plan(_routes(), faults=faults)
    assert _abort_reply(plan) == LocalReply(status=503, body=FAULT_ABORT_BODY)
    assert plan.attempts == []


def test_a_grpc_status_abort_answers_a_grpc_error() -> None:
    """An abort with only a ``grpc_status`` answers 200 with ``grpc-status``, as Envoy's local
    reply to a gRPC request."""
    plan = http_plan(_routes(), faults=(fault(abort_grpc=14, abort_percent=(100, 0)),))
    reply = _abort_reply(plan)
    assert reply is not None
    assert reply.status == 200
    assert ("grpc-status", "14") in reply.headers


def test_grpc_rules_still_fail_with_the_status() -> None:
    """The same filter under gRPC's rules fails the call with the mapped status and no
    reply."""
    faults = (fault(abort_http=503, abort_percent=(100, 0)),)
    plan = CallPlan.begin(
        call(),
        config(_routes(), faults=faults),
        now=0.0,
        rng=random.Random(0),
        faults=ActiveFaults(),
    )
    step = plan.start(0.0)
    assert step == Finish(status=Status(code=Code.UNAVAILABLE, details="Fault injected"), at=0.0)


def test_a_delay_comes_before_the_attempt() -> None:
    """A fixed delay: the request waits, then is sent."""
    plan = http_plan(_routes(), faults=(fault(delay_s=0.25, delay_percent=(100, 0)),), now=5.0)
    assert plan.start(5.0) == Delay(until=5.25)
    assert isinstance(plan.delay_elapsed(5.25), Attempt)


def test_header_controlled_abort_and_delay() -> None:
    """``header_abort`` / ``header_delay``: ``x-envoy-fault-abort-request`` names the status
    and ``x-envoy-fault-delay-request`` the delay in milliseconds; a header that does not
    parse is ignored."""
    faults = (
        fault(header_abort=True, abort_percent=(100, 0), header_delay=True, delay_percent=(100, 0)),
    )
    headers = (("x-envoy-fault-abort-request", "429"), ("x-envoy-fault-delay-request", "40"))
    plan = http_plan(_routes(), http(headers=headers), faults=faults)
    assert plan.start(0.0) == Delay(until=0.04)
    finish = plan.delay_elapsed(0.04)
    assert isinstance(finish, Finish)
    assert finish.reply == LocalReply(status=429, body=FAULT_ABORT_BODY)
    bad = (("x-envoy-fault-abort-request", "4x9"), ("x-envoy-fault-delay-request", "-1"))
    assert isinstance(http_plan(_routes(), http(headers=bad), faults=faults).start(0.0), Attempt)


def _share_aborted(
    faults: tuple[Any, ...], n: int, headers: tuple[tuple[str, str], ...] = ()
) -> float:
    aborted = 0
    for seed in range(n):
        plan = http_plan(_routes(), http(headers=headers), faults=faults, seed=seed)
        aborted += _abort_reply(plan) is not None
    return aborted / n


def test_abort_percentage_within_a_statistical_bound() -> None:
    """A 25 % abort aborts 25 % of 4,000 seeded requests, within four standard deviations."""
    n = 4000
    share = _share_aborted((fault(abort_http=500, abort_percent=(25, 0)),), n)
    assert abs(share - 0.25) < 4 * (0.25 * 0.75 / n) ** 0.5, share


def test_the_percentage_header_lowers_the_configured_percentage() -> None:
    """``x-envoy-fault-abort-request-percentage`` sets the numerator, never above the
    configured one: 10 of a configured 50 aborts about 10 %."""
    n = 4000
    faults = (fault(header_abort=True, abort_percent=(50, 0)),)
    headers = (
        ("x-envoy-fault-abort-request", "503"),
        ("x-envoy-fault-abort-request-percentage", "10"),
    )
    share = _share_aborted(faults, n, headers)
    assert abs(share - 0.10) < 4 * (0.1 * 0.9 / n) ** 0.5, share
    headers = (
        ("x-envoy-fault-abort-request", "503"),
        ("x-envoy-fault-abort-request-percentage", "90"),
    )
    share = _share_aborted(faults, n, headers)
    assert abs(share - 0.5) < 4 * (0.25 / n) ** 0.5, share


def test_max_active_faults_limits_concurrent_delays() -> None:
    """``max_active_faults`` 1: a second request while one is delayed is not delayed; once
    the first ends, the next is."""
    active = ActiveFaults()
    faults = (fault(delay_s=1.0, delay_percent=(100, 0), max_active=1),)
    first = http_plan(_routes(), faults=faults, active=active)
    assert isinstance(first.start(0.0), Delay)
    second = http_plan(_routes(), faults=faults, active=active)
    assert isinstance(second.start(0.1), Attempt)
    first.delay_elapsed(1.0)
    third = http_plan(_routes(), faults=faults, active=active)
    assert isinstance(third.start(1.1), Delay)


def test_a_per_route_override_replaces_the_filters_config() -> None:
    """A route's ``typed_per_filter_config`` replaces the filter's config for its requests."""
    routes = route_pb2.RouteConfiguration(name="routes")
    vhost = routes.virtual_hosts.add(name="vh", domains=["*"])
    quiet = add_route(vhost, "/quiet", "backend")
    quiet.typed_per_filter_config["fault0"].Pack(override(fault()))
    teapot = add_route(vhost, "/teapot", "backend")
    teapot.typed_per_filter_config["fault0"].Pack(
        override(fault(abort_http=418, abort_percent=(100, 0)))
    )
    add_route(vhost, "/", "backend")
    faults = (fault(abort_http=503, abort_percent=(100, 0)),)
    assert _abort_reply(http_plan(routes, http("/quiet"), faults=faults)) is None
    assert _abort_reply(http_plan(routes, http("/teapot"), faults=faults)) == LocalReply(
        status=418, body=FAULT_ABORT_BODY
    )
    assert _abort_reply(http_plan(routes, http("/x"), faults=faults)) == LocalReply(
        status=503, body=FAULT_ABORT_BODY
    )
