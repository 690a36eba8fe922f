"""xdsclient: an asyncio xDS client library, the data-plane side of xDS.

The public API is re-exported here; every other module is private.
"""

from __future__ import annotations

from ._errors import (
    ProtocolError,
    ResourceDecodeError,
    ResourceDoesNotExistError,
    ResourceError,
    ResourceExpiredError,
    ResourceTimeoutError,
    ResourceValidationError,
    ServerResourceError,
    TransportError,
    XdsError,
)
from ._protocol import (
    AmbientError,
    DataError,
    Event,
    ProtocolOptions,
    ResourceChanged,
    ResourceState,
    ResourceStatus,
    Session,
)
from .resources import ResourceType

__all__ = [
    "AmbientError",
    "DataError",
    "Event",
    "ProtocolError",
    "ProtocolOptions",
    "ResourceChanged",
    "ResourceDecodeError",
    "ResourceDoesNotExistError",
    "ResourceError",
    "ResourceExpiredError",
    "ResourceState",
    "ResourceStatus",
    "ResourceTimeoutError",
    "ResourceType",
    "ResourceValidationError",
    "ServerResourceError",
    "Session",
    "TransportError",
    "XdsError",
]

__version__ = "0.1.0.dev0"

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
