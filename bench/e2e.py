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

Ours watches the complete configuration (`XdsClient.watch_config`), so each case also gives the
time to the snapshot that holds the update. Updates run ``--rounds`` times; the best is shown.

The decode floor, printed beside them and as a ratio, is parsing one SotW response of N
assignments and unpacking every ``Any`` with protobuf alone, in this process. grpcio's client
runs up to ``--grpcio-max`` (default 1,000: at 10,000 it does not finish in minutes).

    python bench/e2e.py [--sizes 1000 10000 100000] [--clients xdsclient grpcio] [--rounds 3]
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
    #: case -> seconds to the ACK (None: it did not finish in time)
    times: dict[str, float | None]
    #: case -> seconds to the complete snapshot (ours only; None: not measured)
    snapshots: dict[str, float | None]
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
        await asyncio.sleep(0.002)
    return False


class Snapshots:
    """Reads the worker's lines: ``snapshot <monotonic time> <sum of generations>``, then
    ``rss <KiB>`` at exit."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.seen: list[tuple[float, int]] = []
        self.rss_kib: int | None = None
        self._task = asyncio.ensure_future(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        async for line in stream:
            kind, *values = line.decode().split()
            if kind == "snapshot":
                self.seen.append((float(values[0]), int(values[1])))
            elif kind == "rss":
                self.rss_kib = int(values[0])

    async def when(self, generations: int, after: float, timeout: float) -> float | None:
        """When the first snapshot holding ``generations`` came after ``after``."""

        def found() -> float | None:
            return next((t for t, g in self.seen if g == generations and t >= after), None)

        await _until(lambda: found() is not None, timeout)
        return found()

    async def close(self) -> None:
        await asyncio.wait_for(self._task, 30)


async def _push(
    cp: ControlPlane, names: set[str], messages: list[Any], timeout: float
) -> tuple[float, float] | None:
    """Set endpoint assignments ``messages``; (when the control plane sent its first endpoint
    response, seconds from then to the ACK covering ``names``), None on timeout."""
    start = time.monotonic()
    for message in messages:
        cp.set(message)
    coverage = Coverage(cp, names, start)
    if await _until(coverage.poll, timeout) and coverage.time is not None:
        assert coverage.pushed is not None
        return coverage.pushed, coverage.time - coverage.pushed
    return None


class Run:
    """One client process going through the cases; the best of ``rounds`` for each update."""

    def __init__(self, cp: ControlPlane, n: int, timeout: float, snapshots: Snapshots | None):
        self.cp, self.n, self.timeout, self.snapshots = cp, n, timeout, snapshots
        self.names = {cfg.cluster_name(i) for i in range(n)}
        self.acks: dict[str, float | None] = dict.fromkeys(CASES)
        self.snaps: dict[str, float | None] = dict.fromkeys(CASES)

    def _keep(self, case: str, ack: float | None, snap: float | None) -> None:
        for kept, value in ((self.acks, ack), (self.snaps, snap)):
            if value is not None:
                best = kept[case]
                kept[case] = value if best is None else min(best, value)

    async def full_load(self) -> bool:
        loaded = Coverage(self.cp, self.names, 0.0)
        if not (await _until(loaded.poll, self.timeout) and loaded.time is not None):
            return False
        first_lds = next(r.time for r in self.cp.requests if r.type_url == LISTENER.type_url)
        snap = await self._snapshot(0, first_lds)
        self._keep("full load", loaded.time - first_lds, snap)
        return True

    async def _snapshot(self, generations: int, since: float) -> float | None:
        if self.snapshots is None:
            return None
        when = await self.snapshots.when(generations, since, self.timeout)
        return None if when is None else when - since

    async def update(self, case: str, names: set[str], messages: list[Any], gens: int) -> bool:
        pushed = await _push(self.cp, names, messages, self.timeout)
        if pushed is None:
            return False
        since, ack = pushed
        snap = None if case == "resend unchanged" else await self._snapshot(gens, since)
        self._keep(case, ack, snap)
        return True

    async def updates(self, rounds: int) -> None:
        """Every assignment changes; then all are set again with only the first changed; then
        all are set again unchanged. Each response carries all N (new versions each time)."""
        n = self.n
        for r in range(rounds):
            g = 2 * r + 1
            now = [cfg.endpoints(i, generation=g) for i in range(n)]
            if not await self.update("update all N", self.names, now, n * g):
                return
            now[0] = cfg.endpoints(0, generation=g + 1)
            first = {cfg.cluster_name(0)}
            if not await self.update("update 1 of N", first, now, n * g + 1):
                return
            if not await self.update("resend unchanged", self.names, now, n * g + 1):
                return


async def measure(client: str, n: int, timeout: float, rounds: int) -> Result:
    async with ControlPlane() as cp:
        cp.set(cfg.listener())
        cp.set(cfg.route_configuration(n))
        for i in range(n):
            cp.set(cfg.cluster(i))
            cp.set(cfg.endpoints(i))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            WORKER,
            client,
            cp.address,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        lines = Snapshots(process.stdout)
        run = Run(cp, n, timeout, lines if client == "xdsclient" else None)
        try:
            if await run.full_load():
                await run.updates(rounds)
        finally:
            assert process.stdin is not None
            process.stdin.close()
            await process.wait()
            await lines.close()
        rss = None if lines.rss_kib is None else lines.rss_kib / 1024
        return Result(client, n, run.acks, run.snaps, len(cp.requests), rss, len(cp.nacks()))


def decode_floor(n: int, repeat: int = 7) -> float:
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
    return "-" if value is None else f"{value * 1000:.1f} ms"


def _ratio(value: float | None, floor: float) -> str:
    return "-" if value is None else f"{value / floor:.1f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--clients", nargs="+", default=["xdsclient", "grpcio"])
    parser.add_argument(
        "--grpcio-max", type=int, default=1_000, help="largest N grpcio's client is run at"
    )
    parser.add_argument("--rounds", type=int, default=3, help="updates of each kind (best)")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    results: list[Result] = []
    floors: dict[int, float] = {}
    for n in args.sizes:
        floors[n] = decode_floor(n)
        for client in args.clients:
            if client == "grpcio" and n > args.grpcio_max:
                continue
            result = asyncio.run(measure(client, n, args.timeout, args.rounds))
            results.append(result)
            print(f"  measured {client} N={n}: {result.times}", file=sys.stderr, flush=True)
    line = "{:>7}  {:<10} {:<17} {:>10} {:>8} {:>11} {:>8} {:>9} {:>5}"
    print(
        line.format(
            "N", "client", "case", "ACK", "x floor", "snapshot", "x floor", "peak RSS", "NACKs"
        )
    )
    for r in results:
        rss = "-" if r.rss_mib is None else f"{r.rss_mib:.0f} MiB"
        floor = floors[r.n]
        for case, value in r.times.items():
            snap = r.snapshots[case]
            print(
                line.format(
                    r.n,
                    r.client,
                    case,
                    "timeout" if value is None else _fmt(value),
                    _ratio(value, floor),
                    _fmt(snap),
                    _ratio(snap, floor),
                    rss,
                    r.nacks,
                )
            )
    print()
    for n, floor in floors.items():
        print(f"N={n}: decode floor (parse the response, unpack every Any) {_fmt(floor)}")
    print("ACK: from the control plane's first endpoint response to the ACK covering the update;")
    print("snapshot: to the complete configuration snapshot holding it (xdsclient; a resend of")
    print("unchanged assignments publishes none). Updates: best of --rounds.")
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
