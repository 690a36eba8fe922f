"""Chaos for `XdsChannel`: calls at a steady rate while the control plane misbehaves.

Why here: the test suite runs it for a few seconds and ``bench/chaos_channel.py`` for minutes;
both need the same driver and the same verdict. Real parts throughout: two control planes on
127.0.0.1 (a primary and a fallback, gRFC A71, serving the same resources), real grpc.aio
backends, and an `XdsChannel` over an `XdsClient` bootstrapped with both servers.

While a caller sends one unary call every ``interval`` seconds (each with its own deadline, not
``wait_for_ready``: a call that cannot be routed or picked fails at once), faults run one at a
time, in a shuffled cycle so that a short run has each at least once:

- ``kill``: the primary stops (every stream ends, nothing listens) and starts again later;
- ``restart``: the primary stops and starts at once;
- ``close streams``: the primary ends every stream;
- ``stop answering``: the primary reads requests but answers nothing for a while;
- ``NACK``: both servers serve a cluster the client rejects, then the good one again;
- ``fallback``: the primary stops, and a new `XdsChannel` for a listener the client has not
  cached starts: the client falls back to the second server (A71), that channel's first calls
  (``wait_for_ready``) go through the fallback, then the primary returns;
- ``endpoints``: the assignment changes to a random set of the backends, some DRAINING,
  always with at least one HEALTHY one.

Every backend stays up and at least one HEALTHY endpoint is always assigned, so the verdict is
that no call fails: a NACK keeps the last good configuration, an outage or a fallback leaves
the snapshot in use, and a call in flight on an endpoint that leaves finishes there.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import attrs
import grpc

from .._settings._config import Backoff
from .._settings._options import ClientOptions
from . import builders
from ._bootstraps import bootstrap
from ._control_plane import ControlPlane

__all__ = ["ChannelChaosReport", "run_channel_chaos"]

METHOD = "/chaos.Echo/Say"
LISTENER = "chaos"
CLUSTER = "chaos-cluster"
FAULTS = ("kill", "restart", "close streams", "stop answering", "NACK", "fallback", "endpoints")
_BACKOFF = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 200),
)


@attrs.frozen(kw_only=True)
class FaultRow:
    """One kind of fault: how often it ran, and the calls that started while it lasted."""

    fault: str
    times: int
    calls: int
    failed: int
    #: the slowest of those calls, in seconds
    slowest: float


@attrs.frozen(kw_only=True)
class ChannelChaosReport:
    """What the run did, and every call that failed (there must be none)."""

    seconds: float
    calls: int
    #: (fault during which it started or "-", code, details) of each failed call
    failures: tuple[tuple[str, str, str], ...]
    rows: tuple[FaultRow, ...]
    #: calls on channels opened while the primary was down (they go through the fallback)
    fallback_calls: int
    fallback_failed: int
    #: the assignments the servers sent
    assignments: int
    #: how many backends answered calls (endpoints coming and going spread them)
    backends_used: int
    #: latency of the steady calls, in seconds
    p50: float
    p99: float
    slowest: float

    @property
    def ok(self) -> bool:
        return not self.failures and self.fallback_failed == 0


class _Backend:
    """A grpc.aio server on 127.0.0.1 answering `METHOD` with its name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.port = 0
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        name = self.name.encode()

        async def say(request: bytes, context: Any) -> bytes:
            return name

        handler = grpc.method_handlers_generic_handler(
            "chaos.Echo", {"Say": grpc.unary_unary_rpc_method_handler(say)}
        )
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([handler])
        self.port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(None)


def _resources(listener: str) -> list[Any]:
    return [
        builders.api_listener(listener),
        builders.route_configuration(f"{listener}-routes", CLUSTER),
    ]


def _assignment(backends: list[_Backend], rng: random.Random) -> Any:
    chosen = rng.sample(backends, rng.randint(1, len(backends)))
    healthy = rng.randrange(len(chosen))
    endpoints = [
        builders.EndpointSpec(
            "127.0.0.1",
            backend.port,
            health="healthy" if i == healthy or rng.random() < 0.7 else "draining",
        )
        for i, backend in enumerate(chosen)
    ]
    return builders.cluster_load_assignment(CLUSTER, endpoints)


def _nacked_cluster() -> Any:
    cluster = builders.cluster(CLUSTER)
    cluster.eds_cluster_config.eds_config.path_config_source.path = "/not/ads"
    return cluster


