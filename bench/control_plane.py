"""Benchmark: the test control plane serving a thousand client streams, and one push to all.

`xdsclient.testing.ControlPlane` runs in its own process (so its CPU time and memory are its
own) with one listener -> one route configuration -> C EDS clusters -> C assignments. This
process opens S raw ADS streams (grpc.aio, no xDS client: each stream only asks for the known
names in walk order and ACKs every response) over S / P channels, each channel its own TCP
connection. Measured:

- full config: from opening the first stream until every stream holds all C assignments
  (p50 and max over the streams);
- push: the control plane sets a new version of every assignment (one `set_all`); from the
  command until every stream received all C new ones (p50 and max);
- the server's CPU seconds (user + system) spent in each phase, and its RSS after them.

Loopback only; everything is bounded by ``--timeout`` and ends by itself.

    python bench/control_plane.py [--streams 1000] [--clusters 10] [--per-channel 100]
                                  [--variants sotw delta] [--server-src DIR]

``--server-src DIR`` runs the control plane from another checkout's source tree (e.g. main's,
to compare before and after).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import attrs

sys.path.insert(0, os.path.dirname(__file__))

import grpc
import xds_config as cfg
from child_server import stop_child_sync
from envoy.service.discovery.v3 import discovery_pb2

LDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
ADS = "/envoy.service.discovery.v3.AggregatedDiscoveryService/"


# ---------------------------------------------------------------------------- the server process


def serve(clusters: int) -> None:
    """The control plane's process: answers ``push``, ``stats`` and ``quit`` on stdin."""
    asyncio.run(_serve(clusters))


async def _serve(clusters: int) -> None:
    from xdsclient.testing import ControlPlane

    loop = asyncio.get_running_loop()
    async with ControlPlane() as cp:
        cp.set_all(
            [cfg.listener(), cfg.route_configuration(clusters)]
            + [cfg.cluster(i) for i in range(clusters)]
            + [cfg.endpoints(i) for i in range(clusters)]
        )
        print(cp.port, flush=True)
        generation = 0
        while True:
            line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if line == "push":
                generation += 1
                cp.set_all(cfg.endpoints(i, generation=generation) for i in range(clusters))
                print("pushed", flush=True)
            elif line == "stats":
                usage = resource.getrusage(resource.RUSAGE_SELF)
                print(f"{usage.ru_utime + usage.ru_stime} {_rss_mib()}", flush=True)
            else:
                return


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# ---------------------------------------------------------------------------- the client streams


@attrs.define
class _Stream:
    """One raw ADS stream walking listener -> route -> clusters -> assignments."""

    delta: bool
    clusters: int
    call: Any = None
    received: int = 0  # assignments received since the mark
    complete_at: float | None = None
    pushed_at: float | None = None
    pushing: bool = False
    asked: set[str] = attrs.Factory(set)  # the types requested so far
    failed: str | None = None  # the gRPC status the stream failed with (it is not retried)

    def requests(self, type_url: str, names: list[str], nonce: str = "", version: str = "") -> Any:
        if self.delta:
            request = discovery_pb2.DeltaDiscoveryRequest(
                type_url=type_url, response_nonce=nonce, resource_names_subscribe=names
            )
        else:
            request = discovery_pb2.DiscoveryRequest(
                type_url=type_url, resource_names=names, response_nonce=nonce, version_info=version
            )
        return request

    async def run(
        self, channel: Any, node: str, done: asyncio.Event, pushed: asyncio.Event
    ) -> None:
        try:
            await self._walk(channel, node, done, pushed)
        except grpc.aio.AioRpcError as exc:
            self.failed = exc.code().name
            done.set()
            pushed.set()

    async def _walk(
        self, channel: Any, node: str, done: asyncio.Event, pushed: asyncio.Event
    ) -> None:
        method = "DeltaAggregatedResources" if self.delta else "StreamAggregatedResources"
        request_class = (
            discovery_pb2.DeltaDiscoveryRequest if self.delta else discovery_pb2.DiscoveryRequest
        )
        response_class = (
            discovery_pb2.DeltaDiscoveryResponse if self.delta else discovery_pb2.DiscoveryResponse
        )
        self.call = channel.stream_stream(
            ADS + method,
            request_serializer=request_class.SerializeToString,
            response_deserializer=response_class.FromString,
        )()
        first = self.requests(LDS, [cfg.LISTENER])
        first.node.id = node
        await self.call.write(first)
        names = {
            LDS: [cfg.LISTENER],
            RDS: [cfg.ROUTE],
            CDS: [cfg.cluster_name(i) for i in range(self.clusters)],
            EDS: [cfg.cluster_name(i) for i in range(self.clusters)],
        }
        following = {LDS: RDS, RDS: CDS, CDS: EDS}
        async for response in self.call:
            type_url = response.type_url
            # The ACK: names are already subscribed (Delta) or the same again (SotW).
            ack = self.requests(type_url, [] if self.delta else names[type_url], response.nonce,
                                "" if self.delta else response.version_info)  # fmt: skip
            await self.call.write(ack)
            after = following.get(type_url)
            if after is not None and after not in self.asked:
                self.asked.add(after)
                await self.call.write(self.requests(after, names[after]))
            if type_url == EDS:
                self.received += len(response.resources)
                if self.received >= self.clusters:
                    self.received = 0
                    if self.pushing:
                        self.pushed_at = time.monotonic()
                        pushed.set()
                    elif self.complete_at is None:
                        self.complete_at = time.monotonic()
                        done.set()


