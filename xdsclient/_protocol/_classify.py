"""The classify step every response goes through, the same for SotW and Delta.

Why one: both variants must decide, per resource, the same things in the same way: is its name
usable (present, not the wildcard, not too long), does its body decode and validate, did the
response name it twice, is it a body-less `Resource` (a heartbeat or a deletion), and what the
NACK says about the ones that cannot even be named. The variants differ only in how they find a
resource's name, body and version in their message (SotW: inside the body or a `Resource`
wrapper; Delta: on the `Resource`, with aliases) and in what they apply afterwards (SotW: full
state deletion for LDS/CDS; Delta: ``removed_resources``). `Classifier` is fed one resource at a
time, then `finish` settles duplicates; `TypeState.apply_classified` applies the result.

Names: a response may spell an xdstp name another way than the request did (``xdstp:///t/x``
for ``xdstp:/t/x``, context parameters in another order, other percent-encoding); every name a
response gives (body, `Resource` wrapper, Delta name, alias, removal, server error) is turned
into its cache key by `key_of`, the same canonicalisation the registry applies to the names a
user gives (`canonical_name`) and the `Session` to the names it is asked to subscribe to, so any
spelling reaches the watchers of the resource. An xdstp
name that does not parse, or names another type, cannot be attributed: it only makes the NACK
(C-core: "Cannot parse xDS resource name").

Hot path: one `Classifier` per response, one method call per resource, locals and no
per-resource objects beyond the result tuples.

Unchanged resources: when the type's decoder is pure, a resource whose serialized bytes equal
the cached bytes of a held value reuses that value instead of being decoded and validated again
(a SotW resend of N unchanged resources then costs the parse and N dict lookups). It still goes
through `TypeState.apply_valid` like any valid resource, so it is ACKed, refreshes its TTL,
clears its does-not-exist timer and a previous error; it is not announced again. A bare SotW
body names itself only once decoded, so SotW finds the cached entry by the name its bytes
begin with (`leading_name`: field 1, where every built-in type keeps its name) and compares the
bytes; where the bytes do not begin with such a field (or interpreted, where reading it costs
more than hashing the bytes), it looks the bytes up in an index of the cached bytes, built once
per response that is not much smaller than the cache. Either way a hit is a resource whose bytes
equal a held value's, so both find the same ones for the built-in types; a leading name that
names no entry, or one with other bytes, is decoded as any changed resource is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Sequence
from typing import TYPE_CHECKING, Any, Final

from .._errors import ResourceDecodeError
from .._names import WILDCARD
from .._wire import skip, varint
from .._xdstp import XDSTP_PREFIX, InvalidNameError, canonical_name
from ._cache import Table

if TYPE_CHECKING:  # compiled, positions are native 64-bit integers; plain int as Python
    from mypy_extensions import i64


def name_too_long(name: str, limit: int) -> str:
    return f"name of {len(name)} characters exceeds max_name_length ({limit})"


ttl_none: Final[float | None] = None
#: compiled, a C static, not a lookup in the module's dict per resource
_XDSTP: Final = XDSTP_PREFIX

#: SotW indexes the cached bytes only for responses of at least 1/_INDEX_RATIO of the cache
_INDEX_RATIO = 8
#: Whether this module runs compiled (mypyc): then SotW finds unchanged bytes by `leading_name`
COMPILED: Final = not __file__.endswith(".py")

__all__ = ["BodilessItem", "Classifier", "ValidItem", "key_of", "name_too_long"]

#: A valid resource to apply: (name, serialized value, decoded value, version, TTL seconds or None)
ValidItem = tuple[str, bytes, Any, str, "float | None"]
#: A body-less resource: (name, version, TTL seconds or None)
BodilessItem = tuple[str, str, "float | None"]


def key_of(name: str, type_url: str) -> str:
    """The cache key of a name a response gives where nothing can be rejected (a removal, a
    server error, an alias): the canonical form of an xdstp name, else the name as it is (a
    malformed one then matches no subscription)."""
    if not name.startswith(XDSTP_PREFIX):
        return name
    try:
        return canonical_name(name, type_url)
    except InvalidNameError:
        return name


def leading_name(raw: bytes) -> str | None:
    """The text of ``raw``'s first field when it is field 1, length-delimited, under 16 KiB and
    valid UTF-8 (a built-in resource's name, as its serializer writes it first), else None.
    Only a guess to look the cache up by: a hit still needs the cached bytes to be ``raw``."""
    size = len(raw)
    if size < 2 or raw[0] != 10:
        return None
    length = raw[1]
    start = 2
    if length >= 128:
        if size < 3 or raw[2] >= 128:
            return None
        length = (length & 127) | (raw[2] << 7)
        start = 3
    end = start + length
    if end > size:
        return None
    try:
        return raw[start:end].decode()
    except UnicodeDecodeError:
        return None


class _Odd(Exception):
    """Bytes `resource_values` does not read: the caller reads the message instead."""


def resource_values(wire: bytes, type_url: bytes) -> list[bytes | None] | None:
    """The resources of a serialized DiscoveryResponse, read from its bytes: in order, each
    ``Any``'s value when its type URL is ``type_url``, None when it is another type (a
    `Resource` wrapper, a wrong type). None when the bytes hold anything it does not read (a
    group, a truncated field): the caller then reads the message.

    Compiled, this is what SotW reads a response's resources with: through upb, each
    resource is a message wrapper and two field reads, a string made for its type URL
    (about 0.3 us a resource, more than serializing the whole response again and reading
    its bytes); interpreted, reading bytes costs more than upb's accessors."""
    try:
        return _values(wire, type_url)
    except (_Odd, IndexError):
        return None


