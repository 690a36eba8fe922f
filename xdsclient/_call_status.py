"""The status a gRPC stream call ended with, as the server sent it.

Why: when a server ends a stream just as we write (an ACK going out), gRPC fails the write
and reports its own status (`LOCAL_WRITE_FAILURE`, INTERNAL "Internal error from Core") beside
the server's, which comes just before or just after it. Both the client's streams and the load
tester's simulated ones must report the server's status, not gRPC's: `CallStatuses` records
every status a call reports (a done callback sees each as it is set) and waits briefly for the
server's when only gRPC's own is known.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

__all__ = ["LOCAL_WRITE_FAILURE", "CallStatuses", "stream_status"]

#: what gRPC reports for a write that failed because the call had already ended
LOCAL_WRITE_FAILURE = ("INTERNAL", "Internal error from Core")


def stream_status(reported: Sequence[tuple[str, str]]) -> str | None:
    """The gRPC status name a stream ended with, from every (code, details) its call reported
    in turn: the first that is not gRPC's own for a failed write (`LOCAL_WRITE_FAILURE`: the
    server's status came just before or comes just after it), else the last (None: none yet)."""
    found = server_status(reported)
    return None if found is None else found[0]


def server_status(reported: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """`stream_status` with its details."""
    for status in reported:
        if status != LOCAL_WRITE_FAILURE:
            return status
    return reported[-1] if reported else None


class CallStatuses:
    """Every status a call reports, in turn (see the module's docstring)."""

    __slots__ = ("_changed", "reported")

    def __init__(self, call: Any) -> None:
        self._changed: asyncio.Event | None = None
        self.reported: list[tuple[str, str]] = []
        call.add_done_callback(self._on_done)

    def _on_done(self, call: Any) -> None:
        code, details = _ready(call.code()), _ready(call.details())
        if code is not None:
            self.reported.append((code.name, details or ""))
        if self._changed is not None:
            self._changed.set()

    async def server_status(self, fallback: tuple[str, str], wait: float = 1.0) -> tuple[str, str]:
        """The server's (code, details) from what was reported (``fallback`` if nothing was);
        while nothing is, or only gRPC's own for a failed write, wait (``wait`` seconds at
        most) for the server's, which gRPC reports right after it. For a call that ended."""
        if all(status == LOCAL_WRITE_FAILURE for status in self.reported):
            self._changed = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    while all(status == LOCAL_WRITE_FAILURE for status in self.reported):
                        self._changed.clear()
                        await self._changed.wait()
        status = server_status(self.reported)
        return status if status is not None else fallback


def _ready(coroutine: Any) -> Any:
    """The value of a coroutine that finishes without waiting (a call's ``code()`` once its
    status is set, as in its done callback); None, and the coroutine closed, if it would wait."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    return None
