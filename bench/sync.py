"""What the sync side costs: reads through `SyncXdsClient`, and HTTP requests through the sync
bridge (`xdsclient.httpx._sync.BridgedTransport`, which `XdsSyncTransport` is) against httpx's
own sync transport, in one run.

Reads: `SyncXdsClient.get` of a name already read (answered in the caller's thread) against
`SyncXdsClient.resource_state` (one hop to the loop thread and back), microseconds per call.

HTTP: one hypercorn backend on 127.0.0.1 (in this process, on a loop thread of its own), read
by ``httpx.Client`` over ``httpx.HTTPTransport`` (plain) and over the bridge running
``httpx.AsyncHTTPTransport`` on a loop thread, from 1 and from 32 threads: p50 and p99
latency, requests per second and the process's CPU time per request (the backend's included,
the same for both: the column least disturbed by a busy machine). The bridge alone, first:
over ``httpx.MockTransport``, which answers at once, sync and async.

    python bench/sync.py [--reads 20000] [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import socket
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
from envoy.config.cluster.v3 import cluster_pb2
from hypercorn.asyncio import serve
from hypercorn.config import Config

from xdsclient.httpx._sync import BridgedTransport
from xdsclient.resources import CLUSTER
from xdsclient.sync import LoopThread, SyncXdsClient
from xdsclient.testing import ControlPlane


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _per_call(function: Callable[[], object], count: int) -> float:
    """Microseconds per call of ``function``, over ``count`` calls."""
    start = time.perf_counter()
    for _ in range(count):
        function()
    return (time.perf_counter() - start) / count * 1e6


def reads(thread: LoopThread, count: int) -> list[tuple[str, float]]:
    async def started() -> ControlPlane:
        plane = ControlPlane()
        await plane.start()
        cluster = cluster_pb2.Cluster(name="web", type=cluster_pb2.Cluster.EDS)
        cluster.eds_cluster_config.eds_config.ads.SetInParent()
        plane.set(cluster)
        return plane

    plane = thread.run(started())
    try:
        with SyncXdsClient(plane.address, node_id="bench") as xds:
            xds.get(CLUSTER, "web")
            return [
                ("get (a name already read)", _per_call(lambda: xds.get(CLUSTER, "web"), count)),
                (
                    "resource_state (a hop to the loop)",
                    _per_call(lambda: xds.resource_state(CLUSTER, "web"), count // 10),
                ),
            ]
    finally:
        thread.run(plane.stop())


def _answer_at_once(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=b"ok")


def overhead(total: int) -> list[tuple[str, int, dict[str, float]]]:
    """The bridge alone: ``httpx.MockTransport`` (sync and async at once) answering at once,
    called directly and through the bridge."""
    rows = []
    for threads in (1, 32):
        with httpx.Client(transport=httpx.MockTransport(_answer_at_once)) as plain:
            rows.append(("MockTransport, sync", threads, _http(plain, "http://x/", threads, total)))
        bridge = BridgedTransport(lambda: httpx.MockTransport(_answer_at_once))
        with httpx.Client(transport=bridge) as bridged:
            rows.append(
                ("bridge over MockTransport", threads, _http(bridged, "http://x/", threads, total))
            )
    return rows


def _http(client: httpx.Client, url: str, threads: int, total: int) -> dict[str, float]:
    per_thread = total // threads

    def work(_: int) -> list[float]:
        latencies = []
        for _ in range(per_thread):
            start = time.perf_counter()
            client.get(url).read()
            latencies.append(time.perf_counter() - start)
        return latencies

    for _ in range(20):  # warm the pool
        client.get(url)
    start, cpu = time.perf_counter(), time.process_time()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        latencies = sorted(x for batch in pool.map(work, range(threads)) for x in batch)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {
        "p50": statistics.median(latencies) * 1e6,
        "p99": latencies[int(len(latencies) * 0.99)] * 1e6,
        "rps": len(latencies) / elapsed,
        "cpu": cpu / len(latencies) * 1e6,
    }


def http(thread: LoopThread, total: int) -> list[tuple[str, int, dict[str, float]]]:
    listening = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listening.getsockname()[1]}/"
    config = Config()
    config.bind = [f"fd://{listening.detach()}"]
    config.accesslog = config.errorlog = None

    async def event() -> asyncio.Event:
        return asyncio.Event()

    stop = thread.run(event())
    serving = thread.submit(serve(_app, config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    rows = []
    try:
        for threads in (1, 32):
            limits = httpx.Limits(max_connections=threads)
            with httpx.Client(transport=httpx.HTTPTransport(limits=limits)) as plain:
                rows.append(("httpx.HTTPTransport", threads, _http(plain, url, threads, total)))
            bridge = BridgedTransport(lambda: httpx.AsyncHTTPTransport(limits=limits))  # noqa: B023
            with httpx.Client(transport=bridge) as bridged:
                rows.append(
                    ("bridge over AsyncHTTPTransport", threads, _http(bridged, url, threads, total))
                )
    finally:
        thread.call_soon(stop.set)
        serving.result(10)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=2_000)
    args = parser.parse_args()
    with LoopThread(name="bench-servers") as thread:
        read_rows = reads(thread, args.reads)
        http_rows = overhead(args.requests) + http(thread, args.requests)
    print(f"{'read':40} {'us/call':>10}")
    for name, micros in read_rows:
        print(f"{name:40} {micros:10.2f}")
    print()
    print(
        f"{'HTTP client':34} {'threads':>7} {'p50 us':>9} {'p99 us':>9} {'req/s':>9} "
        f"{'CPU us/req':>11}"
    )
    for name, threads, result in http_rows:
        print(
            f"{name:34} {threads:7d} {result['p50']:9.0f} {result['p99']:9.0f} "
            f"{result['rps']:9.0f} {result['cpu']:11.0f}"
        )


if __name__ == "__main__":
    main()
