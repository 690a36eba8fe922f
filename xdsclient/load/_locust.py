"""Distributed load runs on Locust, from the asyncio side: ``--processes``, ``--master`` and
``--worker``.

Why Locust: it is the distributed engine Python load testers already run (its master/worker
connection, heartbeats and process handling), so a team spreads simulated xDS clients over
machines the way it spreads its HTTP users. Why a child process: Locust needs gevent's
monkey-patching before anything is imported, and the command line is already inside asyncio;
`_locust_main` is that child (its header says what it patches and why). This module starts it,
turns its frames (`_frames`: length-prefixed JSON, so a merged result of any size crosses)
into `Progress` snapshots for the terminal, the Prometheus endpoint and the
HTML report (the same ones a local run feeds), and returns the merged `RunResult`, so every
report reads a distributed run as it reads a local one.

Clocks: workers start together at a wall-clock time the master picks, and each measures push to
applied from the push schedule on its own clock. On one machine that is exact; across machines
it is off by the machines' clock offset (synchronise them: NTP or PTP). Fan-out spread is
measured within each worker (from the first of its clients to receive a version), so across
workers it is a lower bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import socket
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs

from .._errors import MissingExtraError, XdsError
from ._frames import FrameError, read_frames
from ._locust_merge import progress_from_dict
from ._progress_view import ProgressCallback
from ._results import RunResult
from ._scenario import Scenario

__all__ = ["Distributed", "LocustError", "WorkersUnavailableError", "run_distributed",
           "run_worker"]  # fmt: skip

#: Locust's own default port for workers to reach their master
DEFAULT_MASTER_PORT = 5557
#: what the child reports as its exit status, by kind of failure (the CLI's statuses)
USAGE, UNAVAILABLE, FAILED = 2, 4, 1


class LocustError(XdsError):
    """A distributed run failed (a worker failed, or the processes did); one line."""

    status = FAILED


class WorkersUnavailableError(LocustError, TimeoutError):
    """Workers or their master did not connect in time, or went away during the run."""

    status = UNAVAILABLE


@attrs.frozen(kw_only=True)
class Distributed:
    """How a run is spread: ``workers`` Locust worker processes, started here (``local``:
    ``--processes``) or anywhere that can reach ``bind_host:bind_port`` (``--master``).
    ``timeout`` bounds every wait for a process to connect."""

    workers: int
    local: bool = True
    bind_host: str = "127.0.0.1"
    bind_port: int = 0
    timeout: float = 60.0


def _require_locust() -> None:
    for module in ("locust", "gevent"):
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError("distributed runs need Locust: pip install 'xdsclient[load]'")


async def run_distributed(
    scenario: Scenario,
    plan: Distributed,
    *,
    on_progress: ProgressCallback | None = None,
    on_listening: Callable[[int], None] | None = None,
) -> RunResult:
    """Run ``scenario`` over ``plan.workers`` Locust workers and return their merged result
    (``processes`` is the number of workers). ``on_listening`` is told the master's port once
    it listens. Raises `WorkersUnavailableError` when the workers do not all connect within
    ``plan.timeout``, `LocustError` when one fails."""
    _require_locust()
    port = plan.bind_port or (_free_port(plan.bind_host) if plan.local else DEFAULT_MASTER_PORT)
    job = {"mode": "master", "scenario": scenario.to_dict(), "workers": plan.workers,
           "bind_host": plan.bind_host, "bind_port": port, "timeout": plan.timeout}  # fmt: skip
    master = await _Child.start(job)
    children = [master]
    try:
        if plan.local:  # started together with the master: each takes seconds to import
            worker = {"mode": "worker", "master_host": _dial_host(plan.bind_host),
                      "master_port": port, "timeout": plan.timeout}  # fmt: skip
            for _ in range(plan.workers):
                children.append(await _Child.start(worker))
        return await _master_result(master, children[1:], on_progress, on_listening)
    finally:
        await asyncio.gather(*(child.end() for child in children))


async def run_worker(master_host: str, master_port: int, *, timeout: float = 60.0) -> None:
    """Serve as one Locust worker of the master at ``master_host:master_port`` until its run
    ends (`WorkersUnavailableError` when there is no master, or no run, within
    ``timeout`` seconds)."""
    _require_locust()
    job = {"mode": "worker", "master_host": master_host, "master_port": master_port,
           "timeout": timeout}  # fmt: skip
    child = await _Child.start(job)
    try:
        async for _ in child.events():
            pass
        await child.finished()
    finally:
        await child.end()


async def _master_result(
    master: _Child,
    workers: list[_Child],
    on_progress: ProgressCallback | None,
    on_listening: Callable[[int], None] | None,
) -> RunResult:
    """The master's result, handing its progress on; a local worker that fails first (before
    it could tell the master) ends the run with its own error."""
    result: RunResult | None = None

    async def read_master() -> None:
        nonlocal result
        async for event in master.events():
            if event["event"] == "progress" and on_progress is not None:
                on_progress(progress_from_dict(event["progress"]))
            elif event["event"] == "listening" and on_listening is not None:
                on_listening(int(event["port"]))
            elif event["event"] == "result":
                result = RunResult.from_dict(event["result"])
                return
        await master.finished()

    reading = asyncio.ensure_future(read_master())
    watching = [asyncio.ensure_future(worker.finished()) for worker in workers]
    try:
        pending: set[asyncio.Future[None]] = {reading, *watching}
        while reading in pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                future.result()  # a worker's failure raises here
    finally:
        for future in (reading, *watching):
            future.cancel()
        await asyncio.gather(reading, *watching, return_exceptions=True)
    if result is None:
        raise LocustError("the Locust master ended without a result")
    return result


def _free_port(host: str) -> int:
    """A port free on ``host`` now, for a local master (its workers start before it listens)."""
    with socket.socket() as probe:
        probe.bind((_dial_host(host), 0))
        port: int = probe.getsockname()[1]
        return port


def _dial_host(host: str) -> str:
    return "127.0.0.1" if host in ("*", "0.0.0.0", "") else host


class _Child:
    """One `_locust_main` process: its JSON lines, and its error line as a `LocustError`."""

    def __init__(self, job: dict[str, Any], process: asyncio.subprocess.Process) -> None:
        self.job = job
        self.process = process
        self.error: dict[str, Any] | None = None

    @classmethod
    async def start(cls, job: dict[str, Any]) -> _Child:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "xdsclient.load._locust_main", json.dumps(job),
            stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        return cls(job, process)

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """Each event it writes (a `_frames` frame), but its error (kept for `finished`)."""
        assert self.process.stdout is not None
        frames = read_frames(self.process.stdout)
        while True:
            try:
                event = await anext(frames)
            except StopAsyncIteration:
                return
            except FrameError as exc:
                raise LocustError(f"the Locust {self.job['mode']} process: {exc}") from None
            if event["event"] == "error":
                self.error = event
            else:
                yield event

    async def finished(self) -> None:
        """Wait for it to end; raise its error, or a `LocustError` if it failed silently."""
        if self.job["mode"] == "worker":
            async for _ in self.events():
                pass
        status = await self.process.wait()
        if self.error is not None:
            kind = WorkersUnavailableError if self.error["status"] == UNAVAILABLE else LocustError
            failure = kind(self.error["message"])
            failure.status = int(self.error["status"])
            raise failure
        if status != 0:
            raise LocustError(f"the Locust {self.job['mode']} process ended with status {status}")

    async def end(self) -> None:
        """Make sure it has ended (it should have: terminated, then killed, if not)."""
        process = self.process
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
