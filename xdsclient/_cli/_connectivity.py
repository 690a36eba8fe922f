"""What ``dump`` and ``watch`` know of the servers they tried: the cause to name when nothing
arrived in time.

Why: an unreachable server used to make two lines on stderr, the library's WARNING
("xDS server ... lost: ...") and then the command's own failure line, which did not say why
nothing had arrived; a NACK did the same with its WARNING. While these commands run, the
library's connectivity and NACK lines are held back (their output already shows each error as
it changes, once), and the failure line names the cause: the last failure of a server that is
still lost, or a resource's status with the client's reason (`._outcome`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from .._observe._events import ConnectivityChanged

__all__ = ["Connectivity", "held_back"]

#: the library's lines these commands say themselves: a server lost (the failure line names
#: it) and a NACK (the failure line gives its reason; watch prints each error as it changes)
_LOGGERS = ("xdsclient.connectivity", "xdsclient.protocol")


class Connectivity:
    """An observer keeping, per server, the last failure while it stays lost."""

    def __init__(self) -> None:
        self._lost: dict[str, str] = {}

    def __call__(self, event: Any) -> None:
        if type(event) is not ConnectivityChanged:
            return
        self._lost.pop(event.server, None)  # a failure goes last: the latest
        if not event.connected:
            self._lost[event.server] = event.error or "no response"

    def cause(self) -> str | None:
        """The latest failure of a server still lost (its text names the server), or None."""
        if not self._lost:
            return None
        server, error = next(reversed(self._lost.items()))
        return error if server in error else f"{server}: {error}"


@contextlib.contextmanager
def held_back(client: Any) -> Iterator[Connectivity]:
    """Observe ``client``'s connectivity, and hold back the library's connectivity and NACK
    log lines until the block ends."""
    connectivity = Connectivity()
    remove = client.add_observer(connectivity, verdicts=False)
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    handler, propagates = logging.NullHandler(), [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)  # with no handler, logging's last resort would print them
        logger.propagate = False
    try:
        yield connectivity
    finally:
        for logger, propagate in zip(loggers, propagates, strict=True):
            logger.propagate = propagate
            logger.removeHandler(handler)
        remove()
