"""Per-type subscription state, shared by the SotW and Delta variants.

Why one base: interest (explicit names, wildcard), the does-not-exist and TTL deadlines and the
event rules are the same in both variants; only how requests are built and responses read
differ (`_sotw.py`, `_delta.py`). The resources themselves live in the client's cache
(`xdsclient._cache`): ``entries`` is this type's table there, not a copy.

Invariants:
- Interest changes are intents until `settle_interest` (run when requests are built): only then
  are entries no longer wanted forgotten. A drop and re-add in between changes nothing, so a
  resource stays cached while someone wants it.
- Once settled, ``entries`` holds an entry for every explicitly subscribed name, and otherwise
  only entries that hold a value received through the wildcard.
- A does-not-exist deadline exists only for a name in status REQUESTED whose request has been
  handed out on the current stream (``_unsent`` holds REQUESTED names not yet handed out).
- A TTL deadline exists exactly while an entry holds a value and has ``expires_at``.
- ``pending_acks`` answers every response received on this stream, in order, until sent; it
  and every other stream-scoped field are reset by `reset_stream`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

import attrs

from .._errors import (
    ResourceDoesNotExistError,
    ResourceExpiredError,
    ResourceTimeoutError,
    ResourceValidationError,
    ServerResourceError,
    TransportError,
    XdsError,
)
from .._names import WILDCARD
from ..resources._type import ResourceType
from ._cache import CacheEntry, Table
from ._classify import Classifier, ValidItem, key_of
from ._deadlines import Deadlines
from ._events import CHANGED_SETTERS, AmbientError, DataError, Event, ResourceChanged
from ._messages import Request
from ._options import ProtocolOptions
from ._status import AFTER_VALID, Input, ResourceState, ResourceStatus, next_status

__all__ = ["DNE", "TTL", "Ack", "DeadlineKey", "TypeState"]

DNE = 0  #: deadline kind: does-not-exist timer
TTL = 1  #: deadline kind: TTL expiry
DeadlineKey = tuple[int, str, str]  # (kind, type_url, name)

# Final aliases: compiled, they are C statics, not a lookup in the module's dict per resource.
_REQUESTED: Final = ResourceStatus.REQUESTED
_IGNORED_DELETION: Final = ResourceStatus.DOES_NOT_EXIST_BUT_CACHED
_new: Final = object.__new__
_AFTER_VALID: Final = AFTER_VALID
_CHANGED: Final = ResourceChanged


@attrs.frozen
class Ack:
    """The answer owed to one response: its nonce, the version to send, the NACK message."""

    nonce: str
    version: str  # SotW: the response's version on ACK, the previous accepted one on NACK
    error: str | None  # None for an ACK


class TypeState:
    """Subscription state and cache for one resource type on one stream."""

    def __init__(
        self,
        rtype: ResourceType[Any],
        options: ProtocolOptions,
        deadlines: Deadlines[DeadlineKey],
        entries: Table,
    ) -> None:
        self.rtype = rtype
        self.type_url = rtype.type_url
        self.options = options
        self.deadlines = deadlines
        #: explicitly subscribed names, in subscription order (the wildcard is a flag instead)
        self.names: dict[str, None] = {}
        self.wildcard = False
        #: this type's table in the client's cache (adopted with whatever it already holds)
        self.entries = entries
        #: interest changed since it was last settled (entries may be due for forgetting)
        self._unsettled = False
        #: names whose entry came from another server (`adopt`) and not since from this one
        self.adopted: set[str] = set()
        #: the classify step of the last response applied, and how many of its errors were
        #: for resources it could not name (read by `Session.verdicts`, for observers)
        self.last_classified: Classifier | None = None
        self.last_unnamed = 0
        for name, entry in entries.items():
            if entry.expires_at is not None and entry.status.holds_value:
                deadlines.arm((TTL, self.type_url, name), entry.expires_at)
        self._init_variant()
        # --- stream-scoped: reset by reset_stream() ---
        #: a request for this type has been handed out on the current stream
        self.sent_on_stream = False
        self.pending_acks: list[Ack] = []
        #: interest changed since the last request was handed out
        self.dirty = False
        self._unsent: set[str] = set()

    def _init_variant(self) -> None:
        """Hook: the variant's own fields."""

    # ----------------------------------------------------------------- interest

    @property
    def has_interest(self) -> bool:
        return self.wildcard or bool(self.names)

    def wants(self, name: str) -> bool:
        return name in self.names or self.wildcard

    def subscribe(self, name: str) -> bool:
        """Add interest in ``name`` (or the wildcard); returns whether anything changed.

        A name dropped since interest was last settled keeps its entry as it is: the drop and
        re-add net to nothing.
        """
        if name == WILDCARD:
            if self.wildcard:
                return False
            self.wildcard = True
        else:
            if name in self.names:
                return False
            self.names[name] = None
            if name not in self.entries:
                self.entries[name] = CacheEntry()
                self._unsent.add(name)
        self._interest_added(name)
        self.dirty = True
        return True

    def unsubscribe(self, name: str) -> bool:
        """Drop interest in ``name`` (or the wildcard); returns whether anything changed.

        Nothing is forgotten yet: `settle_interest` does that when the next request is built.
        """
        if name == WILDCARD:
            if not self.wildcard:
                return False
            self.wildcard = False
            self._interest_removed(name, had_value=False)
        else:
            if name not in self.names:
                return False
            del self.names[name]
            self._interest_removed(name, had_value=self.entries[name].status.holds_value)
        self._unsettled = True
        self.dirty = True
        return True

    def settle_interest(self) -> None:
        """Forget the entries nobody wants any more (explicitly or through the wildcard)."""
        if not self._unsettled:
            return
        self._unsettled = False
        names, wildcard = self.names, self.wildcard
        for name in [n for n, e in self.entries.items() if n not in names]:
            if not (wildcard and self.entries[name].status.holds_value):
                self._forget(name)

    def adopt(self, name: str, source: CacheEntry) -> None:
        """Copy another server's entry for a wanted ``name`` (see `Session.adopt`)."""
        if not self.wants(name):
            return
        entry = self.entries.get(name)
        if entry is None:
            entry = self.entries[name] = CacheEntry()
        entry.copy_from(source)
        key = (TTL, self.type_url, name)
        if entry.expires_at is not None and entry.status.holds_value:
            self.deadlines.arm(key, entry.expires_at)
        else:
            self.deadlines.cancel(key)
        if entry.status is not _REQUESTED:
            self.deadlines.cancel((DNE, self.type_url, name))
            self._unsent.discard(name)
        self.adopted.add(name)

    def _forget(self, name: str) -> None:
        del self.entries[name]
        self._unsent.discard(name)
        self.adopted.discard(name)
        self.deadlines.cancel((DNE, self.type_url, name))
        self.deadlines.cancel((TTL, self.type_url, name))

    def _interest_added(self, name: str) -> None:
        """Hook for the variant: ``name`` (maybe the wildcard) was subscribed."""

    def _interest_removed(self, name: str, *, had_value: bool) -> None:
        """Hook for the variant: ``name`` (maybe the wildcard) was unsubscribed."""

    # ----------------------------------------------------------------- stream

    def reset_stream(self) -> None:
        """A new stream starts: forget everything stream-scoped, owe the server our interest."""
        self.sent_on_stream = False
        self.pending_acks = []
        self.dirty = self.has_interest
        self._unsent = {n for n in self.names if self.entries[n].status is _REQUESTED}

    def stream_lost(self) -> None:
        """The stream ended: its does-not-exist timers stop (gRFC A57) and no ACK is owed."""
        self.pending_acks = []
        cancel = self.deadlines.cancel
        for name, entry in self.entries.items():  # dropped but unsettled names included
            if entry.status is _REQUESTED:
                cancel((DNE, self.type_url, name))

    def connectivity_error(self, error: XdsError, now: float, events: list[Event]) -> None:
        """The stream failed before any response: record it on every entry and tell everyone
        who is waiting (gRFC A57). Statuses stay: a cached value is still usable."""
        stamp: Any = now  # one float object for every entry (see `apply_valid`)
        for name, entry in self.entries.items():
            entry.error = error
            entry.error_at = stamp
            kind = AmbientError if entry.status.holds_value else DataError
            events.append(kind(type_url=self.type_url, name=name, error=error))
        if self.wildcard:
            kind = AmbientError if len(self.entries) > len(self.names) else DataError
            events.append(kind(type_url=self.type_url, name=WILDCARD, error=error))

    def take_requests(self) -> list[Request]:
        """The requests owed for this type, in order; marks them handed out."""
        requests = self._build_requests()
        if requests:
            self.sent_on_stream = True
        self.pending_acks = []
        self.dirty = False
        return requests

    def _build_requests(self) -> list[Request]:
        raise NotImplementedError

    def answers(self, build: Callable[[int, Ack], Request]) -> list[Request]:
        """One request per pending ACK/NACK, in order, built by the variant; NACKs carry
        ``error_detail`` (INVALID_ARGUMENT, as gRPC Go and Java send)."""
        requests = []
        for index, ack in enumerate(self.pending_acks):
            request = build(index, ack)
            if ack.error is not None:
                request.error_detail.code = 3
                request.error_detail.message = ack.error
            requests.append(request)
        return requests

    def arm_sent(self, now: float) -> None:
        """Requests naming the not-yet-sent REQUESTED names were handed out: start their timers."""
        if self._unsent and self.sent_on_stream:
            when = now + self.options.does_not_exist_timeout
            type_url = self.type_url
            self.deadlines.arm_all([(DNE, type_url, name) for name in self._unsent], when)
            self._unsent = set()

    # ----------------------------------------------------------------- applying updates

    def apply_valid(self, items: Iterable[ValidItem], now: float, events: list[Event]) -> None:
        """Valid resources arrived for wanted names: ``(name, raw, value, version, ttl)`` each.

        This is the per-resource hot path of every response, hence one loop with locals, and
        events built through their slots (`_events.resource_changed`, inlined: compiled, no
        Python frame per event).
        """
        entries = self.entries
        type_url = self.type_url
        deadlines = self.deadlines
        unsent = self._unsent
        append = events.append
        set_type_url, set_name, set_value, set_version = CHANGED_SETTERS
        # Boxed once: compiled, ``now`` is a C double, and storing it would make a float
        # object per entry (28 bytes for each resource of the response, kept in the cache).
        stamp: Any = now
        for name, raw, value, version, ttl in items:
            entry = entries.get(name)
            if entry is None:
                entry = entries[name] = CacheEntry()
            old = entry.status
            if old is _REQUESTED:
                deadlines.cancel((DNE, type_url, name))
                unsent.discard(name)
            entry.status = _AFTER_VALID[old]
            entry.version = version
            if entry.error is not None:
                entry.error = None
                entry.error_at = None
            if entry.raw != raw or not old.holds_value:
                entry.raw = raw
                entry.value = value
                entry.updated_at = stamp
                event = _new(_CHANGED)
                set_type_url(event, type_url)
                set_name(event, name)
                set_value(event, value)
                set_version(event, version)
                append(event)
            if ttl is not None:
                entry.expires_at = when = now + ttl
                deadlines.arm((TTL, type_url, name), when)
            elif entry.expires_at is not None:
                deadlines.cancel((TTL, type_url, name))
                entry.expires_at = None

    def apply_error(
        self, name: str, cause: Input, error: XdsError, now: float, events: list[Event]
    ) -> None:
        """Anything but a valid update happened to a wanted name: look up the transition."""
        entry = self.entries.get(name)
        if entry is None:
            entry = self.entries[name] = CacheEntry()
        old = entry.status
        new = next_status(old, cause)
        if old is _REQUESTED:
            self.deadlines.cancel((DNE, self.type_url, name))
            self._unsent.discard(name)
        previous = entry.error
        entry.status = new
        entry.error = error
        entry.error_at = now
        holds_value = new.holds_value
        if not holds_value:
            entry.value = None
            entry.raw = None
            entry.version = None
            if entry.expires_at is not None:
                self.deadlines.cancel((TTL, self.type_url, name))
                entry.expires_at = None
        if old is not new or previous is None or str(previous) != str(error):
            kind = AmbientError if holds_value else DataError
            events.append(kind(type_url=self.type_url, name=name, error=error))
        if not holds_value and name not in self.names:
            # Received only through the wildcard and now gone: keep nothing unrequested.
            self._forget(name)

    def apply_deletion(self, name: str, now: float, events: list[Event], version: str = "") -> None:
        """The server said ``name`` does not exist (or deleted it), in the response at
        ``version`` when there is one."""
        entry = self.entries.get(name)
        if (
            entry is not None
            and entry.status is _IGNORED_DELETION
            and isinstance(entry.error, ResourceDoesNotExistError)
        ):
            return  # still absent: the deletion (and the version that made it) stands
        how = f"deleted by the server in version {version}" if version else "removed by the server"
        if self.options.ignore_resource_deletion and entry is not None and entry.status.holds_value:
            cause = Input.DELETION_IGNORED
            message = f"does not exist: {how}; the cached value is kept (ignore_resource_deletion)"
        else:
            cause, message = Input.DELETED, f"does not exist: {how}"
        error = ResourceDoesNotExistError(self.type_url, name, message, version=version)
        self.apply_error(name, cause, error, now, events)

    def refresh_ttl(self, name: str, version: str, ttl: float | None, now: float) -> bool:
        """A heartbeat: a body-less resource with the cached version refreshes (or clears) its TTL.

        Returns False when it is not a heartbeat (nothing cached at that version).
        """
        entry = self.entries.get(name)
        if entry is None or not entry.status.holds_value or entry.version != version:
            return False
        if ttl is None:
            self.deadlines.cancel((TTL, self.type_url, name))
            entry.expires_at = None
        else:
            entry.expires_at = now + ttl
            self.deadlines.arm((TTL, self.type_url, name), entry.expires_at)
        return True

    def classifier(self) -> Classifier:
        """A classify step for one response of this type."""
        rtype = self.rtype
        return Classifier(
            self.type_url,
            rtype.decode,
            self.entries,
            self.options.max_name_length,
            rtype.decode_is_pure,
        )

    def apply_classified(
        self,
        classified: Classifier,
        keys: Callable[[str], Iterable[str]],
        now: float,
        events: list[Event],
    ) -> None:
        """Apply what the classify step found; ``keys(name)`` are the cache entries a named
        resource of the response updates (none when nobody wants it)."""
        self.last_classified = classified
        self.last_unnamed = len(classified.errors)
        self.apply_valid(classified.valid, now, events)
        for name, version, ttl in classified.bodiless:
            for key in keys(name):
                if not self.refresh_ttl(key, version, ttl, now):
                    self.remove(key, now, events)
        errors = classified.errors
        for name, reason in classified.invalid.items():
            version = classified.versions.get(name, classified.version)
            error = ResourceValidationError(self.type_url, name, reason, version=version)
            errors.append(str(error))
            for key in keys(name):
                self.apply_error(key, Input.INVALID, error, now, events)

    def remove(self, key: str, now: float, events: list[Event]) -> None:
        """The server deleted ``key`` (a body-less resource that is not a heartbeat, or a
        Delta removal)."""
        self.apply_deletion(key, now, events)

    def answer(self, nonce: str, errors: list[str], version: str) -> None:
        """Queue the ACK (``version``) or, with ``errors``, the NACK of one response."""
        if errors:
            message = nack_message(errors, self.options.max_nack_message_length)
            self.pending_acks.append(Ack(nonce, self.accepted_version(), message))
        else:
            self.pending_acks.append(Ack(nonce, version, None))

    def reject(self, nonce: str, reason: str) -> None:
        """NACK a whole response without applying any of it."""
        self.pending_acks.append(Ack(nonce, self.accepted_version(), reason))

    def accepted_version(self) -> str:
        """The version a NACK carries (SotW); Delta has none."""
        return ""

    def apply_server_errors(
        self, resource_errors: Any, now: float, events: list[Event]
    ) -> set[str]:
        """``resource_errors`` of a response (gRFC A88); returns the names they covered. Each
        error carries the response's version (SotW), as C-core records it for CSDS."""
        covered: set[str] = set()
        version = self.last_classified.version if self.last_classified is not None else ""
        for item in resource_errors:
            name = key_of(item.resource_name.name, self.type_url)
            if not self.wants(name):
                continue
            covered.add(name)
            status = item.error_detail
            text = clip(status.message, self.options.max_nack_message_length)
            error = ServerResourceError(
                self.type_url, name, text or "error reported by the server", code=status.code
            )
            error.version = version
            cause = Input.DATA_ERROR if error.is_data_error else Input.TRANSIENT_ERROR
            self.apply_error(name, cause, error, now, events)
        return covered

    def expire(self, kind: int, name: str, now: float, events: list[Event]) -> None:
        """A deadline of ours passed."""
        if kind == DNE:
            self.apply_error(name, *self._timer_fired(name), now, events)
        else:
            error = ResourceExpiredError(self.type_url, name, "its TTL expired without a refresh")
            self.apply_error(name, Input.EXPIRED, error, now, events)

    def _timer_fired(self, name: str) -> tuple[Input, XdsError]:
        """What a fired does-not-exist timer means (gRFC A88): the resource does not exist (a
        data error), or, on a server with ``resource_timer_is_transient_failure``, the server
        is slow (a transient error, UNAVAILABLE). The texts follow C-core's."""
        late = f"not received within {self.options.does_not_exist_timeout:g} s of being requested"
        if not self.options.resource_timer_is_transient_failure:
            missing = ResourceTimeoutError(self.type_url, name, f"does not exist: {late}")
            return Input.TIMED_OUT, missing
        what = f'{short_type(self.type_url)} "{name}"'
        text = f"{what}: timeout obtaining resource from the xDS server: {late}"
        return Input.TIMED_OUT_TRANSIENT, TransportError(text, code="UNAVAILABLE")

    # ----------------------------------------------------------------- introspection

    def state(self, name: str) -> ResourceState | None:
        entry = self.entries.get(name)
        return None if entry is None else entry.snapshot(self.type_url, name)


def short_type(type_url: str) -> str:
    """The message name of a type URL, as error texts name it."""
    return type_url.rsplit(".", 1)[-1]


def nack_message(errors: list[str], limit: int) -> str:
    """Join per-resource errors into one NACK message of at most ``limit`` characters."""
    message = "; ".join(errors)
    if len(message) <= limit:
        return message
    suffix = f" ... ({len(errors)} errors in all)"
    return (message[: max(0, limit - len(suffix))] + suffix)[:limit]


def duration_seconds(duration: Any) -> float:
    """A ``google.protobuf.Duration`` in seconds."""
    seconds: float = duration.seconds + duration.nanos / 1e9
    return seconds


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying so."""
    suffix = " ... (clipped)"
    return text if len(text) <= limit else (text[: max(0, limit - len(suffix))] + suffix)[:limit]
