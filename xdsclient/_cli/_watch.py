"""``xdsclient watch``: stream updates of resources, or of a listener's whole configuration, as
human lines or JSON lines, until Ctrl-C, ``--count N`` or ``--timeout S``; then exit as ``dump``
does for the same state (`._outcome`).

A resource update prints the resource (a summary in text, proto3 JSON with ``--json``). An
error is printed when it changes, not on every retry: a server that cannot be reached is one
line, and another only once something else happens to that resource.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncGenerator
from typing import Any, TypeAlias

from ._common import (
    TYPES,
    USAGE,
    CliError,
    Command,
    Style,
    add_source_options,
    known_type,
    make_client,
    positive_float,
    positive_int,
)
from ._connectivity import held_back
from ._outcome import outcome
from ._summary import resource_json, summary

Lines: TypeAlias = AsyncGenerator[str, None]


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("type", nargs="?", help=f"{', '.join(TYPES)} or a type URL")
    parser.add_argument("names", nargs="*", help="resource names ('*': every one)")
    parser.add_argument("--listener", help="watch a listener's whole configuration instead")
    parser.add_argument("--count", type=positive_int, help="stop after this many updates")
    parser.add_argument(
        "--timeout", type=positive_float, help="stop after this many seconds (default: never)"
    )
    add_source_options(parser)


async def _run(args: argparse.Namespace) -> int:
    if args.listener is not None and args.type is not None:
        raise CliError("watch takes TYPE NAME... or --listener NAME, not both", USAGE)
    if args.listener is None and (args.type is None or not args.names):
        raise CliError("watch needs TYPE NAME... or --listener NAME", USAGE)
    rtype = None if args.listener is not None else known_type(args.type)
    client = make_client(args)
    with held_back(client) as connectivity:
        async with client:
            lines = (_config_lines(client, args) if rtype is None
                     else _event_lines(client, rtype, args))  # fmt: skip
            printed = await _follow(lines, args.count, args.timeout)
            config = client.csds()
    finished = args.count is None or printed >= args.count
    after = f" after {args.timeout:g} s" if args.timeout is not None else ""
    unfinished = f"{printed} of {args.count} updates{after}"
    asked = _asked(rtype, args)
    return outcome(config, _wanted(rtype, args.names), asked, finished=finished,
                   unfinished=unfinished, cause=connectivity.cause())  # fmt: skip


async def _follow(lines: Lines, count: int | None, timeout: float | None) -> int:
    """Print ``lines`` until ``count`` of them or ``timeout`` seconds; how many were printed."""
    printed = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout), contextlib.aclosing(lines):
            async for line in lines:
                print(line, flush=True)
                printed += 1
                if count is not None and printed >= count:
                    break
    return printed


def _wanted(rtype: Any, names: list[str]) -> Any:
    """Which CSDS entries the exit status looks at: those watched (all, for a listener)."""
    if rtype is None:
        return lambda _: True
    everything = "*" in names
    return lambda item: item.type_url == rtype.type_url and (everything or item.name in names)


def _asked(rtype: Any, args: argparse.Namespace) -> list[tuple[str, str]]:
    """(type URL, name) of each resource asked for by name (not ``'*'``)."""
    if rtype is None:
        from ..resources import LISTENER

        return [(LISTENER.type_url, args.listener)]
    return [(rtype.type_url, name) for name in args.names if name != "*"]


async def _config_lines(client: Any, args: argparse.Namespace) -> Lines:
    from .._demo import summarize

    count = 0
    async with client.watch_config(args.listener) as configs:
        async for config in configs:
            count += 1
            if args.json:
                yield json.dumps({"update": count, **config_json(config)})
            else:
                yield f"--- update {count}\n{summarize(config)}"


async def _event_lines(client: Any, rtype: Any, args: argparse.Namespace) -> Lines:
    """A line for each event of each name, but an error only when it differs from the last
    line of its resource (a retry that fails the same way is not news)."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    style = Style(sys.stdout)
    last: dict[tuple[str, str], str] = {}

    async def pump(watch: Any) -> None:
        async with watch:
            async for event in watch:
                queue.put_nowait(event)

    tasks = [asyncio.ensure_future(pump(client.watch(rtype, name))) for name in args.names]
    try:
        while True:
            event = await queue.get()
            line = event_line(event, args.json, style)
            key = (event.type_url, event.name)
            if hasattr(event, "error") and last.get(key) == line:
                continue
            last[key] = line
            yield line
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def event_line(event: Any, as_json: bool, style: Style | None = None) -> str:
    """One watch event as human lines (coloured by kind on a terminal: the event, then a summary
    of the resource) or a JSON line (with the resource as proto3 JSON)."""
    from .._protocol import AmbientError, DataError

    kind, colour = (
        ("error", "bad") if isinstance(event, DataError)
        else ("warning", "warn") if isinstance(event, AmbientError)
        else ("changed", "good")
    )  # fmt: skip
    error = getattr(event, "error", None)
    if as_json:
        data: dict[str, Any] = {"event": kind, "type_url": event.type_url, "name": event.name}
        if error is not None:
            data["error"] = str(error)
        else:
            data.update(version=event.version, resource=resource_json(event.value))
        return json.dumps(data)
    label = style(f"{kind:<8}", colour) if style is not None else f"{kind:<8}"
    head = f"{label} {event.type_url.rsplit('.', 1)[-1]} {event.name}"
    if error is not None:
        return f"{head}: {error}"
    lines = [f"{head}: version {event.version}"]
    lines.extend(f"  {line}" for line in summary(event.value))
    return "\n".join(lines)


def config_json(config: Any) -> dict[str, Any]:
    """A snapshot of a listener's configuration as JSON-ready data (or its error)."""
    from .._protocol import AmbientError
    from .._watch._dependencies import XdsConfig
    from ..resources import ClusterType

    if isinstance(config, AmbientError):
        return {"warning": str(config.error)}
    if not isinstance(config, XdsConfig):
        return {"error": str(config)}
    clusters: dict[str, Any] = {}
    for name, cluster in sorted(config.clusters.items()):
        if cluster.error is not None:
            clusters[name] = {"error": str(cluster.error)}
        elif cluster.cluster is not None and cluster.cluster.type is ClusterType.AGGREGATE:
            clusters[name] = {"aggregate": list(cluster.leaves)}
        elif cluster.endpoints is not None:
            clusters[name] = {
                "endpoints": [
                    {"address": f"{e.address}:{e.port}", "healthy": e.healthy}
                    for locality in cluster.endpoints.localities
                    for e in locality.endpoints
                ]
            }
        else:
            clusters[name] = {"error": str(cluster.endpoints_error)}
    return {
        "listener": config.listener.name,
        "route_config": config.route_config.name,
        "virtual_host": config.virtual_host.name,
        "clusters": clusters,
    }


COMMAND = Command(
    "watch", "stream updates of resources or of a listener's configuration", _arguments, _run
)
