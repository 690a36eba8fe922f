"""Helpers every part of the suite shares.

`eventually` is the one way an end-to-end test waits for something to *happen* over real gRPC,
files or HTTP, where no event announces it: it polls a condition on the loop until it holds or a
timeout passes, and then fails naming what it waited for and what it saw last. It never shows
that something does *not* happen (a wait that passes by timing out proves nothing): such a test
runs on `xdsclient.testing.FakeClock` and `FakeTransport` instead.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

import pytest

__all__ = ["eventually"]

T = TypeVar("T")

#: How often `eventually` asks again, in seconds of real time.
POLL_INTERVAL = 0.01


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
        f"waited {timeout} s for {what or _source(condition)}; last it was {last!r}",
        pytrace=False,
    )


def _source(condition: Callable[..., object]) -> str:
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