class _Run:
    """The state of one run: the servers, the caller's records, the fault now running."""

    def __init__(self, planes: list[ControlPlane], backends: list[_Backend], seed: int) -> None:
        self.planes = planes
        self.backends = backends
        self.rng = random.Random(seed)
        self.fault = "-"
        self.assignments = 0
        self.late = 0
        #: (fault when it started, ok, seconds, backend or (code, details))
        self.calls: list[tuple[str, bool, float, Any]] = []
        self.fallback_calls = 0
        self.fallback_failed = 0
        self.times: collections.Counter[str] = collections.Counter()

    def set_all(self, resources: list[Any]) -> None:
        for plane in self.planes:
            plane.set_all(resources)

    def set_endpoints(self) -> None:
        self.assignments += 1
        self.set_all([_assignment(self.backends, self.rng)])

    async def call(self, channel: Any, timeout: float) -> None:
        fault = self.fault
        start = time.monotonic()
        try:
            reply = await channel.unary_unary(METHOD)(b"", timeout=timeout)
        except grpc.aio.AioRpcError as error:
            outcome: Any = (error.code().name, error.details() or "")
            ok = False
        else:
            outcome, ok = reply.decode(), True
        self.calls.append((fault, ok, time.monotonic() - start, outcome))

    async def fault_once(self, kind: str, client: Any) -> None:
        primary = self.planes[0]
        rng = self.rng
        self.fault = kind
        self.times[kind] += 1
        if kind == "kill":
            await primary.stop(keep_port=True)
            await asyncio.sleep(rng.uniform(0.1, 0.4))
            await primary.start()
        elif kind == "restart":
            await primary.restart()
        elif kind == "close streams":
            primary.close_streams()
        elif kind == "stop answering":
            primary.pause()
            await asyncio.sleep(rng.uniform(0.1, 0.3))
            primary.resume()
        elif kind == "NACK":
            self.set_all([_nacked_cluster()])
            await asyncio.sleep(rng.uniform(0.1, 0.3))
            self.set_all([builders.cluster(CLUSTER)])
        elif kind == "fallback":
            await self._fallback(client)
        else:
            self.set_endpoints()
        await asyncio.sleep(0.05)  # calls started just after a fault still count for it
        self.fault = "-"

    async def _fallback(self, client: Any) -> None:
        from ..grpc import XdsChannel

        primary = self.planes[0]
        self.late += 1
        listener = f"{LISTENER}-late-{self.late}"
        self.set_all(_resources(listener))
        await primary.stop(keep_port=True)
        try:
            async with XdsChannel(
                f"xds:///{listener}", client=client, channel_options=_BACKOFF
            ) as late:
                for _ in range(5):
                    self.fallback_calls += 1
                    try:
                        await late.unary_unary(METHOD)(b"", timeout=5.0, wait_for_ready=True)
                    except grpc.aio.AioRpcError:
                        self.fallback_failed += 1
        finally:
            await primary.start()


@contextlib.asynccontextmanager
async def _backends(count: int) -> AsyncIterator[list[_Backend]]:
    backends = [_Backend(f"b{i}") for i in range(count)]
    try:
        for backend in backends:
            await backend.start()
        yield backends
    finally:
        for backend in backends:
            await backend.stop()


async def run_channel_chaos(
    *, seconds: float, seed: int = 0, interval: float = 0.01, backends: int = 4
) -> ChannelChaosReport:
    """Send a call every ``interval`` seconds for ``seconds`` under the faults of the module's
    docstring (each fault at least once when ``seconds`` allows a cycle of them)."""
    from .._client import XdsClient
    from ..grpc import XdsChannel

    async with contextlib.AsyncExitStack() as stack:
        servers = await stack.enter_async_context(_backends(backends))
        planes = [await stack.enter_async_context(ControlPlane()) for _ in range(2)]
        run = _Run(planes, servers, seed)
        run.set_all([*_resources(LISTENER), builders.cluster(CLUSTER)])
        run.set_endpoints()
        client = await stack.enter_async_context(
            XdsClient(
                bootstrap=bootstrap(planes, node_id=f"channel-chaos-{seed}"),
                options=ClientOptions(
                    does_not_exist_timeout=2.0, backoff=Backoff(initial=0.02, maximum=0.2)
                ),
            )
        )
        channel = await stack.enter_async_context(
            XdsChannel(f"xds:///{LISTENER}", client=client, channel_options=_BACKOFF)
        )
        await channel.unary_unary(METHOD)(b"", timeout=10.0, wait_for_ready=True)
        calls: set[asyncio.Task[None]] = set()
        end = time.monotonic() + seconds

        async def caller() -> None:
            while time.monotonic() < end:
                task = asyncio.ensure_future(run.call(channel, 5.0))
                calls.add(task)
                task.add_done_callback(calls.discard)
                await asyncio.sleep(interval)

        async def faults() -> None:
            cycle: list[str] = []
            while time.monotonic() < end:
                if not cycle:
                    cycle = list(FAULTS)
                    run.rng.shuffle(cycle)
                await run.fault_once(cycle.pop(), client)
                await asyncio.sleep(run.rng.uniform(0.02, 0.15))

        await asyncio.gather(caller(), faults())
        if calls:
            await asyncio.wait(calls)
    return _report(run, seconds)


def _report(run: _Run, seconds: float) -> ChannelChaosReport:
    latencies = sorted(took for _, ok, took, _ in run.calls if ok)
    failures = tuple(
        (fault, outcome[0], outcome[1]) for fault, ok, _, outcome in run.calls if not ok
    )
    rows = tuple(
        FaultRow(
            fault=kind,
            times=run.times[kind],
            calls=sum(1 for fault, *_ in run.calls if fault == kind),
            failed=sum(1 for fault, ok, *_ in run.calls if fault == kind and not ok),
            slowest=max((took for fault, _, took, _ in run.calls if fault == kind), default=0.0),
        )
        for kind in (*FAULTS, "-")
    )
    return ChannelChaosReport(
        seconds=seconds,
        calls=len(run.calls),
        failures=failures,
        rows=rows,
        fallback_calls=run.fallback_calls,
        fallback_failed=run.fallback_failed,
        assignments=run.assignments,
        backends_used=len({outcome for _, ok, _, outcome in run.calls if ok}),
        p50=statistics.median(latencies) if latencies else 0.0,
        p99=latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else 0.0,
        slowest=latencies[-1] if latencies else 0.0,
    )