@attrs.frozen
class Result:
    variant: str
    streams: int
    full_p50: float
    full_max: float
    push_p50: float
    push_max: float
    cpu_full: float
    cpu_push: float
    rss_mib: float


class _Server:
    def __init__(self, clusters: int, source: str | None) -> None:
        env = dict(os.environ, GRPC_VERBOSITY="NONE")
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (source, os.path.dirname(__file__), env.get("PYTHONPATH")) if p
        )
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--clusters", str(clusters)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self.port = int(self._line())

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit("the control plane process ended")
        return line

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._line().strip()

    def stats(self) -> tuple[float, float]:
        cpu, rss = self.ask("stats").split()
        return float(cpu), float(rss)

    def close(self) -> None:
        stop_child_sync(self.process, grace=10)


def _check(streams: list[_Stream]) -> None:
    failed = collections.Counter(s.failed for s in streams if s.failed is not None)
    if failed:
        raise SystemExit(f"{failed.total()} of {len(streams)} streams failed: {dict(failed)}")


async def run(args: Any, delta: bool) -> Result:
    server = _Server(args.clusters, args.server_src)
    channels: list[Any] = []
    tasks: list[asyncio.Task[None]] = []
    try:
        cpu_start, _ = server.stats()
        options = [("grpc.use_local_subchannel_pool", 1)]  # a TCP connection per channel
        count = -(-args.streams // args.per_channel)
        channels = [
            grpc.aio.insecure_channel(f"127.0.0.1:{server.port}", options=options)
            for _ in range(count)
        ]
        streams = [_Stream(delta=delta, clusters=args.clusters) for _ in range(args.streams)]
        done, pushed = asyncio.Event(), asyncio.Event()
        start = time.monotonic()
        async with asyncio.timeout(args.timeout):
            tasks = [
                asyncio.create_task(s.run(channels[i % count], f"bench-{i}", done, pushed))
                for i, s in enumerate(streams)
            ]
            while any(s.complete_at is None and s.failed is None for s in streams):
                done.clear()
                await done.wait()
            _check(streams)
            cpu_full, _ = server.stats()
            for s in streams:
                s.pushing = True
            push_start = time.monotonic()
            server.ask("push")
            while any(s.pushed_at is None and s.failed is None for s in streams):
                pushed.clear()
                await pushed.wait()
            _check(streams)
            cpu_push, rss = server.stats()
        full = [s.complete_at - start for s in streams if s.complete_at is not None]
        push = [s.pushed_at - push_start for s in streams if s.pushed_at is not None]
        return Result(
            variant="delta" if delta else "sotw",
            streams=args.streams,
            full_p50=statistics.median(full),
            full_max=max(full),
            push_p50=statistics.median(push),
            push_max=max(push),
            cpu_full=cpu_full - cpu_start,
            cpu_push=cpu_push - cpu_full,
            rss_mib=rss,
        )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel in channels:
            await channel.close()
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--per-channel", type=int, default=100)
    parser.add_argument(
        "--variants", nargs="+", choices=("sotw", "delta"), default=["sotw", "delta"]
    )
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--server-src", help="run the control plane from this source tree")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.clusters)
        return
    header = ("variant", "streams", "full p50", "full max", "push p50", "push max",
              "cpu full", "cpu push", "rss MiB")  # fmt: skip
    print("{:<8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}".format(*header))
    for variant in args.variants:
        r = asyncio.run(run(args, variant == "delta"))
        print(
            f"{r.variant:<8} {r.streams:>7} {r.full_p50:>8.3f}s {r.full_max:>8.3f}s "
            f"{r.push_p50:>8.3f}s {r.push_max:>8.3f}s {r.cpu_full:>8.2f}s {r.cpu_push:>8.2f}s "
            f"{r.rss_mib:>8.1f}"
        )


if __name__ == "__main__":
    main()
