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

What we add, measured so the machine's load does not decide it (the second table): each
client, async and sync (``httpx.Client`` over ``httpx.HTTPTransport`` against
`XdsSyncTransport`), runs alone in a child process of its own over the same backend, sending
``--counted-requests`` sequential requests after a warm-up:

- Python function calls per request under cProfile (every thread: the sync transport's loop
  thread too), and how many of them are in xdsclient's own modules: a count, the same on an
  idle or a busy machine; XdsTransport's minus plain httpx's is what we add;
- CPU per request without the profiler: the best of ``--blocks`` blocks (the least disturbed
  by other processes), and XdsTransport's minus plain httpx's.

What the difference holds: the request's plan (route, timeout, retry policy, hash), the pick,
the attempt's bookkeeping (picker, load report, connection), the streamed body's wrapper; both
send on an httpcore pool. The paired concurrency-64 CPU difference (``--pairs``) is printed
too, for comparison: it moves with the machine's load. ``--sync`` also runs ``bench/sync.py``
(latency and throughput of the sync clients, 1 and 32 threads) in the same run.

    python bench/http.py [--rounds 6] [--latency-requests 300] [--throughput-requests 1500]
                         [--counted-requests 300] [--blocks 5] [--sync] [--before DIR]

``--instructions`` (valgrind) adds callgrind's instructions per async request, counted only
around the requests, and prices what XdsTransport adds in microseconds at plain httpx's own
rate in this run (its best-block CPU per request over its instructions per request; measured
for the purpose with ``--only instructions``): the 20 us target read off one run.

``--before DIR`` counts the XdsTransport and sync rows again with the xdsclient found in
``DIR`` (another checkout's root, e.g. ``git archive``'d from main) first on the path: before
and after in one run.

(Run as a script, this file's folder comes first on ``sys.path``, where its own name would
hide the standard library's ``http`` from httpx: it moves itself to the end before importing
httpx, where it still finds bench/counting.py, the counting it shares with bench/channel.py.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]
sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # after the standard library

import httpx
from child_server import served
from counting import callgrind_instructions, python_calls, window
from timing import CONCURRENCY, Sample, cells, measured, paired_cpu, quartiles, throughput

from xdsclient import XdsClient
from xdsclient.httpx import XdsSyncTransport, XdsTransport
from xdsclient.httpx._sync import BridgedTransport
from xdsclient.sync import LoopThread, SyncXdsClient
from xdsclient.testing import ControlPlane, builders

LISTENER = "bench"

_SERVER = r"""
import asyncio, sys
from xdsclient.testing import http_backends
async def main():
    async with http_backends(names=("bench",)) as (backend,):
        print(backend.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"""


def backend() -> contextlib.AbstractAsyncContextManager[int]:
    """The backend's port, served by a child process until the context ends."""
    return served(_SERVER)


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


async def run(args: argparse.Namespace) -> None:
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with backend() as port:
        if args.only in (None, "timed"):
            await timed(port, limits, args)
        rows = counted(port, args) if args.only in (None, "counted") else {}
        if args.instructions or args.only == "instructions":
            plain = rows.get(("async", "plain")) or _counted_row("async", "plain", port, args)
            instructions(port, args, plain["cpu"])


async def timed(port: int, limits: httpx.Limits, args: argparse.Namespace) -> None:
    """The first table: latency and throughput, interleaved."""
    async with ControlPlane() as plane:
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
            samples[name] = await measured(
                requests[name], args.latency_requests, args.throughput_requests
            )
        rounds.append(samples)
    report(names, rounds, args)
    extra = await paired_cpu(
        requests["plain"], requests["XdsTransport"], args.pairs, args.throughput_requests // 3
    )
    print(
        f"\npaired CPU per request at concurrency {CONCURRENCY} (XdsTransport minus plain httpx, "
        f"median of {args.pairs} pairs; moves with the machine's load): {quartiles(extra)}"
    )


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
    base = [r["plain"] for r in rounds]
    for name in names:
        print(f"| {name} {cells([r[name] for r in rounds], base)}")


# --- what we add, counted: each client alone in a child process ---

#: (mode, client) of each counted row, the plain client of a mode first (the bridge: the sync
#: transport's bridge over httpx's own async transport, what `XdsSyncTransport` adds to)
COUNTED = (
    ("async", "plain"),
    ("async", "XdsTransport"),
    ("sync", "plain"),
    ("sync", "bridge"),
    ("sync", "XdsSyncTransport"),
)


