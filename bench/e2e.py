"""Benchmark: a full xDS load from the control plane, xdsclient against grpcio's built-in client.

For N = 1,000 / 10,000 / 100,000: one listener, a route configuration with N routes, N EDS
clusters and N endpoint assignments, served by `xdsclient.testing.ControlPlane` on loopback
(ADS, SotW). Each client runs in its own process. Measured at the control plane:

- full load: from the first LDS request to the ACK that covers all N endpoint assignments,
  both as the control plane saw them: four round trips (LDS, RDS, CDS, EDS), so it includes
  the control plane building and writing each response, in this process (printed apart as its
  share), and, between them, the client decoding each response, ACKing it and walking the
  configuration to subscribe to the next type (the client's CPU time, from its start to its
  first snapshot, is printed too: less disturbed by a busy machine than the wall time);
- update all N: every assignment changes; from the control plane's first EDS response to the
  ACK that covers all N new versions;
- update 1 of N: every assignment is set again, one with new content (new versions for all, so
  the SotW response carries all N, as from a server that resends the whole state); to the ACK;
- resend unchanged: every assignment is set again with the same content (new versions);
  (the test control plane sends only assignments whose version changed, so both carry all N)
- settled: from the same start until the client process was last busy (over 20% of a core,
  from its CPU time in Linux's ``/proc``, sampled every 20 ms), once it has been quiet for
  0.5 s; at least the ACK (and our snapshot), to within about 0.1 s. Both clients ACK a
  response before applying it; grpcio's then applies an update of N changed assignments as
  N configuration updates, each rebuilding all N routes (about 18 s at N=1,000), so its ACK
  says little about when it is done;
- requests: how many requests the client sent; peak RSS of the client process.

Each case starts only once the client is quiet after the previous one. Before, each push
followed the previous ACK at once, and grpcio reads a response only after applying the one
before, so each case's ACK carried the previous case's work: "update all N" (1.1 s) the tail
of the full load, "update 1 of N" (14.5 s) that of "update all N". Every push is one
`ControlPlane.set_all`, which reaches either client as one EDS response of all N.

Ours watches the complete configuration (`XdsClient.watch_config`), so each case also gives the
time to the snapshot that holds the update, with every assignment's localities read from it (the
compiled build checks an update's assignments before the ACK and builds their localities on
first read: that building is in the snapshot's time, not the ACK's). Updates run ``--rounds``
times; the best is shown.

The full load is sampled ``--load-samples`` times for ours (default 3) and
``--grpcio-load-samples`` times for grpcio (default 1: one takes 0.7 s and more), each in a
fresh client process against a fresh control plane, the clients taking turns (sample 1 of every
client, then sample 2, ...), so a moment when the machine is busy falls on one sample rather
than on one client. The table shows the median of a client's samples (its ACK, snapshot and
CPU time each), and a line below it their spread; the first sample's process then runs the
updates, and its peak RSS is the one shown.

The decode floor, printed beside them and as a ratio, is parsing one SotW response of N
assignments and unpacking every ``Any`` with protobuf alone, in this process. grpcio's client
runs up to ``--grpcio-max`` (default 1,000: at 10,000 it does not finish in minutes).

Ours runs twice: as installed (``xdsclient``: compiled where the build is) and as pure Python
(``xdsclient-pure``, with ``XDSCLIENT_PURE=1``), so the fallback's cost shows too; with
``--before PATH`` the package of another checkout (an older commit, built the same way) runs
both ways too (``before``, ``before-pure``), in the same run.

``--update-timeline`` prints each update of ours as both sides saw it (stderr): the control
plane building its response, the client's read (the transfer, gRPC's read and parse, the
hand-off to the loop), its ``receive``, the steps before the ACK's write, the write and the ACK
reaching the control plane, and the client loop's CPU time from the read to the written ACK
(the worker notes them with ``XDSCLIENT_BENCH_TIMELINE=1``).

    python bench/e2e.py [--sizes 1000 10000 100000] [--clients xdsclient xdsclient-pure grpcio]
        [--rounds 3] [--load-samples 3] [--grpcio-load-samples 1] [--before PATH] [--timeline]
        [--update-timeline]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

import attrs

sys.path.insert(0, os.path.dirname(__file__))

import xds_config as cfg
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.service.discovery.v3 import discovery_pb2

import xdsclient
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION
from xdsclient.testing import ControlPlane

WORKER = os.path.join(os.path.dirname(__file__), "e2e_worker.py")


#: Ours as installed (compiled where the build is: the wheels, `make compiled`), and ours with
#: every module from its source (``XDSCLIENT_PURE=1``: the sdist's, a platform without a wheel).
PURE = "xdsclient-pure"
OURS = ("xdsclient", PURE)
#: Ours from another checkout (``--before PATH``), as built there and as pure Python.
BEFORE = ("before", "before-pure")
#: Each of ours: the environment its worker runs in, over this process's.
ENVIRONMENTS: dict[str, dict[str, str]] = {"xdsclient": {}, PURE: {"XDSCLIENT_PURE": "1"}}


def add_before(path: str) -> None:
    """Run ``BEFORE`` with the package of the checkout at ``path``."""
    where = {"PYTHONPATH": os.path.abspath(path)}
    ENVIRONMENTS[BEFORE[0]] = where
    ENVIRONMENTS[BEFORE[1]] = {**where, "XDSCLIENT_PURE": "1"}


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
    #: case -> seconds until the client went quiet (None: no /proc, or not in time)
    settled: dict[str, float | None]
    requests: int
    rss_mib: float | None
    nacks: int
    #: of the full load: the control plane's time, and the client's CPU time (ours only)
    load_server: float | None = None
    load_cpu: float | None = None
    #: of the full load: the CPU time of the client's event loop thread (ours only)
    load_loop_cpu: float | None = None
    #: RSS once the package was imported, before any resource (ours only)
    import_rss_mib: float | None = None
    #: the full load's time to the ACK in each sample (None: not in time), in the order taken
    load_samples: tuple[float | None, ...] = ()


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
    """Reads the worker's lines: ``import-rss <KiB>`` once imported, ``snapshot <monotonic
    time> <sum of generations>``, ``load-cpu <seconds>`` (the CPU time of its full load),
    ``load-loop-cpu <seconds>`` (its event loop thread's part of it), then
    ``rss <KiB>`` at exit."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.seen: list[tuple[float, int]] = []
        self.rss_kib: int | None = None
        self.load_cpu: float | None = None
        self.load_loop_cpu: float | None = None
        self.import_rss_kib: int | None = None
        #: ``--update-timeline``: (read, receive, received, write, written, CPU) per response
        self.steps: list[tuple[float, ...]] = []
        self._task = asyncio.ensure_future(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        async for line in stream:
            kind, *values = line.decode().split()
            if kind == "snapshot":
                self.seen.append((float(values[0]), int(values[1])))
            elif kind == "rss":
                self.rss_kib = int(values[0])
            elif kind == "load-cpu":
                self.load_cpu = float(values[0])
            elif kind == "load-loop-cpu":
                self.load_loop_cpu = float(values[0])
            elif kind == "import-rss" and int(values[0]) > 0:
                self.import_rss_kib = int(values[0])
            elif kind == "steps":
                self.steps.append(tuple(map(float, values)))

    async def when(self, generations: int, after: float, timeout: float) -> float | None:
        """When the first snapshot holding ``generations`` came after ``after``."""

        def found() -> float | None:
            return next((t for t, g in self.seen if g == generations and t >= after), None)

        await _until(lambda: found() is not None, timeout)
        return found()

    async def close(self) -> None:
        await asyncio.wait_for(self._task, 30)


class CpuLog:
    """When a process was last busy: its CPU time (all threads, ``/proc/PID/stat``, Linux),
    sampled every 20 ms from the moment it starts.

    A client may ACK a response long before it has applied it (grpcio's does, and reads the
    next response only once done), so a case starts only once the client is quiet.
    """

    #: busy: more than this share of one core over the trailing ``SPAN`` seconds
    BUSY, SPAN = 0.2, 0.1
    #: quiet: not busy for this long
    QUIET = 0.5

    def __init__(self, pid: int) -> None:
        self._path = f"/proc/{pid}/stat"
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._samples: list[tuple[float, float]] = []
        self._span_start = 0  # the latest sample at least SPAN before the newest
        #: when it was last busy (None: not yet, or no /proc to read)
        self.busy: float | None = None
        self.available = self._read() is not None
        self._task = asyncio.ensure_future(self._sample())

    def _read(self) -> float | None:
        try:
            with open(self._path) as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / self._tick  # utime + stime
        except (OSError, IndexError, ValueError):
            return None

    async def _sample(self) -> None:
        samples = self._samples
        while (cpu := self._read()) is not None:
            now = time.monotonic()
            samples.append((now, cpu))
            while self._span_start + 1 < len(samples) and (
                samples[self._span_start + 1][0] <= now - self.SPAN
            ):
                self._span_start += 1
            then, before = samples[self._span_start]
            if now > then and (cpu - before) / (now - then) > self.BUSY:
                self.busy = now
            await asyncio.sleep(0.02)

    async def settle(self, after: float, timeout: float) -> float | None:
        """Wait until the process has been quiet for ``QUIET`` seconds since ``after`` (a time
        it was busy: busy is seen up to ``SPAN`` late); when it was last busy, ``after`` at
        the earliest (None: no ``/proc``, or still busy after ``timeout``)."""
        if not self.available:
            return None

        def last_busy() -> float:
            return max(after, self.busy or after)

        def quiet() -> bool:
            return time.monotonic() - last_busy() >= self.QUIET

        return last_busy() if await _until(quiet, timeout) else None

    def close(self) -> None:
        self._task.cancel()


def load_timeline(cp: ControlPlane, start: float) -> list[str]:
    """The full load as the control plane saw it (``--timeline``): each type's first request,
    its response and its ACK, in ms from ``start``, with the server's and the client's part of
    each round trip (the client's: from the response to the next type's first request, or to
    the ACK for the last type)."""
    lines, last = [], None
    for type_url in (t.type_url for t in (LISTENER, ROUTE_CONFIGURATION, CLUSTER, ENDPOINT)):
        asked = next((r for r in cp.requests if r.type_url == type_url), None)
        sent = next((r for r in cp.responses if r.type_url == type_url), None)
        if asked is None or sent is None:
            break
        acked = next((r for r in cp.requests if r.message.response_nonce == sent.nonce), None)
        if last is not None:
            lines[-1] += f", client {(asked.time - last) * 1000:.2f}"
        ack = "-" if acked is None else f"{(acked.time - start) * 1000:.2f}"
        lines.append(
            f"{type_url.rsplit('.', 1)[1]:>22}: asked {(asked.time - start) * 1000:.2f}, answered"
            f" {(sent.time - start) * 1000:.2f} (server {(sent.time - asked.time) * 1000:.2f}),"
            f" ACK {ack}"
        )
        last = sent.time
    if lines and acked is not None and last is not None:
        lines[-1] += f", client {(acked.time - last) * 1000:.2f}"
    return lines


def _server_share(cp: ControlPlane) -> float:
    """The control plane's part of a full load: for each type, from the client's first request
    of it to the first response (the server building and writing it, in this process)."""
    share = 0.0
    for type_url in {r.type_url for r in cp.responses}:
        asked = next(r.time for r in cp.requests if r.type_url == type_url)
        share += next(r.time for r in cp.responses if r.type_url == type_url) - asked
    return share


async def _push(
    cp: ControlPlane, names: set[str], messages: list[Any], timeout: float
) -> tuple[float, float] | None:
    """Set endpoint assignments ``messages`` in one batch; (when the control plane sent its
    first endpoint response, when the client ACKed the one covering ``names``), None on
    timeout."""
    start = time.monotonic()
    cp.set_all(messages)
    coverage = Coverage(cp, names, start)
    if await _until(coverage.poll, timeout) and coverage.time is not None:
        assert coverage.pushed is not None
        return coverage.pushed, coverage.time
    return None


class Run:
    """One client process going through the cases, each once the client is quiet after the
    previous one; the best of ``rounds`` for each update."""

    def __init__(
        self, cp: ControlPlane, n: int, timeout: float, snapshots: Snapshots | None, cpu: CpuLog
    ):
        self.cp, self.n, self.timeout, self.snapshots, self.cpu = cp, n, timeout, snapshots, cpu
        self.names = {cfg.cluster_name(i) for i in range(n)}
        self.acks: dict[str, float | None] = dict.fromkeys(CASES)
        self.snaps: dict[str, float | None] = dict.fromkeys(CASES)
        self.settled: dict[str, float | None] = dict.fromkeys(CASES)
        #: of the full load: the control plane's own time (see `_server_share`)
        self.server: float | None = None
        #: of the full load: its round trips (see `load_timeline`)
        self.timeline: list[str] = []

    def _keep(
        self, case: str, ack: float | None, snap: float | None, settled: float | None
    ) -> None:
        for kept, value in ((self.acks, ack), (self.snaps, snap), (self.settled, settled)):
            if value is not None:
                best = kept[case]
                kept[case] = value if best is None else min(best, value)

    async def _settle(self, since: float, acked: float, snap: float | None) -> float | None:
        """Wait until the client is quiet after its ACK at ``acked`` and its snapshot ``snap``
        seconds after ``since``; seconds from ``since`` until it was last busy."""
        done = acked if snap is None else max(acked, since + snap)
        busy = await self.cpu.settle(done, self.timeout)
        return None if busy is None else busy - since

    async def full_load(self) -> bool:
        loaded = Coverage(self.cp, self.names, 0.0)
        if not (await _until(loaded.poll, self.timeout) and loaded.time is not None):
            return False
        first_lds = next(r.time for r in self.cp.requests if r.type_url == LISTENER.type_url)
        snap = await self._snapshot(0, first_lds)
        settled = await self._settle(first_lds, loaded.time, snap)
        self._keep("full load", loaded.time - first_lds, snap, settled)
        self.server = _server_share(self.cp)
        self.timeline = load_timeline(self.cp, first_lds)
        return True

    async def _snapshot(self, generations: int, since: float) -> float | None:
        if self.snapshots is None:
            return None
        when = await self.snapshots.when(generations, since, self.timeout)
        return None if when is None else when - since

    async def update(self, case: str, names: set[str], messages: list[Any], gens: int) -> bool:
        start = time.monotonic()
        pushed = await _push(self.cp, names, messages, self.timeout)
        if pushed is None:
            return False
        since, acked = pushed
        snap = None if case == "resend unchanged" else await self._snapshot(gens, since)
        settled = await self._settle(since, acked, snap)
        self._keep(case, acked - since, snap, settled)
        if UPDATE_TIMELINE[0] and self.snapshots is not None:  # its steps have come by now
            steps = update_timeline(start, since, acked, self.snapshots.steps)
            print(f"    {case}: {steps}", file=sys.stderr, flush=True)
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


#: ``--timeline``: print each full load's round trips (`load_timeline`) as it is measured
TIMELINE: list[bool] = [False]
#: ``--update-timeline``: print each update's steps (`update_timeline`) as it is measured
UPDATE_TIMELINE: list[bool] = [False]


def update_timeline(start: float, sent: float, acked: float, steps: list[tuple[float, ...]]) -> str:
    """One update as both sides saw it, in ms from the control plane's write of its response
    (where the ACK's time starts): the client's read (the transfer, gRPC's read and parse, the
    hand-off to the loop), the wait until its ``receive``, the receive, the steps until the
    ACK's write starts (the events handed to the watchers, the ACK built), and from there the
    ACK reaching the control plane (gRPC's write, the transfer, the server's read); then the
    control plane's own build before its write (from ``set_all``), how long the client's write
    took to return, and the client loop's CPU time from its read to the written ACK. From the
    worker's ``steps`` (ours only)."""
    mine = next((s for s in steps if sent <= s[0] <= acked), None)
    if mine is None:
        return f"ACK {(acked - sent) * 1e3:.2f} ms (no steps)"
    read, receive, received, write, written, cpu = mine
    parts = [
        ("read", read - sent),
        ("to receive", receive - read),
        ("receive", received - receive),
        ("to the write", write - received),
        ("to the ACK", acked - write),
    ]
    shown = ", ".join(f"{label} {value * 1e3:.2f}" for label, value in parts)
    return (
        f"{shown} = {(acked - sent) * 1e3:.2f} ms; the control plane's build before it "
        f"{(sent - start) * 1e3:.2f}, the write's return {(written - write) * 1e3:.2f}, the "
        f"client loop's CPU {cpu * 1e3:.2f}"
    )


async def measure(
    client: str, n: int, timeout: float, rounds: int, *, updates: bool = True
) -> Result:
    """One client process against a fresh control plane: the full load, then (``updates``)
    the updates."""
    async with ControlPlane() as cp:
        cp.set(cfg.listener())
        cp.set(cfg.route_configuration(n))
        for i in range(n):
            cp.set(cfg.cluster(i))
            cp.set(cfg.endpoints(i))
        ours = ENVIRONMENTS.get(client)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            WORKER,
            "xdsclient" if ours is not None else client,
            cp.address,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=None if ours is None else {**os.environ, **ours},
        )
        assert process.stdout is not None
        lines = Snapshots(process.stdout)
        cpu = CpuLog(process.pid)
        if not cpu.available:
            print("no /proc: cases may carry the previous one's work", file=sys.stderr)
        run = Run(cp, n, timeout, lines if ours is not None else None, cpu)
        try:
            if await run.full_load():
                if TIMELINE[0]:
                    print(f"  {client} N={n} full load (ms):", file=sys.stderr)
                    print("\n".join(run.timeline), file=sys.stderr, flush=True)
                if updates:
                    await run.updates(rounds)
        finally:
            cpu.close()
            assert process.stdin is not None
            process.stdin.close()
            await process.wait()
            await lines.close()
        rss = None if lines.rss_kib is None else lines.rss_kib / 1024
        return Result(
            client,
            n,
            run.acks,
            run.snaps,
            run.settled,
            len(cp.requests),
            rss,
            len(cp.nacks()),
            run.server,
            lines.load_cpu,
            lines.load_loop_cpu,
            None if lines.import_rss_kib is None else lines.import_rss_kib / 1024,
            (run.acks["full load"],),
        )


def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def combine(samples: list[Result]) -> Result:
    """One client's result from its full-load samples: the first sample's (its updates, its
    peak RSS), with the full load's ACK, snapshot, settled, control plane's share and CPU time
    the median of all samples' (a sample that timed out counts only in `Result.load_samples`)."""
    first, case = samples[0], CASES[0]

    def median_of(kept: str) -> dict[str, float | None]:
        values = [getattr(r, kept)[case] for r in samples]
        return {**getattr(first, kept), case: _median(values)}

    return attrs.evolve(
        first,
        times=median_of("times"),
        snapshots=median_of("snapshots"),
        settled=median_of("settled"),
        load_server=_median([r.load_server for r in samples]),
        load_cpu=_median([r.load_cpu for r in samples]),
        load_loop_cpu=_median([r.load_loop_cpu for r in samples]),
        load_samples=tuple(t for r in samples for t in r.load_samples),
    )


def sample_all(n: int, clients: list[str], wanted: dict[str, int], args: Any) -> list[Result]:
    """Each client's ``wanted[client]`` full loads of N, each in a fresh process, the clients
    taking turns; the first sample of each also runs the updates."""
    samples: dict[str, list[Result]] = {client: [] for client in clients}
    for k in range(max((wanted[c] for c in clients), default=0)):
        for client in (c for c in clients if k < wanted[c]):
            result = asyncio.run(measure(client, n, args.timeout, args.rounds, updates=k == 0))
            samples[client].append(result)
            shown = result.times if k == 0 else result.times[CASES[0]]
            print(f"  measured {client} N={n} sample {k + 1}: {shown}", file=sys.stderr, flush=True)
    return [combine(samples[client]) for client in clients if samples[client]]


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
    parser.add_argument("--clients", nargs="+", default=[*OURS, "grpcio"])
    parser.add_argument(
        "--grpcio-max", type=int, default=1_000, help="largest N grpcio's client is run at"
    )
    parser.add_argument("--rounds", type=int, default=3, help="updates of each kind (best)")
    parser.add_argument(
        "--load-samples",
        type=int,
        default=3,
        help="full loads of ours, each in a fresh process (median shown)",
    )
    parser.add_argument(
        "--grpcio-load-samples", type=int, default=1, help="full loads of grpcio's client"
    )
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--before", metavar="PATH", help="also run the package of the checkout at PATH"
    )
    parser.add_argument(
        "--timeline", action="store_true", help="print each full load's round trips (stderr)"
    )
    parser.add_argument(
        "--update-timeline", action="store_true", help="print each update's steps (stderr)"
    )
    args = parser.parse_args()
    TIMELINE[0] = args.timeline
    if args.before:
        add_before(args.before)
        args.clients = [*args.clients, *(c for c in BEFORE if c not in args.clients)]
    if args.update_timeline:
        UPDATE_TIMELINE[0] = True
        for environment in ENVIRONMENTS.values():
            environment["XDSCLIENT_BENCH_TIMELINE"] = "1"
    results: list[Result] = []
    floors: dict[int, float] = {}
    for n in args.sizes:
        floors[n] = decode_floor(n)
        clients = [c for c in args.clients if c != "grpcio" or n <= args.grpcio_max]
        wanted = {
            c: args.grpcio_load_samples if c == "grpcio" else args.load_samples for c in clients
        }
        results.extend(sample_all(n, clients, wanted, args))
    line = "{:>7}  {:<14} {:<17} {:>10} {:>8} {:>11} {:>8} {:>10} {:>9} {:>5}"
    print(
        line.format(
            "N",
            "client",
            "case",
            "ACK",
            "x floor",
            "snapshot",
            "x floor",
            "settled",
            "peak RSS",
            "NACKs",
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
                    _fmt(r.settled[case]),
                    rss,
                    r.nacks,
                )
            )
    print()
    for n, floor in floors.items():
        print(f"N={n}: decode floor (parse the response, unpack every Any) {_fmt(floor)}")
    for r in results:
        cpu = "" if r.load_cpu is None else f"; the client's CPU time {_fmt(r.load_cpu)}"
        if r.load_loop_cpu is not None:
            cpu += f" (its event loop's thread {_fmt(r.load_loop_cpu)})"
        print(f"N={r.n} {r.client} full load: the control plane's share {_fmt(r.load_server)}{cpu}")
    for r in results:
        if len(r.load_samples) > 1:
            each = ", ".join("timeout" if t is None else _fmt(t) for t in r.load_samples)
            print(
                f"N={r.n} {r.client} full load to the ACK: median {_fmt(r.times[CASES[0]])} of "
                f"{len(r.load_samples)} samples ({each})"
            )
    print("(full load: the median of its samples, each in a fresh client process; the control")
    print("plane's share and the client's CPU time are medians too)")
    print("(full load: the control plane's share is its time from each type's first request to")
    print("its response; the client's CPU time runs from its start to its first snapshot)")
    print("ACK: from the control plane's first endpoint response to the ACK covering the update;")
    print("snapshot: to the complete configuration snapshot holding it, every assignment's")
    print("localities read (xdsclient; a resend of unchanged assignments publishes none);")
    print("settled: until the client process is quiet")
    print("(coarse, within ~0.1 s: compare it only where it is long). Each case starts once")
    print("the previous one settled. Updates: best of --rounds.")
    for r in results:
        if r.import_rss_mib is not None and r.rss_mib is not None:
            print(
                f"N={r.n} {r.client}: peak RSS {r.rss_mib:.1f} MiB, of which "
                f"{r.import_rss_mib:.1f} MiB once imported (before grpc's channel and any resource)"
            )
    by_n: dict[int, dict[str, Result]] = {}
    for r in results:
        by_n.setdefault(r.n, {})[r.client] = r
    build = "compiled" if xdsclient.compiled else "pure Python: no compiled build here"
    print(f"xdsclient: as installed ({build}); {PURE}: XDSCLIENT_PURE=1, every module from source")
    for n, pair in by_n.items():
        theirs = pair.get("grpcio")
        for client in ENVIRONMENTS:
            ours = pair.get(client)
            if not (ours and theirs):
                continue
            for case in CASES:
                a, b = ours.times[case], theirs.times[case]
                if a and b:
                    print(f"N={n} {case}: {client} {b / a:.1f}x faster to the ACK than grpcio's")


if __name__ == "__main__":
    main()
