"""Benchmark: `XdsTransport` against a plain ``httpx.AsyncClient`` over the same backend.

One HTTP/1.1 backend (`xdsclient.testing.HttpBackend`, hypercorn, in a child process so its CPU
is not this process's) answers ``GET /bench`` on 127.0.0.1. The test control plane (in this
process, idle while requests run) routes listener ``bench`` to it through one round-robin EDS
cluster. Two clients send the same requests:

- ``plain``: ``httpx.AsyncClient()`` to ``http://127.0.0.1:<port>/bench``;
- ``XdsTransport``: ``httpx.AsyncClient(transport=XdsTransport("bench", client=...))`` to
  ``http://bench.svc/bench``.

For each: p50/p99 latency at concurrency 1 (``--latency-requests`` sequential requests) and
requests per second at concurrency 64 (``--throughput-requests`` requests by 64 tasks). The
machine may be shared, so the clients run interleaved, round by round (``--rounds``, each
starting with the other client); latencies pool every round, throughput is the median of the
rounds, and the ratios against plain are the medians of the rounds' ratios.

Our CPU per request: ``--pairs`` pairs of back-to-back concurrency-64 runs of both clients
(which goes first alternates); each pair gives XdsTransport's process CPU per request minus
plain httpx's, and the median of the pairs counts. What the difference holds: the request's
plan (route, timeout, retry policy, hash), the pick, the attempt's request and response
objects, and the picker's and load report's bookkeeping; both send on an httpcore pool.
``--profile`` also counts the Python function calls per request of each client under cProfile
(a count the machine's load does not change).

    python bench/http.py [--rounds 6] [--latency-requests 300] [--throughput-requests 1500]

(Run as a script, this file's folder comes first on ``sys.path``, where its own name would
hide the standard library's ``http`` from httpx: it takes itself off before importing httpx.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import pstats
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import attrs
import httpx

from xdsclient import XdsClient
from xdsclient.httpx import XdsTransport
from xdsclient.testing import ControlPlane, builders

LISTENER = "bench"
CONCURRENCY = 64

_SERVER = r"""
import asyncio, sys
from xdsclient.testing import http_backends
async def main():
    async with http_backends(names=("bench",)) as (backend,):
        print(backend.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""


@contextlib.asynccontextmanager
async def backend() -> AsyncIterator[int]:
    """The backend's port, served by a child process until the context ends."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SERVER,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        yield int(await asyncio.wait_for(process.stdout.readline(), 30))
    finally:
        process.stdin.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), 5)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def resources(port: int) -> list[Any]:
    return [
        builders.api_listener(LISTENER),
        builders.route_configuration(f"{LISTENER}-routes", "bench-cluster"),
        builders.cluster("bench-cluster"),
        builders.cluster_load_assignment("bench-cluster", [("127.0.0.1", port)]),
    ]


def requester(http: httpx.AsyncClient, url: str) -> Callable[[], Awaitable[None]]:
    async def request() -> None:
        response = await http.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.text}")

    return request


async def latencies(request: Callable[[], Awaitable[None]], count: int) -> list[float]:
    """Seconds each of ``count`` sequential requests took."""
    out = []
    clock = time.perf_counter
    for _ in range(count):
        start = clock()
        await request()
        out.append(clock() - start)
    return out


async def throughput(request: Callable[[], Awaitable[None]], count: int) -> tuple[float, float]:
    """(requests per second, CPU seconds per request) of ``count`` requests by `CONCURRENCY`
    tasks."""
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await request()

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return count / wall, cpu / count


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@attrs.frozen
class Sample:
    """One client's measurements in one round."""

    latencies: list[float]
    per_second: float
    cpu_per_request: float


async def run(args: argparse.Namespace) -> None:
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with backend() as port, ControlPlane() as plane:
        plane.set_all(resources(port))
        async with (
            XdsClient(plane.address, node_id="bench") as client,
            XdsTransport(LISTENER, client=client, limits=limits) as transport,
            httpx.AsyncClient(limits=limits) as plain,
            httpx.AsyncClient(transport=transport) as ours,
        ):
            requests = {
                "plain": requester(plain, f"http://127.0.0.1:{port}/bench"),
                "XdsTransport": requester(ours, "http://bench.svc/bench"),
            }
            await measure(requests, args)


async def measure(requests: dict[str, Callable[[], Awaitable[None]]], args: Any) -> None:
    for request in requests.values():  # connect, warm up
        await throughput(request, 200)
    names = list(requests)
    rounds: list[dict[str, Sample]] = []
    for number in range(args.rounds):
        samples = {}
        for name in names[number % 2 :] + names[: number % 2]:
            took = await latencies(requests[name], args.latency_requests)
            per_second, per_request = await throughput(requests[name], args.throughput_requests)
            samples[name] = Sample(took, per_second, per_request)
        rounds.append(samples)
    report(names, rounds, args)
    extra = await paired_cpu(
        requests["plain"], requests["XdsTransport"], args.pairs, args.throughput_requests // 3
    )
    if args.profile:
        counts = {name: await calls_per_request(request, 300) for name, request in requests.items()}
        print(
            "Python function calls per request: "
            + ", ".join(f"{name} {count:.0f}" for name, count in counts.items())
            + f"; XdsTransport adds {counts['XdsTransport'] - counts['plain']:.0f}"
        )
    print(
        f"\nour CPU per request (XdsTransport minus plain httpx, median of {args.pairs} pairs): "
        f"{statistics.median(extra) * 1e6:.1f} us "
        f"(quartiles {percentile(extra, 0.25) * 1e6:.1f} to {percentile(extra, 0.75) * 1e6:.1f})"
    )


async def calls_per_request(request: Callable[[], Awaitable[None]], count: int) -> float:
    """Python function calls per request of ``count`` sequential requests, under cProfile."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(count):
        await request()
    profiler.disable()
    return float(pstats.Stats(profiler).total_calls) / count  # type: ignore[attr-defined]


def report(names: list[str], rounds: list[dict[str, Sample]], args: Any) -> None:
    """The table: latencies pooled over the rounds; requests per second, the median of the
    rounds; CPU per request, the best round; ratios against plain, the median of the rounds'."""
    print(
        f"{args.rounds} rounds; concurrency 1: {args.latency_requests} requests a round; "
        f"concurrency {CONCURRENCY}: {args.throughput_requests} requests a round\n"
    )
    print(
        "| client | p50 us (c=1) | p99 us (c=1) | requests/s (c=64) | CPU us/request "
        "| p50 / plain | requests/s / plain |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        took = [t for r in rounds for t in r[name].latencies]
        per_second = statistics.median(r[name].per_second for r in rounds)
        per_request = min(r[name].cpu_per_request for r in rounds)
        p50_ratio = statistics.median(
            statistics.median(r[name].latencies) / statistics.median(r["plain"].latencies)
            for r in rounds
        )
        rate_ratio = statistics.median(r[name].per_second / r["plain"].per_second for r in rounds)
        print(
            f"| {name} | {statistics.median(took) * 1e6:.0f} | {percentile(took, 0.99) * 1e6:.0f} "
            f"| {per_second:.0f} | {per_request * 1e6:.1f} | {p50_ratio:.2f}x "
            f"| {rate_ratio:.2f}x |"
        )


async def paired_cpu(
    plain: Callable[[], Awaitable[None]],
    ours: Callable[[], Awaitable[None]],
    pairs: int,
    count: int,
) -> list[float]:
    """CPU seconds per request that ``ours`` takes beyond ``plain``: ``pairs`` times, ``count``
    requests of each back to back (which goes first alternates), the difference of the two."""
    extra = []
    for pair in range(pairs):
        first, second = (plain, ours) if pair % 2 else (ours, plain)
        a = (await throughput(first, count))[1]
        b = (await throughput(second, count))[1]
        extra.append(b - a if first is plain else a - b)
    return extra


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--latency-requests", type=int, default=300)
    parser.add_argument("--throughput-requests", type=int, default=1500)
    parser.add_argument("--pairs", type=int, default=10, help="paired runs for our CPU")
    parser.add_argument("--profile", action="store_true", help="function calls per request")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
