"""Protocol events for observers: what the client sent, received, accepted and lost.

Why: metrics (gRFC A78), Envoy-style stats, logs, test recorders and latency probes all need
the same facts about the wire: every request (ACK or NACK) written, every response read, the
verdict on every resource in it, and when a server became reachable or failed. Rather than each
feature reaching into the driver, the shell reports these as frozen values to `Observers`, and
each feature is one observer. The core stays sans-I/O: the session keeps the verdicts of the
last response as data; the driver turns them into events, and only when someone listens.

Rules: observers run synchronously, in registration order, on the event loop; one that raises
is logged and removed from nothing (it sees the next event too) and never breaks the client or
the other observers. An observer must not block: it runs on the path of every response.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeAlias

import attrs

__all__ = [
    "ConnectivityChanged",
    "Observer",
    "Observers",
    "ProtocolEvent",
    "RequestSent",
    "ResourceUpdate",
    "ResponseReceived",
]

logger = logging.getLogger("xdsclient.observe")


@attrs.frozen(kw_only=True)
class RequestSent:
    """A request written on a stream: an ACK, a NACK or a change of subscriptions.

    ``resource_names``: SotW, the names the request carries (empty: wildcard or none);
    Delta, the names it subscribes to. ``unsubscribed``: Delta, the names it unsubscribes
    from (always empty in SotW). ``version_info``: SotW, the version it ACKs (or the last
    accepted one, on a NACK); Delta, empty. ``error_detail``: the NACK's message, None for
    anything else.
    """

    server: str
    time: float
    type_url: str
    delta: bool
    version_info: str
    nonce: str
    resource_names: tuple[str, ...]
    unsubscribed: tuple[str, ...] = ()
    error_detail: str | None = None

    @property
    def is_nack(self) -> bool:
        """Whether this request rejects the response its nonce names."""
        return self.error_detail is not None


@attrs.frozen(kw_only=True)
class ResponseReceived:
    """A response read from a stream, before it is applied.

    ``version_info``: SotW, the response's version; Delta, its ``system_version_info``.
    ``resource_count``: how many resources it carries; ``removed``: Delta's removed names;
    ``size_bytes``: its serialized size.
    """

    server: str
    time: float
    type_url: str
    delta: bool
    version_info: str
    nonce: str
    resource_count: int
    size_bytes: int
    removed: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class ResourceUpdate:
    """The verdict on one resource of a response (gRFC A78's valid and invalid updates).

    Valid ones count even when unchanged; resources of a response nobody asked for are not
    reported. ``name`` is empty for a resource that could not be named (no name, a name too
    long, a body that does not decode that far); ``error`` is the reason it was rejected.
    ``authority``: the name's authority (``#old`` for a name that is not an xdstp name).
    """

    server: str
    time: float
    type_url: str
    name: str
    authority: str
    valid: bool
    error: str | None = None


@attrs.frozen(kw_only=True)
class ConnectivityChanged:
    """A server became usable (a response arrived) or failed (gRFC A57: no response on a stream,
    or it could not be reached). Reported on changes only: the first failure of a server
    that never answered, then once per change of state, not once per retry."""

    server: str
    time: float
    connected: bool
    error: str | None = None


#: Everything an observer can be told.
ProtocolEvent: TypeAlias = RequestSent | ResponseReceived | ResourceUpdate | ConnectivityChanged
#: A callable told of every protocol event, synchronously.
Observer: TypeAlias = Callable[[ProtocolEvent], None]


class Observers:
    """The client's observers; falsy while there are none, so the shell builds no event."""

    __slots__ = ("_callbacks",)

    def __init__(self) -> None:
        self._callbacks: tuple[Observer, ...] = ()

    def __bool__(self) -> bool:
        return bool(self._callbacks)

    def add(self, callback: Observer) -> Callable[[], None]:
        """Register ``callback``; returns the function that removes it (idempotent)."""
        self._callbacks = (*self._callbacks, callback)

        def remove() -> None:
            callbacks = list(self._callbacks)
            if callback in callbacks:
                callbacks.remove(callback)
                self._callbacks = tuple(callbacks)

        return remove

    def emit(self, event: ProtocolEvent) -> None:
        """Tell every observer; one that raises is logged and the others still hear of it."""
        for callback in self._callbacks:
            try:
                callback(event)
            except Exception:
                logger.exception("an xDS protocol observer raised on %s", type(event).__name__)
