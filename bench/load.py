"""Benchmark: the load tester against its performance targets (docs/load-testing.md, "Performance").

The test control plane (`xdsclient.testing.ControlPlane`) runs in its own process, so what is
measured here is the generator alone: its CPU time and memory are this process's. Each client
watches listener ``l``: routes to 10 EDS clusters, each with an assignment. Half-way through,
every assignment is updated at once (one `ControlPlane.set_all`, asked of the server process
over its stdin; the push time is taken just before asking).

Measured (targets in brackets):
- all complete: run start to the last client's first complete configuration [10 s];
- update reached all: the push to the last client applying its last changed assignment [2 s];
- ACK p99: response read to its ACK handed to gRPC, inside the generator [50 ms];
- memory per client: the generator's RSS growth from before the run to its peak, per client
  [150 KB own connections, 64 KB shared]; each case runs in a fresh process;
- the generator's CPU seconds (gRPC's threads included), its largest event-loop lag, whether
  it saturated, and the server's CPU seconds over the run.

    python bench/load.py [--clients 1000] [--shared-clients 5000] [--duration 40]
                         [--in-process]

``--in-process`` keeps the control plane in this process (the first pass's set-up). To compare
with another checkout, copy this file into its ``bench/`` and run it there: it imports the
``xdsclient`` beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from child_server import stop_child  # this folder: first on the path, as a script's

from xdsclient.load import Progress, Push, Scenario, run
from xdsclient.testing import ControlPlane
from xdsclient.testing.builders import (
    api_listener,
    cluster,
    cluster_load_assignment,
    route_configuration,
)

NAMES = [f"cluster-{k}" for k in range(10)]


def _rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _assignments(port: int) -> list[Any]:
    return [cluster_load_assignment(name, [(f"10.0.{i}.1", port), (f"10.0.{i}.2", port)])
            for i, name in enumerate(NAMES)]  # fmt: skip


def _config() -> list[Any]:
    routes = route_configuration("routes", {f"/{name}/": name for name in NAMES})
    return [api_listener("l", route_config_name="routes"), routes,
            *(cluster(name) for name in NAMES), *_assignments(8080)]  # fmt: skip


# ---------------------------------------------------------------------------- the server process


async def _serve() -> None:
    """The control plane's process: prints its port, then answers ``push``, ``cpu``, ``quit``."""
    loop = asyncio.get_running_loop()
    async with ControlPlane() as cp:
        cp.set_all(_config())
        print(cp.port, flush=True)
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if line == "push":
                cp.set_all(_assignments(9090))
                print("pushed", flush=True)
            elif line == "cpu":
                print(_cpu(), flush=True)
            else:
                return


class _Server:
    """The control plane in a child process, spoken to over its stdin and stdout."""

    def __init__(self, process: asyncio.subprocess.Process, port: int) -> None:
        self.process = process
        self.address = f"127.0.0.1:{port}"

    @classmethod
    async def start(cls) -> _Server:
        env = dict(os.environ, GRPC_VERBOSITY="NONE")
        process = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--serve", env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        server = cls(process, 0)
        server.address = f"127.0.0.1:{int(await server._line())}"
        return server

    async def _line(self) -> str:
        assert self.process.stdout is not None
        line = await self.process.stdout.readline()
        if not line:
            raise SystemExit("the control plane process ended")
        return line.decode().strip()

    async def ask(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command.encode() + b"\n")
        await self.process.stdin.drain()
        return await self._line()

    async def close(self) -> None:
        await stop_child(self.process, grace=10)


# ---------------------------------------------------------------------------- one case


async def _measure(
    address: str, push: Callable[[], Awaitable[None] | None], clients: int, shared: bool,
    duration: float,
) -> tuple[Any, int]:  # fmt: skip
    before = _rss()
    peak = [before]

    def sample(progress: Progress) -> None:
        peak[0] = max(peak[0], _rss())

    scenario = Scenario(server=address, listener="l", clients=clients, duration=duration,
                        share_connections=shared, push=Push(at=duration / 2),
                        connect_timeout=30)  # fmt: skip
    result = await run(scenario, on_progress=sample, push=push)
    return result, peak[0] - before


async def _case(clients: int, shared: bool, duration: float, in_process: bool) -> dict[str, Any]:
    server_cpu = "-"
    if in_process:
        async with ControlPlane() as cp:
            cp.set_all(_config())
            result, grown = await _measure(
                cp.address, lambda: cp.set_all(_assignments(9090)), clients, shared, duration
            )
    else:
        server = await _Server.start()
        try:
            cpu0 = float(await server.ask("cpu"))

            async def push() -> None:
                await server.ask("push")

            result, grown = await _measure(server.address, push, clients, shared, duration)
            server_cpu = f"{float(await server.ask('cpu')) - cpu0:.1f}"
        finally:
            await server.close()
    complete_at = max((c.first_config or 0.0) for c in result.per_client)
    return {
        "case": f"{clients} clients, {'shared connection' if shared else 'own connections'}",
        "complete": f"{result.complete}/{clients}",
        "all complete (s)": f"{complete_at:.2f}" if result.complete == clients else "never",
        "first config p50 (s)": f"{result.first_config.percentile(50):.2f}",
        "update reached all (s)": f"{result.push_to_applied.max:.3f}",
        "updates applied": f"{result.push_to_applied.count}/{clients * len(NAMES)}",
        "ACK p50 (ms)": f"{result.ack_latency.percentile(50) * 1000:.1f}",
        "ACK p99 (ms)": f"{result.ack_latency.percentile(99) * 1000:.1f}",
        "KB per client": f"{grown / clients / 1024:.0f}",
        "CPU (s)": f"{result.cpu_seconds:.1f}",
        "loop lag max (ms)": f"{result.loop_lag_max * 1000:.0f}",
        "saturated": "yes" if result.saturated else "no",
        "stream errors": str(sum(result.errors.values())),
        "server CPU (s)": server_cpu,
    }


def _in_child(clients: int, shared: bool, args: argparse.Namespace) -> dict[str, Any]:
    """One case in a fresh process: memory per client is then the case's own, not shrunk by
    the heap an earlier case grew and freed (42 KB against 58 KB at 5,000 shared clients)."""
    command = [sys.executable, __file__, "--one", str(clients), "--duration", str(args.duration)]
    command += ["--shared"] if shared else []
    command += ["--in-process"] if args.in_process else []
    env = dict(os.environ, GRPC_VERBOSITY="NONE")
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, check=True, text=True)
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--shared-clients", type=int, default=5000)
    parser.add_argument("--duration", type=float, default=40.0)
    parser.add_argument("--in-process", action="store_true",
                        help="run the control plane in this process")  # fmt: skip
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--shared", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    if args.one is not None:
        row = asyncio.run(_case(args.one, args.shared, args.duration, args.in_process))
        print(json.dumps(row), flush=True)
        return
    rows = []
    for clients, shared in ((args.clients, False), (args.shared_clients, True)):
        if clients:
            started = time.monotonic()
            rows.append(_in_child(clients, shared, args))
            print(rows[-1], f"({time.monotonic() - started:.0f} s)", flush=True)
    keys = list(rows[0])
    widths = [max(len(k), *(len(r[k]) for r in rows)) for k in keys]
    for row in [dict(zip(keys, keys, strict=True)), *rows]:
        print("  ".join(row[k].ljust(w) for k, w in zip(keys, widths, strict=True)))


if __name__ == "__main__":
    main()
