"""The watch registry: every watcher's registration and every read of the cache, for
`XdsClient.watch` / `add_watcher` / `watch_config` and for the configuration walk alike.

Why a part below the client: a response goes transport -> driver -> session -> cache, and its
events go dispatcher -> watchers -> config watch -> walk, which reads the cache and adds watchers
for what it finds. The walk must do that without climbing back up to the client, so the
registry holds what that path needs and nothing above it: the cache (read side), the dispatcher
(registrations), the checks that make a (type, name) a cache key (canonical names, authorities
the bootstrap configures), the server pool seen as a `Subscriber`, and the task owner config
watches run their callbacks on. The client builds it and delegates; `ConfigWatch` is given it.

Rules:
- One path adds watchers (`_register`), for one name or for a walk's thousands: each name is
  registered with its cached state as its replay (read in the same synchronous step, see
  `_watchers`), and the names to fetch are subscribed in one call per authority.
- Names the caller gives (`add_watcher`, `state`) are checked and a bad one raises. Names from
  resources a server sent (`add_watchers` and `resource_state`, the walk's) never raise: one
  that is malformed, empty, or of an authority the bootstrap does not configure is that
  resource's error (a data error to its watcher, an unusable state to the walk) and is never
  subscribed; so is a name of a type no stream of the client carries.
- The last watcher of a name leaving unsubscribes it, if it was fetchable at all.
- The checks are paid once per type where a walk makes thousands of calls: once an old-style
  name of a type passed them, every old-style name of that type does (`_plain`: what the pool
  can fetch is fixed by the configuration).
"""

from __future__ import annotations

import asyncio
import enum
import weakref
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from itertools import repeat
from typing import Any, Protocol, cast

from .._errors import ClientClosedError, ResourceDoesNotExistError, XdsError
from .._names import OLD_AUTHORITY, WILDCARD, authority_of
from .._protocol import DataError, Event, ResourceCache, ResourceState, ResourceStatus
from .._protocol._cache import CacheEntry
from .._runtime._clock import Clock
from .._runtime._tasks import TaskOwner
from .._xdstp import XDSTP_PREFIX, canonical_name
from ..resources import LISTENER, ResourceType
from ..resources._type import removed_v2_type
from ._config_watch import ConfigUpdate, ConfigWatch
from ._dependencies import Resolved
from ._dynamic_clusters import OnDemand
from ._watchers import Dispatcher, ResourceWatcher, WatchHandle, replay_events

__all__ = ["Registry", "Subscriber", "check_name"]

#: What a lookup reads before a type has a table: nothing.
_NO_TABLE: Mapping[str, CacheEntry] = {}


class Subscriber(Protocol):
    """What the registry needs of the server pool: where names can be fetched, and interest."""

    def knows(self, authority: str, type_url: str | None = None) -> bool:
        """Whether names of ``authority`` (and type) can be fetched; fixed by the configuration."""
        ...

    def check_type(self, type_url: str) -> None:
        """Raise when no stream carries ``type_url``."""
        ...

    def subscribe_all(self, type_url: str, authority_name: str, names: Collection[str]) -> None:
        """Want ``names``, all of ``authority_name``."""
        ...

    def unsubscribe(self, type_url: str, name: str) -> None:
        """No longer want ``name``."""
        ...


class _Phase(enum.Enum):
    NEW = "new"  # built; the client is not started: calls raise RuntimeError
    OPEN = "open"  # the pool is attached: watches and reads work
    CLOSED = "closed"  # calls raise ClientClosedError


#: (phase, input) -> next phase; any other input raises RuntimeError.
_TRANSITIONS = {
    (_Phase.NEW, "open"): _Phase.OPEN,
    (_Phase.NEW, "close"): _Phase.CLOSED,
    (_Phase.OPEN, "close"): _Phase.CLOSED,
    (_Phase.CLOSED, "close"): _Phase.CLOSED,
}


