"""`follow_plan`, the loop both front ends drive a call's plan with, on a `FakeClock`: a real
`CallPlan` with retries followed through its attempts and backoff."""

from __future__ import annotations

import asyncio
import random

from tests.call.builders import add_route, call, config, route_config
from xdsclient._call import (
    ActiveFaults,
    Attempt,
    AttemptOutcome,
    CallPlan,
    Code,
    Finish,
    Status,
)
from xdsclient._call._plan import Step
from xdsclient._plane import follow_plan
from xdsclient.testing import FakeClock


def _retried_plan(clock: FakeClock) -> CallPlan:
    routes = route_config()
    route = add_route(routes.virtual_hosts[0], "/pkg.Svc/", "backend")
    route.route.retry_policy.retry_on = "unavailable"
    route.route.retry_policy.num_retries.value = 2
    return CallPlan.begin(
        call(deadline=100.0),
        config(routes),
        now=clock.time(),
        rng=random.Random(0),
        faults=ActiveFaults(),
    )


async def test_a_retried_call_sleeps_out_its_backoff_and_returns_the_finish() -> None:
    """An attempt that fails is told to the plan by the front end's ``attempt``; the loop then
    sleeps until the backoff's end on the front end's ``sleep_until`` (the fake time stands
    still until advanced), makes attempt 2, and returns the plan's finish."""
    clock = FakeClock(10.0)
    plan = _retried_plan(clock)
    attempts: list[int] = []
    sleeps: list[float] = []
    codes = iter([Code.UNAVAILABLE, Code.OK])

    async def attempt(step: Attempt) -> Step:
        attempts.append(step.number)
        return plan.attempt_done(AttemptOutcome(code=next(codes)), clock.time())

    async def sleep_until(until: float) -> None:
        sleeps.append(until)
        await clock.sleep_until(until)

    first = plan.start(clock.time())
    following = asyncio.create_task(follow_plan(plan, first, attempt, sleep_until, clock.time))
    for _ in range(5):
        await asyncio.sleep(0)
    assert attempts == [1]
    assert len(sleeps) == 1
    assert sleeps[0] > 10.0  # the backoff, not yet over
    assert not following.done()
    clock.advance(sleeps[0] - 10.0)
    finish = await asyncio.wait_for(following, 5)
    assert attempts == [1, 2]
    assert finish == Finish(status=Status(code=Code.OK), at=sleeps[0])
