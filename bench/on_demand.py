"""On demand against subscribed to everything: 10,000 clusters on the test control plane, one
client resolving 100 of them at random (`XdsClient.resolve`, Delta), one subscribed to all of
them (a Delta wildcard watch of CDS), and one resolving the same 100 at request time through a
configuration watch (`ConfigWatch.resolve_cluster`: each cluster and its endpoints in a
published snapshot, as a data plane needs them), in one run.

Prints one table: what each client holds (bytes that tracemalloc sees allocated by the client
and still live while it runs: every allocation made under the client's code, the event loop's
objects it owns included, and none made under the test control plane's, which runs in the same
process; upb's own memory is not traced), the requests it sent and the resources it received,
the resolve latency (p50 / p99 over the 100 resolves on loopback, each a new name: one Delta
request and its answer), and the wall time to have what it needs. A first client resolves one
other cluster before any is measured, so that no measured client pays the process's first
imports; latencies and wall times come from a second client of each kind, run untraced.

``--before PATH`` runs the same at once in a second process with the package of the checkout at
PATH first on the path, and prints its on-demand and everything columns beside these.

    python bench/on_demand.py [--clusters 10000] [--resolves 100] [--seed 1] [--before PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import functools
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from envoy.config.route.v3 import route_components_pb2, route_pb2

from xdsclient import Available, XdsClient, XdsConfig
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane, builders

_LISTENER = "bench-on-demand"

_SERVER = "*/xdsclient/testing/*"
_CLIENT = "*/xdsclient/*"
_FRAMES = 16  # deep enough to see the client's frame under the loop's and gRPC's


@functools.cache
def _whose(filename: str) -> str | None:
    """``server`` or ``client`` for a file of either, else None."""
    if fnmatch.fnmatch(filename, _SERVER):
        return "server"
    return "client" if fnmatch.fnmatch(filename, _CLIENT) else None


def _is_client(frames: tracemalloc.Traceback) -> bool:
    """Whether an allocation is the client's: made under its code, not under the server's."""
    owners = {_whose(frame.filename) for frame in frames}
    return "client" in owners and "server" not in owners


def _forget_traces() -> None:
    """Start counting afresh: what was allocated before is no longer traced (so an earlier
    client's state, freed while the next one runs, is not subtracted from the next one)."""
    gc.collect()
    tracemalloc.clear_traces()


def _held() -> int:
    """Bytes allocated by client code since `_forget_traces` and still live (after a
    collection); 0 when not tracing."""
    gc.collect()
    if not tracemalloc.is_tracing():
        return 0
    snapshot = tracemalloc.take_snapshot()
    return sum(trace.size for trace in snapshot.traces if _is_client(trace.traceback))


async def _measure(
    control_plane: ControlPlane, work: Callable[[XdsClient], Awaitable[list[float]]]
) -> dict[str, Any]:
    """Run ``work`` on a fresh Delta client: held bytes (when tracing), requests, resources
    received, latencies, wall time."""
    requests_before = len(control_plane.requests)
    responses_before = len(control_plane.responses)
    _forget_traces()
    start = time.perf_counter()
    async with XdsClient(control_plane.address, node_id="bench", delta=True) as client:
        latencies = await work(client)
        elapsed = time.perf_counter() - start
        held = _held()
        cached = len(client.resource_states())
    sent = control_plane.requests[requests_before:]
    read = control_plane.responses[responses_before:]
    return {
        "held": held,
        "cached": cached,
        "requests": len(sent),
        "response_names": sum(len(r.names) for r in read),
        "latencies": latencies,
        "elapsed": elapsed,
    }


async def run(clusters: int, resolves: int, seed: int) -> dict[str, dict[str, Any]]:
    """The three clients' measurements, by column."""
    names = [f"cluster-{i:05d}" for i in range(clusters)]
    chosen = random.Random(seed).sample(names, resolves)
    spare = next(name for name in names if name not in chosen)
    tracemalloc.start(_FRAMES)
    async with ControlPlane() as control_plane:
        control_plane.set_all(builders.cluster(name) for name in names)
        control_plane.set_all(
            builders.cluster_load_assignment(name, [("127.0.0.1", 8080)]) for name in chosen
        )
        control_plane.set_all([builders.api_listener(_LISTENER), _header_routes()])

        async def on_demand(client: XdsClient) -> list[float]:
            latencies = []
            for name in chosen:
                began = time.perf_counter()
                outcome = await client.resolve(CLUSTER, name, timeout=10.0)
                latencies.append(time.perf_counter() - began)
                assert isinstance(outcome, Available), outcome
            return latencies

        async def everything(client: XdsClient) -> list[float]:
            seen: set[str] = set()
            async with client.watch(CLUSTER, "*") as events:
                async for event in events:
                    seen.add(event.name)
                    if len(seen) == clusters:
                        break
            return []

        async def request_time(client: XdsClient) -> list[float]:
            latencies = []
            async with client.watch_config(_LISTENER) as configs:
                first = await anext(configs)
                assert isinstance(first, XdsConfig), first
                with_header = first.virtual_host.http_routes[0]
                timeout = first.on_demand_timeout(with_header)
                assert timeout is not None
                for name in chosen:
                    began = time.perf_counter()
                    outcome = await configs.resolve_cluster(name, timeout=10.0)
                    latencies.append(time.perf_counter() - began)
                    assert isinstance(outcome, Available), outcome
                latest = configs.latest
                assert latest is not None
                assert len(latest.dynamic_clusters) == len(chosen)
            return latencies

        async def warm_up(client: XdsClient) -> list[float]:
            await client.resolve(CLUSTER, spare, timeout=10.0)
            return []

        await _measure(control_plane, warm_up)
        lean = await _measure(control_plane, on_demand)
        walked = await _measure(control_plane, request_time)  # before the big client's garbage
        full = await _measure(control_plane, everything)
        tracemalloc.stop()
        # times on fresh clients, untraced (tracing slows every allocation)
        for traced, work in ((lean, on_demand), (walked, request_time), (full, everything)):
            timed = await _measure(control_plane, work)
            traced.update(latencies=timed["latencies"], elapsed=timed["elapsed"])
    return {"on demand": lean, "everything": full, "config watch": walked}


def _before(path: str, clusters: int, resolves: int, seed: int) -> subprocess.Popen[str]:
    """The same run with the package of the checkout at ``path``, in a second process started
    now (it runs beside this one: both see the same machine)."""
    if not os.path.isfile(os.path.join(path, "xdsclient", "__init__.py")):
        raise SystemExit(f"--before {path}: no xdsclient package there")
    command = [sys.executable, __file__, "--json", "--clusters", str(clusters)]
    return subprocess.Popen(
        [*command, "--resolves", str(resolves), "--seed", str(seed)],
        env={**os.environ, "PYTHONPATH": os.path.abspath(path)},
        stdout=subprocess.PIPE,
        text=True,
    )


def _result(process: subprocess.Popen[str]) -> dict[str, dict[str, Any]]:
    """What the ``--before`` process printed."""
    out, _ = process.communicate()
    if process.returncode:
        raise SystemExit(f"the --before run failed (exit status {process.returncode})")
    result: dict[str, dict[str, Any]] = json.loads(out)
    return result


def _header_routes() -> Any:
    """One virtual host whose only route takes its cluster from a request header."""
    message = route_pb2.RouteConfiguration(name=f"{_LISTENER}-routes")
    vhost = message.virtual_hosts.add(name="vh", domains=["*"])
    route = vhost.routes.add(route=route_components_pb2.RouteAction(cluster_header="x-cluster"))
    route.match.prefix = "/"
    return message


def _percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p99 in milliseconds."""
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def _print(
    clusters: int,
    resolves: int,
    now: dict[str, dict[str, Any]],
    before: dict[str, dict[str, Any]] | None,
) -> None:
    lean, full, walked = now["on demand"], now["everything"], now["config watch"]
    print(f"{clusters} clusters served; Delta; {resolves} resolved at random vs all subscribed")
    head = f"{'':28} {'on demand':>12} {'everything':>12} {'ratio':>7} {'config watch':>12}"
    if before is not None:
        head += f" {'bef. on dem.':>12} {'bef. every.':>12} {'bef. ratio':>10}"
    print(head)
    for label, key in (
        ("client-held bytes (traced)", "held"),
        ("resources cached", "cached"),
        ("requests sent", "requests"),
        ("resources received", "response_names"),
    ):
        line = f"{label:28} {lean[key]:>12,} {full[key]:>12,} {_ratio(lean, full, key):>7}"
        line += f" {walked[key]:>12,}"
        if before is not None:
            was_lean, was_full = before["on demand"], before["everything"]
            line += f" {was_lean[key]:>12,} {was_full[key]:>12,}"
            line += f" {_ratio(was_lean, was_full, key):>10}"
        print(line)
    line = f"{'wall time (s)':28} {lean['elapsed']:>12.2f} {full['elapsed']:>12.2f} {'':>7}"
    line += f" {walked['elapsed']:>12.2f}"
    if before is not None:
        line += f" {before['on demand']['elapsed']:>12.2f} {before['everything']['elapsed']:>12.2f}"
    print(line)
    runs = [("", now)] if before is None else [("", now), ("before: ", before)]
    for label, key in (
        ("resolve latency on loopback", "on demand"),
        ("resolve_cluster latency (cluster and endpoints in a snapshot)", "config watch"),
    ):
        text = "; ".join(
            "{}p50 {:.2f} ms, p99 {:.2f} ms".format(tag, *_percentiles(run[key]["latencies"]))
            for tag, run in runs
        )
        print(f"{label}: {text}")


def _ratio(lean: dict[str, Any], full: dict[str, Any], key: str) -> str:
    return f"{lean[key] / full[key]:.2%}" if full[key] else "-"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--resolves", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--before", metavar="PATH", help="also run the package of the checkout at PATH"
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    other = _before(args.before, args.clusters, args.resolves, args.seed) if args.before else None
    result = asyncio.run(run(args.clusters, args.resolves, args.seed))
    if args.json:
        print(json.dumps(result))
    else:
        _print(args.clusters, args.resolves, result, None if other is None else _result(other))
