"""A clock that moves only when told to, for testing timing without waiting.

Why: does-not-exist timers, TTLs, backoff and slow-watcher warnings are all deadlines. With
`FakeClock` a test says "15 seconds pass" and sees at once what fired, and that nothing fired
before; no test sleeps.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

__all__ = ["FakeClock"]


class FakeClock:
    """A `Clock` whose time changes only through `advance` (or `set`).

    Sleepers wake in deadline order as time passes them. Pass it to ``XdsClient(clock=...)``
    together with a `FakeTransport`, so that nothing in the client waits on real time.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def time(self) -> float:
        """The fake time, in seconds."""
        return self._now

    async def sleep_until(self, when: float) -> None:
        """Wait until the fake time reaches ``when``; at once (after one yield) when it has."""
        if when <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (when, next(self._seq), future))
        await future

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and wake everyone whose deadline passed."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self.set(self._now + seconds)

    def set(self, now: float) -> None:
        """Move time forward to ``now`` and wake everyone whose deadline passed."""
        if now < self._now:
            raise ValueError("a clock does not go backwards")
        self._now = now
        while self._sleepers and self._sleepers[0][0] <= now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)
