"""``xdsclient check``: run the conformance rules against a management server and print the
table (or JSON), optionally a JUnit XML file.

Why its own exit statuses: a CI step must tell "the server broke a MUST rule" (1) from "the
server could not be reached" (4) and from "the server serves nothing to check" (6, the wrong
port or the wrong node), and none of them from the checker crashing. Each is one line on
stderr, after the report when there is one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .._errors import TransportError
from ._common import (
    CONFIG,
    FAILED,
    NOT_SERVED,
    OK,
    UNAVAILABLE,
    USAGE,
    CliError,
    Command,
    metadata_of,
    parse_metadata,
    positive_float,
    resource_type,
)

EPILOG = """exit status:
  0  every variant checked passed its MUST rules
  1  a MUST rule failed (SHOULD failures are reported, not fatal)
  2  bad arguments
  3  the --junit file cannot be written
  4  the server cannot be reached within --timeout
  6  nothing to check (and no MUST rule failed): no xDS service, a variant asked
     for is not served, or no resource is served to this node (see --node-id,
     --node-metadata, --listener)
"""


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--server", required=True, help="the management server, host:port")
    parser.add_argument(
        "--variants",
        help="comma-separated: ads-sotw,ads-delta,xds-sotw,xds-delta (default: all "
        "the server serves)",
    )
    parser.add_argument("--listener", action="append", default=[], help="start from this listener")
    parser.add_argument(
        "--resource", action="append", default=[], help="TYPE:NAME to check too (repeatable)"
    )
    parser.add_argument("--node-id", default="xdsclient-check", help="node id to present")
    parser.add_argument(
        "--node-metadata",
        action="append",
        type=parse_metadata,
        metavar="KEY=VALUE",
        help="node metadata to present (repeatable; servers select resources by node)",
    )
    parser.add_argument(
        "--quiet-window",
        type=positive_float,
        default=1.0,
        help="seconds of silence that count as no response (1)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=5.0,
        help="seconds to wait for the connection and for answers (5)",
    )
    parser.add_argument("--json", action="store_true", help="JSON output")
    parser.add_argument("--junit", type=Path, help="also write a JUnit XML report here")


def _resources(items: list[str]) -> list[tuple[str, str]]:
    resources = []
    for item in items:
        kind, _, name = item.partition(":")
        if not name:
            raise CliError(f"--resource {item!r}: expected TYPE:NAME", USAGE)
        rtype = resource_type(kind)
        resources.append((getattr(rtype, "type_url", rtype), name))
    return resources


async def _run(args: argparse.Namespace) -> int:
    from ..conformance import VARIANTS, Level, check

    variants = args.variants.split(",") if args.variants else None
    if variants is not None and set(variants) - set(VARIANTS):
        raise CliError(f"--variants: choose from {', '.join(VARIANTS)}", USAGE)
    try:
        report = await check(
            args.server,
            variants=variants,
            listeners=args.listener,
            resources=_resources(args.resource),
            node_id=args.node_id,
            node_metadata=metadata_of(args.node_metadata),
            quiet=args.quiet_window,
            timeout=args.timeout,
        )
    except TransportError as exc:
        raise CliError(str(exc), UNAVAILABLE) from None
    print(report.to_json() if args.json else report.table())
    if args.junit is not None:
        try:
            args.junit.write_text(report.to_junit())
        except OSError as exc:
            raise CliError(f"--junit {args.junit}: {exc.strerror}", CONFIG) from None
    if any(failure.level is Level.MUST for failure in report.failures):
        raise CliError("a MUST rule failed", FAILED)
    if report.not_served:
        raise CliError(f"nothing to check at {args.server}: {report.not_served}", NOT_SERVED)
    return OK


COMMAND = Command(
    "check", "run the xDS conformance rules against a management server", _arguments, _run
)
