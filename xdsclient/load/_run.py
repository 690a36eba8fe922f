"""Running a scenario: ramp the clients up, run the faults and pushes on schedule, stop on time,
and hand back what was measured.

Why one coroutine owns everything: every task a run starts (clients, the push schedule, storms,
the progress publisher, the loop-lag probe) is created here and cancelled and awaited here, so
a run always ends by itself at ``duration`` and leaves nothing behind, whatever the server did.
The server is checked before anything else: an unreachable one is one `UnreachableError`, not
a thousand clients retrying into the void.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import attrs
import grpc

from .. import NodeConfig, XdsError, load_bootstrap
from ._client import SimClient, channel_options
from ._fleet import Fleet
from ._lean import SharedDecoder
from ._results import Progress, RunResult
from ._scenario import Scenario, ScenarioError

__all__ = ["PROGRESS_INTERVAL", "NotServedError", "UnreachableError", "run"]

#: seconds between two `Progress` snapshots
PROGRESS_INTERVAL = 0.5
#: the loop-lag probe's period, and the lag (seconds) above which the generator saturated
_PROBE = 0.05
_LAG_LIMIT = 0.25
#: CPU share (of one core) above which the generator saturated
_CPU_LIMIT = 0.9
#: clients started per event-loop turn without a ramp: starting 5,000 (and running their
#: first steps) in one turn held the loop 3 s (the streams that then failed INTERNAL were the
#: test control plane's pending-call limit, `testing/_grpc_front.py`, not this)
_START_BATCH = 50

PushHook = Callable[[], Awaitable[Any] | Any]
ProgressHook = Callable[[Progress], Any]


class UnreachableError(XdsError, ConnectionError):
    """The server could not be reached before the run started (``connect_timeout``)."""


class NotServedError(XdsError, LookupError):
    """The server answered the clients' first streams UNIMPLEMENTED before any response: it
    does not serve the xDS method the scenario uses (ADS or per-type, SotW or Delta). The run
    ends at once instead of retrying against it to the end."""


def target_and_node(scenario: Scenario) -> tuple[str, NodeConfig]:
    """The server to dial and the node the clients start from (the bootstrap's, if any)."""
    if scenario.server is not None:
        return scenario.server, NodeConfig(cluster=scenario.node_cluster)
    assert scenario.bootstrap is not None
    config = load_bootstrap(scenario.bootstrap)
    if not config.servers:
        raise ScenarioError(f"bootstrap {scenario.bootstrap}: no servers")
    server = config.servers[0]
    if server.channel_credentials.type != "insecure":
        raise ScenarioError("bootstrap: the load tester dials insecure servers only")
    target = server.uri.removeprefix("dns:///").removeprefix("dns:")
    return target, config.node


def node_of(scenario: Scenario, base: NodeConfig, index: int) -> NodeConfig:
    """The node client ``index`` presents: the template's id, metadata and its locality."""
    text = str(index)
    metadata = {
        **base.metadata,
        **{k: v.replace("{i}", text) for k, v in scenario.metadata.items()},
    }
    localities = scenario.localities
    return attrs.evolve(
        base,
        id=scenario.node_id.replace("{i}", text),
        cluster=base.cluster or scenario.node_cluster,
        metadata=metadata,
        locality=localities[index % len(localities)] if localities else base.locality,
        user_agent_name="xdsclient-load",
    )


async def _reach(target: str, timeout: float) -> None:
    channel = grpc.aio.insecure_channel(target)
    try:
        async with asyncio.timeout(timeout):
            await channel.channel_ready()
    except TimeoutError:
        raise UnreachableError(f"cannot reach {target} within {timeout:g} s") from None
    finally:
        await channel.close()


class _Run:
    def __init__(
        self,
        scenario: Scenario,
        on_progress: ProgressHook | None,
        push: PushHook | None,
        start_at: float | None = None,
    ) -> None:
        self.scenario = scenario
        self.start_at = start_at
        self.on_progress = on_progress
        self.push = push
        self.result = RunResult(scenario=scenario.to_dict())
        self.fleet = Fleet(self.result, SharedDecoder(validate=scenario.validate))
        self.ended = asyncio.Event()  # set when the run must end before its duration
        self.fleet.on_unserved = self.ended.set
        self.clients: dict[int, SimClient] = {}
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.next_index = scenario.first_index
        self.start = 0.0
        self.stop_at = 0.0
        self.shared: grpc.aio.Channel | None = None
        self.target = ""
        self.node = NodeConfig()

    async def main(self) -> RunResult:
        scenario = self.scenario
        self.target, self.node = target_and_node(scenario)
        if scenario.validate and scenario.bootstrap is not None:  # check as its clients would
            providers = load_bootstrap(scenario.bootstrap).certificate_providers
            self.fleet.decoder = SharedDecoder(validate=True, certificate_providers=providers)
        if self.start_at is not None:
            await asyncio.sleep(max(0.0, self.start_at - time.time()))
        await _reach(self.target, scenario.connect_timeout)
        cpu0, wall0, began = time.process_time(), time.time(), Fleet.now()
        # A run told to start at a time it has passed (its wait for the server, or a busy
        # worker of a distributed run) counts its schedule from that time, as the other
        # workers do; its CPU share is of the time it ran.
        late = 0.0 if self.start_at is None else max(0.0, wall0 - self.start_at)
        self.result.started = wall0 - late
        self.start = began - late
        self.stop_at = self.start + scenario.duration
        helpers = [asyncio.create_task(coro) for coro in self._helpers()]
        try:
            if scenario.share_connections:
                await self._dial_shared()
            await self._ramp()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ended.wait(), max(0.0, self.stop_at - Fleet.now()))
            if self.fleet.unserved is None:  # the fleet as the run ends, before the clients stop
                self._publish(done=True)
        finally:
            await self._stop(helpers)
        if self.fleet.unserved is not None:
            raise NotServedError(self.fleet.unserved)
        result = self.result
        result.duration = Fleet.now() - self.start
        result.cpu_seconds = time.process_time() - cpu0
        ran = Fleet.now() - began
        result.cpu_share = result.cpu_seconds / ran if ran else 0.0
        result.saturated = result.cpu_share >= _CPU_LIMIT or result.loop_lag_max >= _LAG_LIMIT
        result.per_client.sort(key=lambda client: client.index)
        return result

    def _helpers(self) -> list[Coroutine[Any, Any, None]]:
        helpers: list[Coroutine[Any, Any, None]] = [self._probe()]
        if self.on_progress is not None:
            helpers.append(self._progress())
        if self.scenario.push is not None:
            helpers.append(self._pushes())
        storms = sorted({at for f in self.scenario.faults for at in f.storms})
        helpers.extend(self._storm(at) for at in storms)
        return helpers

    async def _dial_shared(self) -> None:
        started = Fleet.now()
        self.shared = grpc.aio.insecure_channel(self.target, options=channel_options(True))
        await self.shared.channel_ready()
        self.fleet.connected(Fleet.now() - started)

    async def _ramp(self) -> None:
        ramp = self.scenario.ramp
        for number in range(self.scenario.clients):
            if ramp is not None:
                due = self.start + number / ramp
                if due >= self.stop_at:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ended.wait(), max(0.0, due - Fleet.now()))
                if self.ended.is_set():
                    break
            elif number and number % _START_BATCH == 0:  # all at once, in short loop turns
                await asyncio.sleep(0)
            self._start_client()

    def _start_client(self) -> None:
        index = self.next_index
        self.next_index += 1
        client = SimClient(index, self.scenario, self.fleet, target=self.target,
                           node=node_of(self.scenario, self.node, index),
                           shared_channel=self.shared)  # fmt: skip
        self.clients[index] = client
        self.result.clients += 1
        self.fleet.started += 1
        task = asyncio.create_task(client.run())
        self.tasks[index] = task
        task.add_done_callback(lambda _: self._ended(index))

    def _ended(self, index: int) -> None:
        client = self.clients.pop(index)
        self.tasks.pop(index, None)
        self.result.per_client.append(client.result)
        if client.churned and Fleet.now() < self.stop_at:
            self._start_client()  # churn: a new client joins in its place

    async def _stop(self, helpers: list[asyncio.Task[None]]) -> None:
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        while self.tasks:  # churn may start one while others stop: until none is left
            tasks = list(self.tasks.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.sleep(0)
        if self.shared is not None:
            await self.shared.close()

    async def _probe(self) -> None:
        while True:
            due = Fleet.now() + _PROBE
            await asyncio.sleep(_PROBE)
            lag = Fleet.now() - due
            self.result.loop_lag_max = max(self.result.loop_lag_max, lag)

    async def _progress(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL)
            self._publish(done=False)

    def _publish(self, *, done: bool) -> None:
        if self.on_progress is None:
            return
        fleet, result = self.fleet, self.result
        self.on_progress(Progress(
            elapsed=Fleet.now() - self.start, started=fleet.started,
            connected=fleet.connected_now, complete=fleet.complete_now,
            reconnects=result.reconnects, nacks=result.nacks,
            errors=sum(result.errors.values()), latest_connect=fleet.latest_connect,
            latest_first_config=fleet.latest_first_config, latest_ack_latency=fleet.latest_ack,
            latest_push_to_applied=fleet.latest_push, done=done,
            histograms=result.histograms()))  # fmt: skip

    async def _pushes(self) -> None:
        plan = self.scenario.push
        assert plan is not None
        for number in range(plan.count):
            await asyncio.sleep(max(0.0, self.start + plan.at + number * plan.every - Fleet.now()))
            self.fleet.push_time = Fleet.now()
            self.result.pushes += 1
            if not await self._push_once(plan.command):
                self.fleet.error("PUSH_FAILED")

    async def _push_once(self, command: str | None) -> bool:
        if command is None:
            if self.push is None:
                return True
            outcome = self.push()
            if inspect.isawaitable(outcome):
                await outcome
            return True
        process = await asyncio.create_subprocess_shell(
            command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        try:
            return await process.wait() == 0
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.kill()

    async def _storm(self, at: float) -> None:
        await asyncio.sleep(max(0.0, self.start + at - Fleet.now()))
        for client in list(self.clients.values()):
            if any(at in f.storms and f.applies_to(client.index) for f in self.scenario.faults):
                client.storm()


async def run(
    scenario: Scenario,
    *,
    on_progress: ProgressHook | None = None,
    push: PushHook | None = None,
    start_at: float | None = None,
) -> RunResult:
    """Run ``scenario`` to its end and return what it measured.

    ``start_at`` (a `time.time` value) is when the run's schedule (ramp, pushes, storms, its
    end) counts from: the run waits for it, and a run that begins after it (a busy worker of
    a distributed run) keeps the schedule of the others; now by default.

    ``on_progress`` is called with a `Progress` snapshot every `PROGRESS_INTERVAL` seconds
    and once at the end (``done``). ``push`` is the scenario's push action when it has no
    command (the push time is taken just before it is called; it may be a coroutine
    function). Raises `UnreachableError` when the server cannot be reached within
    ``connect_timeout``, `NotServedError` (as soon as it shows) when the server does not
    serve the scenario's xDS method, `ScenarioError` for a bootstrap the load tester cannot
    use.
    """
    return await _Run(scenario, on_progress, push, start_at).main()
