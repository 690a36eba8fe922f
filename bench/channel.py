"""Benchmark: `XdsChannel` against grpcio's own ``xds:///`` channel and a plain grpc.aio channel.

One backend (a grpc.aio server in a child process, so its CPU is not this process's) serves
``Say`` (unary) and ``Count`` (server streaming, ``--stream`` messages) on 127.0.0.1. The test
control plane (in this process, idle while calls run) routes ``xds:///bench`` to it through
one round-robin EDS cluster. Three channels call the same backend:

- ``plain``: ``grpc.aio.insecure_channel("127.0.0.1:<port>")``;
- ``grpcio xds``: ``grpc.aio.insecure_channel("xds:///bench")`` (C-core's xDS client, its
  bootstrap from ``GRPC_XDS_BOOTSTRAP``, set by this script);
- ``XdsChannel``: ``xdsclient.grpc.XdsChannel("xds:///bench")`` with its own `XdsClient`.

For each channel and call kind: p50/p99 latency at concurrency 1 (``--latency-calls``
sequential calls), and calls per second at concurrency 64 (``--throughput-calls`` calls by 64
tasks). The machine may be shared and loaded, so the channels run interleaved, round by round
(``--rounds``, each starting with the next channel); latencies pool every round, throughput is
the median of the rounds, and each ratio against grpcio's ``xds:///`` is the median of the
rounds' ratios (the two measured seconds apart).

CPU per call: the process's CPU time (``time.process_time``: every thread of this process,
C-core's included; the backend is another process) over the concurrency-64 run, divided by the
calls; the best round counts (other load on the machine only adds to it). Our CPU per call is
measured apart, in ``--pairs`` pairs of back-to-back concurrency-64 runs of the plain channel
and XdsChannel (which goes first alternates); each pair gives XdsChannel's CPU per call minus
the plain channel's, and the median of the pairs counts (pairing cancels the machine's load,
which drifts over seconds). XdsChannel sends each attempt on a plain grpc.aio channel to the
endpoint, so what it adds (the call's plan, the pick, the call object and its task, load and
outcome bookkeeping) is the difference.

First call at scale (``--endpoints``, default 1 and 2000): a new channel of each xDS kind to a
listener whose cluster lists that many endpoints (the backend first, the others on other
loopback addresses, where nothing listens: they refuse, as dead endpoints do), and the time
and the process's CPU until its first call is answered (the configuration is already cached
by the client, as for a channel made in a running service; grpcio's ``xds:///`` channel fetches
its own). Round robin connects every endpoint; the call needs only one. ``--profile`` also
runs XdsChannel's unary calls under
cProfile and prints the functions of ``xdsclient`` by their own time (cProfile slows Python
code about twofold: use it for where, the subtraction for how much); ``--profile-only`` runs
that alone (the counts do not depend on the machine's load, so a before/after takes seconds).

Where the paired CPU goes: ``--threads`` splits the pairs' CPU by thread (the event loop's,
C-core's ``event_engine`` threads, the others by name: user and system time from
/proc/self/task/*/stat, on-CPU time from its schedstat). ``--instructions`` /
``--instructions-only`` add the counted table (below, `counted`) and, before it, the paired
runs again in child processes, this code's and ``--before``'s alternately, each with its
thread table, so a before/after of the paired CPU comes from one run. The counted table also
counts the instructions of the loop's thread alone (where all of XdsChannel's Python runs,
without C-core's threads and their run-to-run swing). ``--syscalls`` adds each channel's
system calls per call by name (``strace -f -c``) and perf stat's task-clock, context switches
and CPU migrations per call (a run of twice ``--system-calls`` calls minus a run of
``--system-calls``: start-up and warm-up cancel). ``--metadata`` adds, to the paired and the
counted runs, rows whose unary calls carry `METADATA` (each counted against the plain channel's
calls with the same metadata); ``--streams`` adds rows of server-streaming calls of
``--stream`` messages (each counted against the plain channel's streams).

    python bench/channel.py [--rounds 8] [--latency-calls 300] [--throughput-calls 1500]
                            [--stream 10] [--endpoints 1 2000] [--profile] [--profile-only]
                            [--threads] [--instructions | --instructions-only] [--syscalls]
                            [--metadata] [--streams] [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from child_server import served
from counting import callgrind_instructions, perf_counts, python_calls, syscall_counts, window
from google.protobuf import wrappers_pb2
from timing import (
    CONCURRENCY,
    Sample,
    cells,
    latencies,
    measured,
    quartiles,
    throughput,
)

from xdsclient import XdsClient
from xdsclient._call import Attempt, AttemptOutcome, CallPlan, CallRequest, Code, grpc_header_view
from xdsclient.grpc import XdsChannel
from xdsclient.lb import PickResult
from xdsclient.testing import ControlPlane, bootstrap, builders

SERVICE = "bench.Echo"
SAY = f"/{SERVICE}/Say"
COUNT = f"/{SERVICE}/Count"
LISTENER = "bench"
Text = wrappers_pb2.StringValue
KINDS = ("unary", "stream")
#: the suffix of a row whose unary calls carry `METADATA`
WITH_METADATA = ", metadata"
#: the suffix of a row of server-streaming calls (``--stream`` messages each)
STREAMS = ", stream"
#: the first call's timeout at scale (seconds)
FIRST_CALL_TIMEOUT = 120

_SERVER = r"""
import asyncio, sys, grpc
from google.protobuf import wrappers_pb2
Text = wrappers_pb2.StringValue
async def say(request, context):
    return Text(value=request.value)
