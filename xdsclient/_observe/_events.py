"""Protocol events for observers: what the client sent, received, accepted and lost.

Why: metrics (gRFC A78), Envoy-style stats, logs, test recorders and latency probes all need
the same facts about the wire: every request (ACK or NACK) written, every response read, the
verdict on every resource in it, and when a server became reachable or failed. Rather than each
feature reaching into the driver, the shell reports these as frozen values to `Observers`, and
each feature is one observer. The core stays sans-I/O: the session keeps the verdicts of the
last response as data; the `DiscoveryReporter` the pool attaches to each discovery stream
(`xdsclient._shell._reporter`) turns what the driver tells it into events, and only when
someone listens.

Rules: observers run synchronously, in registration order, on the event loop; one that raises
is logged and removed from nothing (it sees the next event too) and never breaks the client or
the other observers. An observer must not block: it runs on the path of every response.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeAlias

import attrs

__all__ = [
    "ChannelClosed",
    "ConnectivityChanged",
    "LoadReportingChanged",
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
    ``message``: the response itself (read it, never change it).
    """

    server: str
    time: float
    type_url: str
    delta: bool
    version_info: str
    nonce: str
    resource_count: int
    removed: tuple[str, ...] = ()
    message: Any = attrs.field(default=None, eq=False, repr=False)

    @property
    def size_bytes(self) -> int:
        """The response's serialized size (computed on demand: about 1 ms per MB)."""
        return int(self.message.ByteSize()) if self.message is not None else 0


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
    """A server's connectivity changed, as gRFC A78's ``grpc.xds_client.connected`` gauge
    follows it: connected when the first stream to it is created; failed on a connectivity
    failure or a stream that ends without a response (gRFC A57); connected again on the first
    response after that. Reported on changes only, never once per retry.

    ``type_urls``: on a failure, the types subscribed on the stream that failed (each counts
    the failure, as Envoy counts ``update_failure`` per subscription), even when no request
    could be written yet; empty otherwise."""

    server: str
    time: float
    connected: bool
    error: str | None = None
    type_urls: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class ChannelClosed:
    """The client closed its channel to a server no authority uses any more (a fallback
    server once the primary is back, gRFC A71; every server when the client closes). The server
    is no longer connected; this is not a failure. Its streams have ended: no event of that
    server follows until a channel to it is opened again."""

    server: str
    time: float


@attrs.frozen(kw_only=True)
class LoadReportingChanged:
    """The load reporting (LRS, gRFC A27) stream to a server changed state, reported on
    changes only, never once per retry: ``"connecting"`` (a stream is opened, the server has
    not answered yet: a server that never answers stays here), ``"reporting"`` (the server
    answered: reports go out at its interval), ``"failing"`` (a stream failed before any
    answer: refused, UNIMPLEMENTED, ...; ``error`` says why; retried with backoff) or
    ``"closed"`` (nothing is left to report to that server, or the client closed)."""

    server: str
    time: float
    state: str
    error: str | None = None


#: Everything an observer can be told.
ProtocolEvent: TypeAlias = (
    RequestSent
    | ResponseReceived
    | ResourceUpdate
    | ConnectivityChanged
    | ChannelClosed
    | LoadReportingChanged
)
#: A callable told of every protocol event, synchronously.
Observer: TypeAlias = Callable[[ProtocolEvent], None]


class Observers:
    """The client's observers; falsy while there are none, so the shell builds no event.

    `ResourceUpdate` events (one per resource of every response) are built only while an
    observer that wants them (``verdicts=True``) is registered: counters of responses need
    none of them.
    """

    __slots__ = ("_all", "_verdicts", "verdicts")

    def __init__(self) -> None:
        self._all: tuple[Observer, ...] = ()
        self._verdicts: tuple[Observer, ...] = ()
        #: whether any observer wants `ResourceUpdate` events
        self.verdicts = False

    def __bool__(self) -> bool:
        return bool(self._all)

    def add(self, callback: Observer, *, verdicts: bool = True) -> Callable[[], None]:
        """Register ``callback`` (told of `ResourceUpdate` events too when ``verdicts``);
        returns the function that removes it (idempotent)."""
        entry = (callback,)
        self._all += entry
        if verdicts:
            self._verdicts += entry
        self.verdicts = bool(self._verdicts)

        def remove() -> None:
            self._all = _without(self._all, callback)
            self._verdicts = _without(self._verdicts, callback)
            self.verdicts = bool(self._verdicts)

        return remove

    def emit(self, event: ProtocolEvent) -> None:
        """Tell every observer; one that raises is logged and the others still hear of it."""
        callbacks = self._verdicts if type(event) is ResourceUpdate else self._all
        for callback in callbacks:
            try:
                callback(event)
            except Exception:
                logger.exception("an xDS protocol observer raised on %s", type(event).__name__)


def _without(callbacks: tuple[Observer, ...], callback: Observer) -> tuple[Observer, ...]:
    """``callbacks`` less the first registration of ``callback`` (by identity)."""
    for index, registered in enumerate(callbacks):
        if registered is callback:
            return callbacks[:index] + callbacks[index + 1 :]
    return callbacks
