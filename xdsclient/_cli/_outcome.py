"""How ``dump`` and ``watch`` end: one rule over the client's CSDS dump, so the two commands
give the same exit status for the same state.

Why from the dump: it is the client's own account of every resource it asked for (the statuses
gRPC and Envoy report), so the exit status says what an operator would read in the dump:
5 when any resource asked for is NACKED, DOES_NOT_EXIST, TIMEOUT or RECEIVED_ERROR, or is not in
the dump at all (no server or source serves its type); else 4 when the run ended before what
it waited for or one is still REQUESTED (nothing usable arrived); else 0.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

from ._common import INCOMPLETE, OK, UNAVAILABLE

__all__ = ["BAD", "outcome"]

#: CSDS statuses that make a run a failure (status 5)
BAD = ("NACKED", "DOES_NOT_EXIST", "TIMEOUT", "RECEIVED_ERROR")
_SHOWN = 3

Wanted = Callable[[Any], bool]


def outcome(
    config: Any,
    wanted: Wanted,
    asked: Iterable[tuple[str, str]],
    *,
    finished: bool,
    unfinished: str,
    cause: str | None = None,
) -> int:
    """The exit status for the CSDS ``config`` (its resources ``wanted`` only; each (type URL,
    name) ``asked`` for by name must be there), printing the one line that explains a failure;
    ``finished``: whether the run got all it waited for, ``unfinished``: the line to print when
    it did not; ``cause``: why nothing usable arrived (a server's failure), added to the line
    of status 4."""
    from envoy.admin.v3 import config_dump_shared_pb2 as shared

    name_of = shared.ClientResourceStatus.Name
    items = [item for item in config.generic_xds_configs if wanted(item)]
    bad = [_entry(item, _why(name_of(item.client_status), item)) for item in items
           if name_of(item.client_status) in BAD]  # fmt: skip
    present = {(item.type_url, item.name) for item in config.generic_xds_configs}
    bad += [_entry(key, "not served") for key in dict.fromkeys(asked) if key not in present]
    if bad:
        _say(f"not usable: {_list(bad)}")
        return INCOMPLETE
    because = f": {cause}" if cause else ""
    if not finished:
        _say(unfinished + because)
        return UNAVAILABLE
    waiting = [_entry(item, "REQUESTED") for item in items
               if name_of(item.client_status) == "REQUESTED"]  # fmt: skip
    if waiting:
        _say(f"nothing arrived for {_list(waiting)}{because}")
        return UNAVAILABLE
    return OK


def _why(status: str, item: Any) -> str:
    """``NACKED: <reason>``: a status with the client's reason for it, when the dump has one."""
    details = item.error_state.details if item.HasField("error_state") else ""
    return f"{status}: {details}" if details else status


def _entry(item: Any, status: str) -> str:
    """``Cluster c (NACKED)``: a dump entry (or a (type URL, name) pair) and its status."""
    type_url, name = item if isinstance(item, tuple) else (item.type_url, item.name)
    return f"{type_url.rsplit('.', 1)[-1]} {name} ({status})"


def _list(entries: list[str]) -> str:
    more = len(entries) - _SHOWN
    return ", ".join(entries[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _say(line: str) -> None:
    print(f"xdsclient: {line}", file=sys.stderr)
