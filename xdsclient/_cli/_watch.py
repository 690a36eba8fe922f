"""``xdsclient watch``: stream updates of resources, or of a listener's whole configuration, as
human lines or JSON lines, until Ctrl-C or ``--count N``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from ._common import OK, TYPES, USAGE, CliError, Command, Style, add_source_options, make_client


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("type", nargs="?", help=f"{', '.join(TYPES)} or a type URL")
    parser.add_argument("names", nargs="*", help="resource names ('*': every one)")
    parser.add_argument("--listener", help="watch a listener's whole configuration instead")
    parser.add_argument("--count", type=int, help="stop after this many updates")
    add_source_options(parser)


async def _run(args: argparse.Namespace) -> int:
    if args.listener is None and (args.type is None or not args.names):
        raise CliError("watch needs TYPE NAME... or --listener NAME", USAGE)
    async with make_client(args) as client:
        if args.listener is not None:
            await _configs(client, args)
        else:
            await _resources(client, args)
    return OK


async def _configs(client: Any, args: argparse.Namespace) -> None:
    from .._demo import summarize

    count = 0
    async with client.watch_config(args.listener) as configs:
        async for config in configs:
            count += 1
            if args.json:
                print(json.dumps({"update": count, **config_json(config)}), flush=True)
            else:
                print(f"--- update {count}\n{summarize(config)}", flush=True)
            if args.count is not None and count >= args.count:
                return


async def _resources(client: Any, args: argparse.Namespace) -> None:
    from ._common import resource_type

    rtype = resource_type(args.type)
    queue: asyncio.Queue[Any] = asyncio.Queue()
    style = Style(sys.stdout)

    async def pump(watch: Any) -> None:
        async with watch:
            async for event in watch:
                queue.put_nowait(event)

    tasks = [asyncio.ensure_future(pump(client.watch(rtype, name))) for name in args.names]
    try:
        count = 0
        while args.count is None or count < args.count:
            print(event_line(await queue.get(), args.json, style), flush=True)
            count += 1
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def event_line(event: Any, as_json: bool, style: Style | None = None) -> str:
    """One watch event as a human line (coloured by kind on a terminal) or a JSON line."""
    from .._protocol import AmbientError, DataError

    kind, colour = (
        ("error", "bad") if isinstance(event, DataError)
        else ("warning", "warn") if isinstance(event, AmbientError)
        else ("changed", "good")
    )  # fmt: skip
    detail = str(getattr(event, "error", "")) or f"version {event.version}"
    if as_json:
        return json.dumps({"event": kind, "type_url": event.type_url, "name": event.name,
                           "detail": detail})  # fmt: skip
    label = style(f"{kind:<8}", colour) if style is not None else f"{kind:<8}"
    return f"{label} {event.type_url.rsplit('.', 1)[-1]} {event.name}: {detail}"


def config_json(config: Any) -> dict[str, Any]:
    """A snapshot of a listener's configuration as JSON-ready data (or its error)."""
    from .._dependencies import XdsConfig
    from .._protocol import AmbientError
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