def counted(port: int, args: argparse.Namespace) -> dict[tuple[str, str], dict[str, float]]:
    """The second table: each client in a child process of its own (`child`)."""
    rows = {}
    runs: list[tuple[str, str, str | None]] = [(mode, client, None) for mode, client in COUNTED]
    if args.before:  # the same rows of another checkout's xdsclient, in this run
        runs += [
            (mode, f"{client} (before)", args.before)
            for mode, client in COUNTED
            if client != "plain"
        ]
    for mode, client, path in runs:
        rows[mode, client] = _counted_row(mode, client, port, args, path)
    print(
        f"\nwhat we add, each client alone in a process ({args.counted_requests} sequential "
        f"requests; calls: under cProfile, every thread; CPU: the best of {args.blocks} blocks, "
        "no profiler)\n"
    )
    print(
        "| mode | client | Python calls/request | in xdsclient | calls added "
        "| CPU us/request | CPU added us | added calls at plain's us/call |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for mode, client, _ in runs:
        row = rows[mode, client]
        added = cpu = estimate = ""
        if client != "plain":  # over httpx's own async transport: plain async, or the bridge
            base = rows[mode, "plain" if mode == "async" or "bridge" in client else "bridge"]
            added = f"{row['calls'] - base['calls']:.0f}"
            cpu = f"{row['cpu'] - base['cpu']:.1f}"
            estimate = f"{(row['calls'] - base['calls']) * base['cpu'] / base['calls']:.1f}"
        print(
            f"| {mode} | {client} | {row['calls']:.0f} | {row['ours']:.0f} | {added} "
            f"| {row['cpu']:.1f} | {cpu} | {estimate} |"
        )
    print(
        "\n(added: over plain httpx for async and for the bridge; over the bridge, which is "
        "httpx's own async transport run for a sync client, for XdsSyncTransport. The last "
        "column prices the added calls at the base's CPU per call, this run: a count times "
        "a rate, steadier than the difference of two CPU times)"
    )
    return rows


def _counted_row(
    mode: str, client: str, port: int, args: argparse.Namespace, path: str | None = None
) -> dict[str, float]:
    """One counted row, in a child process (with ``path``'s xdsclient first when given)."""
    command = [sys.executable, os.path.abspath(__file__), "--child", f"{mode}:{client}"]
    command += ["--port", str(port), "--counted-requests", str(args.counted_requests)]
    command += ["--blocks", str(args.blocks)]
    env = dict(os.environ)
    if path is not None:  # in place of this checkout: as long a path to search
        env["PYTHONPATH"] = path
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} {client}: {done.stderr.strip().splitlines()[-1:]}")
    row: dict[str, float] = json.loads(done.stdout)
    return row


def child(which: str, port: int, args: argparse.Namespace) -> None:
    """One counted row: print {calls, ours, cpu} per request as JSON."""
    mode, client = which.split(":")
    client = client.removesuffix(" (before)")
    if mode == "instructions":
        _child_instructions(client, port, args.counted_requests)
        return
    if mode == "async":
        result = asyncio.run(_child_async(client, port, args))
    else:
        result = _child_sync(client, port, args)
    print(json.dumps(result))


async def _child_async(client: str, port: int, args: argparse.Namespace) -> dict[str, float]:
    if client == "plain":
        async with httpx.AsyncClient() as http:
            return await _counted_async(requester(http, f"http://127.0.0.1:{port}/bench"), args)
    async with ControlPlane() as plane:
        plane.set_all(resources(port))
        async with (
            XdsClient(plane.address, node_id="bench") as xds,
            XdsTransport(LISTENER, client=xds) as transport,
            httpx.AsyncClient(transport=transport) as http,
        ):
            return await _counted_async(requester(http, "http://bench.svc/bench"), args)


async def _counted_async(
    request: Callable[[], Awaitable[None]], args: argparse.Namespace
) -> dict[str, float]:
    count = args.counted_requests
    for _ in range(50):
        await request()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(count):
        await request()
    profiler.disable()
    best = float("inf")
    for _ in range(args.blocks):
        cpu = time.process_time()
        for _ in range(count):
            await request()
        best = min(best, time.process_time() - cpu)
    return {**python_calls([profiler], count), "cpu": best / count * 1e6}


def _child_sync(client: str, port: int, args: argparse.Namespace) -> dict[str, float]:
    if client == "plain":
        with httpx.Client() as http:
            return _counted_sync(http, f"http://127.0.0.1:{port}/bench", None, args)
    if client == "bridge":
        bridge = BridgedTransport(httpx.AsyncHTTPTransport)
        with httpx.Client(transport=bridge) as http:
            return _counted_sync(http, f"http://127.0.0.1:{port}/bench", bridge, args)
    with contextlib.ExitStack() as stack:
        thread = stack.enter_context(LoopThread(name="bench-control-plane"))
        plane = thread.run(_started_plane(port))
        stack.callback(lambda: thread.run(plane.stop()))
        xds = stack.enter_context(SyncXdsClient(plane.address, node_id="bench"))
        transport = XdsSyncTransport(LISTENER, client=xds)
        http = stack.enter_context(httpx.Client(transport=transport))
        return _counted_sync(http, "http://bench.svc/bench", transport, args)


async def _started_plane(port: int) -> ControlPlane:
    plane = ControlPlane()
    await plane.start()
    plane.set_all(resources(port))
    return plane