async def count(request, context):
    for i in range(int(request.value)):
        yield Text(value=str(i))
async def main():
    server = grpc.aio.server()
    handlers = {
        "Say": grpc.unary_unary_rpc_method_handler(
            say, Text.FromString, Text.SerializeToString),
        "Count": grpc.unary_stream_rpc_method_handler(
            count, Text.FromString, Text.SerializeToString),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(sys.argv[1], handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(None)
asyncio.run(main())
"""


def backend() -> contextlib.AbstractAsyncContextManager[int]:
    """The backend's port, served by a child process until the context ends."""
    return served(_SERVER, SERVICE)


#: the metadata of the ``--metadata`` rows' calls (a user id, a request id and a binary value)
METADATA = (("x-user", "42"), ("x-request-id", "7f3c9a0e-1b2d"), ("trace-bin", b"\x00\x01\x02"))


class Stub:
    """The two calls of one channel, as a generated stub makes them (unary ones with
    ``metadata`` when given)."""

    def __init__(self, channel: Any, stream: int, metadata: Any = None) -> None:
        ser, de = Text.SerializeToString, Text.FromString
        self._say = channel.unary_unary(SAY, request_serializer=ser, response_deserializer=de)
        self._count = channel.unary_stream(COUNT, request_serializer=ser, response_deserializer=de)
        self._hello = Text(value="hello")
        self._n = Text(value=str(stream))
        self._metadata = metadata

    async def unary(self) -> None:
        await self._say(self._hello, timeout=10, metadata=self._metadata)

    async def stream(self) -> None:
        async for _ in self._count(self._n, timeout=10):
            pass


def resources(port: int, listener: str = LISTENER, endpoints: int = 1) -> list[Any]:
    """``listener`` routing to a round-robin cluster of ``endpoints`` endpoints: the backend,
    then loopback addresses nothing listens on."""
    cluster = f"{listener}-cluster"
    dead = [(f"127.0.{1 + i // 250}.{1 + i % 250}", port) for i in range(endpoints - 1)]
    return [
        builders.api_listener(listener),
        builders.route_configuration(f"{listener}-routes", cluster),
        builders.cluster(cluster),
        builders.cluster_load_assignment(cluster, [("127.0.0.1", port), *dead]),
    ]


async def run(args: argparse.Namespace) -> None:
    async with backend() as port, ControlPlane() as plane:
        if args.instructions_only:
            plane.set_all(resources(port))
            with tempfile.TemporaryDirectory() as directory:
                path = _bootstrap_file(plane, directory)
                await paired_children(port, path, args)
                await counted(port, path, args)
            return
        plane.set_all(
            [
                *resources(port),
                *(r for n in args.endpoints for r in resources(port, f"{LISTENER}-{n}", n)),
            ]
        )
        with tempfile.TemporaryDirectory() as directory:
            path = _bootstrap_file(plane, directory)
            os.environ["GRPC_XDS_BOOTSTRAP"] = path
            async with XdsClient(bootstrap=path) as client:
                channels: dict[str, Any] = {
                    "plain": grpc.aio.insecure_channel(f"127.0.0.1:{port}"),
                    "grpcio xds": grpc.aio.insecure_channel(f"xds:///{LISTENER}"),
                    "XdsChannel": XdsChannel(f"xds:///{LISTENER}", client=client),
                }
                try:
                    await measure(channels, args)
                finally:
                    for channel in channels.values():
                        await channel.close()
                if not args.profile_only:
                    await first_calls(client, args.endpoints)
            if args.instructions and not args.profile_only:
                await counted(port, path, args)


def _bootstrap_file(plane: ControlPlane, directory: str) -> str:
    path = os.path.join(directory, "bootstrap.json")
    with open(path, "w") as file:
        json.dump(bootstrap([plane], node_id="bench", server_features=["xds_v3"]), file)
    return path


async def measure(channels: dict[str, Any], args: argparse.Namespace) -> None:
    stubs = {name: Stub(channel, args.stream) for name, channel in channels.items()}
    for stub in stubs.values():  # connect, warm up
        for _ in range(200):
            await stub.unary()
            await stub.stream()
    if args.profile_only:
        await profile(stubs, args.throughput_calls)
        return
    rounds: list[dict[tuple[str, str], Sample]] = []
    names = list(stubs)
    for number in range(args.rounds):
        samples: dict[tuple[str, str], Sample] = {}
        order = names[number % len(names) :] + names[: number % len(names)]
        for kind in KINDS:
            for name in order:  # each round starts with the next channel
                call = getattr(stubs[name], kind)
                samples[name, kind] = await measured(
                    call, args.latency_calls, args.throughput_calls
                )
        rounds.append(samples)
    report(names, rounds, args)
    print()
    for kind in KINDS:
        plain, ours = getattr(stubs["plain"], kind), getattr(stubs["XdsChannel"], kind)
        extra, threads = await paired_threads(plain, ours, args.pairs, args.throughput_calls // 3)
        print(
            f"our CPU per {kind} call (XdsChannel minus plain, median of {args.pairs} pairs): "
            f"{quartiles(extra)}"
        )
        if args.threads:
            _print_threads(kind, threads, args.pairs * (args.throughput_calls // 3))
    if args.profile:
        await profile(stubs, args.throughput_calls)


# --- where the paired CPU goes: each thread's user and system time ---

_TICK = os.sysconf("SC_CLK_TCK")


def thread_times() -> dict[str, tuple[float, float, float]]:
    """This process's CPU seconds so far by kind of thread: (user, system, on CPU) of the
    thread running the event loop (``loop``), C-core's ``event_engine`` threads, and the others
    by their name. User and system time are /proc/self/task/*/stat's clock ticks (10 ms);
    on CPU, schedstat's nanoseconds (both together, precisely). A thread that ended since is
    missing."""
    main = str(os.getpid())
    times: dict[str, tuple[float, float, float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as file:
                stat = file.read()
            with open(f"/proc/self/task/{tid}/schedstat") as file:
                ran = int(file.read().split()[0]) / 1e9
            with open(f"/proc/self/task/{tid}/comm") as file:
                name = "loop" if tid == main else file.read().strip()
        except FileNotFoundError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # field 3 on: utime, stime at 14, 15
        user, system, on_cpu = times.get(name, (0.0, 0.0, 0.0))
        times[name] = (
            user + int(fields[11]) / _TICK,
            system + int(fields[12]) / _TICK,
            on_cpu + ran,
        )
    return times


Threads = dict[tuple[str, str, str], float]
"""(channel, thread kind, `_PARTS` member) -> CPU seconds over the paired runs."""
_PARTS = ("user", "system", "on CPU")


async def paired_threads(
    plain: Callable[[], Awaitable[None]],
    ours: Callable[[], Awaitable[None]],
    pairs: int,
    count: int,
) -> tuple[list[float], Threads]:
    """`timing.paired_cpu`'s pairs (``count`` calls of each channel back to back at
    concurrency 64, which goes first alternating; each pair's difference of CPU seconds per
    call), and each thread kind's CPU summed over the pairs per channel."""
    extra = []
    threads: Threads = {}
    for pair in range(pairs):
        order = [("plain", plain), ("XdsChannel", ours)]
        per_call = {}
        for name, call in order if pair % 2 else order[::-1]:
            before = thread_times()
            per_call[name] = (await throughput(call, count))[1]
            after = thread_times()
            for kind, now in after.items():
                then = before.get(kind, (0.0, 0.0, 0.0))
                for part, end, start in zip(_PARTS, now, then, strict=True):
                    key = (name, kind, part)
                    threads[key] = threads.get(key, 0.0) + end - start
        extra.append(per_call["XdsChannel"] - per_call["plain"])
    return extra, threads


def _print_threads(kind: str, threads: Threads, calls: int) -> None:
    print(
        f"\n{kind} calls: CPU us per call by thread over the pairs ({calls} calls of each "
        "channel; user and system: clock ticks of /proc/self/task/*/stat; on CPU: schedstat)\n"
    )
    print("| thread | time | plain | XdsChannel | added |\n|---|---|---:|---:|---:|")
    kinds = sorted({key[1] for key in threads}, key=lambda k: (k != "loop", k))
    for thread in kinds:
        for part in _PARTS:
            a = threads.get(("plain", thread, part), 0.0) / calls * 1e6
            b = threads.get(("XdsChannel", thread, part), 0.0) / calls * 1e6
            if a or b:
                print(f"| {thread} | {part} | {a:.1f} | {b:.1f} | {b - a:+.1f} |")


def report(
    names: list[str], rounds: list[dict[tuple[str, str], Sample]], args: argparse.Namespace
) -> None:
    """The table: latencies pooled over the rounds; calls per second, the median of the
    rounds; CPU per call, the best round (load from elsewhere only adds to it); ratios against
    grpcio's ``xds:///``, the median of each round's ratio (measured minutes apart at most)."""
    print(
        f"{args.rounds} rounds; concurrency 1: {args.latency_calls} calls a round; "
        f"concurrency {CONCURRENCY}: {args.throughput_calls} calls a round; "
        f"stream: {args.stream} messages\n"
    )
    print(
        "| call | channel | p50 us (c=1) | p99 us (c=1) | calls/s (c=64) | CPU us/call "
        "| p50 / grpcio xds | calls/s / grpcio xds |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for kind in KINDS:
        base = [r["grpcio xds", kind] for r in rounds]
        for name in names:
            print(f"| {kind} | {name} {cells([r[name, kind] for r in rounds], base)}")


async def first_calls(client: XdsClient, sizes: list[int]) -> None:
    """The first-call table (see the module's docstring)."""
    print("\n| endpoints | channel | first call ms | CPU ms |\n|---:|---|---:|---:|")
    for size in sizes:
        listener = f"{LISTENER}-{size}"
        await client.wait_for_config(listener, timeout=60)
        target = f"xds:///{listener}"
        for name in ("grpcio xds", "XdsChannel"):
            cpu, wall = time.process_time(), time.perf_counter()
            channel: Any = (
                grpc.aio.insecure_channel(target)
                if name == "grpcio xds"
                else XdsChannel(target, client=client)
            )
            stub = Stub(channel, 1)
            try:
                await stub._say(stub._hello, timeout=FIRST_CALL_TIMEOUT)
            except grpc.aio.AioRpcError as error:
                print(f"| {size} | {name} | failed: {error.code().name} | |")
                await channel.close()
                continue
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"| {size} | {name} | {wall * 1e3:.0f} | {cpu * 1e3:.0f} |")
            await channel.close()


async def profile(stubs: dict[str, Stub], calls: int) -> None:
    """Unary calls under cProfile: Python function calls per call of each channel (a count the
    machine's load does not change), and xdsclient's functions by their own time."""
    counts = {}
    for name, stub in stubs.items():
        table = await _profiled(stub, calls)
        counts[name] = sum(value[1] for value in table.values()) / calls
    print(
        "\nPython function calls per unary call: "
        + ", ".join(f"{name} {count:.0f}" for name, count in counts.items())
        + f"; XdsChannel adds {counts['XdsChannel'] - counts['plain']:.0f}"
    )
    ours = {
        k: v
        for k, v in (await _profiled(stubs["XdsChannel"], calls)).items()
        if "xdsclient" in k[0]
    }
    total = sum(value[2] for value in ours.values())
    print(f"cProfile: xdsclient's own time {total / calls * 1e6:.1f} us per unary call")
    top = sorted(ours.items(), key=lambda item: item[1][2], reverse=True)[:15]
    for (file, line, function), value in top:
        short = file[file.index("xdsclient") :]
        print(f"  {value[2] / calls * 1e6:6.2f} us  {short}:{line} {function}")


async def _profiled(stub: Stub, calls: int) -> dict[tuple[str, int, str], tuple[Any, ...]]:
    """cProfile's table of ``calls`` unary calls one after the other (the count of function
    calls then depends on nothing else: concurrent calls share event-loop turns)."""
    profiler = cProfile.Profile()
    profiler.enable()
    await latencies(stub.unary, calls)
    profiler.disable()
    table: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    return table


# --- what XdsChannel adds, counted: each channel alone in a child process ---


async def counted(port: int, bootstrap_path: str, args: argparse.Namespace) -> None:
    """The counted table (see the module's docstring). The children run while this process's
    loop serves their control plane."""
    runs: list[tuple[str, str | None]] = [("plain", None), ("XdsChannel", None)]
    if args.before:
        runs.append(("XdsChannel (before)", args.before))
    unary = list(runs)
    if args.metadata:
        runs += [(f"{client}{WITH_METADATA}", path) for client, path in unary]
    if args.streams:
        runs += [(f"{client}{STREAMS}", path) for client, path in unary]
    rows: dict[str, dict[str, float]] = {}
    system: dict[str, dict[str, float]] = {}
    for client, path in runs:
        argv = [
            sys.executable, os.path.abspath(__file__), "--child", client, "--port", str(port),
            "--bootstrap", bootstrap_path, "--counted-calls", str(args.counted_calls),
            "--blocks", str(args.blocks), "--stream", str(args.stream),
        ]  # fmt: skip
        env = {**os.environ, **({"PYTHONPATH": path} if path else {})}
        native = await asyncio.to_thread(
            subprocess.run, argv, env=env, capture_output=True, text=True, check=False
        )
        if native.returncode != 0:
            raise RuntimeError(f"{client}: {native.stderr.strip().splitlines()[-1:]}")
        instructions = await asyncio.to_thread(
            callgrind_instructions, [*argv, "--instruction-window"], env
        )
        loop_thread = await asyncio.to_thread(
            callgrind_instructions, [*argv, "--instruction-window"], env, all_threads=False
        )
        rows[client] = {
            **json.loads(native.stdout),
            "instructions": instructions,
            "loop": loop_thread,
        }
        if not client.startswith("plain"):  # our code's rate: its decisions, the loop's thread
            rows[client]["decisions"] = await asyncio.to_thread(
                callgrind_instructions, [*argv, "--decisions-window"], env, all_threads=False
            )
        if args.syscalls:
            system[client] = await asyncio.to_thread(_per_call_system, argv, env, args)
    _print_counted(rows, args)
    if args.syscalls:
        _print_system(system)


_EVENTS = ("task-clock", "context-switches", "cpu-migrations")


def _per_call_system(
    argv: list[str], env: dict[str, str], args: argparse.Namespace
) -> dict[str, float]:
    """A child's system calls by name (strace) and `_EVENTS` (perf stat) per call: a run of
    ``2 * --system-calls`` calls minus a run of ``--system-calls`` (start-up, warm-up and
    close cancel), over ``--system-calls``."""
    calls = args.system_calls
    runs = []
    for count in (calls, 2 * calls):
        run = [*argv, "--calls-only"]
        run[run.index("--counted-calls") + 1] = str(count)
        runs.append({**syscall_counts(run, env), **perf_counts(run, _EVENTS, env)})
    short, long = runs
    return {name: (long[name] - short.get(name, 0)) / calls for name in long}


def _print_system(system: dict[str, dict[str, float]]) -> None:
    print(
        "\nper unary call, each channel alone in a process (a run of twice --system-calls "
        "calls minus a run of --system-calls: system calls of every thread under strace -f, and "
        "perf stat's task-clock, context switches and CPU migrations without it)\n"
    )
    names = sorted(
        {name for row in system.values() for name in row if name not in _EVENTS},
        key=lambda name: -max(row.get(name, 0.0) for row in system.values()),
    )
    shown = [name for name in names if max(row.get(name, 0.0) for row in system.values()) >= 0.5]
    print(
        "| channel | task-clock us | context switches | migrations | system calls | "
        + " | ".join(shown)
        + " |"
    )
    print("|---" + "|---:" * (4 + len(shown)) + "|")
    for client, row in system.items():
        total = sum(value for name, value in row.items() if name not in _EVENTS)
        cells = " | ".join(f"{row.get(name, 0.0):.1f}" for name in shown)
        print(
            f"| {client} | {row.get('task-clock', 0.0) * 1e3:.1f} "
            f"| {row.get('context-switches', 0.0):.2f} | {row.get('cpu-migrations', 0.0):.2f} "
            f"| {total:.1f} | {cells} |"
        )


def _print_counted(rows: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    calls = args.counted_calls
    plain = rows["plain"]
    plain_count = plain["instructions"] / calls
    rate = plain["cpu"] / plain_count  # us per instruction: the process's CPU (kernel too)
    print(
        f"\nwhat XdsChannel adds per call (unary; a stream of {args.stream} messages in the "
        f"'{STREAMS[2:]}' rows), each channel alone in a process ({calls} "
        "sequential calls after a warm-up; instructions: callgrind, every thread; Python "
        f"calls: cProfile; CPU: native, the best of {args.blocks} blocks)\n"
    )
    print(
        "| channel | instructions/call | added | added us at plain's rate "
        "| added us at our code's rate | loop thread's instructions/call | added "
        "| Python calls/call | added | in xdsclient | CPU us/call |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for client, row in rows.items():
        count = row["instructions"] / calls
        added = micros = ours = added_calls = added_loop = ""
        base = rows.get(f"plain{_suffix(client)}", plain)  # the plain channel's same calls
        if not client.startswith("plain"):
            extra = count - base["instructions"] / calls
            own_rate = row["decisions_cpu"] / (row["decisions"] / calls)
            added = f"{extra:,.0f}"
            micros = f"{extra * rate:.1f}"
            ours = f"{extra * own_rate:.1f}"
            added_calls = f"{row['calls'] - base['calls']:.0f}"
            added_loop = f"{(row['loop'] - base['loop']) / calls:,.0f}"
        print(
            f"| {client} | {count:,.0f} | {added} | {micros} | {ours} "
            f"| {row['loop'] / calls:,.0f} | {added_loop} | {row['calls']:.0f} "
            f"| {added_calls} | {row['ours']:.0f} | {row['cpu']:.1f} |"
        )
    print(
        f"\n(plain's rate, this run: its CPU per call over its instructions per call, "
        f"{plain['cpu']:.1f} us / {plain_count:,.0f} = {rate * 1e3:.3f} ns per instruction; "
        f"user-space CPU only: {plain['user'] / plain_count * 1e3:.3f} ns)"
    )
    for client, row in rows.items():
        if "decisions" in row:
            decided = row["decisions"] / calls
            print(
                f"({client}: our code's rate, its decisions per call without I/O (plan, pick, "
                f"pick's end) natively over their instructions on the loop's thread: "
                f"{row['decisions_cpu']:.2f} us / {decided:,.0f} = "
                f"{row['decisions_cpu'] / decided * 1e3:.3f} ns per instruction)"
            )


def _suffix(client: str) -> str:
    """The suffix of a row's name that says its calls (`WITH_METADATA`, `STREAMS`, or none)."""
    return next((end for end in (WITH_METADATA, STREAMS) if client.endswith(end)), "")


def paired_child(args: argparse.Namespace) -> None:
    """``--pairs`` paired runs of the plain channel and XdsChannel (`paired_threads`, unary
    calls, or streams with ``--call-streams``, ``--throughput-calls // 3`` calls a run) in this
    process, whose xdsclient is the one on its path: print {extra: [seconds per call],
    threads: [[channel, thread, part, s]]}."""

    async def run() -> dict[str, Any]:
        async with XdsClient(bootstrap=args.bootstrap) as client:
            plain = grpc.aio.insecure_channel(f"127.0.0.1:{args.port}")
            ours = XdsChannel(f"xds:///{LISTENER}", client=client)
            metadata = METADATA if args.call_metadata else None
            try:
                kind = "stream" if args.call_streams else "unary"
                calls = [
                    getattr(Stub(channel, args.stream, metadata), kind) for channel in (plain, ours)
                ]
                for call in calls:
                    await _calls(call, 200)  # connect, warm up
                extra, threads = await paired_threads(
                    calls[0], calls[1], args.pairs, args.throughput_calls // 3
                )
            finally:
                await plain.close()
                await ours.close()
        return {"extra": extra, "threads": [[*key, value] for key, value in threads.items()]}

    print(json.dumps(asyncio.run(run())))


async def paired_children(port: int, bootstrap_path: str, args: argparse.Namespace) -> None:
    """The paired runs in child processes, this code's and ``--before``'s: alternately, two
    children of each with half the pairs (the machine's load drifts over minutes), then the
    median and quartiles of each code's pairs and its CPU by thread."""
    versions: list[tuple[str, str | None]] = [("XdsChannel", None)]
    if args.before:
        versions.append(("XdsChannel (before)", args.before))
    unary = list(versions)
    if args.metadata:
        versions += [(f"{name}{WITH_METADATA}", path) for name, path in unary]
    if args.streams:
        versions += [(f"{name}{STREAMS}", path) for name, path in unary]
    extra: dict[str, list[float]] = {name: [] for name, _ in versions}
    threads: dict[str, Threads] = {name: {} for name, _ in versions}
    half = max(1, args.pairs // 2)
    for _ in range(2):
        for name, path in versions:
            argv = [
                sys.executable, os.path.abspath(__file__), "--paired-child", "--port", str(port),
                "--bootstrap", bootstrap_path, "--pairs", str(half),
                "--throughput-calls", str(args.throughput_calls), "--stream", str(args.stream),
                *(["--call-metadata"] if name.endswith(WITH_METADATA) else []),
                *(["--call-streams"] if name.endswith(STREAMS) else []),
            ]  # fmt: skip
            env = {**os.environ, **({"PYTHONPATH": path} if path else {})}
            done = await asyncio.to_thread(
                subprocess.run, argv, env=env, capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise RuntimeError(f"{name}: {done.stderr.strip().splitlines()[-1:]}")
            result = json.loads(done.stdout)
            extra[name] += result["extra"]
            for channel, thread, part, value in result["threads"]:
                key = (channel, thread, part)
                threads[name][key] = threads[name].get(key, 0.0) + value
    calls = 2 * half * (args.throughput_calls // 3)
    print(
        f"\npaired CPU per call in child processes (unary; a stream of {args.stream} messages "
        f"in the '{STREAMS[2:]}' rows; XdsChannel minus plain at "
        f"concurrency {CONCURRENCY}, {2 * half} pairs of {args.throughput_calls // 3} calls "
        f"per code, alternating; load average before: {os.getloadavg()[0]:.2f})\n"
    )
    for name, _ in versions:
        print(f"{name}: {quartiles(extra[name])}")
    for name, _ in versions:
        kind = "stream" if name.endswith(STREAMS) else "unary"
        _print_threads(f"{kind} ({name})", threads[name], calls)


def child(args: argparse.Namespace) -> None:
    """One channel's counts: with ``--instruction-window``, its calls inside the window
    callgrind counts (``--decisions-window``: `_decisions` instead); else print {calls, ours,
    cpu, user, and for XdsChannel decisions_cpu} per call as JSON."""
    loop = asyncio.new_event_loop()
    stack = contextlib.AsyncExitStack()
    channel, call = loop.run_until_complete(_opened(stack, args))
    loop.run_until_complete(_calls(call, 200))  # connect, warm up
    if args.calls_only:
        loop.run_until_complete(_calls(call, args.counted_calls))
    elif args.decisions_window:
        window(_decisions, channel, args.counted_calls)
    elif args.instruction_window:
        window(loop.run_until_complete, _calls(call, args.counted_calls))
    else:
        result = loop.run_until_complete(_native(call, args))
        if isinstance(channel, XdsChannel):
            result["decisions_cpu"] = _decisions_cpu(channel, args)
        print(json.dumps(result))
    loop.run_until_complete(stack.aclose())
    loop.close()


async def _opened(
    stack: contextlib.AsyncExitStack, args: argparse.Namespace
) -> tuple[Any, Callable[[], Awaitable[None]]]:
    channel: Any
    if args.child.startswith("plain"):
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{args.port}")
    else:
        client = await stack.enter_async_context(XdsClient(bootstrap=args.bootstrap))
        channel = XdsChannel(f"xds:///{LISTENER}", client=client)
    stack.push_async_callback(channel.close)
    metadata = METADATA if args.child.endswith(WITH_METADATA) else None
    stub = Stub(channel, args.stream, metadata)
    return channel, stub.stream if args.child.endswith(STREAMS) else stub.unary


def _decisions(channel: XdsChannel, count: int) -> None:
    """``count`` times what an XdsChannel unary call decides without I/O, on the channel's own
    configuration and picker: its plan from the request to the OK attempt's end, the pick and
    the pick's end (private parts: the rate of our own code, for pricing our instructions)."""
    core = channel._core
    config = core.config
    assert config is not None
    headers = grpc_header_view(())
    ok = AttemptOutcome(code=Code.OK)
    for _ in range(count):
        now = core.clock()
        request = CallRequest(
            authority=core.authority, path=SAY, deadline=now + 10, channel_id=core.channel_id
        )
        plan = CallPlan.begin(request, config, now=now, rng=core.rng, faults=core.faults)
        step = plan.start(now)
        assert isinstance(step, Attempt)
        picked = core.pick_now(step.cluster, headers, step.request_hash, step.deadline)
        assert isinstance(picked, PickResult)
        core.picker.call_finished(picked, True, now)
        plan.attempt_done(ok, now)


def _decisions_cpu(channel: XdsChannel, args: argparse.Namespace) -> float:
    """`_decisions`' CPU per call natively (us; the best of ``--blocks`` blocks)."""
    count: int = args.counted_calls
    best = float("inf")
    for _ in range(args.blocks):
        cpu = time.process_time()
        _decisions(channel, count)
        best = min(best, time.process_time() - cpu)
    return best / count * 1e6


async def _calls(call: Callable[[], Awaitable[None]], count: int) -> None:
    for _ in range(count):
        await call()


async def _native(
    call: Callable[[], Awaitable[None]], args: argparse.Namespace
) -> dict[str, float]:
    count = args.counted_calls
    profiler = cProfile.Profile()
    profiler.enable()
    await _calls(call, count)
    profiler.disable()
    best = best_user = float("inf")
    for _ in range(args.blocks):
        cpu, user = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_utime
        await _calls(call, count)
        best = min(best, time.process_time() - cpu)
        best_user = min(best_user, resource.getrusage(resource.RUSAGE_SELF).ru_utime - user)
    return {
        **python_calls([profiler], count),
        "cpu": best / count * 1e6,
        "user": best_user / count * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--latency-calls", type=int, default=300)
    parser.add_argument("--throughput-calls", type=int, default=1500)
    parser.add_argument("--stream", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=20, help="paired runs for our CPU per call")
    parser.add_argument(
        "--endpoints", type=int, nargs="*", default=[1, 2000], help="first call at these sizes"
    )
    parser.add_argument(
        "--threads", action="store_true", help="the paired runs' CPU per call by thread too"
    )
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--profile-only",
        action="store_true",
        help="only the counts under cProfile (no timing rounds, no first calls)",
    )
    parser.add_argument(
        "--instructions", action="store_true", help="the counted table too (valgrind)"
    )
    parser.add_argument("--instructions-only", action="store_true", help="the counted table only")
    parser.add_argument("--counted-calls", type=int, default=300)
    parser.add_argument("--blocks", type=int, default=5, help="native CPU blocks per counted row")
    parser.add_argument("--before", help="a checkout of xdsclient to count too (its root)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--instruction-window", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--decisions-window", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calls-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--paired-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--call-metadata", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--call-streams", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--streams",
        action="store_true",
        help="with --instructions(-only): paired and counted rows of server-streaming calls too",
    )
    parser.add_argument(
        "--metadata",
        action="store_true",
        help="with --instructions(-only): paired and counted rows of unary calls with metadata too",
    )
    parser.add_argument(
        "--syscalls",
        action="store_true",
        help="with the counted table: system calls, context switches per call (strace, perf)",
    )
    parser.add_argument(
        "--system-calls", type=int, default=2000, help="calls of the shorter --syscalls run"
    )
    args = parser.parse_args()
    if args.paired_child:
        paired_child(args)
        return
    if args.child:
        child(args)
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
