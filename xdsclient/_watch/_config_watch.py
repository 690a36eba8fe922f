"""Configuration watches: the dependency walk kept up to date against the cache.

Why separate from the walk: `walk` is pure; this is the small stateful part around it. It keeps
one resource watch per resource the walk needs (so the client subscribes to exactly those, and
drops what is no longer reachable), re-walks once per batch of cache changes (scheduled after the
batch, so a CDS update adding 100 clusters subscribes their endpoints in one request), and
publishes a snapshot only when it is complete and differs from the last one.

It needs three things, named by `WatchRegistry`: add watchers (a walk adds thousands at once),
read the cache, start an owned task. The client's `Registry` (`_registry.py`) provides them, so
a response reaches a snapshot through the dispatcher, this watch and the registry's cache, never
through the client (and tests give a small registry of their own).

Errors (gRFCs A57, A74): a needed resource with no usable value and an error (deleted, invalid,
timed out, or unreachable server) makes the walk publish that error; an error that leaves the
cached values usable reaches the consumer as that `AmbientError`, and the last snapshot stands.
Dynamic clusters (`resolve_cluster`, `subscribe_cluster`; gRFC A74's cluster subscriptions): a
data plane asks at request time for a cluster no route walked ahead names; once resolved it is
walked with the rest, without ever withholding a snapshot (`_dynamic_clusters`).

An ambient error is handled with the rest of its batch (the events delivered before the re-walk
runs): it comes after the snapshot that batch produced, since a failed reconnect yields both at
once, unless its own resource changed after it in the batch; a later snapshot drops it if unread.

A state change is reported once: an ambient error equal to the last one delivered (the same
resource, error type and text) is not delivered again, so a server that stays unreachable is
one warning, not one per backoff cycle. A new snapshot, or any change of that resource, makes
the next one news again. (A recovery that changes nothing reaches the watch as no event at all,
so the same failure right after such a recovery stays quiet until something changes.)
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any, Protocol, TypeAlias

from .._errors import XdsError
from .._protocol import AmbientError, DataError, Event, ResourceChanged
from .._runtime._gc import gc_paused
from ..resources import ENDPOINT
from ._dependencies import Resolved, XdsConfig, endpoint_users, rewalk_endpoints, walk
from ._dynamic_clusters import ClusterSubscription, DynamicClusters, OnDemand
from ._resolve import Outcome
from ._watchers import (
    BatchFeeder,
    ResourceWatcher,
    WatchHandle,
    await_user_code,
    cancelled_by_caller,
    warn_never_cancelled,
)

__all__ = ["ConfigUpdate", "ConfigWatch", "WatchRegistry"]

logger = logging.getLogger("xdsclient.watchers")

#: What a configuration watch yields: a complete snapshot, why there is none, or a warning
#: that leaves the last snapshot in use.
ConfigUpdate: TypeAlias = XdsConfig | XdsError | AmbientError


class WatchRegistry(Protocol):
    """What a configuration watch needs: the client's `Registry` (or a test's own)."""

    def add_watchers(
        self, type_url: str, names: Sequence[str], watcher: ResourceWatcher
    ) -> list[WatchHandle]:
        """Watch every name of one type (a walk adds thousands at once); a handle per name."""
        ...

    def resource_state(self, type_url: str, name: str) -> Resolved | None:
        """The walk's lookup: what the cache holds for a name from a resource, or the unusable
        state of one that cannot be fetched (never an exception)."""
        ...

    def resource_lookup(self, type_url: str) -> Callable[[str], Resolved | None]:
        """`resource_state` for one type (name -> state), asked once per type per walk."""
        ...

    def resource_states(self, type_url: str, names: list[str]) -> list[Resolved | None]:
        """`resource_state` of each of ``names`` of one type, in order (a walk's thousands of
        clusters and assignments)."""
        ...

    def start_task(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]: ...


def _same(a: XdsConfig | XdsError | None, b: XdsConfig | XdsError | None) -> bool:
    if isinstance(a, XdsError) or isinstance(b, XdsError):
        return type(a) is type(b) and str(a) == str(b)
    return a == b


class _Feeder(BatchFeeder):
    """The resource watcher behind a config watch (held weakly, like `Watch`'s): a batch's
    events in one call (a CDS response of N clusters is one call, and one walk after it)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: ConfigWatch) -> None:
        self._owner = weakref.ref(owner)

    def on_batch(self, events: list[Event]) -> None:
        owner = self._owner()
        if owner is not None:
            owner._events(events)


