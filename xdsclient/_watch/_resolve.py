"""On-demand resolution: the outcomes of `XdsClient.resolve` and the bookkeeping behind them.

Why a sans-I/O part: which resolve shares which subscription, which names wait for the first
on-demand request of their type to be answered, and when a resolved name is released are
decisions about counts and times, made synchronously with ``now`` passed in; the shell
(`_resolver`) only registers watchers, sets futures and sleeps on the client's clock.

The rules (Envoy's on-demand CDS, docs/on-demand.md):
- The outcome of a resolve is `Available` (the server sent a valid value), `Missing` (the
  server said the name does not exist: a Delta ``removed_resources`` or a resource with no
  body, a SotW full-state response without it, or gRFC A57's does-not-exist timer) or
  `TimedOut` (none of those within the caller's timeout). An invalid value (NACKed) is not an
  outcome: a later one may be valid.
- Concurrent resolves of one name share one subscription (one hold per name).
- While the first on-demand request of a type is unanswered, names newly asked of that type
  wait and go out together in the next request once it is answered (or its resolve timed
  out); after that each name is subscribed when asked.
- A name stays subscribed while a resolve waits for it, and for ``grace`` seconds after the
  last one finished; then its hold is released (the subscription itself stays while anything
  else watches the name). A resolve in the grace period is answered from the hold at once.
- A name marked stale (its virtual host table was cleared) is not answered from the hold: the
  resolve waits for the server to send it again.
"""

from __future__ import annotations

import collections
import enum
from typing import Any, TypeAlias

import attrs

from .._errors import ResourceDoesNotExistError
from .._protocol import DataError, Event, ResourceChanged

__all__ = [
    "OUTCOME_NAMES",
    "Ask",
    "Available",
    "Missing",
    "Outcome",
    "ResolveBook",
    "TimedOut",
    "outcome_of",
]


@attrs.frozen(kw_only=True)
class Available:
    """The server sent a valid value: ``view`` (the resource type's decoded value)."""

    view: Any = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class Missing:
    """The server said the resource does not exist; ``error`` says how (a removal, a resource
    with no body, a full-state response without it, or the does-not-exist timer)."""

    error: ResourceDoesNotExistError = attrs.field(eq=False)


@attrs.frozen(kw_only=True)
class TimedOut:
    """Neither a value nor a verdict of absence arrived within ``timeout`` seconds."""

    timeout: float


#: What `XdsClient.resolve` returns.
Outcome: TypeAlias = Available | Missing | TimedOut


def outcome_of(event: Event) -> Available | Missing | None:
    """The outcome an event settles, or None when it settles nothing (an invalid value, a
    server's transient error, an ambient error)."""
    if isinstance(event, ResourceChanged):
        return Available(view=event.value)
    if isinstance(event, DataError) and isinstance(event.error, ResourceDoesNotExistError):
        return Missing(error=event.error)
    return None


class Ask(enum.Enum):
    """What the shell does for a new resolve (`ResolveBook.ask`)."""

    ANSWER = "answer"  # the hold knows the outcome: answer at once (`ResolveBook.known`)
    HOLD = "hold"  # register the hold now: the name is subscribed in the next request
    QUEUE = "queue"  # wait: the first request of the type is unanswered (`ResolveBook.ready`)
    JOIN = "join"  # a hold (or a queued one) exists: wait for its outcome


class _Phase(enum.Enum):
    NOT_STARTED = "not started"  # no on-demand request of the type yet
    AWAITING = "awaiting"  # the first one is out, unanswered: new names queue
    DONE = "done"  # answered: each name is subscribed when asked


@attrs.define
class _Entry:
    waiters: int = 0
    held: bool = False  # the shell holds a watcher of the name
    known: Available | Missing | None = None  # the hold's latest outcome
    release_at: float | None = None  # no waiter since; released then


Key: TypeAlias = tuple[str, str]  # (type URL, name)


