"""``python -m xdsclient``: ``demo``, ``watch`` and ``dump``.

Why a CLI: an operator or a control-plane author should be able to point the client at a
server, a bootstrap, a file or a REST endpoint and see what it gets, without writing code.
Errors are one line on stderr with a distinct exit status, never a traceback:
0 ok, 2 bad arguments, 3 bad configuration (bootstrap, file, names), 4 nothing usable arrived
(unreachable, timed out), 5 ``dump`` found NACKed or missing resources, 130 Ctrl-C.
Adding a subcommand is one entry in `COMMANDS`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from ._errors import XdsError

__all__ = ["COMMANDS", "main", "run"]

OK, USAGE, CONFIG, UNAVAILABLE, INCOMPLETE, INTERRUPTED = 0, 2, 3, 4, 5, 130
_TYPES = {"listener": "LISTENER", "route": "ROUTE_CONFIGURATION", "cluster": "CLUSTER",
          "endpoint": "ENDPOINT"}  # fmt: skip


class CliError(Exception):
    """A one-line error and its exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _add_source_options(parser: argparse.ArgumentParser) -> None:
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


def _client(args: argparse.Namespace) -> Any:
    """The client the options describe (not started)."""
    from . import FileSource, RestSource, XdsClient, resources

    options: dict[str, Any] = {"ads": args.ads, "delta": args.delta}
    try:
        if args.server:
            return XdsClient(args.server, node_id=args.node_id, **options)
        if args.bootstrap:
            return XdsClient(bootstrap=args.bootstrap, **options)
        if args.rest:
            rest = RestSource(url=args.rest)
            types = [getattr(resources, t) for t in _TYPES.values()]
            return XdsClient(node_id=args.node_id, sources=dict.fromkeys(types, rest))
        return XdsClient(node_id=args.node_id, sources=_file_sources(args.file, FileSource))
    except (XdsError, ValueError, TypeError) as exc:
        raise CliError(str(exc), CONFIG) from None


def _file_sources(paths: list[str], file_source: Any) -> dict[str, Any]:
    """Each file's type, read from the DiscoveryResponse it holds."""
    from ._transports._formats import FormatError, format_of, parse_response

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


def _type(name: str) -> Any:
    from . import resources

    if name in _TYPES:
        return getattr(resources, _TYPES[name])
    if name.startswith("type.googleapis.com/"):
        return name
    raise CliError(f"unknown type {name!r}: one of {', '.join(_TYPES)} or a type URL", USAGE)


# ---------------------------------------------------------------------- watch


def _watch_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("type", nargs="?", help=f"{', '.join(_TYPES)} or a type URL")
    parser.add_argument("names", nargs="*", help="resource names ('*': every one)")
    parser.add_argument("--listener", help="watch a listener's whole configuration instead")
    parser.add_argument("--count", type=int, help="stop after this many updates")
    _add_source_options(parser)


async def _watch(args: argparse.Namespace) -> int:
    from ._demo import summarize

    if args.listener is None and (args.type is None or not args.names):
        raise CliError("watch needs TYPE NAME... or --listener NAME", USAGE)
    count = 0
    async with _client(args) as client:
        if args.listener is not None:
            async with client.watch_config(args.listener) as configs:
                async for config in configs:
                    print(f"--- update {count + 1}\n{summarize(config)}", flush=True)
                    count += 1
                    if args.count is not None and count >= args.count:
                        return OK
            return OK
        rtype = _type(args.type)
        watches = [client.watch(rtype, name) for name in args.names]
        queue: asyncio.Queue[Any] = asyncio.Queue()

        async def pump(watch: Any) -> None:
            async with watch:
                async for event in watch:
                    queue.put_nowait(event)

        tasks = [asyncio.ensure_future(pump(w)) for w in watches]
        try:
            while args.count is None or count < args.count:
                print(_event_line(await queue.get(), args.json), flush=True)
                count += 1
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return OK


def _event_line(event: Any, as_json: bool) -> str:
    import json

    from ._protocol import AmbientError, DataError

    kind = (
        "error" if isinstance(event, DataError)
        else "warning" if isinstance(event, AmbientError)
        else "changed"
    )  # fmt: skip
    detail = str(getattr(event, "error", "")) or f"version {event.version}"
    if as_json:
        return json.dumps({"event": kind, "type_url": event.type_url, "name": event.name,
                           "detail": detail})  # fmt: skip
    return f"{kind:<8} {event.type_url.rsplit('.', 1)[-1]} {event.name}: {detail}"


