"""The cyclic garbage collector, paused while one response is decoded or one walk runs.

Why: decoding a response of N resources allocates several objects per resource, all of which
live on in the cache. Each 700 allocations start a young collection, every 10 of those an older
one, and as the heap grows CPython runs full collections that traverse every object of the
process: at N=10,000 about a quarter of an update went to collections that free nothing. With
the collector paused for the synchronous decode, the allocations of one response cost at most
one young collection afterwards.

Safe because the pause covers synchronous code only (no await: no other task runs in it), or
(the driver's `CollectorHold`) one response's step and what follows from it, up to a bound; it
restores the state it found (an application that disabled the collector keeps it disabled),
and it frees nothing late that matters: garbage made meanwhile is collected by the next
collection, as it would have been by the one it skipped.

Why a hold across awaits: in a full load each response leads to the next request (the routes
name the clusters to ask for, the clusters their assignments). Resumed at each ACK, the
collector ran its young collections over the response's objects (and, every tenth, an older
one over the walk's: 1.7 ms at N=1,000) between the ACK and the walk that makes the next
request, on the path of every round trip. Held for `HOLD_LIMIT` from a response, over the
ones that follow meanwhile, it collects once after them (after the last ACK of a full load
of N=1,000) instead.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["HOLD_LIMIT", "CollectorHold", "gc_paused"]

#: How long a `CollectorHold` keeps the collector paused (seconds): the round trips of a full
#: load of N=1,000 fit in it; garbage cycles made meanwhile wait no longer than this.
HOLD_LIMIT = 0.1


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block, if it is running."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class CollectorHold:
    """The collector paused from `hold` until the first `release` past `HOLD_LIMIT` (or one
    without a time), across awaits: a stream driver holds it from a response's arrival,
    through its ACK, its watchers, the requests they made and the responses that follow
    meanwhile. Like `gc_paused`, it resumes the collector only if it found it running."""

    __slots__ = ("_resume", "deadline")

    def __init__(self) -> None:
        self._resume = False
        #: when the hold ends at the latest (None: not holding)
        self.deadline: float | None = None

    def hold(self, now: float) -> None:
        """Pause the collector until `release`, ``now + HOLD_LIMIT`` at the latest; holding
        already, keep the first deadline."""
        if self.deadline is None:
            self.deadline = now + HOLD_LIMIT
            self._resume = gc.isenabled()
            gc.disable()

    def release(self, now: float | None = None) -> None:
        """Resume the collector as `hold` found it; with ``now``, only once the deadline
        passed."""
        if self.deadline is None or (now is not None and now < self.deadline):
            return
        self.deadline = None
        if self._resume:
            gc.enable()
