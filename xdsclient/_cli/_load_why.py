"""Why no simulated client of ``xdsclient load`` had a complete configuration: the resource
that was missing, named, for the run's exit status 4.

Why a real `XdsClient` after the run: the simulated clients keep only what the measurements
need, not why a walk stopped. When none of them ever completed (``--listener nosuch``), one
client with the first simulated client's node watches the same thing for at most `WAIT`
seconds (the run already waited its whole duration), and its CSDS dump names what the server
did not give: a resource that does not exist, was NACKed or never came. That is the sentence
an operator needs instead of a table of zeros and status 0. When it finds nothing amiss (the
clients' own faults, a run too short), the run's table stands alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ._outcome import BAD

__all__ = ["why_incomplete"]

#: entries named in the reason (the rest are counted)
_SHOWN = 3
#: seconds the asking client waits for its answers (at most the scenario's connect_timeout)
WAIT = 2.0


async def why_incomplete(scenario: Any) -> str:
    """What kept a client of ``scenario`` from a complete configuration: the resources missing,
    each with its state (``Listener nosuch (DOES_NOT_EXIST)``, ``(never sent)``); empty when
    a client of its own saw nothing amiss (or the scenario watches wildcards, which name
    nothing)."""
    from .._client import XdsClient
    from ..load._lean import KINDS
    from ..load._run import node_of, target_and_node
    from ..resources import BUILTIN_TYPES, LISTENER

    if scenario.envoy:
        return ""
    target, base = target_and_node(scenario)
    node = node_of(scenario, base, scenario.first_index)
    client = XdsClient(target, node=node, ads=scenario.ads, delta=scenario.delta)
    by_url = {rtype.type_url: rtype for rtype in BUILTIN_TYPES}
    async with client, contextlib.AsyncExitStack() as held:
        if scenario.listener is not None:
            watches: list[Any] = [client.watch_config(scenario.listener)]
            asked = [(LISTENER.type_url, scenario.listener)]
        else:
            watches = [client.watch(by_url[KINDS[kind]], name) for kind, name in scenario.resources]
            asked = [(KINDS[kind], name) for kind, name in scenario.resources]
        updates = [await held.enter_async_context(watch) for watch in watches]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(WAIT, scenario.connect_timeout)):
                await asyncio.gather(*map(_answer, updates))
        return _reason(client.csds(), asked)


async def _answer(updates: AsyncIterator[Any]) -> None:
    """Until the server answered this watch: a value, a complete configuration, or an error
    of the server's (a resource that does not exist, a NACK); not a transport error."""
    from .._errors import TransportError
    from .._protocol import AmbientError, DataError, ResourceChanged
    from .._watch._dependencies import XdsConfig

    async for update in updates:
        if isinstance(update, ResourceChanged | XdsConfig | AmbientError):
            return
        error = update.error if isinstance(update, DataError) else update
        if not isinstance(error, TransportError):
            return


def _reason(config: Any, asked: list[tuple[str, str]]) -> str:
    """The CSDS dump's resources in a bad state or still requested, and those asked for that
    it does not hold; bad ones first."""
    from envoy.admin.v3 import config_dump_shared_pb2 as shared

    name_of = shared.ClientResourceStatus.Name
    items = list(config.generic_xds_configs)
    bad = [_entry(item.type_url, item.name, name_of(item.client_status)) for item in items
           if name_of(item.client_status) in BAD]  # fmt: skip
    held = {(item.type_url, item.name) for item in items}
    bad += [_entry(url, name, "never requested") for url, name in asked if (url, name) not in held]
    waiting = [_entry(item.type_url, item.name, "never sent") for item in items
               if name_of(item.client_status) == "REQUESTED"]  # fmt: skip
    entries = bad + waiting
    more = len(entries) - _SHOWN
    return ", ".join(entries[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _entry(type_url: str, name: str, status: str) -> str:
    return f"{type_url.rsplit('.', 1)[-1]} {name} ({status})"
