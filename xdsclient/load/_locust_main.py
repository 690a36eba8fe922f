"""The Locust master and worker processes of a distributed load run (run by `_locust`).

Why a process of its own: Locust is built on gevent, which must monkey-patch the standard
library before anything else is imported, and the command line is already inside an asyncio
loop. So ``xdsclient load --processes/--master/--worker`` starts this module with a job (one
JSON argument), and it patches first thing, then imports Locust. Three traps, measured:

- gevent's full patching (what ``import locust`` does) hangs grpc.aio: its threads become
  greenlets. We patch everything but threads (``thread=False``) and run each worker's asyncio
  loop, with its simulated clients, in a real thread. Nor do we patch ``select`` (that loop's
  selector) or ``os``, ``subprocess`` and ``signal``: with those patched, a ``--push`` command
  a worker's loop started never completed (gevent then owns ``waitpid`` and SIGCHLD, which
  asyncio's child watcher in the worker's thread relies on).
- Not patching at all lost the master/worker connection in the measurements of distributed runs
  that first motivated these choices.
  Our own runs without it passed, but Locust is written for a patched process (its greenlets
  sleep and do socket I/O through the standard library), so the rest of the patching stays.
- Locust rounds times to milliseconds: the numbers travel as our own histograms
  (`Histogram.to_dict`) in Locust's custom messages, and Locust's request statistics are not
  used at all. Locust carries the messages and the processes, and does the heartbeats.

Messages: a worker says ``xds_ready`` once it can take a run (Locust's own ready message
comes before a worker can register handlers); the master sends each worker ``xds_run`` (its
share of the clients and the wall time to start at) or ``xds_idle``; a worker sends
``xds_progress`` (its latest snapshot), ``xds_result`` (its `RunResult`) or ``xds_failed``
(one line and a status), and the master answers the end with ``xds_bye``. The master writes
what it learns as length-prefixed JSON frames (`_frames`: a merged result of thousands of
clients is megabytes) on its standard output for the parent (`_locust.py`): ``listening``,
``progress``, ``result`` or ``error``; a worker writes only ``error``. Every
wait is bounded: workers have ``timeout`` seconds to connect (and a worker as long to be given
a run), a run has its duration plus `GRACE` to report.
"""

from __future__ import annotations

# Patching comes before every other import (gevent's rule); threads stay real (grpc.aio), and
# what asyncio's loop in a worker's thread uses stays as the standard library has it.
from gevent import monkey  # type: ignore[import-untyped]

monkey.patch_all(thread=False, select=False, os=False, subprocess=False, signal=False)

import os  # noqa: E402

os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"  # Locust would patch threads too

import asyncio  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import IO, Any  # noqa: E402

import gevent  # noqa: E402
from locust import runners  # noqa: E402
from locust.env import Environment  # noqa: E402
from locust.exception import RPCError  # noqa: E402
from locust.rpc import Message  # noqa: E402

from ._frames import frame_writer, write_frame  # noqa: E402
from ._locust_merge import (  # noqa: E402
    merge_progress,
    progress_from_dict,
    progress_to_dict,
    shares,
)
from ._results import Progress, RunResult  # noqa: E402
from ._run import NotServedError, UnreachableError, run  # noqa: E402
from ._scenario import Scenario, ScenarioError  # noqa: E402

#: seconds past a run's duration for every worker's result to arrive
GRACE = 30.0
#: seconds from the master's ``xds_run`` to the common start (every worker gets it by then)
START_DELAY = 0.5
#: exit statuses the parent maps to the CLI's (`_locust.py` names them)
USAGE, CONFIG, UNAVAILABLE, FAILED, NOT_SERVED = 2, 3, 4, 1, 6
_POLL = 0.1


