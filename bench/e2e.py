"""Benchmark: a full xDS load from the control plane, xdsclient against grpcio's built-in client.

For N = 1,000 / 10,000 / 100,000: one listener, a route configuration with N routes, N EDS
clusters and N endpoint assignments, served by `xdsclient.testing.ControlPlane` on loopback
(ADS, SotW). Each client runs in its own process. Measured at the control plane:

- load: from the first LDS request to the ACK that covers all N endpoint assignments;
- update: from changing all N assignments to the ACK that covers all N new versions;
- requests: how many requests the client sent;
- peak RSS of the client process.

    python bench/e2e.py [--sizes 1000 10000 100000] [--clients xdsclient grpcio] [--timeout 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

import attrs

sys.path.insert(0, os.path.dirname(__file__))

import xds_config as cfg

from xdsclient.resources import ENDPOINT, LISTENER
from xdsclient.testing import ControlPlane

WORKER = os.path.join(os.path.dirname(__file__), "e2e_worker.py")


@attrs.frozen
class Result:
    client: str
    n: int
    load: float | None
    update: float | None
    requests: int
    rss_mib: float | None
    nacks: int


class Coverage:
    """Incrementally finds the ACK that makes the ACKed endpoint assignments cover all names.

    Reads only what the control plane logged since the last call, so polling stays cheap even
    when a client sends one request per cluster.
    """

    def __init__(self, cp: ControlPlane, names: set[str], since: float) -> None:
        self._cp = cp
        self._since = since
        self._missing = set(names)
        self._sent: dict[tuple[int, str], tuple[str, ...]] = {}
        self._responses = 0
        self._requests = 0
        self.time: float | None = None

    def poll(self) -> bool:
        cp = self._cp
        for response in cp.responses[self._responses :]:
            if response.type_url == ENDPOINT.type_url and response.time >= self._since:
                self._sent[(response.stream, response.nonce)] = response.names
        self._responses = len(cp.responses)
        for request in cp.requests[self._requests :]:
            message = request.message
            if (
                self.time is None
                and message.type_url == ENDPOINT.type_url
                and not message.HasField("error_detail")
            ):
                self._missing.difference_update(
                    self._sent.get((request.stream, message.response_nonce), ())
                )
                if not self._missing:
                    self.time = request.time
        self._requests = len(cp.requests)
        return self.time is not None


async def _until(predicate: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        await asyncio.sleep(0.005)
    return False


async def measure(client: str, n: int, timeout: float) -> Result:
    async with ControlPlane() as cp:
        cp.set(cfg.listener())
        cp.set(cfg.route_configuration(n))
        for i in range(n):
            cp.set(cfg.cluster(i))
            cp.set(cfg.endpoints(i))
        names = {cfg.cluster_name(i) for i in range(n)}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            WORKER,
            client,
            cp.address,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        load = update = None
        try:
            loaded = Coverage(cp, names, 0.0)
            if await _until(loaded.poll, timeout) and loaded.time is not None:
                first_lds = next(r.time for r in cp.requests if r.type_url == LISTENER.type_url)
                load = loaded.time - first_lds
                print(
                    f"  {client} N={n}: loaded in {load:.3f} s, {len(cp.requests)} requests",
                    file=sys.stderr,
                    flush=True,
                )
                start = time.monotonic()
                for i in range(n):
                    cp.set(cfg.endpoints(i, generation=1))
                updated = Coverage(cp, names, start)
                if await _until(updated.poll, timeout) and updated.time is not None:
                    update = updated.time - start
        finally:
            assert process.stdin is not None
            process.stdin.close()
            out, _ = await process.communicate()
        rss = int(out.split()[-1]) / 1024 if out.split() else None
        return Result(client, n, load, update, len(cp.requests), rss, len(cp.nacks()))


def _fmt(value: float | None, unit: str = "s") -> str:
    return (
        "timeout"
        if value is None
        else f"{value:.3f} {unit}"
        if unit == "s"
        else f"{value:.0f} {unit}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--clients", nargs="+", default=["xdsclient", "grpcio"])
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    results = []
    for n in args.sizes:
        for client in args.clients:
            result = asyncio.run(measure(client, n, args.timeout))
            results.append(result)
            print(
                f"  measured {client} N={n}: load {_fmt(result.load)}", file=sys.stderr, flush=True
            )
    header = ("N", "client", "load", "update", "requests", "peak RSS", "NACKs")
    line = "{:>7}  {:<10} {:>10} {:>10} {:>9} {:>9} {:>5}"
    print(line.format(*header))
    by_n: dict[int, dict[str, Result]] = {}
    for r in results:
        by_n.setdefault(r.n, {})[r.client] = r
        rss = "-" if r.rss_mib is None else f"{r.rss_mib:.0f} MiB"
        print(line.format(r.n, r.client, _fmt(r.load), _fmt(r.update), r.requests, rss, r.nacks))
    for n, pair in by_n.items():
        ours, theirs = pair.get("xdsclient"), pair.get("grpcio")
        if ours and theirs and ours.load and theirs.load:
            ratio = theirs.load / ours.load
            print(f"N={n}: xdsclient loads {ratio:.1f}x faster than grpcio's built-in client")


if __name__ == "__main__":
    main()
