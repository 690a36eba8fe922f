"""Benchmark: client-streaming calls on `XdsChannel` against a plain grpc.aio channel, for one or
more source trees in one run (before and after a change).

One backend (a grpc.aio server in a child process) serves ``Collect`` (client streaming: it
reads every message and answers with their count) on 127.0.0.1; the test control plane routes
``xds:///bench`` to it. Per tree (``--tree PATH``, repeatable; default: the tree this script is
in), a child process imports xdsclient from that tree and measures, for a plain
``grpc.aio.insecure_channel`` and for `XdsChannel`, a call sending ``--messages`` messages of
``--size`` bytes: p50 latency of ``--calls`` sequential calls, and calls per second and the
process's CPU per call of ``--calls`` calls by 16 tasks. The trees run one after the other,
round by round (``--rounds``, the first tree alternating); the table gives each tree's medians.

    python bench/client_stream.py --tree /work/main --tree . [--rounds 3] [--calls 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from timing import latencies, throughput

SERVICE = "bench.Echo"
COLLECT = f"/{SERVICE}/Collect"
CONCURRENCY = 16

_SERVER = r"""
import asyncio, sys, grpc
from google.protobuf import wrappers_pb2
Text = wrappers_pb2.StringValue
async def collect(requests, context):
    count = 0
    async for _ in requests:
        count += 1
    return Text(value=str(count))
async def main():
    server = grpc.aio.server()
    handler = grpc.stream_unary_rpc_method_handler(collect, Text.FromString, Text.SerializeToString)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(sys.argv[1], {"Collect": handler})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(None)
asyncio.run(main())
"""


async def _measure(port: int, args: argparse.Namespace) -> dict[str, list[float]]:
    """(p50 seconds, calls per second, CPU seconds per call) per channel, in this process."""
    import grpc
    from google.protobuf import wrappers_pb2

    from xdsclient import XdsClient
    from xdsclient.grpc import XdsChannel
    from xdsclient.testing import ControlPlane, builders

    text = wrappers_pb2.StringValue
    messages = [text(value="m" * args.size)] * args.messages
    out: dict[str, list[float]] = {}
    async with ControlPlane() as plane, XdsClient(plane.address, node_id="bench") as client:
        plane.set_all(
            [
                builders.api_listener("bench"),
                builders.route_configuration("bench-routes", "bench-cluster"),
                builders.cluster("bench-cluster"),
                builders.cluster_load_assignment("bench-cluster", [("127.0.0.1", port)]),
            ]
        )
        channels: dict[str, Any] = {
            "plain": grpc.aio.insecure_channel(f"127.0.0.1:{port}"),
            "XdsChannel": XdsChannel("xds:///bench", client=client),
        }
        for name, channel in channels.items():
            collect = channel.stream_unary(
                COLLECT,
                request_serializer=text.SerializeToString,
                response_deserializer=text.FromString,
            )

            async def call(collect: Any = collect) -> None:
                await collect(iter(messages), timeout=10)

            await call()  # connected and configured
            p50 = statistics.median(await latencies(call, args.calls))
            out[name] = [p50, *await throughput(call, args.calls, CONCURRENCY)]
            await channel.close()
    return out


def _child(tree: str, port: int, args: argparse.Namespace) -> dict[str, list[float]]:
    command = [sys.executable, __file__, "--child", str(port), *_passed(args)]
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result: dict[str, list[float]] = json.loads(done.stdout.splitlines()[-1])
    return result


def _passed(args: argparse.Namespace) -> list[str]:
    return ["--messages", str(args.messages), "--size", str(args.size), "--calls", str(args.calls)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_measure(args.child, args))))
        return
    trees = args.tree or [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, SERVICE], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert server.stdout is not None
    assert server.stdin is not None
    try:
        port = int(server.stdout.readline())
        rows: dict[tuple[str, str], list[list[float]]] = {}
        for round_ in range(args.rounds):
            for tree in trees[round_ % len(trees) :] + trees[: round_ % len(trees)]:
                for name, values in _child(tree, port, args).items():
                    rows.setdefault((tree, name), []).append(values)
    finally:
        server.stdin.close()
        server.wait(10)
    print(f"client streaming, {args.messages} messages of {args.size} bytes, medians of rounds")
    print("| tree | channel | p50 (ms), conc. 1 | calls/s, conc. 16 | CPU/call (us) |")
    print("|---|---|---|---|---|")
    for (tree, name), measured in rows.items():
        p50, rate, cpu = (statistics.median(column) for column in zip(*measured, strict=True))
        print(f"| {tree} | {name} | {p50 * 1e3:.2f} | {rate:.0f} | {cpu * 1e6:.0f} |")


if __name__ == "__main__":
    main()
