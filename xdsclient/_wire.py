"""The protobuf wire primitives every compiled reader shares: a varint, a length-delimited
value's bounds, a skipped field, a UTF-8 text.

Why one module: the readers of an assignment, a cluster, a route configuration and a
response's resources (`resources._endpoint_wire`, `resources._cluster_wire`,
`resources._route_wire`, `_protocol._classify`) read the same encoding, and each had its own
copy of these few functions, differing only in how they said "leave it to upb". Here they say it
one way, raising nothing: a position of -1 (`NO`), which the caller checks (a reader that
raises does so itself). Compiled, a raised exception costs more than reading a whole common
resource, and this module is compiled with the readers in one group (mypyc; `_compiled.MODULES`),
so a call into it is a C call with its integers unboxed.

Every function takes the message's bytes and the bounds of the part it reads; a position past
``end`` is never returned, so no caller reads beyond its part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # compiled, positions and bytes are native 64-bit integers; plain int as Python
    from mypy_extensions import i64

__all__ = ["NO", "skip", "span", "text", "varint"]

#: The position no primitive returns but for what it leaves to upb.
NO: Final = -1


def varint(data: bytes, pos: i64, end: i64) -> tuple[i64, i64]:
    """(value, position after it); the position is `NO` past ``end`` or beyond 63 bits (no
    field a reader takes holds a longer one)."""
    result: i64 = 0
    shift: i64 = 0
    while pos < end and shift <= 56:
        byte: i64 = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    return 0, NO


def span(data: bytes, pos: i64, end: i64) -> tuple[i64, i64]:
    """A length-delimited value's (start, end) from its length at ``pos``; (`NO`, `NO`) when
    it does not fit. A length under 128 (nearly all) is read without a call."""
    if pos >= end:
        return NO, NO
    size: i64 = data[pos]
    if size < 0x80:
        pos += 1
    else:
        size, pos = varint(data, pos, end)
    stop = pos + size
    if pos < 0 or stop > end:
        return NO, NO
    return pos, stop


def skip(data: bytes, wire: i64, pos: i64, end: i64) -> i64:
    """The position after a field's value of wire type ``wire`` starting at ``pos``; `NO` for
    a group or a value that does not fit."""
    if wire == 0:
        _, pos = varint(data, pos, end)
        return pos
    if wire == 2:
        _, pos = span(data, pos, end)
        return pos
    if wire == 1:
        pos += 8
    elif wire == 5:
        pos += 4
    else:
        return NO  # a group (3, 4) or no wire type at all (6, 7)
    return pos if pos <= end else NO


def text(data: bytes, start: i64, stop: i64) -> str | None:
    """The UTF-8 text, None when invalid (upb rejects it)."""
    try:
        return data[start:stop].decode()
    except UnicodeDecodeError:
        return None
