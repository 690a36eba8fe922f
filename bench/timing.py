"""Timed measurements shared by the benchmarks that compare a client of ours with a plain one
(bench/http.py, bench/channel.py, bench/client_stream.py): latencies, throughput, their rounds
summed up as a table's cells against the plain client, and the paired CPU difference.

Why shared: each benchmark measured the same way (sequential latencies, a fixed number of
calls by a pool of tasks, ratios as the median of each round's ratio, pairs that alternate
which client goes first), and a fix to one of them belongs to all; the counts that the
machine's load does not change are in bench/counting.py.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

import attrs

__all__ = [
    "CONCURRENCY",
    "Sample",
    "cells",
    "latencies",
    "measured",
    "paired_cpu",
    "percentile",
    "quartiles",
    "throughput",
]

#: the tasks that make the calls of a throughput run
CONCURRENCY = 64
Call = Callable[[], Awaitable[None]]


@attrs.frozen
class Sample:
    """One client's measurements in one round."""

    #: seconds each sequential call took
    latencies: list[float]
    #: calls per second at `CONCURRENCY`
    per_second: float
    #: CPU seconds per call at `CONCURRENCY`
    cpu_per_call: float


async def latencies(call: Call, count: int) -> list[float]:
    """Seconds each of ``count`` sequential calls took."""
    out = []
    clock = time.perf_counter
    for _ in range(count):
        start = clock()
        await call()
        out.append(clock() - start)
    return out


async def throughput(call: Call, count: int, concurrency: int = CONCURRENCY) -> tuple[float, float]:
    """(calls per second, CPU seconds per call) of ``count`` calls by ``concurrency`` tasks."""
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return count / wall, cpu / count


async def measured(call: Call, latency_count: int, throughput_count: int) -> Sample:
    """One round of ``call``: ``latency_count`` sequential calls, then ``throughput_count``
    calls at `CONCURRENCY`."""
    took = await latencies(call, latency_count)
    return Sample(took, *await throughput(call, throughput_count))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (the nearest rank below)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cells(rounds: Sequence[Sample], base: Sequence[Sample]) -> str:
    """A client's table cells over its ``rounds`` against the plain client's (``base``, the
    same rounds): p50 and p99 us (latencies pooled over the rounds), calls per second (the
    median round), CPU us per call (the best round: load from elsewhere only adds to it), and
    the p50 and calls-per-second ratios (the median of each round's ratio, measured minutes
    apart at most)."""
    took = [t for sample in rounds for t in sample.latencies]
    per_second = statistics.median(sample.per_second for sample in rounds)
    per_call = min(sample.cpu_per_call for sample in rounds)
    pairs = list(zip(rounds, base, strict=True))
    p50_ratio = statistics.median(
        statistics.median(ours.latencies) / statistics.median(plain.latencies)
        for ours, plain in pairs
    )
    rate_ratio = statistics.median(ours.per_second / plain.per_second for ours, plain in pairs)
    return (
        f"| {statistics.median(took) * 1e6:.0f} | {percentile(took, 0.99) * 1e6:.0f} "
        f"| {per_second:.0f} | {per_call * 1e6:.1f} | {p50_ratio:.2f}x | {rate_ratio:.2f}x |"
    )


async def paired_cpu(plain: Call, ours: Call, pairs: int, count: int) -> list[float]:
    """CPU seconds per call that ``ours`` takes beyond ``plain``: ``pairs`` times, ``count``
    calls of each back to back (which goes first alternates), the difference of the two."""
    extra = []
    for pair in range(pairs):
        first, second = (plain, ours) if pair % 2 else (ours, plain)
        a = (await throughput(first, count))[1]
        b = (await throughput(second, count))[1]
        extra.append(b - a if first is plain else a - b)
    return extra


def quartiles(extra: Sequence[float]) -> str:
    """``extra`` seconds in words: its median and quartiles in us."""
    return (
        f"{statistics.median(extra) * 1e6:.1f} us (quartiles "
        f"{percentile(extra, 0.25) * 1e6:.1f} to {percentile(extra, 0.75) * 1e6:.1f})"
    )
