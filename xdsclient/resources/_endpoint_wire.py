"""A ClusterLoadAssignment read straight from its wire bytes: the optional compiled fast path.

Why: after the lean rewrite, most of an EDS update is spent in upb's accessors (a Python call
per field read). This module reads the bytes itself; compiled with mypyc (the wheels,
``make compiled``) it builds a view's fields in about half the time. Interpreted it is slower
than upb, so the decoder uses it only when it is compiled (`COMPILED`); the sdist needs no C
compiler.

Check, ACK, then build: `decode`, the decoder of the compiled build, only checks the bytes
(`check`: the same rules, building nothing but the cluster name) and returns a view whose
localities (``priorities``) are read from its kept bytes (`read_fields`) when first needed. The
session ACKs on the verdicts alone, and the watchers, which read the localities, run only once
the ACK is written (`xdsclient._shell._driver`): the building, most of an update's cost, falls
after the ACK. What `check` accepts, `read_fields` reads, so an ACKed view always builds, and
`build` reads it without checking again what `check` checked. The
view's module lends its class and the upb decoder with `bind_view` (it imports this module, not
the other way round).

It reads only the shape control planes send: names, localities with weights and priorities,
endpoints with socket addresses, hostnames, health and weights. At anything else (a field it
does not read, metadata, a policy, a field given twice, an unexpected wire type, a value upb
would truncate, invalid UTF-8, bytes that do not parse) it returns None and the upb path
decides, so it can never change a verdict: what it accepts, ``_lean`` accepts with the same
fields (tests/resources/test_endpoint_wire.py holds it to that, interpreted and compiled).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .._wire import text, varint
from ._endpoint_records import (
    _HEALTH,
    _LOCALITIES,
    _NO_METADATA,
    _PORTS,
    Endpoint,
    HealthStatus,
    LocalityEndpoints,
    _LeanFields,
    _locality,
    _new_port,
)
from ._endpoint_records import _UINT32_MAX as _RECORDS_UINT32_MAX
from ._locality import Locality
from ._view import is_ip_address

if TYPE_CHECKING:  # compiled, positions and bytes are native 64-bit integers; plain int as Python
    from mypy_extensions import i64

__all__ = ["COMPILED", "bind_view", "build", "check", "decode", "read_fields"]

#: Whether this module runs compiled (mypyc), not from its source file.
COMPILED: Final = not __file__.endswith(".py")

_new: Final = tuple.__new__
_UNKNOWN: Final = HealthStatus.UNKNOWN
# Final aliases: compiled, they are C statics, not a module dict lookup per record built.
_ENDPOINT: Final = Endpoint
_LOCALITY_ENDPOINTS: Final = LocalityEndpoints
_STATUSES: Final = _HEALTH
_UINT32_MAX: Final = _RECORDS_UINT32_MAX
_NO_METADATA_MAP: Final = _NO_METADATA
_object_new: Final = object.__new__
#: The interned localities (`_endpoint_records._locality`), read here without a Python call
_INTERNED: Final = _LOCALITIES
#: The interned ports (`_endpoint_records._PORTS`): values typed Any, so compiled code keeps
#: the shared int object rather than unboxing it and boxing a new one into the record
_INTERNED_PORTS: Final[dict[int, Any]] = _PORTS


class _Lent:
    """What `bind_view` lent: the view class, its slot setters in field order (name,
    priorities, drop overloads, overprovisioning factor, raw bytes) and the upb decoder. An
    object's fields, not module globals: compiled, reading them is no dict lookup."""

    def __init__(self) -> None:
        self.view: Any = None
        self.setters: tuple[Any, ...] = ()
        self.fallback: Callable[[bytes], tuple[str, Any]] | None = None


_LENT: Final = _Lent()

#: A socket address as read: (host, port), the port the interned int object (typed Any, so
#: compiled code passes that object along instead of boxing a new int into every tuple).
_Address = tuple[str, Any]


class _Unusual(Exception):
    """Something this reader leaves to upb."""


