"""On demand against subscribed to everything: 10,000 clusters on the test control plane, one
client resolving 100 of them at random (`XdsClient.resolve`, Delta), one subscribed to all of
them (a Delta wildcard watch of CDS), and one resolving the same 100 at request time through a
configuration watch (`ConfigWatch.resolve_cluster`: each cluster and its endpoints in a
published snapshot, as a data plane needs them), in one run.

Prints one table: what each client holds (bytes that tracemalloc sees allocated by the client,
the server's share filtered out: the views and their serialized bytes; upb's own memory is not
traced), the requests it sent and the bytes of responses it read, the resolve latency (p50 /
p99 over the 100 resolves on loopback, each a new name: one Delta request and its answer), and
the wall time to have what it needs.

    python bench/on_demand.py [--clusters 10000] [--resolves 100] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from envoy.config.route.v3 import route_components_pb2, route_pb2

from xdsclient import Available, XdsClient, XdsConfig
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane, builders

_LISTENER = "bench-on-demand"

_IGNORED = ("*/xdsclient/testing/*", "*/grpc/*", "*/asyncio/*", tracemalloc.__file__)


def _held() -> int:
    """Bytes traced now, without the server's, gRPC's and the loop's allocations (after a
    collection, so that an earlier client's garbage is not counted against the next)."""
    gc.collect()
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, pattern) for pattern in _IGNORED]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


async def _measure(
    control_plane: ControlPlane, work: Callable[[XdsClient], Awaitable[list[float]]]
) -> dict[str, Any]:
    """Run ``work`` on a fresh Delta client: held bytes, requests, response bytes, latencies."""
    requests_before = len(control_plane.requests)
    responses_before = len(control_plane.responses)
    before = _held()
    start = time.perf_counter()
    async with XdsClient(control_plane.address, node_id="bench", delta=True) as client:
        latencies = await work(client)
        elapsed = time.perf_counter() - start
        held = _held() - before
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


async def main(clusters: int, resolves: int, seed: int) -> None:
    names = [f"cluster-{i:05d}" for i in range(clusters)]
    chosen = random.Random(seed).sample(names, resolves)
    tracemalloc.start()
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

        lean = await _measure(control_plane, on_demand)
        walked = await _measure(control_plane, request_time)  # before the big client's garbage
        full = await _measure(control_plane, everything)
    tracemalloc.stop()
    _print(clusters, resolves, lean, full, walked)


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
    lean: dict[str, Any],
    full: dict[str, Any],
    walked: dict[str, Any],
) -> None:
    print(f"{clusters} clusters served; Delta; {resolves} resolved at random vs all subscribed")
    print(f"{'':28} {'on demand':>14} {'everything':>14} {'ratio':>8} {'config watch':>14}")
    for label, key in (
        ("client-held bytes (traced)", "held"),
        ("resources cached", "cached"),
        ("requests sent", "requests"),
        ("resources received", "response_names"),
    ):
        ratio = lean[key] / full[key] if full[key] else float("nan")
        print(f"{label:28} {lean[key]:>14,} {full[key]:>14,} {ratio:>8.1%} {walked[key]:>14,}")
    print(
        f"{'wall time (s)':28} {lean['elapsed']:>14.2f} {full['elapsed']:>14.2f}"
        f" {'':>8} {walked['elapsed']:>14.2f}"
    )
    p50, p99 = _percentiles(lean["latencies"])
    print(f"resolve latency on loopback: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    p50, p99 = _percentiles(walked["latencies"])
    print(
        "resolve_cluster latency (cluster and endpoints in a published snapshot):"
        f" p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--resolves", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(main(args.clusters, args.resolves, args.seed))
