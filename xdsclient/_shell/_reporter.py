"""What observers hear of a discovery stream: requests, responses, verdicts, connectivity.

Why apart from the driver: the driver runs any stream protocol and knows nothing of discovery
messages; building `RequestSent`, `ResponseReceived`, `ResourceUpdate` and
`ConnectivityChanged` needs the discovery fields of each message and the session's verdicts.
The pool attaches one `DiscoveryReporter` to each discovery stream's `StreamEvents`. It reads
the session (never changes it) and costs a truth test per message while nobody observes.

Rule: connectivity is reported on changes only (gRFC A78's ``connected`` gauge): connected when
the first stream is opened, failed on a connectivity failure, connected again on the first
response after one; a server that stays down is one failure, not one per retry.
"""

from __future__ import annotations

from typing import Any

from .._errors import TransportError
from .._names import authority_of
from .._observe._events import (
    ConnectivityChanged,
    Observers,
    RequestSent,
    ResourceUpdate,
    ResponseReceived,
)
from .._protocol import Session

__all__ = ["DiscoveryReporter"]


class DiscoveryReporter:
    """Turns one discovery stream's life into protocol events for ``observers``."""

    __slots__ = ("_observers", "_reachable", "_server", "_session")

    def __init__(self, *, session: Session, server: str, observers: Observers) -> None:
        self._session = session
        self._server = server
        self._observers = observers
        #: what observers were last told of this server: None before the first stream
        self._reachable: bool | None = None

    def opened(self, now: float) -> None:
        """A stream is being opened: the server counts as connected from the first one."""
        if self._reachable is None:
            self._connectivity(True, None, now)

    def request(self, request: Any, now: float) -> None:
        """A request was written."""
        if not self._observers:
            return
        delta = self._session.delta
        detail = request.error_detail.message if request.HasField("error_detail") else None
        self._observers.emit(
            RequestSent(
                server=self._server,
                time=now,
                type_url=request.type_url,
                delta=delta,
                version_info="" if delta else request.version_info,
                nonce=request.response_nonce,
                resource_names=tuple(
                    request.resource_names_subscribe if delta else request.resource_names
                ),
                unsubscribed=tuple(request.resource_names_unsubscribe) if delta else (),
                error_detail=detail,
            )
        )

    def response(self, response: Any, now: float) -> None:
        """A response was read, before the session applies it."""
        if not self._reachable:
            self._connectivity(True, None, now)
        if not self._observers:
            return
        delta = self._session.delta
        self._observers.emit(
            ResponseReceived(
                server=self._server,
                time=now,
                type_url=response.type_url,
                delta=delta,
                version_info=response.system_version_info if delta else response.version_info,
                nonce=response.nonce,
                resource_count=len(response.resources),
                removed=tuple(response.removed_resources) if delta else (),
                message=response,
            )
        )

    def applied(self, response: Any, now: float) -> None:
        """The session applied the response: its verdicts, when an observer wants them."""
        if not self._observers.verdicts:
            return
        emit, type_url = self._observers.emit, response.type_url
        for name, error in self._session.verdicts():
            emit(
                ResourceUpdate(
                    server=self._server,
                    time=now,
                    type_url=type_url,
                    name=name,
                    authority=authority_of(name) if name else "",
                    valid=error is None,
                    error=error,
                )
            )

    def failed(self, error: TransportError, now: float) -> None:
        """A connectivity failure."""
        self._connectivity(False, error, now)

    def _connectivity(self, connected: bool, error: TransportError | None, now: float) -> None:
        if self._reachable is connected:
            return
        self._reachable = connected
        if self._observers:
            session = self._session
            self._observers.emit(
                ConnectivityChanged(
                    server=self._server,
                    time=now,
                    connected=connected,
                    error=None if error is None else str(error),
                    type_urls=()
                    if connected
                    else tuple(t for t in session.type_urls if session.subscribed(t)),
                )
            )