def _counted_sync(
    http: httpx.Client, url: str, transport: BridgedTransport | None, args: argparse.Namespace
) -> dict[str, float]:
    count = args.counted_requests

    def request() -> None:
        response = http.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.text}")

    for _ in range(50):
        request()
    profilers = [cProfile.Profile()]
    if transport is not None:  # its loop thread runs the async transport
        profilers.append(cProfile.Profile())
        transport.loop_thread.run(_enable(profilers[1]))
    profilers[0].enable()
    for _ in range(count):
        request()
    profilers[0].disable()
    if transport is not None:
        transport.loop_thread.run(_disable(profilers[1]))
    best = float("inf")
    for _ in range(args.blocks):
        cpu = time.process_time()
        for _ in range(count):
            request()
        best = min(best, time.process_time() - cpu)
    return {**python_calls(profilers, count), "cpu": best / count * 1e6}


async def _enable(profiler: cProfile.Profile) -> None:
    profiler.enable()


async def _disable(profiler: cProfile.Profile) -> None:
    profiler.disable()


# --- instructions per request, with callgrind (async clients only) ---


def instructions(port: int, args: argparse.Namespace, plain_cpu: float) -> None:
    """The third table: each async client's instructions per request under callgrind, counted
    only inside ``sys.call_tracing`` (the requests; not the set-up, nor the backend, another
    process): the machine's load does not change them. The added instructions are priced in
    microseconds at plain httpx's own rate on this machine: ``plain_cpu`` (its best CPU per
    request, from the counted table, or a counted run of its own with ``--only
    instructions``) over its instructions per request. That is the column to read the
    20 us target off."""
    runs: list[tuple[str, str | None]] = [("plain", None), ("XdsTransport", None)]
    if args.before:
        runs.append(("XdsTransport (before)", args.before))
    counts = {}
    for client, path in runs:
        command = [
            sys.executable, os.path.abspath(__file__), "--child", f"instructions:{client}",
            "--port", str(port), "--counted-requests", str(args.instruction_requests),
        ]  # fmt: skip
        env = {**os.environ, **({"PYTHONPATH": path} if path else {})}
        instructions = callgrind_instructions(command, env, all_threads=False)
        counts[client] = instructions / args.instruction_requests
    plain = counts["plain"]
    print(f"\ninstructions per request, callgrind, {args.instruction_requests} async requests\n")
    print(
        f"plain httpx: {plain_cpu:.1f} us CPU a request (best block) over {plain:,.0f} "
        f"instructions: {plain / plain_cpu:,.0f} instructions a microsecond on this machine\n"
    )
    print("| client | instructions/request | added | added / plain's | added at plain's rate, us |")
    print("|---|---:|---:|---:|---:|")
    for client, count in counts.items():
        added = share = micros = ""
        if client != "plain":
            added = f"{count - plain:,.0f}"
            share = f"{(count - plain) / plain:.1%}"
            micros = f"{(count - plain) / plain * plain_cpu:.1f}"
        print(f"| {client} | {count:,.0f} | {added} | {share} | {micros} |")


def _child_instructions(client: str, port: int, count: int) -> None:
    loop = asyncio.new_event_loop()
    stack = contextlib.AsyncExitStack()
    request = loop.run_until_complete(_opened(stack, client, port))
    loop.run_until_complete(_requests(request, 50))
    window(loop.run_until_complete, _requests(request, count))
    loop.run_until_complete(stack.aclose())
    loop.close()


async def _opened(
    stack: contextlib.AsyncExitStack, client: str, port: int
) -> Callable[[], Awaitable[None]]:
    if client == "plain":
        http = await stack.enter_async_context(httpx.AsyncClient())
        return requester(http, f"http://127.0.0.1:{port}/bench")
    plane = await stack.enter_async_context(ControlPlane())
    plane.set_all(resources(port))
    xds = await stack.enter_async_context(XdsClient(plane.address, node_id="bench"))
    transport = await stack.enter_async_context(XdsTransport(LISTENER, client=xds))
    http = await stack.enter_async_context(httpx.AsyncClient(transport=transport))
    return requester(http, "http://bench.svc/bench")


async def _requests(request: Callable[[], Awaitable[None]], count: int) -> None:
    for _ in range(count):
        await request()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--latency-requests", type=int, default=300)
    parser.add_argument("--throughput-requests", type=int, default=1500)
    parser.add_argument("--pairs", type=int, default=10, help="paired runs for our CPU")
    parser.add_argument("--counted-requests", type=int, default=300)
    parser.add_argument("--blocks", type=int, default=5, help="CPU blocks per counted row")
    parser.add_argument("--sync", action="store_true", help="run bench/sync.py too")
    parser.add_argument("--before", help="a checkout of xdsclient to count too (its root)")
    parser.add_argument(
        "--only", choices=("timed", "counted", "instructions"), help="one of the tables"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="callgrind's instructions too (valgrind)"
    )
    parser.add_argument("--instruction-requests", type=int, default=100)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.port, args)
        return
    asyncio.run(run(args))
    if args.sync:
        sync = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sync.py")
        print("\nbench/sync.py, in the same run:\n", flush=True)
        subprocess.run([sys.executable, sync, "--rounds", "2"], check=True)


if __name__ == "__main__":
    main()
