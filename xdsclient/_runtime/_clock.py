"""Clocks: where the shell reads the time and sleeps.

Why an interface: the protocol core takes ``now`` as an argument; the shell is the only place
that reads a clock or sleeps, and it does both through a `Clock`. The real one is the event
loop's monotonic clock; `xdsclient.testing.FakeClock` moves only when a test advances it, so
timers, backoff and TTLs are tested in no real time and "nothing happened" is a fact, not a wait.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "LoopClock"]


@runtime_checkable
class Clock(Protocol):
    """A monotonic clock in seconds, and a way to sleep on it."""

    def time(self) -> float:
        """Now."""
        ...

    async def sleep_until(self, when: float) -> None:
        """Return once `time` is at or past ``when`` (at once if it already is)."""
        ...


class LoopClock:
    """The running event loop's clock (``loop.time()``)."""

    def time(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep_until(self, when: float) -> None:
        delay = when - self.time()
        await asyncio.sleep(max(0.0, delay))
