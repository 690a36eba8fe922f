"""What every subcommand shares: exit statuses, one-line errors, where the configuration comes
from (``--server``, ``--bootstrap``, ``--file``, ``--rest``), resource type names, and colour.

Why here: each subcommand module then holds only its own arguments and its run function, and
a new subcommand (``check``, ...) is one module and one line in `xdsclient._cli.COMMANDS`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Coroutine
from typing import IO, Any

import attrs

from .._errors import XdsError

OK, USAGE, CONFIG, UNAVAILABLE, INCOMPLETE, INTERRUPTED = 0, 2, 3, 4, 5, 130
TYPES = {"listener": "LISTENER", "route": "ROUTE_CONFIGURATION", "cluster": "CLUSTER",
         "endpoint": "ENDPOINT"}  # fmt: skip

Runner = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


@attrs.frozen
class Command:
    """A subcommand: its name, one line of help, its arguments and what it runs."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Runner


class CliError(Exception):
    """A one-line error and its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """Where the configuration comes from, and the transport variant."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="a management server, host:port (insecure)")
    where.add_argument("--bootstrap", help="a gRPC xDS bootstrap file")
    where.add_argument(
        "--file", action="append", help="a file holding a DiscoveryResponse (repeat per type)"
    )
    where.add_argument("--rest", help="a REST-JSON endpoint serving every type, http(s)://...")
    parser.add_argument("--node-id", default="xdsclient-cli", help="node id (with --server)")
    parser.add_argument("--ads", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--delta", action="store_true", help="incremental xDS (gRPC only)")
    parser.add_argument("--json", action="store_true", help="JSON output")


def make_client(args: argparse.Namespace) -> Any:
    """The client the options describe (not started)."""
    from .. import FileSource, RestSource, XdsClient, resources

    options: dict[str, Any] = {"ads": args.ads, "delta": args.delta}
    try:
        if args.server:
            return XdsClient(args.server, node_id=args.node_id, **options)
        if args.bootstrap:
            return XdsClient(bootstrap=args.bootstrap, **options)
        if args.rest:
            rest = RestSource(url=args.rest)
            types = [getattr(resources, t) for t in TYPES.values()]
            return XdsClient(node_id=args.node_id, sources=dict.fromkeys(types, rest))
        return XdsClient(node_id=args.node_id, sources=_file_sources(args.file, FileSource))
    except (XdsError, ValueError, TypeError) as exc:
        raise CliError(str(exc), CONFIG) from None


def _file_sources(paths: list[str], file_source: Any) -> dict[str, Any]:
    """Each file's type, read from the DiscoveryResponse it holds."""
    from .._transports._formats import FormatError, format_of, parse_response

    sources: dict[str, Any] = {}
    for path in paths:
        try:
            with open(path, "rb") as file:
                response = parse_response(file.read(), format_of(path))
        except OSError as exc:
            raise CliError(f"{path}: {exc.strerror}", CONFIG) from None
        except FormatError as exc:
            raise CliError(f"{path}: {exc}", CONFIG) from None
        type_url = response.type_url or (
            response.resources[0].type_url if response.resources else ""
        )
        if not type_url:
            raise CliError(f"{path}: cannot tell its resource type (no type_url)", CONFIG)
        sources[type_url] = file_source(path=path)
    return sources


def resource_type(name: str) -> Any:
    """A built-in type by its short name, or a type URL as given."""
    from .. import resources

    if name in TYPES:
        return getattr(resources, TYPES[name])
    if name.startswith("type.googleapis.com/"):
        return name
    raise CliError(f"unknown type {name!r}: one of {', '.join(TYPES)} or a type URL", USAGE)


_COLOURS = {"good": "32", "warn": "33", "bad": "31", "dim": "2"}


class Style:
    """ANSI colour for human output, only on a terminal and never with ``NO_COLOR`` set."""

    def __init__(self, stream: IO[str]) -> None:
        self.enabled = stream.isatty() and not os.environ.get("NO_COLOR")

    def __call__(self, text: str, kind: str) -> str:
        if not self.enabled or kind not in _COLOURS:
            return text
        return f"\x1b[{_COLOURS[kind]}m{text}\x1b[0m"
