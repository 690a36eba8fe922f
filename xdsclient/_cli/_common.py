"""What every subcommand shares: exit statuses, one-line errors, where the configuration comes
from (``--server``, ``--bootstrap``, ``--file``, ``--rest``), the node the client presents
(``--node-id``, ``--node-cluster``, ``--node-metadata``, ``--locality``), checked numbers,
resource type names, and colour.

Why here: each subcommand module then holds only its own arguments and its run function, and
a new subcommand (``check``, ...) is one module and one line in `xdsclient._cli.COMMANDS`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Coroutine
from typing import IO, Any, NoReturn

import attrs

from .._errors import XdsError
from .._settings._config import Locality, NodeConfig

OK, USAGE, CONFIG, UNAVAILABLE, INCOMPLETE, INTERRUPTED, BROKEN_PIPE = 0, 2, 3, 4, 5, 130, 141
FAILED, NOT_SERVED, INTERNAL = 1, 6, 70  # ``check`` only (1, 6); a bug (sysexits' EX_SOFTWARE)

#: Every exit status and what it means: the ``--help`` epilog and the README's table.
EXIT_STATUSES: tuple[tuple[int, str], ...] = (
    (OK, "ok"),
    (FAILED, "check: a MUST rule failed"),
    (USAGE, "usage: a bad or missing argument, or options that do not go together"),
    (CONFIG, "configuration: a bad bootstrap, file or name, or a missing extra"),
    (UNAVAILABLE, "nothing usable in time: unreachable, incomplete at --timeout"),
    (INCOMPLETE, "dump, watch: a resource NACKed, missing, timed out or in error"),
    (NOT_SERVED, "check, load: no xDS service or variant (check: or no resource for this node)"),
    (INTERNAL, "internal error (a bug: please report it)"),
    (INTERRUPTED, "interrupted (Ctrl-C)"),
    (BROKEN_PIPE, "the output was closed early (a pipe into `head`): quietly, as SIGPIPE"),
)


def exit_status_epilog() -> str:
    """The exit status table for ``--help``."""
    rows = "\n".join(f"  {status:>3}  {meaning}" for status, meaning in EXIT_STATUSES)
    return f"exit status:\n{rows}\n\nErrors are one line on stderr, never a traceback."


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


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``xdsclient: ...``) and exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"xdsclient: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(USAGE)


class CliError(Exception):
    """A one-line error and its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero (``--count``, ``--updates``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be above 0")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number of seconds above zero (``--timeout``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: must be above 0")
    return value


def parse_metadata(text: str) -> tuple[str, str]:
    """An argparse type for ``--node-metadata KEY=VALUE``: the pair (the value is a string,
    possibly empty; the key is not empty)."""
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key, value


def metadata_of(pairs: list[tuple[str, str]] | None) -> dict[str, str]:
    """The node metadata from repeated ``--node-metadata`` pairs; a key given twice is a
    usage error (which one was meant?)."""
    metadata: dict[str, str] = {}
    for key, value in pairs or ():
        if key in metadata:
            raise CliError(f"--node-metadata: {key!r} given twice", USAGE)
        metadata[key] = value
    return metadata