class ResolveBook:
    """Every name being resolved or held, per client (see the module's rules).

    Memory: an entry per name in a table per type (no key tuple per name), and the grace
    periods in one queue (three parallel deques: release time, type URL, name) rather than a
    timer per name. The queue is in time order because every release is ``now + grace`` on a
    monotonic clock; a record whose entry was asked again (and so re-armed later, or dropped)
    is skipped when it comes up.
    """

    def __init__(self, *, grace: float) -> None:
        self.grace = grace
        self._entries: dict[str, dict[str, _Entry]] = {}  # type URL -> name -> entry
        self._phase: dict[str, _Phase] = {}
        self._first: dict[str, str] = {}  # type URL -> the name of its first request
        self._queued: dict[str, list[str]] = {}
        self._release_times: collections.deque[float] = collections.deque()
        self._release_types: collections.deque[str] = collections.deque()
        self._release_names: collections.deque[str] = collections.deque()
        #: resolves finished, by outcome (``available``, ``missing``, ``timed_out``)
        self.counts: dict[str, int] = {"available": 0, "missing": 0, "timed_out": 0}

    def _entry(self, type_url: str, name: str) -> _Entry | None:
        table = self._entries.get(type_url)
        return None if table is None else table.get(name)

    def ask(self, type_url: str, name: str, *, cached: bool) -> Ask:
        """A resolve of ``name`` starts. ``cached``: the cache already holds a value or a
        verdict for it (someone else watches it), so it needs no request of its own."""
        table = self._entries.get(type_url)
        if table is None:
            table = self._entries[type_url] = {}
        entry = table.get(name)
        if entry is None:
            entry = table[name] = _Entry()
        entry.waiters += 1
        entry.release_at = None
        if entry.known is not None:
            return Ask.ANSWER
        if entry.held or name in self._queued.get(type_url, ()):
            return Ask.JOIN
        phase = self._phase.get(type_url, _Phase.NOT_STARTED)
        if phase is _Phase.AWAITING and not cached:
            self._queued.setdefault(type_url, []).append(name)
            return Ask.QUEUE
        if phase is _Phase.NOT_STARTED and not cached:
            self._phase[type_url] = _Phase.AWAITING
            self._first[type_url] = name
        entry.held = True
        return Ask.HOLD

    def known(self, type_url: str, name: str) -> Available | Missing | None:
        """The hold's latest outcome for ``name``."""
        entry = self._entry(type_url, name)
        return None if entry is None else entry.known

    def event(self, type_url: str, name: str, event: Event) -> Available | Missing | None:
        """The hold of ``name`` received ``event``: the outcome to give its waiters, if any."""
        entry = self._entry(type_url, name)
        if entry is None or not entry.held:
            return None
        outcome = outcome_of(event)
        if outcome is None:
            if isinstance(event, DataError):
                entry.known = None  # no usable value: not an outcome, but not Available
            return None
        entry.known = outcome
        return outcome

    def answered(self, type_url: str, name: str) -> list[str]:
        """``name`` was answered (an outcome, or its resolve timed out). When it was the first
        on-demand request of its type, the names queued meanwhile, to hold now in one
        request; else nothing."""
        if self._first.get(type_url) != name:
            return []
        del self._first[type_url]
        self._phase[type_url] = _Phase.DONE
        queued = self._queued.pop(type_url, [])
        table = self._entries[type_url]
        for queued_name in queued:
            table[queued_name].held = True
        return queued

    def stale(self, type_url: str, names: list[str]) -> None:
        """Forget what the holds of ``names`` knew: they are answered when the server sends
        them again (a virtual host table cleared by a route configuration change)."""
        for name in names:
            entry = self._entry(type_url, name)
            if entry is not None:
                entry.known = None

    def held(self, type_url: str) -> list[str]:
        """The held names of ``type_url``."""
        table = self._entries.get(type_url, {})
        return [name for name, entry in table.items() if entry.held]

    def fresh(self, type_url: str, name: str, view: Any) -> Available | None:
        """The server sent ``name`` again (changed or not) while its hold knew nothing: the
        outcome to give its waiters."""
        entry = self._entry(type_url, name)
        if entry is None or not entry.held or entry.known is not None:
            return None
        entry.known = Available(view=view)
        return entry.known

    def finished(self, type_url: str, name: str, outcome: Outcome, now: float) -> float | None:
        """A resolve of ``name`` returned ``outcome``. Returns when the hold is to be
        released, if this was its last waiter."""
        self.counts[OUTCOME_NAMES[type(outcome)]] += 1
        return self.gave_up(type_url, name, now)

    def gave_up(self, type_url: str, name: str, now: float) -> float | None:
        """A resolve of ``name`` ended with no outcome (its caller cancelled it). Returns when
        the hold is to be released, if this was its last waiter."""
        entry = self._entries[type_url][name]
        entry.waiters -= 1
        if entry.waiters:
            return None
        times = self._release_times
        when = now + self.grace
        if times and when < times[-1]:  # a clock that went back: keep the queue in order
            when = times[-1]
        entry.release_at = when
        times.append(when)
        self._release_types.append(type_url)
        self._release_names.append(name)
        return when

    def next_release(self) -> float | None:
        """When the earliest grace period in the queue ends (None when none is pending): the
        shell sleeps until then and calls `due`."""
        return self._release_times[0] if self._release_times else None

    def due(self, now: float) -> list[Key]:
        """The names whose grace period ended with no waiter since: dropped from the book;
        the shell releases the holds of those it holds."""
        times, types, names = self._release_times, self._release_types, self._release_names
        keys: list[Key] = []
        while times and times[0] <= now:
            times.popleft()
            type_url, name = types.popleft(), names.popleft()
            table = self._entries.get(type_url)
            entry = None if table is None else table.get(name)
            if table is None or entry is None or entry.waiters or entry.release_at is None:
                continue  # asked again since (re-queued when it finishes), or dropped
            if entry.release_at > now:
                continue  # asked again and finished since: a later record stands for it
            del table[name]
            if not entry.held:  # queued and timed out before its turn
                queued = self._queued.get(type_url, [])
                if name in queued:
                    queued.remove(name)
            keys.append((type_url, name))
        return keys

    def __len__(self) -> int:
        return sum(len(table) for table in self._entries.values())


#: the name each outcome is counted under (`ResolveBook.counts`)
OUTCOME_NAMES: dict[type, str] = {Available: "available", Missing: "missing", TimedOut: "timed_out"}
