"""``xdsclient load``: load test a control plane with simulated clients (`xdsclient.load`).

Why a subcommand: a control-plane team should get time to configuration, push fan-out and ACK
latency for a thousand clients from one line, e.g.
``xdsclient load --server HOST:PORT --listener NAME --clients N --duration S --json FILE``.
A scenario comes from the flags or from ``--scenario FILE`` (YAML; flags given beside it
replace its fields). A bad scenario is a usage error (2), an unreadable file or a missing
extra a configuration error (3), an unreachable server 4; the run itself never fails on what
the server does (that is what it measures), except when no client ever had its complete
configuration: that is 4 too, naming the resource that was missing (`_load_why`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._errors import MissingExtraError
from ._common import (
    CONFIG,
    NOT_SERVED,
    UNAVAILABLE,
    USAGE,
    CliError,
    Command,
    parse_locality,
    parse_metadata,
    positive_float,
    positive_int,
)
from ._load_reports import add_report_options, run_reported, run_worker

__all__ = ["COMMAND"]


def _share(text: str) -> float:
    value = positive_float(text) if text not in ("0", "0.0") else 0.0
    if value > 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be between 0 and 1")
    return value


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--server", help="the control plane, host:port (insecure)")
    where.add_argument("--bootstrap", help="a gRPC xDS bootstrap file (its first server and node)")
    parser.add_argument("--scenario", help="a YAML scenario file (flags given replace its fields)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--listener", help="walk from this listener, as gRPC does")
    what.add_argument(
        "--envoy",
        action="store_true",
        default=None,
        help="wildcard LDS and CDS, then the routes and assignments they name",
    )
    what.add_argument("--resource", action="append", metavar="TYPE:NAME", dest="resources",
                      help="watch this resource (repeatable; TYPE listener, route, cluster or "
                           "endpoint)")  # fmt: skip
    parser.add_argument("--clients", type=positive_int, help="how many clients (default 1)")
    parser.add_argument(
        "--ramp",
        type=positive_float,
        metavar="PER_SECOND",
        help="clients started per second (default: all at once)",
    )
    parser.add_argument(
        "--duration",
        type=positive_float,
        metavar="SECONDS",
        help="how long the run lasts (default 10)",
    )
    parser.add_argument(
        "--ads",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="one stream per client (default), or one per type",
    )
    parser.add_argument("--delta", action="store_true", default=None, help="incremental xDS")
    parser.add_argument("--node-id", help="node id template, {i} is the client's number")
    parser.add_argument("--node-cluster", help="node cluster")
    parser.add_argument(
        "--node-metadata",
        action="append",
        type=parse_metadata,
        metavar="KEY=VALUE",
        help="node metadata ({i} allowed; repeatable)",
    )
    parser.add_argument(
        "--locality",
        action="append",
        type=parse_locality,
        dest="localities",
        metavar="REGION[/ZONE[/SUBZONE]]",
        help="a locality; repeat to spread the clients over several",
    )
    parser.add_argument(
        "--share-connections",
        action="store_true",
        default=None,
        help="multiplex every client's stream on one connection",
    )
    parser.add_argument(
        "--validate",
        action="store_true",
        default=None,
        help="validate resources as the client does (NACK what it NACKs)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        dest="json_file",
        help="also write every number, with histogram buckets, to FILE",
    )
    parser.add_argument("--seed", type=int, help="seed of faults and jitter (default 0)")
    faults = parser.add_argument_group("faults (for --fault-fraction of the clients)")
    faults.add_argument("--fault-fraction", type=_share, help="share of clients (default 1)")
    faults.add_argument(
        "--nack-every", type=positive_int, metavar="N", help="NACK every Nth response"
    )
    faults.add_argument("--nack-share", type=_share, help="NACK this share of responses")
    faults.add_argument(
        "--nack-name",
        action="append",
        metavar="NAME",
        dest="nack_names",
        help="always NACK this resource (repeatable)",
    )
    faults.add_argument(
        "--slow-ack", type=positive_float, metavar="SECONDS", help="wait this long before each ACK"
    )
    faults.add_argument(
        "--reset-every",
        type=positive_float,
        metavar="SECONDS",
        help="reset the stream at random, this often on average",
    )
    faults.add_argument(
        "--storm-at",
        type=positive_float,
        action="append",
        metavar="SECONDS",
        dest="storms",
        help="all reconnect at once at this time (repeatable)",
    )
    faults.add_argument(
        "--forgetful",
        action="store_true",
        default=None,
        help="Delta: reconnect without initial_resource_versions",
    )
    faults.add_argument(
        "--churn-every",
        type=positive_float,
        metavar="SECONDS",
        help="clients leave after this long on average; new ones join",
    )
    push = parser.add_argument_group("push")
    push.add_argument("--push", metavar="COMMAND", help="a shell command that pushes an update")
    push.add_argument(
        "--push-at",
        type=positive_float,
        metavar="SECONDS",
        help="first push this long into the run (default 1)",
    )
    push.add_argument(
        "--push-every",
        type=positive_float,
        metavar="SECONDS",
        help="seconds between pushes (default 1)",
    )
    push.add_argument("--pushes", type=positive_int, help="how many pushes (default 1)")
    add_report_options(parser)


_SCENARIO_FLAGS = ("server", "bootstrap", "listener", "envoy", "resources", "clients", "ramp",
                   "duration", "ads", "delta", "node_cluster", "share_connections", "validate",
                   "seed", "localities")  # fmt: skip
_FAULT_FLAGS = ("nack_every", "nack_share", "nack_names", "slow_ack", "reset_every", "storms",
                "forgetful", "churn_every")  # fmt: skip


def scenario_of(args: argparse.Namespace) -> Any:
    """The scenario the flags (over ``--scenario FILE``) describe."""
    from ..load import Scenario
    from ..load._scenario import read_scenario

    data: dict[str, Any] = {}
    if args.scenario is not None:
        try:
            data = read_scenario(args.scenario)  # checked as a whole, with the flags over it
        except OSError as exc:
            raise CliError(f"{args.scenario}: {exc.strerror}", CONFIG) from None
        except MissingExtraError as exc:
            raise CliError(str(exc), CONFIG) from None
    for name in _SCENARIO_FLAGS:
        value = getattr(args, name)
        if value is not None:
            data[name] = value
    if args.server is not None or args.bootstrap is not None:
        data["server"], data["bootstrap"] = args.server, args.bootstrap
    if args.listener is not None or args.envoy or args.resources:
        data.update(listener=args.listener, envoy=bool(args.envoy),
                    resources=args.resources or ())  # fmt: skip
    if args.node_id is not None:
        data["node_id"] = args.node_id
    if args.node_metadata:
        given = data.get("metadata")  # a bad one in the file is reported as it is
        if given is None or isinstance(given, dict):
            data["metadata"] = {**(given or {}), **dict(args.node_metadata)}
    _faults(args, data)
    _push(args, data)
    return Scenario.from_dict(data)


def _faults(args: argparse.Namespace, data: dict[str, Any]) -> None:
    fault = {name: getattr(args, name) for name in _FAULT_FLAGS if getattr(args, name)}
    if not fault:
        if args.fault_fraction is not None:
            raise CliError("--fault-fraction: no fault given", USAGE)
        return
    if args.fault_fraction is not None:
        fault["fraction"] = args.fault_fraction
    given = data.get("faults")  # a bad one in the file is reported as it is
    if given is None or isinstance(given, list):
        data["faults"] = [*(given or ()), fault]


def _push(args: argparse.Namespace, data: dict[str, Any]) -> None:
    timing = {"at": args.push_at, "every": args.push_every, "count": args.pushes}
    timing = {key: value for key, value in timing.items() if value is not None}
    given = data.get("push")
    if args.push is None:
        if timing and given is None:
            raise CliError("--push-at, --push-every, --pushes: no --push COMMAND given", USAGE)
        if timing and isinstance(given, dict):  # a bad one in the file is reported as it is
            data["push"] = {**given, **timing}
        return
    if given is None or isinstance(given, dict):
        data["push"] = {**(given or {}), "command": args.push, **timing}


async def _run(args: argparse.Namespace) -> int:
    from ..load import NotServedError, ScenarioError, UnreachableError, table

    if args.worker:
        return await run_worker(args)
    try:
        scenario = scenario_of(args)
    except ScenarioError as exc:
        raise CliError(str(exc), USAGE) from None
    _check_writable(args.json_file)
    try:
        result = await run_reported(scenario, args)
    except UnreachableError as exc:
        raise CliError(str(exc), UNAVAILABLE) from None
    except NotServedError as exc:
        raise CliError(str(exc), NOT_SERVED) from None
    except ScenarioError as exc:  # what the bootstrap names cannot be used
        raise CliError(str(exc), CONFIG) from None
    sys.stdout.write(table(result))
    if args.json_file is not None:
        try:
            with open(args.json_file, "w", encoding="utf-8") as file:
                file.write(result.to_json())
        except OSError as exc:
            raise CliError(f"--json {args.json_file}: {exc.strerror}", CONFIG) from None
    if result.clients and not result.complete:
        missing = await _missing(scenario)
        if missing:
            raise CliError(f"no client had a complete configuration within "
                           f"{scenario.duration:g} s; missing: {missing}", UNAVAILABLE)  # fmt: skip
    return 0


def _check_writable(path: str | None) -> None:
    """Refuse a ``--json`` file that cannot be written before the run, not after it (the
    file is opened to append, so an existing one is left as it is until the run's end)."""
    if path is None:
        return
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise CliError(f"--json {path}: {exc.strerror}", CONFIG) from None


async def _missing(scenario: Any) -> str:
    """When no client ever had its whole configuration: what the server did not give (then
    status 4), or nothing (the clients' own faults, a run too short: the table says it)."""
    from ._load_why import why_incomplete

    try:
        return await why_incomplete(scenario)
    except Exception:  # the run's own report stands; the reason is a courtesy
        return ""


COMMAND = Command(
    name="load",
    help="load test a control plane with simulated clients",
    add_arguments=_add_arguments,
    run=_run,
)
