"""What the HTTP front end's connection layer costs: `HttpConnections` (httpcore pools per
endpoint, our network backend, httpx <-> httpcore) against httpx's own transport, over the same
hypercorn backend on 127.0.0.1.

Prints one table, both sides in one run: requests per second, p50 latency, and process CPU
microseconds per request (client and in-process server together, so the difference between the
rows is the cost of our layer), at concurrency 1 and 64, HTTP/1.1 and HTTP/2 (prior
knowledge).

    python bench/http_connections.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx

from xdsclient.httpx._connections import HttpConnection, HttpConnections
from xdsclient.testing import http_backends

Send = Callable[[], Awaitable[None]]
TIMEOUT = httpx.Timeout(5.0).as_dict()


async def _run(send: Send, total: int, concurrency: int) -> tuple[float, float, float]:
    """(requests per second, p50 ms, CPU us per request)."""
    latencies: list[float] = []
    queue = iter(range(total))

    async def worker() -> None:
        for _ in queue:
            started = time.perf_counter()
            await send()
            latencies.append(time.perf_counter() - started)

    for _ in range(20):  # warm the pools
        await send()
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return total / wall, statistics.median(latencies) * 1e3, cpu / total * 1e6


async def main(total: int) -> None:
    rows = []
    async with http_backends(1) as (backend,):
        url = f"http://127.0.0.1:{backend.port}/bench"
        for http2 in (False, True):
            limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
            async with httpx.AsyncClient(http1=not http2, http2=http2, limits=limits) as client:

                async def plain(client: httpx.AsyncClient = client) -> None:
                    (await client.get(url)).raise_for_status()

                connections = HttpConnections(
                    lambda key, state: None, http1=not http2, http2=http2, limits=limits
                )
                connections.hold_only([backend.address])
                connection = connections.connect(backend.address)

                async def ours(connection: HttpConnection = connection) -> None:
                    request = httpx.Request("GET", url, extensions={"timeout": TIMEOUT})
                    response = await connection.send(request, 5.0)
                    await response.aread()
                    response.raise_for_status()

                for concurrency in (1, 64):
                    for name, send in (("httpx transport", plain), ("HttpConnections", ours)):
                        rate, p50, cpu = await _run(send, total, concurrency)
                        rows.append(
                            (name, "HTTP/2" if http2 else "HTTP/1.1", concurrency, rate, p50, cpu)
                        )
                await connections.close()
    print(f"{'path':<16} {'protocol':<9} {'conc':>4} {'req/s':>8} {'p50 ms':>7} {'CPU us/req':>10}")
    for name, protocol, concurrency, rate, p50, cpu in rows:
        print(f"{name:<16} {protocol:<9} {concurrency:>4} {rate:>8.0f} {p50:>7.2f} {cpu:>10.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    asyncio.run(main(parser.parse_args().requests))