# ---------------------------------------------------------------------- dump


def _dump_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listener", help="dump once this listener's configuration is complete")
    parser.add_argument(
        "--resource", action="append", default=[], help="TYPE:NAME to wait for (repeatable)"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait (10)")
    _add_source_options(parser)


async def _dump(args: argparse.Namespace) -> int:
    from ._dependencies import XdsConfig

    if args.listener is None and not args.resource:
        raise CliError("dump needs --listener NAME or --resource TYPE:NAME", USAGE)
    complete = False
    async with _client(args) as client:
        try:
            async with asyncio.timeout(args.timeout):
                if args.listener is not None:
                    async with client.watch_config(args.listener) as configs:
                        async for config in configs:
                            if isinstance(config, XdsConfig):  # snapshots are complete
                                break
                for item in args.resource:
                    kind, _, name = item.partition(":")
                    if not name:
                        raise CliError(f"--resource {item!r}: expected TYPE:NAME", USAGE)
                    await client.wait_for(_type(kind), name, timeout=args.timeout)
                complete = True
        except (TimeoutError, XdsError):
            pass  # what did arrive is dumped; the statuses say what did not
        dump = client.csds_json() if args.json else _table(client.csds())
        statuses = {x.client_status for x in client.csds().generic_xds_configs}
    print(dump)
    from envoy.admin.v3 import config_dump_shared_pb2 as shared

    bad = {shared.ClientResourceStatus.Value(s) for s in ("NACKED", "DOES_NOT_EXIST", "TIMEOUT",
                                                           "RECEIVED_ERROR")}  # fmt: skip
    if statuses & bad:
        return INCOMPLETE
    if not complete:
        print(f"incomplete after {args.timeout:g} s", file=sys.stderr)
        return UNAVAILABLE
    return OK


def _table(config: Any) -> str:
    from envoy.admin.v3 import config_dump_shared_pb2 as shared

    lines = [f"{'status':<15} {'type':<22} {'version':<10} name"]
    for item in config.generic_xds_configs:
        status = shared.ClientResourceStatus.Name(item.client_status)
        kind = item.type_url.rsplit(".", 1)[-1]
        lines.append(f"{status:<15} {kind:<22} {item.version_info or '-':<10} {item.name}")
        if item.HasField("error_state"):
            lines.append(f"{'':<15} error: {item.error_state.details}")
    return "\n".join(lines)


# ---------------------------------------------------------------------- demo and main


def _demo_parser(parser: argparse.ArgumentParser) -> None:
    from ._demo import LISTENER

    parser.add_argument("--updates", type=int, default=None, help="stop after this many")
    parser.add_argument("--bootstrap", help="a gRPC xDS bootstrap file: watch a real server")
    parser.add_argument("--listener", default=LISTENER, help=f"default {LISTENER}")
    parser.add_argument(
        "--source",
        choices=("grpc", "file", "rest"),
        default="grpc",
        help="how the embedded control plane's configuration reaches the client",
    )


async def _demo(args: argparse.Namespace) -> int:
    from ._demo import run

    return await run(
        updates=args.updates, bootstrap=args.bootstrap, listener=args.listener, source=args.source
    )


Runner = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]

#: name -> (help, add the arguments, run)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Runner]] = {
    "demo": ("watch the embedded demo (until Ctrl-C or --updates N)", _demo_parser, _demo),
    "watch": ("stream updates of resources or a listener's configuration", _watch_parser, _watch),
    "dump": ("wait for a configuration, then print the CSDS dump", _dump_parser, _dump),
}


def main(argv: Sequence[str] | None = None) -> int:
    from . import __version__

    parser = argparse.ArgumentParser(prog="python -m xdsclient", description="xdsclient tools")
    parser.add_argument("--version", action="version", version=f"xdsclient {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, (text, add, _) in COMMANDS.items():
        add(commands.add_parser(name, help=text, description=text))
    args = parser.parse_args(argv)
    try:
        return asyncio.run(COMMANDS[args.command][2](args))
    except CliError as exc:
        print(f"xdsclient: {exc}", file=sys.stderr)
        return exc.status
    except XdsError as exc:
        print(f"xdsclient: {exc}", file=sys.stderr)
        return CONFIG
    except KeyboardInterrupt:
        return INTERRUPTED


def run() -> None:
    """The ``xdsclient`` console script."""
    sys.exit(main())
