"""Deadlines as data: a heap of batches of keys with cancellation, and `expire(now)`.

Why: the protocol core never sleeps or reads a clock. It records *when* something must happen
(a does-not-exist verdict, a TTL expiry) and the shell asks `next_deadline()` to know how long it
may sleep, then calls `expire(now)`. Same idea as trio's `Deadlines`.

Why batches: a request naming 10,000 new resources starts 10,000 does-not-exist timers with one
deadline, and their resources usually arrive together and cancel them all. `arm_all` files them
as one heap entry sharing one ``(when, seq)`` value, not one heap entry and two tuples per key.

Invariant: a key has at most one live deadline, in exactly one batch. Re-arming or cancelling a
key leaves it behind in its old batch as a tombstone; a batch whose keys are all tombstones is
dropped when it reaches the top of the heap, and the batches are compacted when tombstones
outnumber live keys, so memory stays proportional to live keys. Keys due at the same time
expire in the order they were armed.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Iterator
from typing import Generic, TypeVar

__all__ = ["Deadlines"]

K = TypeVar("K", bound=Hashable)


class _Batch(Generic[K]):
    """Keys armed together; ``keys[start:]`` may still hold live ones."""

    __slots__ = ("entry", "keys", "start")

    def __init__(self, entry: tuple[float, int], keys: list[K]) -> None:
        self.entry = entry  # (when, seq): shared by the live keys of this batch in `_live`
        self.keys = keys
        self.start = 0


class Deadlines(Generic[K]):
    """Deadlines keyed by ``K``; each key has at most one live deadline."""

    __slots__ = ("_batches", "_filed", "_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []  # (when, seq) of every batch
        self._batches: dict[int, _Batch[K]] = {}  # by seq
        self._live: dict[K, tuple[float, int]] = {}  # key -> its live batch's entry
        self._filed = 0  # keys in batches, live or not
        self._seq = 0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def __iter__(self) -> Iterator[K]:
        """The live keys."""
        return iter(self._live)

    def when(self, key: K) -> float | None:
        """The live deadline of ``key``, or None."""
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def arm(self, key: K, when: float) -> None:
        """Set (or move) the deadline of ``key`` to ``when``."""
        self.arm_all((key,), when)

    def arm_all(self, keys: Iterable[K], when: float) -> None:
        """Set (or move) the deadline of every key to ``when``: one heap entry for all."""
        batch = list(keys)
        if not batch:
            return
        self._seq += 1
        entry = (when, self._seq)
        live = self._live
        for key in batch:
            live[key] = entry
        self._batches[self._seq] = _Batch(entry, batch)
        heapq.heappush(self._heap, entry)
        self._filed += len(batch)
        if self._filed > 64 and self._filed > 2 * len(live):
            self._compact()

    def cancel(self, key: K) -> bool:
        """Forget the deadline of ``key``; returns whether there was one. The last one
        cancelled lets go of the table (a dict keeps its size when emptied: 0.3 MiB after the
        does-not-exist timers of 10,000 names)."""
        live = self._live
        if live.pop(key, None) is None:
            return False
        if not live:
            self._live = {}
        return True

    def next_deadline(self) -> float | None:
        """The earliest live deadline, or None when nothing is armed."""
        heap = self._heap
        while heap:
            when, seq = heap[0]
            if self._has_live(self._batches[seq]):
                return when
            heapq.heappop(heap)
            self._drop(seq)
        return None

    def expire(self, now: float) -> list[K]:
        """Remove and return, earliest first, every key whose deadline is at or before ``now``."""
        due: list[K] = []
        heap = self._heap
        live = self._live
        while heap and heap[0][0] <= now:
            _, seq = heapq.heappop(heap)
            batch = self._drop(seq)
            for key in batch.keys[batch.start :]:
                if live.get(key) is batch.entry:
                    del live[key]
                    due.append(key)
        return due

    def _has_live(self, batch: _Batch[K]) -> bool:
        """Whether any key of ``batch`` is live; skips (for good) the dead ones in front."""
        live, keys, entry = self._live, batch.keys, batch.entry
        while batch.start < len(keys):
            if live.get(keys[batch.start]) is entry:
                return True
            batch.start += 1
            self._filed -= 1
        return False

    def _drop(self, seq: int) -> _Batch[K]:
        batch = self._batches.pop(seq)
        self._filed -= len(batch.keys) - batch.start
        return batch

    def _compact(self) -> None:
        """Keep only live keys, each batch's in their order; drop emptied batches."""
        live = self._live
        batches: dict[int, _Batch[K]] = {}
        for seq, batch in self._batches.items():
            keys = [key for key in batch.keys[batch.start :] if live.get(key) is batch.entry]
            if keys:
                batches[seq] = _Batch(batch.entry, keys)
        self._batches = batches
        self._heap = [batch.entry for batch in batches.values()]
        heapq.heapify(self._heap)
        self._filed = sum(len(batch.keys) for batch in batches.values())
