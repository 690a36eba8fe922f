"""The suite's shared waits: `eventually` (what it returns, what it awaits, how it fails) and
`idle` (it runs the loop as long as anything is ready, and no longer)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.helpers import eventually, idle


async def test_eventually_returns_the_first_truthy_value_of_the_condition() -> None:
    """The condition is asked again until it holds, and its value is handed back."""
    answers: Iterator[object] = iter([None, [], {"a": 1}])
    assert await eventually(lambda: next(answers)) == {"a": 1}


async def test_eventually_awaits_a_condition_that_returns_an_awaitable() -> None:
    """An async condition (a fetch over gRPC, say) is awaited on each try."""
    calls: list[int] = []

    async def fetched() -> int | None:
        calls.append(1)
        await asyncio.sleep(0)
        return len(calls) if len(calls) == 3 else None

    assert await eventually(fetched) == 3


async def test_eventually_fails_naming_the_condition_and_its_last_value() -> None:
    """When time is up the test fails with one line naming the lambda's text and what it last
    returned (no wait: a timeout of 0 ends at the first poll)."""
    seen: list[int] = []
    with pytest.raises(pytest.fail.Exception) as failed:
        await eventually(lambda: len(seen) == 2, timeout=0)
    assert str(failed.value) == "waited 0 s for lambda: len(seen) == 2; last it was False"


async def test_eventually_fails_naming_what_it_was_told() -> None:
    """``what`` replaces the condition's text, as for a named function."""

    def never() -> bool:
        return False

    with pytest.raises(pytest.fail.Exception) as failed:
        await eventually(never, 0, what="the cluster to arrive")
    assert str(failed.value) == "waited 0 s for the cluster to arrive; last it was False"
    with pytest.raises(pytest.fail.Exception) as failed:
        await eventually(never, 0)
    assert "for test_eventually_fails_naming_what_it_was_told.<locals>.never;" in str(failed.value)


async def test_a_timeout_raised_by_the_condition_itself_is_not_reported_as_ours() -> None:
    """A condition's own TimeoutError (an RPC deadline) propagates as it is."""

    def times_out() -> bool:
        raise TimeoutError("the RPC's own deadline")

    with pytest.raises(TimeoutError, match="own deadline"):
        await eventually(times_out)


async def test_idle_runs_a_chain_of_tasks_longer_than_any_fixed_count_of_turns() -> None:
    """A hand-off through 500 tasks (each waking the next) is complete when idle returns: it
    waits for the loop to have nothing ready, not for a number of turns."""
    hops = 500
    events = [asyncio.Event() for _ in range(hops + 1)]
    done: list[int] = []

    async def hop(i: int) -> None:
        await events[i].wait()
        done.append(i)
        events[i + 1].set()

    tasks = [asyncio.create_task(hop(i)) for i in range(hops)]
    events[0].set()
    await idle()
    assert done == list(range(hops))
    assert all(task.done() for task in tasks)


async def test_idle_returns_while_a_task_waits_on_what_only_the_test_can_do() -> None:
    """A task blocked on a future nobody completes does not keep the loop busy."""
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiter = asyncio.create_task(asyncio.wait_for(never, None))
    await idle()
    assert not waiter.done()
    never.set_result(None)
    await idle()
    assert waiter.done()


async def test_idle_fails_naming_a_task_that_never_waits() -> None:
    """A task spinning on ``sleep(0)`` keeps the loop busy: idle fails and names it."""

    async def spin() -> None:
        while True:
            await asyncio.sleep(0)

    spinner = asyncio.create_task(spin(), name="spinner")
    try:
        with pytest.raises(pytest.fail.Exception) as failed:
            await idle(turns=50)
    finally:
        spinner.cancel()
    assert str(failed.value).startswith("the loop was still busy after 50 turns; ready to run: ")
    assert "spinner" in str(failed.value)