class Registry:
    """Watcher registration and cache lookup for one client (see the module's rules)."""

    def __init__(
        self,
        *,
        types: dict[str, ResourceType[Any]],
        clock: Clock,
        slow_threshold: float,
        tasks: TaskOwner,
    ) -> None:
        self._types = types
        self._tasks = tasks
        #: the read side of every resource (sessions write it; the pool assigns its tables)
        self.cache = ResourceCache()
        #: the registrations and the serializer that calls them
        self.dispatcher = Dispatcher(
            clock=clock, slow_threshold=slow_threshold, on_last_watcher=self._last_watcher_left
        )
        self._subscriber: Subscriber | None = None
        self._phase = _Phase.NEW
        self._open = False  # the phase is OPEN (read on every lookup of a walk)
        #: type URLs whose old-style names pass every check (see the module's rules)
        self._plain: set[str] = set()
        self._config_watches: weakref.WeakSet[ConfigWatch] = weakref.WeakSet()

    # ------------------------------------------------------------------ lifecycle

    def _move(self, event: str) -> None:
        phase = _TRANSITIONS.get((self._phase, event))
        if phase is None:
            raise RuntimeError("an XdsClient starts once")
        self._phase = phase
        self._open = phase is _Phase.OPEN

    @property
    def started(self) -> bool:
        """Whether `open` was called (the client started), closed since or not."""
        return self._subscriber is not None

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._phase is _Phase.CLOSED

    def open(self, subscriber: Subscriber) -> None:
        """Attach the server pool: watches and reads work from now on. Once."""
        self._move("open")
        self._subscriber = subscriber

    def close(self) -> None:
        """End every config watch and every watcher's delivery; later calls raise
        `ClientClosedError`. Idempotent."""
        self._move("close")
        for config_watch in list(self._config_watches):
            config_watch.cancel()
        self.dispatcher.close()

    def check_open(self) -> None:
        """Raise unless open: `ClientClosedError` once closed, `RuntimeError` before."""
        if not self._open:
            if self._phase is _Phase.CLOSED:
                raise ClientClosedError("the XdsClient is closed")
            raise RuntimeError("the XdsClient is not started: use `async with XdsClient(...)`")

    def _open_subscriber(self) -> Subscriber:
        self.check_open()
        assert self._subscriber is not None
        return self._subscriber

    # ------------------------------------------------------------------ names

    def type_url(self, resource_type: ResourceType[Any] | str) -> str:
        """The type URL of a resource type this client knows; raises otherwise."""
        if isinstance(resource_type, ResourceType):
            type_url = resource_type.type_url
        elif isinstance(resource_type, str):
            type_url = resource_type
        else:
            raise TypeError(
                f"resource_type must be a ResourceType or a type URL, not {resource_type!r}"
            )
        if type_url not in self._types:
            raise ValueError(
                removed_v2_type(type_url)
                or f"unknown resource type {type_url}; pass it in XdsClient(resource_types=...)"
            )
        return type_url

    def name(self, type_url: str, name: str) -> str:
        """The cache key of ``name``: itself, or the canonical form of an xdstp:// name (which
        must name a resource of ``type_url``). Raises for a name that is not one."""
        check_name(name)
        if name == WILDCARD:
            return name
        return canonical_name(name, type_url)

    def _unknown_authority(self, type_url: str, name: str) -> DataError | None:
        """A data error for a name whose authority cannot be fetched; None when it can."""
        authority = authority_of(name)
        if self._open_subscriber().knows(authority, type_url):
            if authority == OLD_AUTHORITY:
                self._plain.add(type_url)
            return None
        reason = (
            f"no xDS server is configured and no source serves {type_url}"
            if authority == OLD_AUTHORITY
            else f"the bootstrap does not configure the authority {authority!r}"
        )
        error = ResourceDoesNotExistError(type_url, name, reason)
        return DataError(type_url=type_url, name=name, error=error)

    def _key(self, type_url: str, name: str) -> str | DataError:
        """A name from a resource: its cache key, or the data error that stands for it."""
        try:
            key = self.name(type_url, name)
        except ValueError as exc:  # malformed, of another type, or empty
            error = ResourceDoesNotExistError(type_url, name, str(exc))
            return DataError(type_url=type_url, name=name, error=error)
        return self._unknown_authority(type_url, key) or key

    def _is_plain(self, type_url: str, names: Sequence[str]) -> bool:
        """Whether every name is old-style of a type whose checks passed once."""
        if type_url not in self._plain:
            return False
        # In C, no Python frame per name: a walk passes thousands.
        return all(names) and not any(map(str.startswith, names, repeat(XDSTP_PREFIX)))

    # ------------------------------------------------------------------ registration

    def add_watcher(
        self,
        resource_type: ResourceType[Any] | str,
        name: str,
        watcher: ResourceWatcher,
        on_close: Callable[[], None] | None = None,
    ) -> WatchHandle:
        """Watch one name the caller gave (a bad type or name raises). ``on_close``: told
        when the client closes."""
        type_url = self.type_url(resource_type)
        name = self.name(type_url, name)
        self._open_subscriber().check_type(type_url)
        key = self._unknown_authority(type_url, name) or name
        return self._register(type_url, (key,), _by_authority((key,)), watcher, on_close)[0]

    def add_watchers(
        self, type_url: str, names: Sequence[str], watcher: ResourceWatcher
    ) -> list[WatchHandle]:
        """Watch names from resources (the walk's): a handle per name, in order; a name that
        cannot be fetched is that resource's data error, never an exception."""
        type_url = self.type_url(type_url)
        try:
            self._open_subscriber().check_type(type_url)
        except ValueError as exc:  # no stream carries the type: each name's data error
            errors = [_not_carried(type_url, name, exc) for name in names]
            return self._register(type_url, errors, {}, watcher, None)
        if self._is_plain(type_url, names):  # the common case: no name needs a check
            return self._register_plain(type_url, names, watcher)
        keys = [self._key(type_url, name) for name in names]
        return self._register(type_url, keys, _by_authority(keys), watcher, None)

    def _register_plain(
        self, type_url: str, names: Sequence[str], watcher: ResourceWatcher
    ) -> list[WatchHandle]:
        """`_register` for old-style names of a type whose checks passed (a walk's): only the
        names the type's table holds are asked for a replay (in C, not a call per name)."""
        replay = self._plain_replay(type_url)
        if WILDCARD in names:  # its replay is every cached resource of the type
            return self._register(type_url, names, {OLD_AUTHORITY: names}, watcher, None, replay)
        cached = self.cache.table(OLD_AUTHORITY, type_url) or _NO_TABLE
        handles = self.dispatcher.add_all(type_url, names, watcher, replay, cached)
        self._open_subscriber().subscribe_all(type_url, OLD_AUTHORITY, names)
        return handles

    def _register(
        self,
        type_url: str,
        keys: Sequence[str | DataError],
        fetch: Mapping[str, Sequence[str]],
        watcher: ResourceWatcher,
        on_close: Callable[[], None] | None,
        replay: Callable[[str, str], list[Event]] | None = None,
    ) -> list[WatchHandle]:
        """The one path: register each of ``keys`` (a cache key with its cached state, an
        error with itself), then subscribe ``fetch`` (the keys by authority), one call each.
        ``replay``: `_replay` for these keys (`_plain_replay`: for old-style names)."""
        plain = replay is not None  # keys that are all old-style names
        dispatcher, replay = self.dispatcher, replay or self._replay
        if on_close is None and (plain or all(isinstance(key, str) for key in keys)):
            handles = dispatcher.add_all(type_url, cast("Sequence[str]", keys), watcher, replay)
        else:
            handles = [
                dispatcher.add(type_url, key, watcher, replay(type_url, key), on_close=on_close)
                if isinstance(key, str)
                else dispatcher.add(type_url, key.name, watcher, [key], on_close=on_close)
                for key in keys
            ]
        subscriber = self._open_subscriber()
        for authority, names in fetch.items():
            subscriber.subscribe_all(type_url, authority, names)
        return handles

    def _replay(self, type_url: str, name: str) -> list[Event]:
        """The events that bring a new watcher of ``name`` up to the cache (none for a name
        only requested so far: a walk adding thousands of watchers builds no snapshots)."""
        if name == WILDCARD:
            return [e for state in self.cache.states(type_url) for e in replay_events(state)]
        entry = self.cache.entry(type_url, name)
        if entry is None or (entry.error is None and not entry.status.holds_value):
            return []
        return replay_events(entry.snapshot(type_url, name))

    def _plain_replay(self, type_url: str) -> Callable[[str, str], list[Event]]:
        """`_replay` for old-style names (not the wildcard) of one type: their table is
        looked up once, not once per name (a walk adds thousands, most not cached yet)."""
        table = self.cache.table(OLD_AUTHORITY, type_url)
        get = _NO_TABLE.get if table is None else table.get
        everything = self._replay

        def replay(type_url: str, name: str) -> list[Event]:
            if name == WILDCARD:
                return everything(type_url, name)
            entry = get(name)
            if entry is None or (entry.error is None and not entry.status.holds_value):
                return []
            return replay_events(entry.snapshot(type_url, name))

        return replay

    def _last_watcher_left(self, type_url: str, name: str) -> None:
        """The dispatcher's news that nobody watches ``name`` any more."""
        subscriber = self._subscriber
        if subscriber is not None and subscriber.knows(authority_of(name), type_url):
            try:
                subscriber.check_type(type_url)
            except ValueError:  # never subscribed: no stream carries the type
                return
            subscriber.unsubscribe(type_url, name)

    def watch_config(
        self,
        listener: str,
        authority: str,
        callback: Callable[[ConfigUpdate], Awaitable[None] | None] | None,
        *,
        http_rules: bool = False,
        on_demand: OnDemand | None = None,
    ) -> ConfigWatch:
        """A `ConfigWatch` of the listener resource ``listener`` over this registry, ended by
        `close` if not before; ``http_rules``: the walk follows Envoy's HTTP router;
        ``on_demand``: the client's resolver, for its dynamic clusters."""
        name = self.name(LISTENER.type_url, listener)
        self._open_subscriber().check_type(LISTENER.type_url)
        config_watch = ConfigWatch(
            self, name, authority, callback, http_rules=http_rules, on_demand=on_demand
        )
        self._config_watches.add(config_watch)
        return config_watch

    def start_task(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        """Run ``coro`` on a task the client owns (ended by its close)."""
        if self.closed:
            coro.close()
            raise ClientClosedError("the XdsClient is closed")
        return self._tasks.start(coro, name=name)

    # ------------------------------------------------------------------ lookup

    def state(self, resource_type: ResourceType[Any] | str, name: str) -> ResourceState | None:
        """A snapshot of one resource the caller names (a bad type or name raises)."""
        type_url = self.type_url(resource_type)
        name = self.name(type_url, name)
        self.check_open()
        return self.cache.state(type_url, name)

    def resource_lookup(self, type_url: str) -> Callable[[str], Resolved | None]:
        """`resource_state` for one type, asked once per type per walk (a walk reads thousands
        of names): an old-style name of a type whose checks passed (the first name's, in this
        walk or an earlier one) reads the type's table directly; any other goes through
        `resource_state`."""
        if not self._open:
            self.check_open()
        table = self.cache.table(OLD_AUTHORITY, type_url)
        get = _NO_TABLE.get if table is None else table.get
        plain, slow, prefix = self._plain, self.resource_state, XDSTP_PREFIX

        def lookup(name: str) -> Resolved | None:
            if type_url in plain and name and not name.startswith(prefix):
                return get(name)
            return slow(type_url, name)

        return lookup

    def resource_states(self, type_url: str, names: list[str]) -> list[Resolved | None]:
        """`resource_lookup` of each of ``names``, in order: the type's table read in C (no
        Python call per name) when every name is old-style and the type's checks passed (the
        first name's, here or before)."""
        if not self._open:
            self.check_open()
        head: list[Resolved | None] = []
        if names and type_url not in self._plain:  # the first name checks the type, once
            head, names = [self.resource_state(type_url, names[0])], names[1:]
        if not self._is_plain(type_url, names):
            return head + list(map(self.resource_lookup(type_url), names))
        table = self.cache.table(OLD_AUTHORITY, type_url)
        return head + list(map((_NO_TABLE if table is None else table).get, names))

    def resource_state(self, type_url: str, name: str) -> Resolved | None:
        """The walk's lookup: the cache's live entry (no snapshot copy: a walk reads one per
        resource it needs), or the unusable state of a name that cannot be fetched."""
        if type_url in self._plain and name and not name.startswith(XDSTP_PREFIX):  # checked once
            if not self._open:
                self.check_open()
            table = self.cache.table(OLD_AUTHORITY, type_url)
            return None if table is None else table.get(name)
        type_url = self.type_url(type_url)
        try:
            self._open_subscriber().check_type(type_url)
        except ValueError as exc:
            return _unusable(type_url, name, _not_carried(type_url, name, exc).error)
        key = self._key(type_url, name)
        if not isinstance(key, str):
            return _unusable(type_url, name, key.error)
        self.check_open()
        return self.cache.entry(type_url, key)


def _by_authority(keys: Sequence[str | DataError]) -> dict[str, list[str]]:
    """The cache keys among ``keys`` (errors are never subscribed), by authority."""
    fetch: dict[str, list[str]] = {}
    for key in keys:
        if isinstance(key, str):
            fetch.setdefault(authority_of(key), []).append(key)
    return fetch


def _not_carried(type_url: str, name: str, exc: ValueError) -> DataError:
    """The data error of a name from a resource whose type no stream of the client carries
    (a route configuration's VHDS virtual host on a per-type SotW client)."""
    error = ResourceDoesNotExistError(type_url, name, str(exc))
    return DataError(type_url=type_url, name=name, error=error)


def _unusable(type_url: str, name: str, error: XdsError) -> ResourceState:
    """The state of a resource the client cannot fetch: it does not exist for this client
    (``error`` says why and names the resource; it is kept as it is, never wrapped again)."""
    return ResourceState(
        type_url=type_url,
        name=name,
        status=ResourceStatus.DOES_NOT_EXIST,
        value=None,
        version=None,
        last_updated=None,
        error=error,
        error_time=None,
        expires_at=None,
    )


def check_name(name: object) -> None:
    """Raise `TypeError` or `ValueError` unless ``name`` is a non-empty string."""
    if not isinstance(name, str):
        raise TypeError(f"a resource name is a string, not {name!r}")
    if not name:
        raise ValueError("a resource name cannot be empty")
