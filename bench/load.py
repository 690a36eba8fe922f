"""Benchmark: the load tester against the issue's targets (issue 26, "Performance").

One process holds the test control plane (`xdsclient.testing.ControlPlane`) and the simulated
clients. Each client watches listener ``l``: routes to 10 EDS clusters, each with an assignment.
Half-way through, every assignment is updated at once (one `ControlPlane.set_all`).

Measured (targets in brackets):
- all complete: run start to the last client's first complete configuration [10 s];
- update reached all: the push to the last client applying its last changed assignment [2 s];
- ACK p99: response read to ACK written, inside the generator [50 ms];
- memory per client: the process's RSS growth from before the run to its peak, per client
  [150 KB own connections, 64 KB shared]; it includes the control plane's per-stream state,
  since both live in this process;
- generator CPU and whether it saturated.

    python bench/load.py [--clients 1000] [--shared-clients 5000] [--duration 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


def _assignments(port: int) -> list[Any]:
    return [cluster_load_assignment(name, [(f"10.0.{i}.1", port), (f"10.0.{i}.2", port)])
            for i, name in enumerate(NAMES)]  # fmt: skip


def _config() -> list[Any]:
    routes = route_configuration("routes", {f"/{name}/": name for name in NAMES})
    return [api_listener("l", route_config_name="routes"), routes,
            *(cluster(name) for name in NAMES), *_assignments(8080)]  # fmt: skip


async def _case(clients: int, shared: bool, duration: float) -> dict[str, Any]:
    async with ControlPlane() as cp:
        cp.set_all(_config())
        before = _rss()
        peak = [before]

        def sample(progress: Progress) -> None:
            peak[0] = max(peak[0], _rss())

        pushed: list[float] = []

        def push() -> None:
            pushed.append(time.monotonic())
            cp.set_all(_assignments(9090))

        scenario = Scenario(server=cp.address, listener="l", clients=clients, duration=duration,
                            share_connections=shared, push=Push(at=duration / 2),
                            connect_timeout=30)  # fmt: skip
        result = await run(scenario, on_progress=sample, push=push)
    complete_at = max((c.first_config or 0.0) for c in result.per_client)
    return {
        "case": f"{clients} clients, {'shared connection' if shared else 'own connections'}",
        "complete": f"{result.complete}/{clients}",
        "all complete (s)": f"{complete_at:.2f}" if result.complete == clients else "never",
        "first config p50 (s)": f"{result.first_config.percentile(50):.2f}",
        "update reached all (s)": f"{result.push_to_applied.max:.3f}",
        "updates applied": f"{result.push_to_applied.count}/{clients * len(NAMES)}",
        "ACK p99 (ms)": f"{result.ack_latency.percentile(99) * 1000:.1f}",
        "KB per client": f"{(peak[0] - before) / clients / 1024:.0f}",
        "CPU (s)": f"{result.cpu_seconds:.1f}",
        "saturated": "yes" if result.saturated else "no",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--shared-clients", type=int, default=5000)
    parser.add_argument("--duration", type=float, default=30.0)
    args = parser.parse_args()
    rows = []
    for clients, shared in ((args.clients, False), (args.shared_clients, True)):
        if clients:
            rows.append(asyncio.run(_case(clients, shared, args.duration)))
            print(rows[-1], flush=True)
    keys = list(rows[0])
    widths = [max(len(k), *(len(r[k]) for r in rows)) for k in keys]
    for row in [dict(zip(keys, keys, strict=True)), *rows]:
        print("  ".join(row[k].ljust(w) for k, w in zip(keys, widths, strict=True)))


if __name__ == "__main__":
    main()