# Every reader below takes the message's bytes and the bounds of the part it reads, and returns
# what it read (with the position after it, where the caller goes on): no object per
# sub-message, which is what makes the compiled module fast.


def _varint(data: bytes, pos: i64, end: i64) -> tuple[i64, i64]:
    """(value, position after it); a value of 63 bits at most (a longer one is `_Unusual`: no
    field this reader takes holds one, so upb decides)."""
    value, pos = varint(data, pos, end)
    if pos < 0:
        raise _Unusual
    return value, pos


def _field(data: bytes, pos: i64, end: i64) -> tuple[i64, i64, i64]:
    """The next field's (number, wire type, position of its value)."""
    byte: i64 = data[pos]
    if byte < 0x80:
        return byte >> 3, byte & 7, pos + 1
    key, pos = _varint(data, pos, end)
    return key >> 3, key & 7, pos


def _span(data: bytes, pos: i64, end: i64) -> tuple[i64, i64]:
    """A length-delimited value's (start, end)."""
    byte: i64 = data[pos]
    size: i64
    if byte < 0x80:
        size = byte
        pos += 1
    else:
        size, pos = _varint(data, pos, end)
    stop = pos + size
    if stop > end:
        raise _Unusual
    return pos, stop


def _text(data: bytes, start: int, stop: int) -> str:
    value = text(data, start, stop)
    if value is None:
        raise _Unusual
    return value


