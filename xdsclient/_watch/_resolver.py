"""The shell of `XdsClient.resolve`: holds, futures and timers around the `ResolveBook`.

Why apart from the book: the book decides (share, queue, release, what an event means); this
part does what it says with the registry (one registration of one shared watcher, "the hold",
per name resolved), the client's clock (each resolve's timeout while it waits; one task for
every grace period, sleeping until the book's earliest release) and futures (kept only while a
resolve waits). Everything sleeps on the client's `Clock`, so a `FakeClock` drives timeouts and
grace periods in tests.

VHDS's table rule (Envoy's): when a route configuration changes, the virtual hosts held for it
are cleared and must be sent again. The resolver watches the route configuration of every
virtual host it holds; on a change it forgets what those holds knew, and while any is stale it
observes the verdicts on each response (``add_observer``), because the server's copy may be
byte-equal to the cached one, which the cache does not announce again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .._errors import ClientClosedError
from .._names import WILDCARD
from .._protocol import DataError, Event, ResourceChanged
from .._runtime._clock import Clock
from ..resources import ROUTE_CONFIGURATION, VIRTUAL_HOST
from ..resources._virtual_host import split_vhds_name
from ._registry import Registry
from ._resolve import OUTCOME_NAMES, Ask, Key, Outcome, ResolveBook, TimedOut
from ._watchers import CallbackWatcher, WatchHandle

__all__ = ["Resolver"]


class Resolver:
    """Resolves names on demand for one client (`XdsClient.resolve`)."""

    def __init__(
        self,
        registry: Registry,
        clock: Clock,
        *,
        grace: float,
        add_observer: Callable[[Callable[[Any], None]], Callable[[], None]],
    ) -> None:
        self._registry = registry
        self._add_observer = add_observer
        self._stop_observing: Callable[[], None] | None = None
        #: route configuration -> (the watch of it, the virtual hosts held for it)
        self._tables: dict[str, tuple[WatchHandle, set[str]]] = {}
        self._clock = clock
        self.book = ResolveBook(grace=grace)
        #: `ConfigWatch.resolve_cluster` calls finished, by outcome (as ``book.counts``)
        self.cluster_counts: dict[str, int] = {"available": 0, "missing": 0, "timed_out": 0}
        self._holds: dict[str, dict[str, WatchHandle]] = {}  # type URL -> name -> hold
        self._grace_task: asyncio.Task[None] | None = None  # sleeping until the next release
        self._waiters: dict[Key, list[asyncio.Future[Outcome]]] = {}
        self._watcher = CallbackWatcher(self._on_event)

    @property
    def clock(self) -> Clock:
        """The client's clock: every timeout and grace period runs on it."""
        return self._clock

    @property
    def grace(self) -> float:
        """How long a name stays held after its last resolve (``on_demand_grace``)."""
        return self.book.grace

    async def resolve_name(self, type_url: str, name: str, timeout: float) -> Outcome:
        """`resolve` for a name a data plane was given (a request header's, say): made a
        cache key first (a name that cannot be one raises ValueError)."""
        key = self._registry.name(type_url, name)
        if key == WILDCARD:
            raise ValueError("'*' names every resource, not one")
        self._registry.check_open()
        return await self.resolve(type_url, key, timeout)

    def count_cluster(self, outcome: Outcome) -> None:
        """Count a finished `ConfigWatch.resolve_cluster` by its outcome."""
        self.cluster_counts[OUTCOME_NAMES[type(outcome)]] += 1

    async def resolve(self, type_url: str, name: str, timeout: float) -> Outcome:
        """The outcome for ``name`` (a cache key of ``type_url``) within ``timeout``."""
        key = (type_url, name)
        cached = self._registry.cache.entry(type_url, name) is not None
        ask = self.book.ask(type_url, name, cached=cached)
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        if ask is Ask.ANSWER:
            known = self.book.known(type_url, name)
            assert known is not None
            future.set_result(known)
        else:
            self._waiters.setdefault(key, []).append(future)
            if ask is Ask.HOLD:
                self._hold(type_url, [name])
        timer = None
        if not future.done():
            deadline = self._clock.time() + timeout
            timer = asyncio.ensure_future(self._expire(key, future, deadline, timeout))
        try:
            outcome = await future
        except asyncio.CancelledError:  # the caller gave up: as a timeout, but not counted
            if self.book.gave_up(type_url, name, self._clock.time()) is not None:
                self._answered(key)
                self._schedule_release()
            raise
        finally:
            if timer is not None:
                timer.cancel()
            self._forget(key, future)
        if self.book.finished(type_url, name, outcome, self._clock.time()) is not None:
            self._schedule_release()
        return outcome

    def _forget(self, key: Key, future: asyncio.Future[Outcome]) -> None:
        """A resolve ended: its future is no longer kept (nor its name's list, once empty)."""
        waiting = self._waiters.get(key)
        if waiting is None:
            return
        if future in waiting:
            waiting.remove(future)
        if not waiting:
            del self._waiters[key]

    def _hold(self, type_url: str, names: list[str]) -> None:
        """Hold each of ``names``, in one synchronous step: their subscriptions go out in one
        request."""
        holds = self._holds.get(type_url)
        if holds is None:
            holds = self._holds[type_url] = {}
        for name in names:
            holds[name] = self._registry.add_watcher(type_url, name, self._watcher, self._closed)
            if type_url == VIRTUAL_HOST.type_url:
                self._table_of(name).add(name)

    def _table_of(self, name: str) -> set[str]:
        """The virtual hosts held for the route configuration of ``name`` (watched from now)."""
        route_config = split_vhds_name(name)[0]
        table = self._tables.get(route_config)
        if table is None:
            versions: list[str] = []

            def changed(event: Event) -> None:
                if isinstance(event, ResourceChanged):
                    if versions:
                        self._clear(route_config)
                    versions.append(event.version)

            handle = self._registry.add_watcher(
                ROUTE_CONFIGURATION.type_url, route_config, CallbackWatcher(changed)
            )
            table = self._tables[route_config] = (handle, set())
        return table[1]

    def _clear(self, route_config: str) -> None:
        """The route configuration changed: its virtual hosts must be sent again."""
        names = list(self._tables[route_config][1])
        self.book.stale(VIRTUAL_HOST.type_url, names)
        if names and self._stop_observing is None:
            self._stop_observing = self._add_observer(self._verdict)

    def _verdict(self, event: Any) -> None:
        """A protocol event, while virtual hosts are stale: a valid one for a stale name
        answers its waiters with the cached value (the copy was sent again)."""
        if getattr(event, "type_url", None) != VIRTUAL_HOST.type_url or not getattr(
            event, "valid", False
        ):
            return
        entry = self._registry.cache.entry(event.type_url, event.name)
        if entry is None or entry.value is None:
            return
        key = (event.type_url, event.name)
        outcome = self.book.fresh(*key, entry.value)
        if outcome is not None:
            for future in self._waiters.pop(key, []):
                if not future.done():
                    future.set_result(outcome)
        if self._stop_observing is not None and all(
            self.book.known(VIRTUAL_HOST.type_url, name) is not None
            for name in self.book.held(VIRTUAL_HOST.type_url)
        ):
            self._stop_observing()
            self._stop_observing = None

    def _closed(self) -> None:
        """The client closed: every waiting resolve raises `ClientClosedError`."""
        for futures in self._waiters.values():
            for future in futures:
                if not future.done():
                    future.set_exception(ClientClosedError("the XdsClient closed while resolving"))
        self._waiters.clear()

    def _on_event(self, event: Event) -> None:
        if not isinstance(event, ResourceChanged | DataError):
            return
        key = (event.type_url, event.name)
        outcome = self.book.event(*key, event)
        if outcome is None:
            return
        for future in self._waiters.pop(key, []):
            if not future.done():
                future.set_result(outcome)
        self._answered(key)

    def _answered(self, key: Key) -> None:
        queued = self.book.answered(*key)
        if queued:
            self._hold(key[0], queued)

    async def _expire(
        self, key: Key, future: asyncio.Future[Outcome], deadline: float, timeout: float
    ) -> None:
        await self._clock.sleep_until(deadline)
        if not future.done():
            future.set_result(TimedOut(timeout=timeout))
            self._answered(key)

    def _schedule_release(self) -> None:
        """A grace period started: make sure the one grace task runs. It need not be woken
        earlier: the book's releases come in time order, so the new one is not the first."""
        if self._grace_task is None:
            self._grace_task = self._registry.start_task(
                self._release_due(), name="xdsclient-resolve-grace"
            )

    async def _release_due(self) -> None:
        """Sleep until the book's earliest release, release what is due, until none is left."""
        try:
            while (when := self.book.next_release()) is not None:
                await self._clock.sleep_until(when)
                for type_url, name in self.book.due(self._clock.time()):
                    self._release(type_url, name)
        finally:
            self._grace_task = None

    def _release(self, type_url: str, name: str) -> None:
        holds = self._holds.get(type_url)
        handle = None if holds is None else holds.pop(name, None)
        if handle is not None:
            handle.cancel()
        if type_url == VIRTUAL_HOST.type_url:
            self._drop_from_table(name)

    def _drop_from_table(self, name: str) -> None:
        route_config = split_vhds_name(name)[0]
        table = self._tables.get(route_config)
        if table is None:
            return
        table[1].discard(name)
        if not table[1]:
            del self._tables[route_config]
            table[0].cancel()

    def held(self) -> dict[Key, Any]:
        """The names held now, each with what its hold knows (for tests and dumps)."""
        return {
            (type_url, name): self.book.known(type_url, name)
            for type_url, holds in self._holds.items()
            for name in holds
        }
