"""Benchmark: what the shared `StreamDriver` costs a stream against a bare read loop.

Why: the load tester runs thousands of simulated clients, each on its own loop over the protocol
core, and shares the client's stream-life rules (`StreamLife`) instead of running on the driver.
This measures the driver's own share: N sessions, each on its stream over the in-memory
`FakeTransport` (no sockets, so gRPC's costs are out), answered 10 times each, once through the
driver and once through a bare loop (write what the session owes, read, apply, write the ACK).
Both columns include the fake transport's own costs, which are the same for both.

Prints, per stream: the Python memory held (tracemalloc, with every stream established and
answered) and the CPU time a response takes (process time, so other work counts less).

    python bench/stream_loops.py [--streams 1000 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import tracemalloc
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from xdsclient import Backoff, ClientOptions, NodeConfig
from xdsclient._protocol import Session
from xdsclient._runtime._clock import LoopClock
from xdsclient._shell._driver import StreamDriver
from xdsclient._transports import Stream, StreamSpec, Transport
from xdsclient.resources import ENDPOINT
from xdsclient.testing import FakeStream, FakeTransport
from xdsclient.testing.builders import cluster_load_assignment

ROUNDS = 10


class _Events:
    """The driver's `StreamEvents`, doing nothing."""

    def on_open(self, now: float) -> None: ...
    def on_request(self, request: Any, now: float) -> None: ...
    def on_response(self, response: Any, now: float) -> None: ...
    def on_applied(self, response: Any, now: float) -> None: ...
    def on_failure(self, error: Any, now: float) -> None: ...

    def publish(self, events: list[Any], after: Any = None) -> None:
        return None


async def _bare(transport: Transport, session: Session) -> None:
    stream: Stream = await transport.open(StreamSpec())
    session.connect(0.0)
    while True:
        for request in session.requests_to_send(0.0):
            await stream.write(request)
        session.receive(await stream.read(), 0.0)


async def _case(streams: int, kind: str) -> tuple[float, float]:
    fake = FakeTransport()
    transport = fake(type("Server", (), {"uri": "fake"})(), ClientOptions())
    node = NodeConfig(id="n").to_proto()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tasks = []
    for _ in range(streams):
        session = Session(node=node, resource_types=[ENDPOINT])
        session.subscribe(ENDPOINT.type_url, "a")
        if kind == "driver":
            driver = StreamDriver(protocol=session, transport=transport, spec=StreamSpec(),
                                  server="fake", clock=LoopClock(), events=_Events(),
                                  backoff=Backoff())  # fmt: skip
            tasks.append(asyncio.create_task(driver.run()))
        else:
            tasks.append(asyncio.create_task(_bare(transport, session)))
    opened: list[FakeStream] = [await fake.stream("fake") for _ in range(streams)]
    for stream in opened:
        await stream.request()
    cpu = time.process_time()
    for round_ in range(ROUNDS):
        for stream in opened:
            stream.send([cluster_load_assignment("a", [("10.0.0.1", round_ + 1)])])
        for stream in opened:
            await stream.request()
    cpu = time.process_time() - cpu
    memory = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return memory / streams / 1024, cpu / (streams * ROUNDS) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1000, 5000])
    args = parser.parse_args()
    print(f"{'streams':>8}  {'loop':<6}  {'KB a stream':>11}  {'us a response':>13}")
    for streams in args.streams:
        for kind in ("bare", "driver"):
            kb, us = asyncio.run(_case(streams, kind))
            print(f"{streams:>8}  {kind:<6}  {kb:>11.1f}  {us:>13.0f}")


if __name__ == "__main__":
    main()