def parse_locality(text: str) -> Locality:
    """An argparse type for ``--locality REGION[/ZONE[/SUBZONE]]``: one to three non-empty
    parts."""
    parts = text.split("/")
    if len(parts) > 3 or not all(parts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected REGION[/ZONE[/SUBZONE]]")
    region, zone, sub_zone = (*parts, "", "")[:3]
    return Locality(region=region, zone=zone, sub_zone=sub_zone)


def add_node_options(parser: argparse.ArgumentParser) -> None:
    """``--node-id``, ``--node-cluster``, ``--node-metadata KEY=VALUE`` (repeatable) and
    ``--locality``: the node the client presents. With ``--bootstrap`` each one given
    replaces the bootstrap's field (metadata: key by key)."""
    parser.add_argument("--node-id", help="node id (default xdsclient-cli, or the bootstrap's)")
    parser.add_argument("--node-cluster", help="node cluster")
    parser.add_argument(
        "--node-metadata",
        action="append",
        type=parse_metadata,
        metavar="KEY=VALUE",
        help="node metadata, a string value (repeatable)",
    )
    parser.add_argument(
        "--locality", type=parse_locality, metavar="REGION[/ZONE[/SUBZONE]]", help="node locality"
    )


def node_config(args: argparse.Namespace, base: NodeConfig | None = None) -> NodeConfig:
    """The node `add_node_options` describes, over ``base`` (a bootstrap's node) if given."""
    node = base if base is not None else NodeConfig(id=_DEFAULT_NODE_ID)
    changes: dict[str, Any] = {}
    if args.node_id is not None:
        changes["id"] = args.node_id
    if args.node_cluster is not None:
        changes["cluster"] = args.node_cluster
    if args.node_metadata:
        changes["metadata"] = {**node.metadata, **metadata_of(args.node_metadata)}
    if args.locality is not None:
        changes["locality"] = args.locality
    return attrs.evolve(node, **changes)


_DEFAULT_NODE_ID = "xdsclient-cli"


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """Where the configuration comes from, and the transport variant."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="a management server, host:port (insecure)")
    where.add_argument("--bootstrap", help="a gRPC xDS bootstrap file")
    where.add_argument(
        "--file", action="append", help="a file holding a DiscoveryResponse (repeat per type)"
    )
    where.add_argument("--rest", help="a REST-JSON endpoint serving every type, http(s)://...")
    add_node_options(parser)
    parser.add_argument(
        "--ads",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="one stream for every type (default), or one per type (gRPC only)",
    )
    parser.add_argument("--delta", action="store_true", help="incremental xDS (gRPC only)")
    parser.add_argument("--json", action="store_true", help="JSON output")


def make_client(args: argparse.Namespace) -> Any:
    """The client the options describe (not started)."""
    from .. import resources
    from .._client import XdsClient
    from .._settings._bootstrap import load_bootstrap
    from .._settings._sources import FileSource, RestSource

    _check_variant(args)
    options: dict[str, Any] = {"ads": args.ads, "delta": args.delta}
    try:
        if args.server:
            return XdsClient(args.server, node=node_config(args), **options)
        if args.bootstrap:
            config = load_bootstrap(args.bootstrap)
            config = attrs.evolve(config, node=node_config(args, config.node))
            return XdsClient(bootstrap=config, **options)
        if args.rest:
            rest = RestSource(url=args.rest)
            types = [getattr(resources, t) for t in TYPES.values()]
            return XdsClient(node=node_config(args), sources=dict.fromkeys(types, rest))
        return XdsClient(node=node_config(args), sources=_file_sources(args.file, FileSource))
    except (XdsError, ValueError, TypeError) as exc:
        raise CliError(str(exc), CONFIG) from None


def _check_variant(args: argparse.Namespace) -> None:
    """``--delta`` and ``--ads/--no-ads`` choose among gRPC streams: REST polls and files have
    none, so either flag with ``--rest`` or ``--file`` is a usage error, not silently ignored."""
    if args.server or args.bootstrap:
        return
    kind = "REST" if args.rest else "a file source"
    if args.delta:
        raise CliError(f"--delta: {kind} has no Delta xDS (it is gRPC only)", USAGE)
    if args.ads is not None:
        flag = "--ads" if args.ads else "--no-ads"
        raise CliError(f"{flag}: {kind} has no xDS streams to aggregate (gRPC only)", USAGE)


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
    """A built-in type by its short name, or a type URL as given (an xDS v2 one is a usage
    error naming its v3 URL)."""
    from .. import resources
    from ..resources._type import removed_v2_type

    if name in TYPES:
        return getattr(resources, TYPES[name])
    removed = removed_v2_type(name)
    if removed is not None:
        raise CliError(removed, USAGE)
    if name.startswith("type.googleapis.com/"):
        return name
    raise CliError(f"unknown type {name!r}: one of {', '.join(TYPES)} or a type URL", USAGE)


def known_type(name: str) -> Any:
    """`resource_type`, for a client of the built-in types only: a type URL none of them has
    is a usage error (the CLI cannot decode it)."""
    from ..resources import BUILTIN_TYPES

    rtype = resource_type(name)
    if isinstance(rtype, str):
        rtype = next((t for t in BUILTIN_TYPES if t.type_url == rtype), None)
        if rtype is None:
            raise CliError(f"unknown type {name!r}: one of {', '.join(TYPES)} or their type URLs",
                           USAGE)  # fmt: skip
    return rtype


_COLOURS = {"good": "32", "warn": "33", "bad": "31", "dim": "2"}


class Style:
    """ANSI colour for human output, only on a terminal and never with ``NO_COLOR`` set."""

    def __init__(self, stream: IO[str]) -> None:
        self.enabled = stream.isatty() and not os.environ.get("NO_COLOR")

    def __call__(self, text: str, kind: str) -> str:
        if not self.enabled or kind not in _COLOURS:
            return text
        return f"\x1b[{_COLOURS[kind]}m{text}\x1b[0m"