def _varint(data: bytes, pos: i64, end: i64) -> tuple[i64, i64]:
    if pos < end and data[pos] < 0x80:  # a key or a short length: no call
        return data[pos], pos + 1
    value, pos = varint(data, pos, end)
    if pos < 0:
        raise _Odd
    return value, pos


def _skip(data: bytes, wire: i64, pos: i64, end: i64) -> i64:
    """The position after a field's value of wire type ``wire`` starting at ``pos``."""
    pos = skip(data, wire, pos, end)
    if pos < 0:
        raise _Odd  # a group, or a value that does not fit
    return pos


def _values(data: bytes, type_url: bytes) -> list[bytes | None]:
    values: list[bytes | None] = []
    pos: i64 = 0
    end: i64 = len(data)
    while pos < end:
        key, pos = _varint(data, pos, end)
        if key == 0x12:  # field 2 (resources), length-delimited: one Any
            size, pos = _varint(data, pos, end)
            stop = pos + size
            if stop > end:
                raise _Odd
            values.append(_any_value(data, pos, stop, type_url))
            pos = stop
        else:
            pos = _skip(data, key & 7, pos, end)
    return values


def _any_value(data: bytes, pos: i64, end: i64, type_url: bytes) -> bytes | None:
    """An ``Any``'s value when its type URL is ``type_url`` (the last of each field counts,
    as in upb), else None."""
    type_start: i64 = 0
    type_stop: i64 = 0
    value_start: i64 = 0
    value_stop: i64 = 0
    while pos < end:
        key, pos = _varint(data, pos, end)
        if key == 0x0A or key == 0x12:  # field 1 (type URL) or 2 (value), length-delimited
            size, pos = _varint(data, pos, end)
            stop = pos + size
            if stop > end:
                raise _Odd
            if key == 0x0A:
                type_start, type_stop = pos, stop
            else:
                value_start, value_stop = pos, stop
            pos = stop
        else:
            pos = _skip(data, key & 7, pos, end)
    if type_stop - type_start != len(type_url) or data[type_start:type_stop] != type_url:
        return None
    return data[value_start:value_stop]


def upb_values(resources: Collection[Any], type_url: str) -> list[bytes | None]:
    """`resource_values` through the message: each resource's value when its type URL is
    ``type_url``, else None."""
    return [packed.value if packed.type_url == type_url else None for packed in resources]


