"""Deadlines as data: a heap of (when, key) with cancellation, and `expire(now)`.

Why: the protocol core never sleeps or reads a clock. It records *when* something must happen
(a does-not-exist verdict, a TTL expiry) and the shell asks `next_deadline()` to know how long it
may sleep, then calls `expire(now)`. Same idea as trio's `Deadlines`.

Invariant: a key has at most one live deadline. Re-arming or cancelling a key leaves its old heap
entry behind as a tombstone; tombstones are skipped (and dropped) when they reach the top, and
the heap is rebuilt when they outnumber live entries, so memory stays proportional to live keys.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["Deadlines"]

K = TypeVar("K", bound=Hashable)


class Deadlines(Generic[K]):
    """Deadlines keyed by ``K``; each key has at most one live deadline."""

    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        # key -> (when, seq) of its live heap entry
        self._live: dict[K, tuple[float, int]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def when(self, key: K) -> float | None:
        """The live deadline of ``key``, or None."""
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def arm(self, key: K, when: float) -> None:
        """Set (or move) the deadline of ``key`` to ``when``."""
        self._seq += 1
        self._live[key] = (when, self._seq)
        heapq.heappush(self._heap, (when, self._seq, key))
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._live):
            self._compact()

    def cancel(self, key: K) -> bool:
        """Forget the deadline of ``key``; returns whether there was one."""
        return self._live.pop(key, None) is not None

    def next_deadline(self) -> float | None:
        """The earliest live deadline, or None when nothing is armed."""
        heap = self._heap
        while heap:
            when, seq, key = heap[0]
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                return when
            heapq.heappop(heap)
        return None

    def expire(self, now: float) -> list[K]:
        """Remove and return, earliest first, every key whose deadline is at or before ``now``."""
        due: list[K] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, seq, key = heapq.heappop(heap)
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                del self._live[key]
                due.append(key)
        return due

    def _compact(self) -> None:
        self._heap = [(when, seq, key) for key, (when, seq) in self._live.items()]
        heapq.heapify(self._heap)
