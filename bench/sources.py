"""Benchmark: N clusters through each transport — gRPC (ADS SotW), a watched file, REST-JSON.

For each source and N: one client watches every cluster (the wildcard) and we time
- load: from starting the client to all N clusters in its cache;
- update: from changing every cluster at the source (a new file moved in place; a control plane
  update for gRPC and REST) to all N new versions in the cache.
All in one process, on loopback; the file is written in binary protobuf and in JSON.

    python bench/sources.py [--sizes 1000 10000] [--refresh 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2

from xdsclient import CallbackWatcher, ClientOptions, FileSource, RestSource, XdsClient
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane

OPTIONS = ClientOptions(does_not_exist_timeout=30.0)


def cluster(name: str, seconds: int) -> Any:
    message = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.EDS)
    message.eds_cluster_config.eds_config.ads.SetInParent()
    message.connect_timeout.seconds = seconds
    return message


def serve(cp: ControlPlane, n: int, seconds: int) -> None:
    cp.set_all(cluster(f"c{i}", seconds) for i in range(n))


def all_at(client: XdsClient, n: int, seconds: int) -> bool:
    states = client.resource_states()
    done = sum(
        1
        for s in states
        if s.value is not None and s.value.proto.connect_timeout.seconds == seconds
    )
    return done >= n


async def until(predicate: Any, timeout: float = 300.0) -> float:
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > timeout:
            raise TimeoutError
        await asyncio.sleep(0.002)
    return time.perf_counter() - start


async def measure(kind: str, n: int, refresh: float, directory: Path) -> tuple[float, float]:
    async with ControlPlane() as cp:
        serve(cp, n, 1)
        path = directory / ("cds.pb" if kind == "file (binary)" else "cds.json")
        if kind.startswith("file"):
            cp.write_file(path, CLUSTER.type_url)
            client = XdsClient(
                node_id="b", sources={CLUSTER: FileSource(path=str(path))}, options=OPTIONS
            )
        elif kind == "rest":
            url = (await cp.serve_rest()).url
            client = XdsClient(
                node_id="b",
                sources={CLUSTER: RestSource(url=url, refresh_delay=refresh)},
                options=OPTIONS,
            )
        else:
            client = XdsClient(cp.address, node_id="b", options=OPTIONS)
        start = time.perf_counter()
        async with client:
            client.add_watcher(CLUSTER, "*", CallbackWatcher(lambda event: None))
            await until(lambda: all_at(client, n, 1))
            load = time.perf_counter() - start
            start = time.perf_counter()
            serve(cp, n, 2)
            if kind.startswith("file"):
                cp.write_file(path, CLUSTER.type_url)
            await until(lambda: all_at(client, n, 2))
            update = time.perf_counter() - start
        return load, update


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--refresh", type=float, default=0.05, help="REST refresh_delay (s)")
    args = parser.parse_args()
    print(f"{'source':<15} {'N':>7} {'load s':>8} {'update s':>9}")
    with tempfile.TemporaryDirectory() as directory:
        for n in args.sizes:
            for kind in ("grpc ads-sotw", "file (binary)", "file (json)", "rest"):
                load, update = asyncio.run(measure(kind, n, args.refresh, Path(directory)))
                print(f"{kind:<15} {n:>7} {load:>8.3f} {update:>9.3f}", flush=True)


if __name__ == "__main__":
    main()