class ConfigWatch:
    """Complete configuration snapshots for one listener, as an async iterator.

    Yields `XdsConfig`; an `XdsError` when the listener or its routes are unusable; an
    `AmbientError` when something failed that leaves the last snapshot usable. Only the latest
    snapshot (and the latest ambient error after it) waits for a slow consumer. Leaving
    ``async with`` or `cancel` ends it and its subscriptions, as does closing the client; a watch
    dropped without either is cancelled with a `ResourceWarning`. A data plane resolves the
    clusters of routes that name theirs only per request with `resolve_cluster` (or holds one
    with `subscribe_cluster`); `latest` is the last complete snapshot published.
    """

    def __init__(
        self,
        source: WatchRegistry,
        listener: str,
        authority: str,
        callback: Callable[[ConfigUpdate], Awaitable[None] | None] | None = None,
        *,
        http_rules: bool = False,
        on_demand: OnDemand | None = None,
    ) -> None:
        self._source = source
        self.listener = listener
        self.authority = authority
        #: the virtual host and its routes are chosen as Envoy's HTTP router does
        self.http_rules = http_rules
        self._dynamic: DynamicClusters | None = None
        if on_demand is not None:
            self._dynamic = DynamicClusters(
                on_demand,
                rewalk=self._rewalk_all,
                latest=self._latest,
                start_task=source.start_task,
            )
        #: type URL -> name -> the watch of a resource the last walk needed
        self._handles: dict[str, dict[str, WatchHandle]] = {}
        self._feeder = _Feeder(self)
        self._published: XdsConfig | XdsError | None = None
        self._snapshot: XdsConfig | XdsError | None = None  # waiting for the consumer
        self._warning: AmbientError | None = None  # waiting for the consumer, after it
        self._batch_warning: AmbientError | None = None  # of the batch the next walk follows
        #: the last ambient error delivered, as `_warning_key` has it; None once stale
        self._warned: tuple[str, str, type, str] | None = None
        #: the last walk's complete snapshot, and which of its clusters use each assignment
        self._last: XdsConfig | None = None
        self._users: dict[str, list[str]] | None = None
        #: endpoint names changed since the last walk; None: something else changed too
        self._changed_endpoints: set[str] | None = set()
        self._ready = asyncio.Event()
        self._scheduled = False
        self._cancelled = False
        self._task: asyncio.Task[None] | None = None
        try:
            self._walk()
            if callback is not None:
                self._task = source.start_task(
                    _run_callback(self, callback),
                    name=f"xdsclient config watcher {listener}",
                )
        except BaseException:
            self.cancel()  # drop what the walk subscribed; a watch that never was needs no warning
            raise

    @property
    def cancelled(self) -> bool:
        """Whether `cancel` was called (leaving ``async with`` calls it)."""
        return self._cancelled

    def cancel(self) -> None:
        """Stop: drop every subscription this watch holds; iteration ends at once, dropping
        what was waiting; the callback form's task is cancelled. Idempotent."""
        if self._cancelled:
            return
        self._cancelled = True
        by_type, self._handles = list(self._handles.values()), {}
        for handles in by_type:
            for handle in handles.values():
                handle.cancel()
        if self._task is not None:
            self._task.cancel()
        if self._dynamic is not None:
            self._dynamic.cancel()
        self._snapshot = self._warning = None
        self._ready.set()

    # ------------------------------------------------------------------ dynamic clusters

    def subscribe_cluster(self, name: str) -> ClusterSubscription:
        """Hold the cluster ``name`` in this watch's snapshots (gRFC A74's cluster
        subscription), for a cluster no route walked ahead names: a ``cluster_header`` route's,
        or one Envoy's on-demand filter covers (`XdsConfig.on_demand_timeout`). Call
        `ClusterSubscription.resolve` to have it; `release` it (or leave ``with``) when done:
        it leaves the snapshots ``on_demand_grace`` seconds later unless held again."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a cluster name must be a non-empty string, not {name!r}")
        if self._dynamic is None:
            raise XdsError("this configuration watch has no on-demand resolver")
        if self._cancelled:
            raise XdsError("this configuration watch was cancelled")
        return self._dynamic.subscribe(name)

    async def resolve_cluster(self, name: str, *, timeout: float = 5.0) -> Outcome:
        """Resolve the cluster ``name`` at request time, as Envoy's on-demand CDS does:
        `Available` once a snapshot this watch published holds it in ``clusters`` (with its
        endpoints: the data plane can pick in it), `Missing` when the server said it does not
        exist, `TimedOut` when neither within ``timeout`` seconds of the client's clock. Held
        while it waits, then released (`subscribe_cluster` holds it longer); a name in the
        last snapshot is answered at once. Concurrent resolves share one subscription and
        are batched as `XdsClient.resolve`'s are (docs/on-demand.md). A name no cluster can
        have is `Missing`. Raises `ValueError` for a bad timeout or an empty name, `XdsError`
        once the watch was cancelled (closing the client cancels it), `ClientClosedError` if
        the client closes while the server's answer is awaited."""
        if not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        with self.subscribe_cluster(name) as subscription:
            return await subscription.resolve(timeout=float(timeout))

    @property
    def latest(self) -> XdsConfig | None:
        """The latest complete snapshot this watch published (None before the first, or
        while the listener or its routes are unusable)."""
        return self._latest()

    def _latest(self) -> XdsConfig | None:
        published = self._published
        return published if isinstance(published, XdsConfig) else None

    def _rewalk_all(self) -> None:
        """Dynamic clusters changed: a full walk (they change what is needed)."""
        self._changed_endpoints = None
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and not self._cancelled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._walk)

    def _walk(self) -> None:
        """Re-walk after a batch: subscribe to what is needed, publish a new complete snapshot,
        then the batch's latest ambient error (it is about the snapshot the batch led to)."""
        with gc_paused():  # a walk of N clusters allocates an entry per cluster
            self._walk_batch()

    def _walk_batch(self) -> None:
        self._scheduled = False
        warning, self._batch_warning = self._batch_warning, None
        changed, self._changed_endpoints = self._changed_endpoints, set()
        if self._cancelled:
            return
        config: XdsConfig | XdsError | None = None
        if changed is not None:
            config = self._rewalk(changed)
        if config is None:
            config = self._full_walk()
        if config is not None and not _same(config, self._published):
            self._published = self._snapshot = config
            self._warning = self._warned = (
                None  # older warnings were about the snapshot it replaces
            )
            self._ready.set()
        if self._dynamic is not None and isinstance(config, XdsConfig):
            self._dynamic.published(config)
        if warning is None or self._published is None:  # no snapshot: nothing to warn of
            return
        key = _warning_key(warning)
        if key != self._warned:  # the same again (a retry failing alike) is no news
            self._warning, self._warned = warning, key
            self._ready.set()

    def _full_walk(self) -> XdsConfig | XdsError | None:
        """Walk from the listener; subscribe to what it needs, drop what it no longer does."""
        dynamic = () if self._dynamic is None else self._dynamic.names
        result = walk(
            self.listener,
            self.authority,
            self._source.resource_state,
            self._last,
            http_rules=self.http_rules,
            dynamic=dynamic,
            by_type=self._source.resource_lookup,
            by_names=self._source.resource_states,
        )
        self._watch(result.needed)
        config = result.config
        self._last = config if isinstance(config, XdsConfig) else None
        self._users = None
        return config

    def _watch(self, needed: Mapping[str, frozenset[str]]) -> None:
        """Hold a watch on each name ``needed`` (type URL -> names) and on no other: the new
        ones added in one call per type, in order, then the ones no longer needed dropped.
        Names are compared per type, as strings (a string caches its hash; a pair does not)."""
        handles = self._handles
        for type_url in sorted(needed):
            held = handles.setdefault(type_url, {})
            new = sorted(needed[type_url] - held.keys())
            if new:
                added = self._source.add_watchers(type_url, new, self._feeder)
                held.update(zip(new, added, strict=True))
        for type_url in sorted(handles):
            held = handles[type_url]
            for name in sorted(held.keys() - needed.get(type_url, frozenset())):
                held.pop(name).cancel()
            if not held:
                del handles[type_url]

    def _rewalk(self, changed: set[str]) -> XdsConfig | None:
        """The last snapshot with only the ``changed`` endpoint assignments redone (what
        needs watching cannot change); None when a full walk is needed."""
        last = self._last
        if last is None:
            return None
        if self._users is None:
            self._users = endpoint_users(last)
        config = rewalk_endpoints(last, changed, self._source.resource_state, self._users)
        if config is not None:
            self._last = config
        return config

    def _events(self, events: list[Event]) -> None:
        """A batch's events, in order: the endpoint assignments among them are noted for the
        re-walk; one walk follows. A batch without an ambient error while no warning is held
        (a response's) is read per batch, in C: its names, or that it is not only endpoints."""
        endpoint = ENDPOINT.type_url
        if (
            self._batch_warning is None
            and self._warned is None
            and not any(map(isinstance, events, repeat(AmbientError)))
        ):
            changed = self._changed_endpoints
            if changed is not None:
                if all(map(endpoint.__eq__, map(_type_url, events))):
                    changed.update(map(_name, events))
                else:
                    self._changed_endpoints = None
            self._schedule()
            return
        for event in events:
            if isinstance(event, AmbientError):
                self._ambient(event)
            elif self._batch_warning is not None or self._warned is not None:
                self._changed(event)
            elif (changed := self._changed_endpoints) is not None:  # `_changed`, inlined
                if event.type_url == endpoint:
                    changed.add(event.name)
                else:
                    self._changed_endpoints = None
        self._schedule()

    def _changed(self, event: ResourceChanged | DataError) -> None:
        changed = self._changed_endpoints
        if changed is not None:
            if event.type_url == ENDPOINT.type_url:
                changed.add(event.name)
            else:
                self._changed_endpoints = None
        warning = self._batch_warning
        if warning is not None and (warning.type_url, warning.name) == (event.type_url, event.name):
            self._batch_warning = None  # that resource changed since: the warning is stale
        if self._warned is not None and self._warned[:2] == (event.type_url, event.name):
            self._warned = None  # so is the one delivered: the same failure again is news
        self._schedule()

    def _ambient(self, event: AmbientError) -> None:
        """Keep ``event`` for after this batch's walk, whatever its place in the batch."""
        self._batch_warning = event
        self._schedule()

    def __aiter__(self) -> ConfigWatch:
        return self

    async def __anext__(self) -> ConfigUpdate:
        while self._snapshot is None and self._warning is None:
            if self._cancelled:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        if self._snapshot is not None:
            snapshot, self._snapshot = self._snapshot, None
            return snapshot
        assert self._warning is not None
        warning, self._warning = self._warning, None
        return warning

    async def __aenter__(self) -> ConfigWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()

    def __del__(self) -> None:
        if not self._cancelled:
            warn_never_cancelled(self)
            self.cancel()


_type_url = attrgetter("type_url")
_name = attrgetter("name")


def _warning_key(warning: AmbientError) -> tuple[str, str, type, str]:
    """What makes two ambient errors the same news (errors compare by identity)."""
    return (warning.type_url, warning.name, type(warning.error), str(warning.error))


async def _run_callback(
    watch: ConfigWatch, callback: Callable[[ConfigUpdate], Awaitable[None] | None]
) -> None:
    """The callback form: call ``callback`` for each update, in order, on an owned task, until
    the watch is cancelled or the client closes. The callback's coroutine runs as its own task
    (see `await_user_code`), so it cannot hold up the client's close."""
    async for update in watch:
        try:
            outcome = callback(update)
            if inspect.isawaitable(outcome):
                await await_user_code(outcome)
        except asyncio.CancelledError:
            if cancelled_by_caller():
                raise
            logger.exception("xDS config watcher %r raised CancelledError on %r", callback, update)
        except Exception:
            logger.exception("xDS config watcher %r raised on %r", callback, update)
