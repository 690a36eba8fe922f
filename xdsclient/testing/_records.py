"""What the test control plane saw and did: the request and response records, and the journal.

Why its own module: every front end (gRPC streams, REST polls, files) records into the same
journal, and tests read it through `ControlPlane.requests` / `responses`; the records are plain
values stamped with the time the front end passes in, so the server streams stay sans-I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .._names import RESOURCE_WRAPPER_TYPE_URL
from .._protocol._messages import DeltaDiscoveryRequest, Resource
from ..resources import ENDPOINT

__all__ = ["Journal", "ReceivedRequest", "SentResponse", "sotw_name"]


@attrs.frozen(kw_only=True)
class ReceivedRequest:
    """A request the control plane received: when, on which stream and method, and what."""

    time: float  #: time.monotonic() at arrival
    stream: int  #: stream id, counting from 1 in order of arrival
    method: str  #: gRPC method path
    message: Any  #: the DiscoveryRequest or DeltaDiscoveryRequest

    @property
    def type_url(self) -> str:
        """The request's type URL."""
        type_url: str = self.message.type_url
        return type_url

    @property
    def is_delta(self) -> bool:
        """Whether it is a ``DeltaDiscoveryRequest`` (else a SotW ``DiscoveryRequest``)."""
        return isinstance(self.message, DeltaDiscoveryRequest)


@attrs.frozen(kw_only=True)
class SentResponse:
    """A response the control plane sent: when, on which stream, its type, nonce and names."""

    time: float
    stream: int
    type_url: str
    nonce: str
    names: tuple[str, ...]
    removed: tuple[str, ...] = ()


class Journal:
    """Every request received and response sent, in order; listeners hear of each request."""

    def __init__(self) -> None:
        #: Every request received, in order (the list `ControlPlane.requests` is).
        self.requests: list[ReceivedRequest] = []
        #: Every response sent, in order (the list `ControlPlane.responses` is).
        self.responses: list[SentResponse] = []
        self._listeners: list[Callable[[], None]] = []

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after each request is recorded."""
        self._listeners.append(listener)

    def received(self, record: ReceivedRequest) -> None:
        """Record a request and tell the listeners."""
        self.requests.append(record)
        for listener in self._listeners:
            listener()

    def sent(self, record: SentResponse) -> None:
        """Record a response."""
        self.responses.append(record)


def sotw_name(packed: Any) -> str:
    """The name of a resource in a SotW response (for the log), without a type registry: ""
    for a type this process has no message class for."""
    if packed.type_url == RESOURCE_WRAPPER_TYPE_URL:
        return str(Resource.FromString(packed.value).name)
    message = _message_class(packed.type_url)
    if message is None:
        return ""
    decoded = message.FromString(packed.value)
    return str(
        decoded.cluster_name
        if packed.type_url == ENDPOINT.type_url
        else getattr(decoded, "name", "")
    )


def _message_class(type_url: str) -> Any:
    found = _CLASSES.get(type_url)
    if found is not None:
        return found
    from google.protobuf import symbol_database

    try:
        found = symbol_database.Default().GetSymbol(type_url.rsplit("/", 1)[-1])
    except KeyError:
        return None  # not kept: the type may be registered later
    _CLASSES[type_url] = found
    return found


#: type URL -> its message class, once found (every `ControlPlane.set` reads its name back)
_CLASSES: dict[str, Any] = {}
