"""The loop that follows a `CallPlan` from a step to its `Finish`, for every front end.

Why one function: the plan decides every step (attempt, delay, backoff, finish) and what is
left is the same for the gRPC channel and the HTTP transport: run an attempt and hand the plan
its outcome, sleep until a delay or a backoff ends and tell the plan it did, and sleep until
the finish is due. What differs (how an attempt is picked, sent and told to the plan, how a
front end sleeps and fails when it closes meanwhile) comes in as callables, so a front end's
driver is its own coroutine's caller only: following a plan adds no coroutine between the
call's driver and its attempt (each is entered again at every resume).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .._call import Attempt, CallPlan, Delay, Finish, RetryAt
from .._call._plan import Step

__all__ = ["follow_plan"]


async def follow_plan(
    plan: CallPlan,
    step: Step,
    attempt: Callable[[Attempt], Awaitable[Step]],
    sleep_until: Callable[[float], Awaitable[None]],
    clock: Callable[[], float],
) -> Finish:
    """Follow ``plan`` from ``step`` to its `Finish`, returned once it is due.

    ``attempt`` runs an attempt and returns the plan's next step (it tells the plan the
    attempt's outcome itself: a front end may amend the outcome or drop a response around
    it); ``sleep_until`` waits until a time of ``clock`` (raising when the front end closes
    meanwhile)."""
    while True:
        if isinstance(step, Attempt):
            step = await attempt(step)
        elif isinstance(step, Delay):
            await sleep_until(step.until)
            step = plan.delay_elapsed(clock())
        elif isinstance(step, RetryAt):
            await sleep_until(step.at)
            step = plan.backoff_elapsed(clock())
        else:
            assert isinstance(step, Finish)
            if step.at > clock():
                await sleep_until(step.at)
            return step
