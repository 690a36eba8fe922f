"""How ``dump`` and ``watch`` end: one rule over the client's CSDS dump, so the two commands
give the same exit status for the same state.

Why from the dump: it is the client's own account of every resource it asked for (the statuses
gRPC and Envoy report), so the exit status says what an operator would read in the dump:
5 when any resource asked for is NACKED, DOES_NOT_EXIST, TIMEOUT or RECEIVED_ERROR; else 4 when
one is still REQUESTED (nothing usable arrived) or the run ended before what it waited for;
else 0.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ._common import INCOMPLETE, OK, UNAVAILABLE

__all__ = ["BAD", "outcome"]

#: CSDS statuses that make a run a failure (status 5)
BAD = ("NACKED", "DOES_NOT_EXIST", "TIMEOUT", "RECEIVED_ERROR")
_SHOWN = 3

Wanted = Callable[[Any], bool]


def outcome(config: Any, wanted: Wanted, *, finished: bool, unfinished: str) -> int:
    """The exit status for the CSDS ``config`` (its resources ``wanted`` only), printing the
    one line that explains a failure; ``finished``: whether the run got all it waited for,
    ``unfinished``: the line to print when it did not."""
    from envoy.admin.v3 import config_dump_shared_pb2 as shared

    name_of = shared.ClientResourceStatus.Name
    items = [item for item in config.generic_xds_configs if wanted(item)]
    bad = [item for item in items if name_of(item.client_status) in BAD]
    if bad:
        _say(f"not usable: {_list(bad, name_of)}")
        return INCOMPLETE
    if not finished:
        _say(unfinished)
        return UNAVAILABLE
    waiting = [item for item in items if name_of(item.client_status) == "REQUESTED"]
    if waiting:
        _say(f"nothing arrived for {_list(waiting, name_of)}")
        return UNAVAILABLE
    return OK


def _list(items: list[Any], name_of: Callable[[int], str]) -> str:
    shown = ", ".join(
        f"{item.type_url.rsplit('.', 1)[-1]} {item.name} ({name_of(item.client_status)})"
        for item in items[:_SHOWN]
    )
    more = len(items) - _SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _say(line: str) -> None:
    print(f"xdsclient: {line}", file=sys.stderr)
