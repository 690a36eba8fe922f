"""``xdsclient load``'s reports and distributed runs: ``--quiet``, ``--html``,
``--metrics-port``, ``--processes``, ``--master`` and ``--worker``.

Why apart from `_load`: the scenario flags say what a run does; these say how it is watched and
where it runs, and they bring the optional pieces (rich, matplotlib, prometheus-client,
Locust). `_load` calls `add_report_options` for its parser and `run_reported` instead of
``run``; a ``--worker`` has no scenario of its own (its master sends it one) and runs
`run_worker` instead. Every optional piece is checked before the run starts, so a missing extra
or a taken port is one line at once, not after a ten-minute run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import Any

from ._common import (
    CONFIG,
    INTERNAL,
    NOT_SERVED,
    UNAVAILABLE,
    USAGE,
    CliError,
    positive_float,
    positive_int,
)

__all__ = ["add_report_options", "check_report_options", "run_reported", "run_worker"]

#: scenario and report flags a ``--worker`` must not be given (its master has them)
_NOT_FOR_WORKERS = ("server", "bootstrap", "scenario", "listener", "resources", "clients",
                    "json_file", "html", "metrics_port")  # fmt: skip


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: a port is 0 to 65535")
    return value


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """The report and distribution options, in two groups of ``parser``."""
    reports = parser.add_argument_group("reports")
    reports.add_argument("--quiet", action="store_true",
                         help="no live progress (the final table still prints)")  # fmt: skip
    reports.add_argument("--html", metavar="FILE",
                         help="write a self-contained HTML report with plots to FILE")  # fmt: skip
    reports.add_argument("--metrics-port", type=_port, metavar="PORT",
                         help="serve Prometheus metrics on PORT while the run goes on "
                              "(0: any free port)")  # fmt: skip
    reports.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                         help="the address for --metrics-port (default 127.0.0.1)")  # fmt: skip
    spread = parser.add_argument_group("distributed runs (Locust)")
    mode = spread.add_mutually_exclusive_group()
    mode.add_argument("--processes", type=positive_int, metavar="K",
                      help="run the clients in K local worker processes")  # fmt: skip
    mode.add_argument("--master", action="store_true",
                      help="be the master of --expect-workers workers on any machine")  # fmt: skip
    mode.add_argument("--worker", action="store_true",
                      help="be a worker of the master at --master-host")  # fmt: skip
    spread.add_argument("--expect-workers", type=positive_int, metavar="K",
                        help="--master: wait for K workers, then split the clients")  # fmt: skip
    spread.add_argument("--master-host", default=None, metavar="HOST",
                        help="--worker: the master's address (default 127.0.0.1)")  # fmt: skip
    spread.add_argument("--master-port", type=_port, default=None, metavar="PORT",
                        help="the master's port (default 5557, Locust's)")  # fmt: skip
    spread.add_argument("--master-bind-host", default=None, metavar="HOST",
                        help="--master: the address to listen on (default *: all)")  # fmt: skip
    spread.add_argument("--locust-timeout", type=positive_float, default=60.0, metavar="SECONDS",
                        help="how long a master waits for its workers, and a worker for its "
                             "master and its run (default 60)")  # fmt: skip


def check_report_options(args: argparse.Namespace) -> None:
    """Usage errors in the options `add_report_options` added (before anything runs)."""
    if args.master and args.expect_workers is None:
        raise CliError("--master needs --expect-workers K", USAGE)
    if args.expect_workers is not None and not args.master:
        raise CliError("--expect-workers goes with --master", USAGE)
    if args.master_host is not None and not args.worker:
        raise CliError("--master-host goes with --worker", USAGE)
    if args.master_bind_host is not None and not args.master:
        raise CliError("--master-bind-host goes with --master", USAGE)
    if args.master_port is not None and not (args.master or args.worker):
        raise CliError("--master-port goes with --master or --worker", USAGE)
    if args.worker:
        given = [name for name in _NOT_FOR_WORKERS if getattr(args, name, None) is not None]
        if given:
            flag = "--" + given[0].replace("_file", "").replace("_", "-")
            raise CliError(f"{flag}: a --worker takes its scenario and reports from its master",
                           USAGE)  # fmt: skip


async def run_worker(args: argparse.Namespace) -> int:
    """``--worker``: serve the master until its run ends."""
    from ..load._locust import DEFAULT_MASTER_PORT, LocustError
    from ..load._locust import run_worker as serve

    check_report_options(args)
    host = args.master_host or "127.0.0.1"
    port = args.master_port if args.master_port is not None else DEFAULT_MASTER_PORT
    if not args.quiet:
        print(f"xdsclient load: worker of {host}:{port}", file=sys.stderr)
    try:
        await serve(host, port, timeout=args.locust_timeout)
    except LocustError as exc:
        raise CliError(str(exc), _status(exc)) from None
    return 0


async def run_reported(scenario: Any, args: argparse.Namespace) -> Any:
    """Run ``scenario`` (here or on Locust workers) with the reports ``args`` ask for, and
    return its `RunResult` (the caller prints the table and writes ``--json``)."""
    from ..load import run
    from ..load._locust import LocustError, run_distributed
    from ..load._progress_view import ProgressView, Timeline, fan_out
    from ..load._prometheus import MetricsError

    check_report_options(args)
    _check_html(args.html)
    plan = _plan(args)
    timeline = Timeline()
    metrics = _metrics(args, scenario.clients)
    view = ProgressView(scenario.clients, quiet=args.quiet)
    callbacks = [view, timeline, *([metrics] if metrics is not None else [])]
    try:
        if metrics is not None:
            metrics.start()
            if not args.quiet:
                print(f"xdsclient load: metrics at {metrics.url}", file=sys.stderr)
        if plan is None:
            result = await run(scenario, on_progress=fan_out(callbacks))
        else:

            def listening(port: int) -> None:
                if args.master and not args.quiet:
                    print(f"xdsclient load: Locust master on {plan.bind_host}:{port}, waiting "
                          f"for {plan.workers} worker(s)", file=sys.stderr)  # fmt: skip

            result = await run_distributed(scenario, plan, on_progress=fan_out(callbacks),
                                           on_listening=listening)  # fmt: skip
        if metrics is not None:
            metrics.finish(result)
    except MetricsError as exc:
        raise CliError(str(exc), CONFIG) from None
    except LocustError as exc:
        raise CliError(str(exc), _status(exc)) from None
    finally:
        view.close()
        if metrics is not None:
            metrics.close()
    if args.html is not None:
        _write_html(args.html, result, timeline)
    return result


def _status(exc: Any) -> int:
    """The exit status of a distributed run's failure: a bad scenario, a bad address or port,
    nothing in time, a server that does not serve the scenario; anything else a worker hit is
    a bug (70)."""
    status: int = exc.status
    return status if status in (USAGE, CONFIG, UNAVAILABLE, NOT_SERVED) else INTERNAL


def _plan(args: argparse.Namespace) -> Any:
    from ..load._locust import DEFAULT_MASTER_PORT, Distributed

    if args.processes is not None:
        return Distributed(workers=args.processes, local=True, timeout=args.locust_timeout)
    if args.master:
        port = args.master_port if args.master_port is not None else DEFAULT_MASTER_PORT
        return Distributed(workers=args.expect_workers, local=False,
                           bind_host=args.master_bind_host or "*", bind_port=port,
                           timeout=args.locust_timeout)  # fmt: skip
    return None


def _metrics(args: argparse.Namespace, total: int) -> Any:
    if args.metrics_port is None:
        return None
    from ..load._prometheus import MetricsServer

    if importlib.util.find_spec("prometheus_client") is None:
        raise CliError("--metrics-port needs prometheus-client: pip install 'xdsclient[load]'",
                       CONFIG)  # fmt: skip
    return MetricsServer(args.metrics_port, host=args.metrics_host, total=total)


def _check_html(path: str | None) -> None:
    """Fail before the run, not after it: matplotlib is there, the directory is writable."""
    if path is None:
        return
    if importlib.util.find_spec("matplotlib") is None:
        raise CliError("--html needs matplotlib: pip install 'xdsclient[load]'", CONFIG)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise CliError(f"--html {path}: cannot write in {directory}", CONFIG)


def _write_html(path: str, result: Any, timeline: Any) -> None:
    from ..load._html import write_html

    try:
        write_html(path, result, timeline.snapshots)
    except OSError as exc:
        raise CliError(f"--html {path}: {exc.strerror}", CONFIG) from None
