"""Helpers every part of the suite shares.

`eventually` is the one way an end-to-end test waits for something to *happen* over real gRPC,
files or HTTP, where no event announces it: it polls a condition on the loop until it holds or a
timeout passes, and then fails naming what it waited for and what it saw last. It never shows
that something does *not* happen (a wait that passes by timing out proves nothing): such a test
runs on `xdsclient.testing.FakeClock` and `FakeTransport` instead.

`idle` is how such a fake-clock test lets the client react: it runs the loop until nothing is
ready to run (every task waits on a future only the test, or the fake clock, can complete), however
many turns that takes, and fails if the loop never gets there. What the test then sees is all
that will ever happen until it acts again, so it can assert that something did *not* happen.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

import pytest

__all__ = ["described", "eventually", "idle"]

T = TypeVar("T")

#: How often `eventually` asks again, in seconds of real time.
POLL_INTERVAL = 0.01

#: How many loop turns `idle` allows before it calls the loop busy (a task that never waits).
IDLE_TURNS = 10_000


@overload
async def eventually(
    condition: Callable[..., Awaitable[T | None]],
    timeout: float = ...,
    *,
    what: str | None = ...,
    interval: float = ...,
) -> T: ...


@overload
async def eventually(
    condition: Callable[..., T | None],
    timeout: float = ...,
    *,
    what: str | None = ...,
    interval: float = ...,
) -> T: ...


async def eventually(
    condition: Callable[..., Any],
    timeout: float = 5.0,
    *,
    what: str | None = None,
    interval: float = POLL_INTERVAL,
) -> Any:
    """The first truthy value of ``condition()`` (awaited when it returns an awaitable), asked
    every ``interval`` seconds; the test fails after ``timeout`` seconds, naming ``what`` (by
    default the condition's source) and the last value it returned."""
    last: object = "(no answer yet)"
    try:
        async with asyncio.timeout(timeout) as scope:
            while True:
                value = condition()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value
                last = value
                await asyncio.sleep(interval)
    except TimeoutError:
        if not scope.expired():
            raise  # the condition's own timeout: not ours to describe
    pytest.fail(
        f"waited {timeout} s for {what or described(condition)}; last it was {last!r}",
        pytrace=False,
    )


def described(condition: Callable[..., object]) -> str:
    """A lambda's own text, from ``lambda`` to where its call's argument ends, else the
    function's name."""
    name = getattr(condition, "__qualname__", repr(condition))
    if name.rpartition(".")[2] != "<lambda>":
        return name
    try:
        text = " ".join(inspect.getsource(condition).split())
    except (OSError, TypeError):
        return name
    start = text.find("lambda")
    if start < 0:
        return name
    depth = 0
    for end in range(start, len(text)):
        char = text[end]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if depth < 0 or (depth == 0 and char == ","):
            return text[start:end]
    return text[start:]


async def idle(turns: int = IDLE_TURNS) -> None:
    """Run the event loop until no callback is ready: every other task waits on a future that
    only the test (a `FakeStream` it feeds, a `FakeClock` it advances) can complete. Fails after
    ``turns`` turns of a loop that is still busy, naming the tasks that were ready to run.

    Deterministic for a test on `FakeTransport`: no socket, thread or real timer can make
    anything ready later, so once the loop is idle, nothing more happens until the test acts.
    """
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)  # asyncio's own loops keep the run queue here
    if ready is None:
        raise RuntimeError(f"idle() needs an asyncio event loop, not {type(loop).__name__}")
    for _ in range(turns):
        await asyncio.sleep(0)
        if not ready and not _timer_due(loop):
            return
    busy = sorted(_runnable(asyncio.current_task()))
    pytest.fail(
        f"the loop was still busy after {turns} turns; ready to run: {', '.join(busy) or '?'}",
        pytrace=False,
    )


def _timer_due(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether a timer (``call_soon`` in disguise: ``call_later(0, ...)``) is already due."""
    now = loop.time()
    return any(not t.cancelled() and t.when() <= now for t in getattr(loop, "_scheduled", ()))


def _runnable(me: asyncio.Task[Any] | None) -> list[str]:
    """The names of the tasks, other than ``me``, not waiting on an unfinished future."""
    names = []
    for task in asyncio.all_tasks():
        waiter = getattr(task, "_fut_waiter", None)
        if task is not me and (waiter is None or waiter.done()):
            names.append(f"{task.get_name()} ({task.get_coro()!r})")
    return names
