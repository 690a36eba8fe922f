"""Benchmark: a full xDS load from the control plane, xdsclient against grpcio's built-in client.

For N = 1,000 / 10,000 / 100,000: one listener, a route configuration with N routes, N EDS
clusters and N endpoint assignments, served by `xdsclient.testing.ControlPlane` on loopback
(ADS, SotW). Each client runs in its own process. Measured at the control plane:

- full load: from the first LDS request to the ACK that covers all N endpoint assignments;
- update all N: every assignment changes; from the control plane's first EDS response to the
  ACK that covers all N new versions;
- update 1 of N: every assignment is set again, one with new content (new versions for all, so
  the SotW response carries all N, as from a server that resends the whole state); to the ACK;
- resend unchanged: every assignment is set again with the same content (new versions);
  (the test control plane sends only assignments whose version changed, so both carry all N)
- requests: how many requests the client sent; peak RSS of the client process.

The decode floor, printed beside them and as a ratio, is parsing one SotW response of N
assignments and unpacking every ``Any`` with protobuf alone, in this process. grpcio's client
runs up to ``--grpcio-max`` (it takes minutes beyond).

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
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2

from xdsclient.resources import ENDPOINT, LISTENER
from xdsclient.testing import ControlPlane

WORKER = os.path.join(os.path.dirname(__file__), "e2e_worker.py")


#: The cases, in the order one client process goes through them (each after the previous one).
CASES = ("full load", "update all N", "update 1 of N", "resend unchanged")


@attrs.frozen
class Result:
    client: str
    n: int
    #: case -> seconds (None: it did not finish in time)
    times: dict[str, float | None]
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
        #: when the control plane sent its first endpoint response after ``since``
        self.pushed: float | None = None

    def poll(self) -> bool:
        cp = self._cp
        for response in cp.responses[self._responses :]:
            if response.type_url == ENDPOINT.type_url and response.time >= self._since:
                self._sent[(response.stream, response.nonce)] = response.names
                if self.pushed is None:
                    self.pushed = response.time
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


async def _push(
    cp: ControlPlane, names: set[str], messages: list[Any], timeout: float
) -> float | None:
    """Set endpoint assignments ``messages``; the seconds from the control plane's first
    endpoint response to the ACK covering ``names`` (None: timeout)."""
    start = time.monotonic()
    for message in messages:
        cp.set(message)
    coverage = Coverage(cp, names, start)
    if await _until(coverage.poll, timeout) and coverage.time is not None:
        assert coverage.pushed is not None
        return coverage.time - coverage.pushed
    return None


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
        times: dict[str, float | None] = dict.fromkeys(CASES)
        try:
            loaded = Coverage(cp, names, 0.0)
            if await _until(loaded.poll, timeout) and loaded.time is not None:
                first_lds = next(r.time for r in cp.requests if r.type_url == LISTENER.type_url)
                times["full load"] = loaded.time - first_lds
                # Every assignment changes; then all are set again with only the first changed;
                # then all are set again unchanged. Each response carries all N.
                now = [cfg.endpoints(i, generation=1) for i in range(n)]
                times["update all N"] = await _push(cp, names, now, timeout)
                now[0] = cfg.endpoints(0, generation=2)
                first = {cfg.cluster_name(0)}
                times["update 1 of N"] = await _push(cp, first, now, timeout)
                times["resend unchanged"] = await _push(cp, names, now, timeout)
        finally:
            assert process.stdin is not None
            process.stdin.close()
            out, _ = await process.communicate()
        rss = int(out.split()[-1]) / 1024 if out.split() else None
        return Result(client, n, times, len(cp.requests), rss, len(cp.nacks()))


def decode_floor(n: int, repeat: int = 3) -> float:
    """Parse one SotW response of N endpoint assignments and unpack every ``Any``, keeping
    what it unpacks as any client must (best of ``repeat``): the cost no client can avoid."""
    response = discovery_pb2.DiscoveryResponse(type_url=ENDPOINT.type_url, version_info="1")
    for i in range(n):
        response.resources.add().Pack(cfg.endpoints(i))
    wire = response.SerializeToString()
    from_string = endpoint_pb2.ClusterLoadAssignment.FromString
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        parsed = discovery_pb2.DiscoveryResponse.FromString(wire)
        kept = [from_string(packed.value) for packed in parsed.resources]
        best = min(best, time.perf_counter() - start)
        del kept, parsed
    return best


def _fmt(value: float | None) -> str:
    return "timeout" if value is None else f"{value * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--clients", nargs="+", default=["xdsclient", "grpcio"])
    parser.add_argument(
        "--grpcio-max", type=int, default=10_000, help="largest N grpcio's client is run at"
    )
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    results: list[Result] = []
    floors: dict[int, float] = {}
    for n in args.sizes:
        floors[n] = decode_floor(n)
        for client in args.clients:
            if client == "grpcio" and n > args.grpcio_max:
                continue
            result = asyncio.run(measure(client, n, args.timeout))
            results.append(result)
            print(f"  measured {client} N={n}: {result.times}", file=sys.stderr, flush=True)
    line = "{:>7}  {:<10} {:<17} {:>10} {:>10} {:>9} {:>5}"
    print(line.format("N", "client", "case", "time", "x floor", "peak RSS", "NACKs"))
    for r in results:
        rss = "-" if r.rss_mib is None else f"{r.rss_mib:.0f} MiB"
        for case, value in r.times.items():
            ratio = "-" if value is None else f"{value / floors[r.n]:.1f}x"
            print(line.format(r.n, r.client, case, _fmt(value), ratio, rss, r.nacks))
    print()
    for n, floor in floors.items():
        print(f"N={n}: decode floor (parse the response, unpack every Any) {_fmt(floor)}")
    by_n: dict[int, dict[str, Result]] = {}
    for r in results:
        by_n.setdefault(r.n, {})[r.client] = r
    for n, pair in by_n.items():
        ours, theirs = pair.get("xdsclient"), pair.get("grpcio")
        if not (ours and theirs):
            continue
        for case in CASES:
            a, b = ours.times[case], theirs.times[case]
            if a and b:
                print(f"N={n} {case}: xdsclient {b / a:.1f}x faster than grpcio's client")


if __name__ == "__main__":
    main()