class Classifier:
    """Sorts one response's resources into valid, body-less, invalid and unnamed ones."""

    __slots__ = (
        "_decode",
        "_duplicates",
        "_entries",
        "_max_name",
        "_reuse",
        "_type_url",
        "bodiless",
        "errors",
        "every_name_known",
        "invalid",
        "seen",
        "valid",
        "valid_names",
        "version",
        "versions",
    )

    def __init__(
        self,
        type_url: str,
        decode: Callable[[bytes], tuple[str, Any]],
        entries: Table,
        max_name: int,
        reuse: bool = True,
    ) -> None:
        self._type_url = type_url
        self._decode = decode
        self._entries = entries
        self._max_name = max_name
        #: reuse the cached value of a resource whose bytes did not change (a pure decoder)
        self._reuse = reuse
        self.valid: list[ValidItem] = []
        #: the names of the valid resources, kept by `release` for the verdicts
        self.valid_names: list[str] = []
        self.bodiless: list[BodilessItem] = []
        #: name -> why it was rejected (applied to the resource and listed in the NACK)
        self.invalid: dict[str, str] = {}
        #: NACK reasons for resources that could not be attributed to a name
        self.errors: list[str] = []
        self.seen: set[str] = set()
        self._duplicates: list[str] = []
        #: every resource could be named (a SotW full state may then delete what is absent)
        self.every_name_known = True
        #: the version a rejected resource had: ``versions[name]``, else ``version`` (SotW)
        self.version = ""
        self.versions: dict[str, str] = {}

    def unnamed(self, index: int, reason: str) -> None:
        """Resource ``index`` cannot be attributed to a name: it only makes the NACK."""
        self.errors.append(f"resource {index}: {reason}")
        self.every_name_known = False

    def usable_name(self, index: int, name: str) -> bool:
        """Whether ``name`` can name a resource; if not, say why in the NACK."""
        if not name or name == WILDCARD:
            self.unnamed(index, f"{name!r} is not a resource name" if name else "no name")
            return False
        if len(name) > self._max_name:
            self.unnamed(index, name_too_long(name, self._max_name))
            return False
        return True

    def canonical(self, index: int, name: str) -> str:
        """The cache key of an xdstp ``name`` (see the module's "Names"); "" when it cannot be
        one, the NACK saying why."""
        try:
            return canonical_name(name, self._type_url)
        except InvalidNameError as exc:
            self.unnamed(index, str(exc))
            return ""

    def named(self, index: int, name: str) -> str:
        """The cache key of a resource called ``name``, to go on with: usable (else the NACK
        says why) and named for the first time in this response (else it is a duplicate);
        "" when not to go on."""
        if not name or name == WILDCARD or len(name) > self._max_name:
            self.usable_name(index, name)  # says why
            return ""
        if name.startswith(XDSTP_PREFIX) and not (name := self.canonical(index, name)):
            return ""
        seen = self.seen
        if name in seen:
            self._duplicates.append(name)
            return ""
        seen.add(name)
        return name

    def sotw_bodies(
        self,
        resources: Sequence[Any],
        values: list[bytes | None],
        version: str,
        wanted: dict[str, None] | None,
        other: Callable[[int, Any], None],
    ) -> None:
        """The resources of a SotW response: each ``Any`` of the type, whose value is in
        ``values`` (`resource_values`, `upb_values`), is classified here, in one loop with
        locals (the hot path of every SotW response); any other (a `Resource` wrapper, or a
        wrong type: None in ``values``) goes to ``other(index, resources[index])``. Same rules
        as `body`."""
        decode, max_name = self._decode, self._max_name
        seen, valid, invalid = self.seen, self.valid, self.invalid
        by_name = COMPILED and self._reuse and bool(self._entries)
        # compiled, the index is built only for bytes that do not begin with a name
        known = None if by_name else self._known_bytes(len(values))
        entries = self._entries
        for index, raw in enumerate(values):
            if raw is None:
                other(index, resources[index])
                continue
            reason: str | None = None
            hit: str | None = None
            guess = leading_name(raw) if by_name else None
            if guess is not None:
                cached = entries.get(guess)
                if cached is not None and cached.raw == raw and cached.status.holds_value:
                    hit = guess
            elif by_name or known:
                if known is None:
                    known = self._known_bytes(len(resources))
                hit = known.get(raw)
            if hit is not None:
                name, value = hit, entries[hit].value  # unchanged: its cached name and value
            else:
                try:
                    name, value = decode(raw)
                except ResourceDecodeError as exc:
                    name, value, reason = exc.name or "", None, exc.message
                except Exception as exc:
                    name, value, reason = "", None, f"decoder failed: {exc!r}"
            if not name or len(name) > max_name:
                self._unnamed_body(index, name, reason)
            elif (
                hit is None
                and name.startswith(_XDSTP)
                and not (name := self.canonical(index, name))
            ):
                pass  # an xdstp name that is not one of this type: the NACK says why
            elif name in seen:
                self._duplicates.append(name)
            else:
                seen.add(name)
                if reason is not None:
                    invalid[name] = reason
                elif wanted is None or name in wanted:
                    valid.append((name, raw, value, version, ttl_none))

    def body(
        self,
        index: int,
        raw: bytes,
        version: str,
        ttl: float | None,
        name: str = "",
        wanted: Container[str] | None = None,
        same_name: bool = False,
    ) -> None:
        """A resource with a body.

        ``name``: the name the message gave it, already noted with `first`; empty when only
        decoding can tell (SotW). ``same_name``: the decoded name must be ``name`` (a SotW
        `Resource` wrapper). ``wanted`` filters valid ones (None: the caller kept only those).
        The per-resource hot path of SotW: hence positional arguments and inlined steps.
        """
        entry = self._entries.get(name) if name and self._reuse else None
        reason: str | None = None
        if entry is not None and entry.raw == raw and entry.status.holds_value:
            value = entry.value  # unchanged: no need to decode it again
        else:
            try:
                decoded, value = self._decode(raw)
            except ResourceDecodeError as exc:
                decoded, value, reason = exc.name or "", None, exc.message
            except Exception as exc:
                decoded, value, reason = "", None, f"decoder failed: {exc!r}"
            if not name:
                if not decoded or len(decoded) > self._max_name:
                    self._unnamed_body(index, decoded, reason)
                    return
                if decoded.startswith(XDSTP_PREFIX) and not (
                    decoded := self.canonical(index, decoded)
                ):
                    return
                seen = self.seen
                if decoded in seen:
                    self._duplicates.append(decoded)
                    return
                seen.add(decoded)
                name = decoded
            elif same_name and reason is None and key_of(decoded, self._type_url) != name:
                reason = f"the Resource wrapper names it {name!r} but it is {decoded!r}"
        if reason is not None:
            self.invalid[name] = reason
        elif wanted is None or name in wanted:
            self.valid.append((name, raw, value, version, ttl))

    def _known_bytes(self, count: int) -> dict[bytes, str]:
        """The cached bytes of every held value, to its name (the value is the entry's: no
        (name, value) pair per resource, 0.6 MiB more at the peak of a response of 10,000).
        Empty without reuse, and for a response of ``count`` resources much smaller than the
        cache: decoding those few costs less than indexing every cached resource (a
        1-resource update on a cache of 100,000 would otherwise pay 100,000 insertions)."""
        entries = self._entries
        if not self._reuse or count * _INDEX_RATIO < len(entries):
            return {}
        return {
            entry.raw: name
            for name, entry in entries.items()
            if entry.raw is not None and entry.status.holds_value
        }

    def _unnamed_body(self, index: int, decoded: str, reason: str | None) -> None:
        if decoded:
            self.usable_name(index, decoded)  # too long
        else:
            self.unnamed(index, reason or "no name")

    def release(self) -> None:
        """Once applied: keep only what the verdicts need (the names, the reasons), not a
        tuple per resource and the set of names seen (megabytes at N=10,000)."""
        self.valid_names = [item[0] for item in self.valid]
        self.valid = []
        self.seen = set()

    def finish(self) -> None:
        """A name the response gave twice is invalid, whatever each copy held."""
        if not self._duplicates:
            return
        for name in self._duplicates:
            self.invalid[name] = "duplicate resource name in one response"
        invalid = self.invalid
        self.valid = [item for item in self.valid if item[0] not in invalid]
        self.bodiless = [item for item in self.bodiless if item[0] not in invalid]
