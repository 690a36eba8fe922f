"""Resource types: the built-in xDS types and the means to define custom ones."""

from __future__ import annotations

from .._errors import ResourceDecodeError
from ._builtin import (
    BUILTIN_TYPES,
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE_CONFIGURATION,
    RUNTIME,
    SCOPED_ROUTE_CONFIGURATION,
    SECRET,
    VIRTUAL_HOST,
)
from ._type import ResourceType

__all__ = [
    "BUILTIN_TYPES",
    "CLUSTER",
    "ENDPOINT",
    "LISTENER",
    "ROUTE_CONFIGURATION",
    "RUNTIME",
    "SCOPED_ROUTE_CONFIGURATION",
    "SECRET",
    "VIRTUAL_HOST",
    "ResourceDecodeError",
    "ResourceType",
]

ResourceType.__module__ = __name__
