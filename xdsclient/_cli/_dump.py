"""``xdsclient dump``: connect, wait until a listener's whole configuration (or the named
resources) is complete or ``--timeout`` passes, print the CSDS dump as a table, JSON or YAML,
and exit nonzero when anything is NACKed, missing or timed out."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from .._errors import XdsError
from ._common import (
    CONFIG,
    INCOMPLETE,
    OK,
    UNAVAILABLE,
    USAGE,
    CliError,
    Command,
    Style,
    add_source_options,
    make_client,
    resource_type,
)

#: CSDS statuses that make the dump a failure
_BAD = ("NACKED", "DOES_NOT_EXIST", "TIMEOUT", "RECEIVED_ERROR")


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listener", help="dump once this listener's configuration is complete")
    parser.add_argument(
        "--resource", action="append", default=[], help="TYPE:NAME to wait for (repeatable)"
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait (10)")
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
    async with make_client(args) as client:
        complete = await _wait(client, args.listener, wanted, args.timeout)
        config = client.csds()
        text = _render(client, config, output)
    print(text)
    from envoy.admin.v3 import config_dump_shared_pb2 as shared

    bad = {shared.ClientResourceStatus.Value(status) for status in _BAD}
    if any(item.client_status in bad for item in config.generic_xds_configs):
        return INCOMPLETE
    if not complete:
        print(f"xdsclient: incomplete after {args.timeout:g} s", file=sys.stderr)
        return UNAVAILABLE
    return OK


def _resource(item: str) -> tuple[Any, str]:
    kind, _, name = item.partition(":")
    if not name:
        raise CliError(f"--resource {item!r}: expected TYPE:NAME", USAGE)
    return resource_type(kind), name


async def _wait(
    client: Any, listener: str | None, wanted: list[tuple[Any, str]], timeout: float
) -> bool:
    """Whether everything asked for arrived within ``timeout``."""
    from .._dependencies import XdsConfig

    try:
        async with asyncio.timeout(timeout):
            if listener is not None:
                async with client.watch_config(listener) as configs:
                    async for config in configs:
                        if isinstance(config, XdsConfig):  # snapshots are complete
                            break
            for rtype, name in wanted:
                await client.wait_for(rtype, name, timeout=timeout)
    except (TimeoutError, XdsError):
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
