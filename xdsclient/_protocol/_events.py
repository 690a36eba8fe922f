"""What the protocol core tells watchers, in the shape of gRFC A88.

Why these three: a watcher needs to know when the value it should use changed
(`ResourceChanged`), when it must stop using what it had because the resource is gone or
invalid and nothing valid is cached (`DataError`), and when something went wrong that leaves the
cached value usable (`AmbientError`). Everything else (timers, NACKs, deletions, TTLs, server
errors) maps onto these with a precise error inside.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import attrs

from .._errors import XdsError

__all__ = ["AmbientError", "DataError", "Event", "ResourceChanged"]


@attrs.frozen(kw_only=True)
class ResourceChanged:
    """A new valid value for the resource (never sent for an unchanged one)."""

    type_url: str
    name: str
    value: Any = attrs.field(repr=False)
    version: str


@attrs.frozen(kw_only=True)
class DataError:
    """The resource has no usable value any more (or never had one): the error says why."""

    type_url: str
    name: str
    error: XdsError = attrs.field(eq=False)


@attrs.frozen(kw_only=True)
class AmbientError:
    """Something went wrong, but the cached value (if any) is still the one to use."""

    type_url: str
    name: str
    error: XdsError = attrs.field(eq=False)


Event: TypeAlias = ResourceChanged | DataError | AmbientError
