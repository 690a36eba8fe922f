"""One xDS client loading the benchmark config, run in its own process by bench/e2e.py.

    python bench/e2e_worker.py xdsclient|grpcio ADDRESS

It loads the listener, its route configuration, every cluster and every endpoint assignment,
keeps watching until its standard input closes, then prints its peak RSS (KiB) and exits. Ours
also prints its RSS once ``xdsclient`` is imported, before any resource (``import-rss``).
Ours watches the complete configuration (the dependency walk) and prints a line per snapshot,
and after the first (the full load) the CPU time the process spent on it, all threads and the
event loop's thread alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

import xds_config as cfg


async def run_xdsclient(address: str) -> None:
    """Watch the listener's complete configuration; for each snapshot print when it came and
    its endpoints were read (the machine's monotonic clock, which the parent shares) and the sum
    of the endpoint generations it holds, so the parent can tell which push it completes."""
    from xdsclient import XdsClient, XdsConfig

    print(f"import-rss {current_rss_kib()}", flush=True)  # the client's baseline, no resource
    if os.environ.get("XDSCLIENT_BENCH_TIMELINE"):
        _note_steps()
    _LOAD_PROFILE.start()
    _LOAD_CPU.append(time.process_time())
    _LOOP_CPU.append(time.thread_time())
    async with XdsClient(address, node_id="bench-xdsclient") as client:
        stop = asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        async with client.watch_config(cfg.LISTENER) as configs:
            updates = asyncio.ensure_future(_report(configs, XdsConfig))
            await stop
            updates.cancel()


async def _report(configs: Any, config_class: type) -> None:
    profile = _Profile(os.environ.get("XDSCLIENT_BENCH_PROFILE"))
    try:
        async for update in configs:
            if isinstance(update, config_class):
                # Read every view's localities first, as a balancer would: built on first read
                # (compiled), they are part of the snapshot's cost.
                generations = _generations(update)
                now = time.monotonic()
                print(f"snapshot {now} {generations}", flush=True)
                if len(_LOAD_CPU) == 1:  # the full load ends with the first snapshot
                    _LOAD_PROFILE.stop()
                    print(f"load-cpu {time.process_time() - _LOAD_CPU[0]}", flush=True)
                    print(f"load-loop-cpu {time.thread_time() - _LOOP_CPU[0]}", flush=True)
                    _LOAD_CPU.append(now)
                profile.start()  # after the full load: the updates only
    finally:
        profile.stop()


class _Profile:
    """With ``XDSCLIENT_BENCH_PROFILE=PATH``: cProfile the client from its first snapshot on (the
    updates, not the full load), written to PATH (pstats) when the worker ends. With
    ``XDSCLIENT_BENCH_PROFILE_LOAD=PATH``: the full load, from the client's start to its first
    snapshot."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._profile: Any = None

    def start(self) -> None:
        if self._path and self._profile is None:
            import cProfile

            self._profile = cProfile.Profile()
            self._profile.enable()

    def stop(self) -> None:
        if self._profile is not None:
            self._profile.disable()
            self._profile.dump_stats(self._path)
            self._path, self._profile = None, None


_LOAD_PROFILE = _Profile(os.environ.get("XDSCLIENT_BENCH_PROFILE_LOAD"))
#: the CPU time when the client started (then when its full load ended)
_LOAD_CPU: list[float] = []
#: the loop thread's CPU time when the client started (what the full load's own path costs,
#: without gRPC's threads)
_LOOP_CPU: list[float] = []


def _note_steps() -> None:
    """``XDSCLIENT_BENCH_TIMELINE=1`` (bench/e2e.py ``--update-timeline``): for each endpoint
    response, print when the client's loop had it read (gRPC's read and parse done), when the
    session began and ended its ``receive``, and when its ACK's write began and ended (the
    machine's monotonic clock), and the loop thread's CPU time from the read to the written
    ACK: ``steps <read> <receive> <received> <write> <written> <cpu>``."""
    from xdsclient._protocol._session import Session
    from xdsclient._transports._grpc import GrpcStream
    from xdsclient.resources import ENDPOINT

    clock, cpu = time.monotonic, time.thread_time
    pending: dict[str, float] = {}
    # the driver reads through ``read_raw`` (the response with its bytes) where the stream has
    # it; an older checkout's (``--before``) through ``read``
    with_bytes = hasattr(GrpcStream, "read_raw")
    read_name = "read_raw" if with_bytes else "read"
    read, write, receive = getattr(GrpcStream, read_name), GrpcStream.write, Session.receive

    async def noted_read(self: Any) -> Any:
        result = await read(self)
        response = result[0] if with_bytes else result
        if response is not None and response.type_url == ENDPOINT.type_url:
            pending.update(read=clock(), cpu=cpu())
        return result

    def noted_receive(self: Any, response: Any, now: float, *raw: Any) -> Any:
        start = clock()
        events = receive(self, response, now, *raw)
        if "read" in pending:
            pending.update(receive=start, received=clock())
        return events

    async def noted_write(self: Any, request: Any) -> None:
        start = clock()
        await write(self, request)
        if "received" in pending and request.type_url == ENDPOINT.type_url:
            done, spent = clock(), cpu() - pending["cpu"]
            steps = [pending[k] for k in ("read", "receive", "received")]
            print("steps", *steps, start, done, spent, flush=True)
            pending.clear()

    setattr(GrpcStream, read_name, noted_read)
    GrpcStream.write = noted_write  # type: ignore[method-assign]
    Session.receive = noted_receive  # type: ignore[method-assign,assignment]


def _generations(config: Any) -> int:
    total = 0
    for name, entry in config.clusters.items():
        i = int(name.rsplit("-", 1)[1])
        for group in entry.endpoints.priorities[0]:
            total += cfg.generation_of(i, group.endpoints[0].port)
    return total


def run_grpcio(address: str) -> None:
    bootstrap = {
        "xds_servers": [
            {
                "server_uri": address,
                "channel_creds": [{"type": "insecure"}],
                "server_features": ["xds_v3"],
            }
        ],
        "node": {"id": "bench-grpcio"},
    }
    os.environ["GRPC_XDS_BOOTSTRAP_CONFIG"] = json.dumps(bootstrap)
    import grpc

    channel = grpc.insecure_channel(f"xds:///{cfg.LISTENER}")
    states: list[Any] = []
    channel.subscribe(states.append, try_to_connect=True)
    sys.stdin.read()
    channel.close()


def main() -> None:
    kind, address = sys.argv[1], sys.argv[2]
    if kind == "xdsclient":
        asyncio.run(run_xdsclient(address))
    else:
        run_grpcio(address)
    print(f"rss {peak_rss_kib()}", flush=True)


def peak_rss_kib() -> int:
    """This process's peak RSS. Linux's VmHWM belongs to the process's own memory map; its
    ``ru_maxrss`` survives exec, so a worker started by a parent holding N resources would
    report the parent's size at fork."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def current_rss_kib() -> int:
    """This process's RSS now (Linux's VmRSS; 0 without ``/proc``)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    main()