def _uint32(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value, pos = _varint(data, pos, end)
    if value > _UINT32_MAX:
        raise _Unusual  # upb would truncate it
    return value, pos


def _wrapped_uint32(data: bytes, pos: int, end: int) -> int:
    """A google.protobuf.UInt32Value's value (0 when absent from it)."""
    value = -1
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field != 1 or wire != 0 or value >= 0:
            raise _Unusual
        value, pos = _uint32(data, pos, end)
    return max(value, 0)


def read_fields(data: bytes) -> tuple[str, _LeanFields] | None:
    """The cluster name and the view's fields, or None: upb decides (valid or not)."""
    try:
        return _assignment(data, len(data), False)
    except (_Unusual, IndexError):  # IndexError: a field key cut off at the end
        return None


def build(data: bytes) -> tuple[str, _LeanFields] | None:
    """`read_fields` of bytes `check` accepted, without checking again the rules it checked
    (each address and locality once, hosts that are IP addresses): what a view `decode` only
    checked reads when its localities are first needed. None only where `read_fields` gives
    None (never, for bytes `check` accepted)."""
    try:
        return _assignment(data, len(data), True)
    except (_Unusual, IndexError):
        return None


def bind_view(
    view: type, setters: tuple[Any, ...], fallback: Callable[[bytes], tuple[str, Any]]
) -> None:
    """Lend `decode` the view class, its five slot setters and the decoder of everything the
    reader leaves to upb."""
    if len(setters) != 5:
        raise ValueError(f"{view.__name__} has {len(setters)} fields, the reader sets 5")
    _LENT.view, _LENT.setters, _LENT.fallback = view, setters, fallback


def decode(data: bytes) -> tuple[str, Any]:
    """The ENDPOINT decoder of the compiled build: bytes -> (name, view). When the reader takes
    the bytes, they are only checked here (`check`) and the view's localities are left to
    build from them when first read (after the ACK: see the module's "Check, ACK, then
    build"); the upb decoder (which decides every invalid message) builds the rest."""
    try:
        name = _check_assignment(data, len(data))
    except (_Unusual, IndexError):
        name = None
    lent = _LENT
    if name is None:
        assert lent.fallback is not None, "bind_view was not called"
        return lent.fallback(data)
    set_name, set_priorities, set_drops, set_factor, set_raw = lent.setters
    view = _object_new(lent.view)
    set_name(view, name)
    set_priorities(view, None)  # built from ``raw`` when first read
    set_drops(view, ())
    set_factor(view, 140)
    set_raw(view, data)
    return name, view


def check(data: bytes) -> str | None:
    """The cluster name when the reader takes ``data`` (then `read_fields` reads it, with the
    fields ``_lean`` gives), None when upb decides (valid or not); builds nothing but the
    name."""
    try:
        return _check_assignment(data, len(data))
    except (_Unusual, IndexError):
        return None


def _assignment(data: bytes, end: int, checked: bool) -> tuple[str, _LeanFields] | None:
    """The reading; ``checked``: `check` accepted the bytes (its rules are not checked again)."""
    name = ""
    named = False
    by_priority: dict[int, list[LocalityEndpoints]] = {}
    seen_localities: set[tuple[int, str, str, str]] = set()
    seen: set[_Address] = set()
    pos = 0
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if wire != 2:
            raise _Unusual
        start, pos = _span(data, pos, end)
        if field == 1 and not named:
            name = _text(data, start, pos)
            named = True
        elif field == 2:
            if not _group(data, start, pos, by_priority, seen_localities, seen, checked):
                return None
        else:
            raise _Unusual
    count = len(by_priority)
    for p, groups in by_priority.items():
        if p >= count or (len(groups) > 1 and sum(g[1] for g in groups) > _UINT32_MAX):
            return None
    priorities = tuple(tuple(by_priority[p]) for p in range(count))
    return name, (priorities, (), 140)


def _group(
    data: bytes,
    pos: int,
    end: int,
    by_priority: dict[int, list[LocalityEndpoints]],
    seen_localities: set[tuple[int, str, str, str]],
    seen: set[_Address],
    checked: bool,
) -> bool:
    """One LocalityLbEndpoints; False where ``_lean`` gives up (the message is invalid)."""
    weight = -1  # absent
    priority = -1
    where: tuple[str, str, str] | None = None
    lbs: list[tuple[int, int]] = []
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field == 5 and wire == 0 and priority < 0:
            priority, pos = _uint32(data, pos, end)
            continue
        if wire != 2:
            raise _Unusual
        start, pos = _span(data, pos, end)
        if field == 2:
            lbs.append((start, pos))
        elif field == 1 and where is None:
            where = _locality_fields(data, start, pos)
        elif field == 3 and weight < 0:
            weight = _wrapped_uint32(data, start, pos)
        else:
            raise _Unusual
    if weight <= 0:
        return True  # skipped: no weight, or weight 0
    if where is None:
        return False
    priority = max(priority, 0)
    if not checked:
        key = (priority, where[0], where[1], where[2])
        if key in seen_localities:
            return False
        seen_localities.add(key)
    endpoints: list[Endpoint] = []
    for start, stop in lbs:
        endpoint = _lb_endpoint(data, start, stop, seen, checked)
        if endpoint is None:
            return False
        endpoints.append(endpoint)
    locality: Locality | None = _INTERNED.get(where)
    if locality is None:
        locality = _locality(where)  # interns it
    record = _new(_LOCALITY_ENDPOINTS, (locality, weight, priority, tuple(endpoints)))
    group_list = by_priority.get(priority)
    if group_list is None:
        by_priority[priority] = [record]
    else:
        group_list.append(record)
    return True


def _locality_fields(data: bytes, pos: int, end: int) -> tuple[str, str, str]:
    region = zone = sub_zone = ""
    done = 0  # bit per field seen
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if not 1 <= field <= 3 or wire != 2 or done & (1 << field):
            raise _Unusual
        done |= 1 << field
        start, pos = _span(data, pos, end)
        value = _text(data, start, pos)
        if field == 1:
            region = value
        elif field == 2:
            zone = value
        else:
            sub_zone = value
    return region, zone, sub_zone


def _lb_endpoint(
    data: bytes, pos: int, end: int, seen: set[_Address], checked: bool
) -> Endpoint | None:
    weight = -1
    health = -1
    span: tuple[int, int] | None = None
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field == 2 and wire == 0 and health < 0:
            health, pos = _varint(data, pos, end)
            if health > 0x7FFFFFFF:
                raise _Unusual  # a negative enum value
            continue
        if wire != 2:
            raise _Unusual
        start, pos = _span(data, pos, end)
        if field == 1 and span is None:
            span = (start, pos)
        elif field == 4 and weight < 0:
            weight = _wrapped_uint32(data, start, pos)
        else:
            raise _Unusual
    if weight == 0 or span is None:
        return None  # invalid: a zero weight, or no address
    weight = 1 if weight < 0 else weight
    return _endpoint(data, span[0], span[1], seen, weight, max(health, 0), checked)


def _endpoint(
    data: bytes,
    pos: int,
    end: int,
    seen: set[_Address],
    weight: int,
    health: int,
    checked: bool,
) -> Endpoint | None:
    address: _Address | None = None
    addressed = False
    hostname = ""
    named = False
    extras: list[_Address | None] = []
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if wire != 2:
            raise _Unusual
        start, pos = _span(data, pos, end)
        if field == 1 and not addressed:
            address = _address(data, start, pos, checked)
            addressed = True
        elif field == 3 and not named:
            hostname = _text(data, start, pos)
            named = True
        elif field == 4:
            extras.append(_additional(data, start, pos, checked))
        else:
            raise _Unusual
    key = address if checked else _check(address, seen)
    if key is None:
        return None
    additional: tuple[_Address, ...] = ()
    if extras:
        keys: list[_Address] = []
        for extra in extras:
            kept = extra if checked else _check(extra, seen)
            if kept is None:
                return None
            keys.append(kept)
        additional = tuple(keys)
    status = _STATUSES.get(health, _UNKNOWN)
    return _new(_ENDPOINT, (key[0], key[1], additional, hostname, status, weight, _NO_METADATA_MAP))


def _additional(data: bytes, pos: int, end: int, checked: bool) -> _Address | None:
    """An AdditionalAddress's socket address."""
    found: _Address | None = None
    addressed = False
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field != 1 or wire != 2 or addressed:
            raise _Unusual
        start, pos = _span(data, pos, end)
        found = _address(data, start, pos, checked)
        addressed = True
    return found


def _address(data: bytes, pos: int, end: int, checked: bool) -> _Address | None:
    """An Address's socket address as (host, port); None when it has none."""
    found: _Address | None = None
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field != 1 or wire != 2 or found is not None:
            raise _Unusual  # pipe, internal address, or a socket address given twice
        start, pos = _span(data, pos, end)
        found = _socket_address(data, start, pos, checked)
    return found


def _socket_address(data: bytes, pos: int, end: int, checked: bool) -> _Address:
    """(host, port) of a SocketAddress whose host is an IP address (else `_Unusual`: upb
    decides, as for every host ``_lean_address`` rejects; ``checked``: `check` found it one)."""
    host = ""
    port = -1
    named = False
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field == 2 and wire == 2 and not named:
            start, pos = _span(data, pos, end)
            host = _text(data, start, pos)
            if not (checked or _dotted_quad(data, start, pos) or is_ip_address(host)):
                raise _Unusual
            named = True
        elif field == 3 and wire == 0 and port < 0:
            port, pos = _uint32(data, pos, end)
        else:
            raise _Unusual  # protocol, named port, resolver...: upb decides
    if not named or port > 65535:
        raise _Unusual  # no host (not an IP address), or a port upb's path rejects
    port = max(port, 0)
    shared: Any = _INTERNED_PORTS.get(port)
    if shared is None:
        shared = _new_port(port)
    return host, shared


def _check(address: _Address | None, seen: set[_Address]) -> _Address | None:
    """``_lean_address``'s other rule on a read address (`_socket_address` checked its host
    and port)."""
    if address is None:
        return None
    count = len(seen)
    seen.add(address)  # one hash, one boxing of the native tuple: no separate ``in`` test
    return None if len(seen) == count else address


def _dotted_quad(data: bytes, pos: int, end: int) -> bool:
    """Whether ``data[pos:end]`` is an IPv4 address in its plain form (four decimal parts of at
    most 255, no leading zeros): the common case, told apart on the bytes without a call into
    Python. Every such host is one ``is_ip_address`` accepts; anything else is left to it."""
    return _ipv4(data, pos, end) >= 0


def _ipv4(data: bytes, pos: i64, end: i64) -> i64:
    """The address of `_dotted_quad`'s plain IPv4 form as a 32-bit number, else -1. One number
    per plain host: two hosts in that form are the same string exactly when their numbers are
    equal."""
    if end - pos < 7 or end - pos > 15:
        return -1
    address: i64 = 0
    parts: i64 = 0
    value: i64 = 0
    digits: i64 = 0
    while pos < end:
        c: i64 = data[pos]
        pos += 1
        if 48 <= c <= 57:
            if digits > 0 and value == 0:
                return -1  # a leading zero
            value = value * 10 + (c - 48)
            digits += 1
            if value > 255:
                return -1
        elif c == 46 and digits > 0 and parts < 3:
            address = (address << 8) | value
            parts += 1
            value = 0
            digits = 0
        else:
            return -1
    return (address << 8) | value if parts == 3 and digits > 0 else -1


# Check only: the rules of the readers above over the same bytes, building nothing but the
# cluster name (no string, record or list per endpoint): what `check` accepts, `read_fields`
# reads, and what it leaves, `read_fields` leaves (the tests hold the two to one verdict on
# every input). Each mirrors its reader: a field it does not know, or gives twice, is
# `_Unusual`; a rule the message breaks is False (or None).


def _check_assignment(data: bytes, end: int) -> str | None:
    name = ""
    named = False
    kept: list[tuple[int, int, int, int]] = []  # (priority, weight, locality's span)
    seen: set[object] = set()  # the addresses (`_address_key`)
    pos = 0
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if wire != 2:
            raise _Unusual
        start, pos = _span(data, pos, end)
        if field == 1 and not named:
            name = _text(data, start, pos)
            named = True
        elif field == 2:
            if not _check_group(data, start, pos, kept, seen):
                return None
        else:
            raise _Unusual
    if len(kept) == 1:
        return name if kept[0][0] == 0 else None  # one locality: the priorities are [0]
    return name if _check_priorities(data, kept) else None


def _check_priorities(data: bytes, kept: list[tuple[int, int, int, int]]) -> bool:
    """A locality once per priority, priorities from 0 without gaps, each one's weights within
    32 bits (`_assignment`'s rules, `_group`'s duplicate check)."""
    sums: dict[int, int] = {}
    places: set[tuple[int, str, str, str]] = set()
    for priority, weight, start, stop in kept:
        region, zone, sub_zone = _locality_fields(data, start, stop)
        place = (priority, region, zone, sub_zone)
        if place in places:
            return False
        places.add(place)
        sums[priority] = sums.get(priority, 0) + weight
    count = len(sums)
    return all(priority < count and total <= _UINT32_MAX for priority, total in sums.items())


def _check_group(
    data: bytes,
    pos: int,
    end: int,
    kept: list[tuple[int, int, int, int]],
    seen: set[object],
) -> bool:
    """`_group`'s check: its fields first, then, when the locality is kept, its endpoints (a
    second pass over the fields, which the first has checked)."""
    first = pos
    weight = -1  # absent
    priority = -1
    located = False
    where_start = where_stop = 0
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field == 5 and wire == 0 and priority < 0:
            priority, pos = _uint32(data, pos, end)
            continue
        if wire != 2:
            raise _Unusual
        start, pos = _span(data, pos, end)
        if field == 2:
            continue  # an endpoint: checked below if the locality is kept
        if field == 1 and not located:
            _check_locality(data, start, pos)
            located = True
            where_start, where_stop = start, pos
        elif field == 3 and weight < 0:
            weight = _wrapped_uint32(data, start, pos)
        else:
            raise _Unusual
    if weight <= 0:
        return True  # skipped: no weight, or weight 0
    if not located:
        return False
    kept.append((max(priority, 0), weight, where_start, where_stop))
    pos = first
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if wire == 0:
            _, pos = _varint(data, pos, end)  # the priority
            continue
        start, pos = _span(data, pos, end)
        if field == 2 and not _check_lb_endpoint(data, start, pos, seen):
            return False
    return True


def _check_locality(data: bytes, pos: int, end: int) -> None:
    done = 0  # bit per field seen
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if not 1 <= field <= 3 or wire != 2 or done & (1 << field):
            raise _Unusual
        done |= 1 << field
        start, pos = _span(data, pos, end)
        _check_text(data, start, pos)


def _check_text(data: bytes, start: i64, stop: i64) -> None:
    """`_text`'s check; the string is made (and dropped) only when the bytes are not ASCII."""
    pos: i64 = start
    while pos < stop:
        if data[pos] >= 0x80:
            _text(data, start, stop)
            return
        pos += 1


def _check_lb_endpoint(data: bytes, pos: int, end: int, seen: set[object]) -> bool:
    weight = -1
    health = -1
    located = False
    where_start = where_stop = 0
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field == 2 and wire == 0 and health < 0:
            health, pos = _varint(data, pos, end)
            if health > 0x7FFFFFFF:
                raise _Unusual  # a negative enum value
            continue
        if wire != 2:
            raise _Unusual
        start, pos = _span(data, pos, end)
        if field == 1 and not located:
            located = True
            where_start, where_stop = start, pos
        elif field == 4 and weight < 0:
            weight = _wrapped_uint32(data, start, pos)
        else:
            raise _Unusual
    if weight == 0 or not located:
        return False  # invalid: a zero weight, or no address
    return _check_endpoint(data, where_start, where_stop, seen)


def _check_endpoint(data: bytes, pos: int, end: int, seen: set[object]) -> bool:
    key: object = None
    addressed = False
    named = False
    extras: list[object] | None = None
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if wire != 2:
            raise _Unusual
        start, pos = _span(data, pos, end)
        if field == 1 and not addressed:
            key = _address_key(data, start, pos)
            addressed = True
        elif field == 3 and not named:
            _check_text(data, start, pos)
            named = True
        elif field == 4:
            extra = _additional_key(data, start, pos)
            if extras is None:
                extras = [extra]
            else:
                extras.append(extra)
        else:
            raise _Unusual
    if not _first(key, seen):
        return False
    if extras is not None:
        for extra in extras:
            if not _first(extra, seen):
                return False
    return True


def _first(key: object, seen: set[object]) -> bool:
    """`_check`'s rule on an address key: present, and not seen before in the assignment."""
    if key is None:
        return False
    count = len(seen)
    seen.add(key)
    return len(seen) != count


def _additional_key(data: bytes, pos: int, end: int) -> object:
    found: object = None
    addressed = False
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field != 1 or wire != 2 or addressed:
            raise _Unusual
        start, pos = _span(data, pos, end)
        found = _address_key(data, start, pos)
        addressed = True
    return found


def _address_key(data: bytes, pos: int, end: int) -> object:
    """`_address`'s check: the socket address's key (`_socket_key`), None when it has none."""
    found: object = None
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field != 1 or wire != 2 or found is not None:
            raise _Unusual
        start, pos = _span(data, pos, end)
        found = _socket_key(data, start, pos)
    return found


def _socket_key(data: bytes, pos: int, end: int) -> object:
    """`_socket_address`'s check, and a key that is equal for two addresses exactly when their
    (host, port) are: a number for a host in the plain IPv4 form (no string made), else the
    pair."""
    ipv4 = -1
    host = ""
    port = -1
    named = False
    while pos < end:
        field, wire, pos = _field(data, pos, end)
        if field == 2 and wire == 2 and not named:
            start, pos = _span(data, pos, end)
            ipv4 = _ipv4(data, start, pos)
            if ipv4 < 0:
                host = _text(data, start, pos)
                if not is_ip_address(host):
                    raise _Unusual
            named = True
        elif field == 3 and wire == 0 and port < 0:
            port, pos = _uint32(data, pos, end)
        else:
            raise _Unusual
    if not named or port > 65535:
        raise _Unusual
    port = max(port, 0)
    if ipv4 >= 0:
        return (ipv4 << 16) | port
    return (host, port)
