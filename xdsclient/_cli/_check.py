"""``xdsclient check``: run the conformance rules against a management server and print the
table (or JSON), optionally a JUnit XML file; exit 1 when a MUST rule fails."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import OK, USAGE, CliError, Command, resource_type

FAILED = 1


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", required=True, help="the management server, host:port")
    parser.add_argument(
        "--variants",
        help="comma-separated: ads-sotw,ads-delta,xds-sotw,xds-delta (default: all "
        "the server answers)",
    )
    parser.add_argument("--listener", action="append", default=[], help="start from this listener")
    parser.add_argument(
        "--resource", action="append", default=[], help="TYPE:NAME to check too (repeatable)"
    )
    parser.add_argument("--node-id", default="xdsclient-check", help="node id to present")
    parser.add_argument(
        "--quiet-window",
        type=float,
        default=1.0,
        help="seconds of silence that count as no response (1)",
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for answers")
    parser.add_argument("--json", action="store_true", help="JSON output")
    parser.add_argument("--junit", type=Path, help="also write a JUnit XML report here")


async def _run(args: argparse.Namespace) -> int:
    from ..conformance import VARIANTS, check

    variants = args.variants.split(",") if args.variants else None
    if variants is not None and set(variants) - set(VARIANTS):
        raise CliError(f"--variants: choose from {', '.join(VARIANTS)}", USAGE)
    resources = []
    for item in args.resource:
        kind, _, name = item.partition(":")
        if not name:
            raise CliError(f"--resource {item!r}: expected TYPE:NAME", USAGE)
        rtype = resource_type(kind)
        resources.append((getattr(rtype, "type_url", rtype), name))
    report = await check(
        args.server,
        variants=variants,
        listeners=args.listener,
        resources=resources,
        node_id=args.node_id,
        quiet=args.quiet_window,
        timeout=args.timeout,
    )
    print(report.to_json() if args.json else report.table())
    if args.junit is not None:
        args.junit.write_text(report.to_junit())
    if not report.ok:
        print("xdsclient: a MUST rule failed", file=sys.stderr)
        return FAILED
    return OK


COMMAND = Command(
    "check", "run the xDS conformance rules against a management server", _arguments, _run
)