class JobError(Exception):
    """A distributed run cannot go on: one line, and the status to exit with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def main(argv: list[str]) -> int:
    """Run the job ``argv[0]`` (JSON) describes; the exit status."""
    out = frame_writer()  # the pipe carries the frames only: stdout now goes to stderr
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="xdsclient load (locust): %(message)s")  # fmt: skip
    job = json.loads(argv[0])
    try:
        if job["mode"] == "master":
            _Master(job, out).main()
        else:
            _Worker(job).main()
    except JobError as exc:
        _emit(out, {"event": "error", "message": str(exc), "status": exc.status})
        return exc.status
    return 0


def _emit(out: IO[bytes], event: dict[str, Any]) -> None:
    write_frame(out, event)


def _bound_connect(timeout: float) -> None:
    """Make a worker give up on its master after about ``timeout`` seconds (Locust retries
    every `runners.CONNECT_TIMEOUT` seconds, `runners.CONNECT_RETRY_COUNT` times)."""
    runners.CONNECT_TIMEOUT = max(1, min(runners.CONNECT_TIMEOUT, int(timeout)))
    runners.CONNECT_RETRY_COUNT = max(1, int(timeout / runners.CONNECT_TIMEOUT))


class _Master:
    """Waits for its workers, gives each its share, relays progress, merges the results."""

    def __init__(self, job: dict[str, Any], out: IO[bytes]) -> None:
        self.job = job
        self.out = out
        self.scenario = Scenario.from_dict(job["scenario"])
        self.expect = int(job["workers"])
        self.timeout = float(job["timeout"])
        self.progress: dict[str, Progress] = {}
        self.results: dict[str, RunResult] = {}
        self.failed: dict[str, tuple[str, int]] = {}
        #: workers that can take a run (their handlers are registered), in order of arrival
        self.ready: list[str] = []

    def main(self) -> None:
        environment = Environment(user_classes=[])
        where = f"{self.job['bind_host']}:{self.job['bind_port']}"
        quiet = logging.getLogger("locust.runners")
        quiet.setLevel(logging.CRITICAL)  # its log line of a busy port: ours is the one line
        try:
            runner = environment.create_master_runner(self.job["bind_host"], self.job["bind_port"])
        except SystemExit:  # what Locust does when the port is taken
            raise JobError(f"--master-port: cannot listen on {where}: the port is taken",
                           CONFIG) from None  # fmt: skip
        except (OSError, RPCError) as exc:
            reason = "the port is taken" if "in use" in str(exc) else str(exc)
            raise JobError(f"--master-port: cannot listen on {where}: {reason}", CONFIG) from None
        finally:
            quiet.setLevel(logging.NOTSET)
        self.runner = runner
        runner.register_message("xds_progress", self._on_progress)
        runner.register_message("xds_result", self._on_result)
        runner.register_message("xds_failed", self._on_failed)
        runner.register_message("xds_ready", self._on_ready)
        _emit(self.out, {"event": "listening", "port": runner.server.port})
        try:
            workers = self._wait_for_workers()
            self._assign(workers)
            self._collect(workers)
        finally:
            self._shut_down()

    def _wait_for_workers(self) -> list[str]:
        deadline = time.monotonic() + self.timeout
        while len(self.ready) < self.expect:
            if time.monotonic() >= deadline:
                raise JobError(f"{len(self.ready)} of {self.expect} Locust workers "
                               f"connected within {self.timeout:g} s", UNAVAILABLE)  # fmt: skip
            gevent.sleep(_POLL)
        return self.ready[: self.expect]

    def _assign(self, workers: list[str]) -> None:
        start_at = time.time() + START_DELAY
        scenario = self.job["scenario"]
        ramp = scenario.get("ramp")
        for number, (worker, (first, count)) in enumerate(
            zip(workers, shares(self.scenario.clients, len(workers)), strict=True)
        ):
            if count == 0:
                self.runner.send_message("xds_idle", {}, client_id=worker)
                continue
            share = {**scenario, "clients": count, "first_index": first}
            if ramp is not None:
                share["ramp"] = ramp * count / self.scenario.clients
            if number and share.get("push"):
                # One worker runs the push command; the others keep its schedule (same start)
                # to measure push to applied from the same moment.
                share["push"] = {**share["push"], "command": None}
            self.runner.send_message("xds_run", {"scenario": share, "start_at": start_at},
                                     client_id=worker)  # fmt: skip
            self.progress[worker] = Progress(elapsed=0.0, started=0, connected=0, complete=0,
                                             reconnects=0, nacks=0, errors=0)  # fmt: skip

    def _collect(self, workers: list[str]) -> None:
        running = set(self.progress)
        deadline = time.monotonic() + START_DELAY + self.scenario.duration + GRACE
        published = 0.0
        while running - set(self.results) - set(self.failed):
            if time.monotonic() >= deadline:
                raise JobError(f"Locust workers sent no result {GRACE:g} s after the run's end",
                               UNAVAILABLE)  # fmt: skip
            lost = running - set(self.runner.clients.keys())
            if lost:
                raise JobError(f"{len(lost)} Locust worker(s) went away during the run",
                               UNAVAILABLE)  # fmt: skip
            if time.monotonic() - published >= 0.5:
                self._publish(done=False)
                published = time.monotonic()
            gevent.sleep(_POLL)
        for worker in running:
            self.runner.send_message("xds_bye", {}, client_id=worker)
        if self.failed:
            message, status = next(iter(self.failed.values()))
            raise JobError(f"a Locust worker failed: {message}", status)
        result = RunResult.merged(self.results[w] for w in workers if w in self.results)
        result.scenario = self.scenario.to_dict()
        result.pushes = self.results[min(self.results, key=workers.index)].pushes
        self._publish(done=True)
        _emit(self.out, {"event": "result", "result": result.to_dict()})

    def _publish(self, *, done: bool) -> None:
        merged = merge_progress(list(self.progress.values()), done=done)
        _emit(self.out, {"event": "progress", "progress": progress_to_dict(merged)})

    def _on_progress(self, environment: Any, msg: Message, **kwargs: Any) -> None:
        if msg.node_id in self.progress:
            self.progress[msg.node_id] = progress_from_dict(msg.data)

    def _on_ready(self, environment: Any, msg: Message, **kwargs: Any) -> None:
        if msg.node_id not in self.ready:
            self.ready.append(msg.node_id)

    def _on_result(self, environment: Any, msg: Message, **kwargs: Any) -> None:
        self.results[msg.node_id] = RunResult.from_dict(msg.data)

    def _on_failed(self, environment: Any, msg: Message, **kwargs: Any) -> None:
        self.failed[msg.node_id] = (str(msg.data["message"]), int(msg.data["status"]))

    def _shut_down(self) -> None:
        runner = getattr(self, "runner", None)
        if runner is not None:
            for worker in list(runner.clients.keys()):
                runner.send_message("xds_bye", {}, client_id=worker)
        if runner is not None:
            runner.greenlet.kill(block=True)
            runner.server.close(linger=0)


class _Worker:
    """Runs its share of the clients in a real thread with its own asyncio loop."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.timeout = float(job["timeout"])
        self.assignment: dict[str, Any] | None = None
        self.bye = False
        self.latest: dict[str, Any] | None = None
        self.outcome: tuple[str, dict[str, Any]] | None = None

    def main(self) -> None:
        _bound_connect(self.timeout)
        environment = Environment(user_classes=[])
        try:
            runner = environment.create_worker_runner(self.job["master_host"],
                                                      int(self.job["master_port"]))  # fmt: skip
        except ConnectionError:
            raise JobError(f"no Locust master at {self.job['master_host']}:"
                           f"{self.job['master_port']} within {self.timeout:g} s",
                           UNAVAILABLE) from None  # fmt: skip
        runner.register_message("xds_run", self._on_run)
        runner.register_message("xds_idle", self._on_idle)
        runner.register_message("xds_bye", self._on_bye)
        runner.send_message("xds_ready", {})  # Locust's own "ready" comes before these exist
        try:
            self._serve(runner)
        finally:
            runner.greenlet.kill(block=True)
            runner.client.close(linger=0)  # type: ignore[no-untyped-call]

    def _serve(self, runner: Any) -> None:
        deadline = time.monotonic() + self.timeout
        while self.assignment is None and not self.bye:
            if time.monotonic() >= deadline:
                raise JobError(f"the Locust master gave no run within {self.timeout:g} s",
                               UNAVAILABLE)  # fmt: skip
            gevent.sleep(_POLL)
        if self.assignment is None or not self.assignment:
            return  # idle: this worker has no clients in this run
        thread = threading.Thread(target=self._run, args=(self.assignment,), daemon=True,
                                  name="xdsclient-load")  # fmt: skip
        thread.start()
        sent: dict[str, Any] | None = None
        while True:
            alive = thread.is_alive()
            latest = self.latest
            if latest is not None and latest is not sent:
                runner.send_message("xds_progress", latest)
                sent = latest
            if not alive:  # the run's last snapshot (``done``) went before its outcome
                break
            gevent.sleep(_POLL)
        assert self.outcome is not None
        kind, data = self.outcome
        runner.send_message(kind, data)
        deadline = time.monotonic() + 10.0
        while not self.bye and time.monotonic() < deadline:
            gevent.sleep(_POLL)

    def _run(self, assignment: dict[str, Any]) -> None:
        """The worker's thread: wait for the common start, run, keep the outcome."""
        try:
            result = asyncio.run(self._run_at(assignment))
            self.outcome = ("xds_result", result.to_dict())
        except UnreachableError as exc:
            self.outcome = ("xds_failed", {"message": str(exc), "status": UNAVAILABLE})
        except NotServedError as exc:
            self.outcome = ("xds_failed", {"message": str(exc), "status": NOT_SERVED})
        except ScenarioError as exc:
            self.outcome = ("xds_failed", {"message": str(exc), "status": USAGE})
        except Exception as exc:  # any failure is the master's to report, as one line
            self.outcome = ("xds_failed", {"message": f"{type(exc).__name__}: {exc}",
                                           "status": FAILED})  # fmt: skip

    async def _run_at(self, assignment: dict[str, Any]) -> RunResult:
        scenario = Scenario.from_dict(assignment["scenario"])
        start_at = float(assignment["start_at"])
        return await run(scenario, on_progress=self._on_snapshot, start_at=start_at)

    def _on_snapshot(self, progress: Progress) -> None:
        # On the run's loop: the histograms are read here, never from another thread.
        self.latest = progress_to_dict(progress)

    def _on_run(self, environment: Any, msg: Message, **kwargs: Any) -> None:
        self.assignment = dict(msg.data)

    def _on_idle(self, environment: Any, msg: Message, **kwargs: Any) -> None:
        self.assignment = {}

    def _on_bye(self, environment: Any, msg: Message, **kwargs: Any) -> None:
        self.bye = True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
