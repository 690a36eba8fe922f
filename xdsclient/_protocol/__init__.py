"""The sans-I/O xDS protocol core: state in, messages and events out, time passed in."""

from __future__ import annotations

from ._cache import ResourceCache
from ._events import AmbientError, DataError, Event, ResourceChanged
from ._options import ProtocolOptions
from ._session import Session, SessionWriter
from ._status import ResourceState, ResourceStatus

__all__ = [
    "AmbientError",
    "DataError",
    "Event",
    "ProtocolOptions",
    "ResourceCache",
    "ResourceChanged",
    "ResourceState",
    "ResourceStatus",
    "Session",
    "SessionWriter",
]
