"""What the sync side costs, in one run: reads through `SyncXdsClient`, and ``httpx.Client``
requests through the sync bridge and `XdsSyncTransport` against httpx's own sync transport.

Reads: `SyncXdsClient.get` of a name already read (answered in the caller's thread) against
`SyncXdsClient.resource_state` (one hop to the loop thread and back), microseconds per call.

The bridge alone: ``httpx.Client`` over ``httpx.MockTransport`` (sync and async at once,
answering at once), called directly and through the bridge (`BridgedTransport`, which
`XdsSyncTransport` is), from 1 and from 32 threads.

HTTP: one HTTP/1.1 backend (`xdsclient.testing.HttpBackend` in a child process, so its CPU is
not this process's) answers ``GET /bench``; the test control plane (on a loop thread here, idle
while requests run) routes listener ``bench`` to it. ``httpx.Client`` sends through
``httpx.HTTPTransport`` (plain), through the bridge over ``httpx.AsyncHTTPTransport``, and
through `XdsSyncTransport`, from 1 and from 32 threads; and ``httpx.AsyncClient`` with 1 and 32
tasks on a loop of its own (what the bridge runs, without the bridge). The machine may be
shared, so the clients run interleaved for ``--rounds`` rounds (each starting with another
client): p50 and p99 pool every round, requests per second and this process's CPU time per
request are the median of the rounds.

    python bench/sync.py [--reads 20000] [--requests 1000] [--rounds 3]

(Run as a script, this file's folder comes first on ``sys.path``, where ``bench/http.py`` would
hide the standard library's ``http`` from httpx: it moves the folder to the end before importing
httpx, where it still finds bench/child_server.py.)
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # after the standard library

import httpx
from child_server import stop_child_sync

from xdsclient.httpx import XdsSyncTransport
from xdsclient.httpx._sync import BridgedTransport
from xdsclient.resources import CLUSTER
from xdsclient.sync import LoopThread, SyncXdsClient
from xdsclient.testing import ControlPlane, builders

THREADS = (1, 32)

_SERVER = r"""
import asyncio, sys
from xdsclient.testing import http_backends
async def main():
    async with http_backends(names=("bench",)) as (backend,):
        print(backend.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""


@contextlib.contextmanager
def backend() -> Iterator[int]:
    """The backend's port, served by a child process until the context ends."""
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        yield int(process.stdout.readline())
    finally:
        stop_child_sync(process)


async def _started(port: int) -> ControlPlane:
    plane = ControlPlane()
    await plane.start()
    plane.set_all(
        [
            builders.api_listener("bench"),
            builders.route_configuration("bench-routes", "bench-cluster"),
            builders.cluster("bench-cluster"),
            builders.cluster_load_assignment("bench-cluster", [("127.0.0.1", port)]),
        ]
    )
    return plane


def _per_call(function: Callable[[], object], count: int) -> float:
    """Microseconds per call of ``function``, over ``count`` calls."""
    start = time.perf_counter()
    for _ in range(count):
        function()
    return (time.perf_counter() - start) / count * 1e6


def reads(xds: SyncXdsClient, count: int) -> list[tuple[str, float]]:
    xds.get(CLUSTER, "bench-cluster")
    return [
        ("get (a name already read)", _per_call(lambda: xds.get(CLUSTER, "bench-cluster"), count)),
        (
            "resource_state (a hop to the loop)",
            _per_call(lambda: xds.resource_state(CLUSTER, "bench-cluster"), count // 10),
        ),
    ]


def measure(client: httpx.Client, url: str, threads: int, total: int) -> dict[str, Any]:
    """Latencies, requests per second and CPU per request of ``total`` requests by
    ``threads`` threads."""
    per_thread = total // threads

    def work(_: int) -> list[float]:
        latencies = []
        for _ in range(per_thread):
            start = time.perf_counter()
            response = client.get(url)
            latencies.append(time.perf_counter() - start)
            if response.status_code != 200:
                raise RuntimeError(f"{url}: {response.status_code} {response.text}")
        return latencies

    for _ in range(20):  # warm the pool
        client.get(url)
    start, cpu = time.perf_counter(), time.process_time()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        latencies = [x for batch in pool.map(work, range(threads)) for x in batch]
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"latencies": latencies, "rps": len(latencies) / elapsed, "cpu": cpu / len(latencies)}


async def measure_async(url: str, tasks: int, total: int) -> dict[str, Any]:
    """`measure` for ``httpx.AsyncClient`` with ``tasks`` tasks on its own loop: what the
    bridge runs, without the bridge."""
    limits = httpx.Limits(max_connections=tasks, max_keepalive_connections=tasks)
    async with httpx.AsyncClient(limits=limits) as client:
        for _ in range(20):
            await client.get(url)
        latencies: list[float] = []

        async def work() -> None:
            for _ in range(total // tasks):
                start = time.perf_counter()
                await client.get(url)
                latencies.append(time.perf_counter() - start)

        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(work() for _ in range(tasks)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"latencies": latencies, "rps": len(latencies) / elapsed, "cpu": cpu / len(latencies)}


def _answer_at_once(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=b"ok")


Make = Callable[[httpx.Limits], httpx.BaseTransport]


def in_its_loop(limits: httpx.Limits) -> httpx.BaseTransport:  # a marker, never called
    """Marks the row of ``httpx.AsyncClient`` on its own loop, without the bridge."""
    raise AssertionError("a marker")


def interleaved(
    clients: dict[str, tuple[Make, str]], args: argparse.Namespace
) -> list[tuple[str, int, dict[str, Any]]]:
    """Each client's rows, measured round by round, each round starting with another one
    (`in_its_loop`: ``httpx.AsyncClient`` on a loop of its own, tasks for threads)."""
    rows = []
    for threads in THREADS:
        limits = httpx.Limits(max_connections=threads, max_keepalive_connections=threads)
        samples: dict[str, list[dict[str, Any]]] = {name: [] for name in clients}
        names = list(clients)
        for round_ in range(args.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                make, url = clients[name]
                if make is in_its_loop:
                    sample = asyncio.run(measure_async(url, threads, args.requests))
                    samples[name].append(sample)
                    continue
                with httpx.Client(transport=make(limits)) as client:
                    samples[name].append(measure(client, url, threads, args.requests))
        for name in names:
            runs = samples[name]
            latencies = sorted(x for run in runs for x in run["latencies"])
            rows.append(
                (
                    name,
                    threads,
                    {
                        "p50": statistics.median(latencies) * 1e6,
                        "p99": latencies[int(len(latencies) * 0.99)] * 1e6,
                        "rps": statistics.median(run["rps"] for run in runs),
                        "cpu": statistics.median(run["cpu"] for run in runs) * 1e6,
                    },
                )
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mock: dict[str, tuple[Make, str]] = {
        "MockTransport, sync": (lambda _: httpx.MockTransport(_answer_at_once), "http://x/"),
        "bridge over MockTransport": (
            lambda _: BridgedTransport(lambda: httpx.MockTransport(_answer_at_once)),
            "http://x/",
        ),
    }
    with backend() as port, LoopThread(name="bench-control-plane") as thread:
        plane = thread.run(_started(port))
        try:
            with SyncXdsClient(plane.address, node_id="bench") as xds:
                url = f"http://127.0.0.1:{port}/bench"
                http: dict[str, tuple[Make, str]] = {
                    "httpx.HTTPTransport": (lambda limits: httpx.HTTPTransport(limits=limits), url),
                    "httpx.AsyncClient, tasks on its loop": (in_its_loop, url),
                    "bridge over AsyncHTTPTransport": (
                        lambda limits: BridgedTransport(
                            lambda: httpx.AsyncHTTPTransport(limits=limits)
                        ),
                        url,
                    ),
                    "XdsSyncTransport": (
                        lambda limits: XdsSyncTransport("bench", client=xds, limits=limits),
                        "http://bench.svc/bench",
                    ),
                }
                read_rows = reads(xds, args.reads)
                rows = interleaved(mock, args) + interleaved(http, args)
        finally:
            thread.run(plane.stop())
    print(f"{'read':40} {'us/call':>10}")
    for name, micros in read_rows:
        print(f"{name:40} {micros:10.2f}")
    print()
    print(
        f"{'HTTP client':38} {'threads':>7} {'p50 us':>9} {'p99 us':>9} {'req/s':>9} "
        f"{'CPU us/req':>11}"
    )
    for name, threads, result in rows:
        print(
            f"{name:38} {threads:7d} {result['p50']:9.0f} {result['p99']:9.0f} "
            f"{result['rps']:9.0f} {result['cpu']:11.0f}"
        )


if __name__ == "__main__":
    main()
