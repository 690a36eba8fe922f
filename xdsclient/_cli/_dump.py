"""``xdsclient dump``: connect, wait until a listener's whole configuration and every named
resource has arrived (or ``--timeout`` passes), print the CSDS dump as a table, JSON or YAML,
and exit nonzero when anything is NACKED, missing or timed out (`._outcome`).

Everything asked for is watched at once, and held until the dump is read: a resource the client
no longer watches leaves its cache, so waiting for one resource after another would dump only
the last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._common import (
    CONFIG,
    USAGE,
    CliError,
    Command,
    Style,
    add_source_options,
    known_type,
    make_client,
    positive_float,
)
from ._connectivity import held_back
from ._outcome import outcome


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listener", help="dump once this listener's configuration is complete")
    parser.add_argument(
        "--resource", action="append", default=[], help="TYPE:NAME to wait for (repeatable)"
    )
    parser.add_argument("--timeout", type=positive_float, default=10.0, help="seconds to wait (10)")
    parser.add_argument(
        "--format", choices=("table", "json", "yaml"), help="output (default table; --json: json)"
    )
    add_source_options(parser)


async def _run(args: argparse.Namespace) -> int:
    if args.listener is None and not args.resource:
        raise CliError("dump needs --listener NAME or --resource TYPE:NAME", USAGE)
    wanted = [_resource(item) for item in args.resource]
    output = args.format or ("json" if args.json else "table")
    if output == "yaml":
        _yaml()  # fail before connecting when PyYAML is missing
    client = make_client(args)
    with held_back(client) as connectivity:
        complete, config, text = await _dump(client, args, wanted, output)
    print(text)
    unfinished = f"incomplete after {args.timeout:g} s"
    return outcome(config, lambda _: True, _asked(args.listener, wanted), finished=complete,
                   unfinished=unfinished, cause=connectivity.cause())  # fmt: skip


async def _dump(
    client: Any, args: argparse.Namespace, wanted: list[tuple[Any, str]], output: str
) -> tuple[bool, Any, str]:
    """Wait for what was asked (at most ``--timeout``): (all answered, the CSDS dump, its
    text)."""
    async with client, contextlib.AsyncExitStack() as held:
        watches = [await held.enter_async_context(watch)
                   for watch in _watches(client, args.listener, wanted)]  # fmt: skip
        complete = await _all_answered(watches, args.timeout)
        config = client.csds()
        return complete, config, _render(client, config, output)


def _asked(listener: str | None, wanted: list[tuple[Any, str]]) -> list[tuple[str, str]]:
    """(type URL, name) of each resource asked for by name."""
    from ..resources import LISTENER

    asked = [(rtype.type_url, name) for rtype, name in wanted]
    return asked if listener is None else [(LISTENER.type_url, listener), *asked]


def _resource(item: str) -> tuple[Any, str]:
    kind, _, name = item.partition(":")
    if not name:
        raise CliError(f"--resource {item!r}: expected TYPE:NAME", USAGE)
    return known_type(kind), name


def _watches(client: Any, listener: str | None, wanted: list[tuple[Any, str]]) -> Iterator[Any]:
    """A watch of the listener's configuration, if asked for, and of each resource."""
    if listener is not None:
        yield client.watch_config(listener)
    for rtype, name in wanted:
        yield client.watch(rtype, name)


async def _answer(updates: AsyncIterator[Any]) -> None:
    """Until the first answer from the server: a value or complete snapshot, or an error the
    server gave (NACKed, does not exist); a server not reached yet is no answer."""
    from .._errors import TransportError
    from .._protocol import AmbientError, DataError, ResourceChanged
    from .._watch._dependencies import XdsConfig

    async for update in updates:
        if isinstance(update, ResourceChanged | XdsConfig | AmbientError):
            return
        error = update.error if isinstance(update, DataError) else update
        if not isinstance(error, TransportError):
            return


async def _all_answered(watches: list[AsyncIterator[Any]], timeout: float) -> bool:
    """Whether every watch had its answer within ``timeout``."""
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*map(_answer, watches))
    except TimeoutError:
        return False  # what did arrive is dumped; the statuses say what did not
    return True


def _render(client: Any, config: Any, output: str) -> str:
    if output == "json":
        return str(client.csds_json())
    if output == "yaml":
        return str(_yaml().safe_dump(json.loads(client.csds_json()), sort_keys=False))
    return _table(config, Style(sys.stdout))


def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        raise CliError("YAML output needs PyYAML: pip install 'xdsclient[files]'", CONFIG) from None
    return yaml


_STATUS_STYLE = {"ACKED": "good", "REQUESTED": "dim", "NACKED": "bad", "DOES_NOT_EXIST": "bad",
                 "TIMEOUT": "bad", "RECEIVED_ERROR": "bad"}  # fmt: skip


def _table(config: Any, style: Style) -> str:
    from envoy.admin.v3 import config_dump_shared_pb2 as shared

    lines = [f"{'status':<15} {'type':<22} {'version':<10} name"]
    for item in config.generic_xds_configs:
        status = shared.ClientResourceStatus.Name(item.client_status)
        kind = item.type_url.rsplit(".", 1)[-1]
        label = style(f"{status:<15}", _STATUS_STYLE.get(status, ""))
        lines.append(f"{label} {kind:<22} {item.version_info or '-':<10} {item.name}")
        if item.HasField("error_state"):
            lines.append(f"{'':<15} error: {item.error_state.details}")
    return "\n".join(lines)


COMMAND = Command("dump", "wait for a configuration, then print the CSDS dump", _arguments, _run)
