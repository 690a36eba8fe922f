"""Per-resource status: the values, the transition table, and the snapshot users read.

Why a table: every way a cached resource can change (a valid or invalid update, a deletion, a
timer, a server-reported error) is an *input*; the next status is looked up, never computed by
ad-hoc branches, and an input the table does not allow for a status raises. Whether a status
holds a cached value is a property of the status itself (the ``*_BUT_CACHED`` variants and
ACKED), so "drop the value" is decided by the table too.

The statuses follow CSDS / gRFC A78 and A88: requested, acked, nacked, nacked_but_cached,
does_not_exist, does_not_exist_but_cached, timeout, received_error, received_error_but_cached;
plus expired (Envoy's TTL), which CSDS reports as DOES_NOT_EXIST. The does-not-exist timer
leads to does_not_exist (a data error), or to timeout where the server's bootstrap entry lists
``resource_timer_is_transient_failure`` (a transient error: a slow server), as gRFC A88 says.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from .._errors import ProtocolError, XdsError

__all__ = ["AFTER_VALID", "TRANSITIONS", "Input", "ResourceState", "ResourceStatus", "next_status"]


class ResourceStatus(enum.Enum):
    """Where one subscribed resource stands."""

    REQUESTED = "requested"  #: subscribed; nothing heard about it yet
    ACKED = "acked"  #: a valid value is cached
    NACKED = "nacked"  #: the last update was invalid and nothing valid is cached
    NACKED_BUT_CACHED = "nacked_but_cached"  #: the last update was invalid; the previous one kept
    #: the server deleted it or said it does not exist, or the does-not-exist timer fired
    DOES_NOT_EXIST = "does_not_exist"
    DOES_NOT_EXIST_BUT_CACHED = "does_not_exist_but_cached"  #: deletion ignored (gRFC A53)
    #: the timer fired on a server with ``resource_timer_is_transient_failure`` (gRFC A88)
    TIMEOUT = "timeout"
    EXPIRED = "expired"  #: its TTL ran out and it was removed
    RECEIVED_ERROR = "received_error"  #: the server reported an error; nothing cached
    RECEIVED_ERROR_BUT_CACHED = "received_error_but_cached"  #: transient server error; value kept

    #: Whether a resource in this status has a usable cached value (set below for each member:
    #: a plain attribute, since the core reads it once per resource).
    holds_value: bool
    # Members are singletons compared by identity; hashing by identity keeps the table lookups
    # in C instead of Enum's Python-level __hash__.
    __hash__ = object.__hash__


for _status in ResourceStatus:
    _status.holds_value = _status in (
        ResourceStatus.ACKED,
        ResourceStatus.NACKED_BUT_CACHED,
        ResourceStatus.DOES_NOT_EXIST_BUT_CACHED,
        ResourceStatus.RECEIVED_ERROR_BUT_CACHED,
    )


class Input(enum.Enum):
    """Something that happened to one resource."""

    VALID = "valid"  #: a valid update arrived
    INVALID = "invalid"  #: an update arrived and was rejected
    DELETED = "deleted"  #: the server deleted it / said it does not exist
    DELETION_IGNORED = "deletion_ignored"  #: as DELETED, with ignore_resource_deletion on
    TIMED_OUT = "timed_out"  #: its does-not-exist deadline passed: a data error
    #: as TIMED_OUT, on a server whose timer means a slow server (a transient error, gRFC A88)
    TIMED_OUT_TRANSIENT = "timed_out_transient"
    EXPIRED = "expired"  #: its TTL deadline passed
    DATA_ERROR = "data_error"  #: the server reported NOT_FOUND or PERMISSION_DENIED for it
    TRANSIENT_ERROR = "transient_error"  #: the server reported any other error for it

    __hash__ = object.__hash__


_S = ResourceStatus
_ALL = tuple(ResourceStatus)
_CACHED = tuple(s for s in _ALL if s.holds_value)
_UNCACHED = tuple(s for s in _ALL if not s.holds_value)

#: (status, input) -> next status. A pair that is absent is a bug in the caller.
TRANSITIONS: dict[tuple[ResourceStatus, Input], ResourceStatus] = {
    **{(s, Input.VALID): _S.ACKED for s in _ALL},
    **{(s, Input.INVALID): _S.NACKED_BUT_CACHED for s in _CACHED},
    **{(s, Input.INVALID): _S.NACKED for s in _UNCACHED},
    **{(s, Input.DELETED): _S.DOES_NOT_EXIST for s in _ALL},
    **{(s, Input.DELETION_IGNORED): _S.DOES_NOT_EXIST_BUT_CACHED for s in _CACHED},
    **{(s, Input.DELETION_IGNORED): _S.DOES_NOT_EXIST for s in _UNCACHED},
    # The does-not-exist timer runs only while nothing at all has been heard of the resource.
    (_S.REQUESTED, Input.TIMED_OUT): _S.DOES_NOT_EXIST,
    (_S.REQUESTED, Input.TIMED_OUT_TRANSIENT): _S.TIMEOUT,
    # A TTL runs only while a value is cached.
    **{(s, Input.EXPIRED): _S.EXPIRED for s in _CACHED},
    **{(s, Input.DATA_ERROR): _S.RECEIVED_ERROR for s in _ALL},
    **{(s, Input.TRANSIENT_ERROR): _S.RECEIVED_ERROR_BUT_CACHED for s in _CACHED},
    **{(s, Input.TRANSIENT_ERROR): _S.RECEIVED_ERROR for s in _UNCACHED},
}


#: The VALID column of the table, for the hot path (one lookup per received resource).
AFTER_VALID: dict[ResourceStatus, ResourceStatus] = {s: TRANSITIONS[s, Input.VALID] for s in _ALL}


def next_status(status: ResourceStatus, event: Input) -> ResourceStatus:
    """Look up the transition; raise `ProtocolError` for a pair the table does not allow."""
    try:
        return TRANSITIONS[status, event]
    except KeyError:
        raise ProtocolError(
            f"resource in status {status.value} cannot take {event.value}"
        ) from None


@attrs.frozen(kw_only=True)
class ResourceState:
    """A snapshot of one resource in the cache, for introspection (CSDS-like)."""

    type_url: str
    name: str
    status: ResourceStatus
    #: The cached value (what the type's decoder returned), when the status holds one.
    value: Any = attrs.field(eq=False, repr=False)
    #: Version of the cached value: the response's version_info (SotW) or the resource's (Delta).
    version: str | None
    #: When the cached value was last updated (the core's clock), or None.
    last_updated: float | None
    #: The most recent error about this resource, or None since the last valid update.
    error: XdsError | None = attrs.field(eq=False)
    #: When ``error`` happened, or None.
    error_time: float | None
    #: When the TTL (if the server set one) expires, or None.
    expires_at: float | None
