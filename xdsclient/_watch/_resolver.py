"""The shell of `XdsClient.resolve`: holds, futures and timers around the `ResolveBook`.

Why apart from the book: the book decides (share, queue, release, what an event means); this
part does what it says with the registry (one watcher, "the hold", per name resolved), the
client's clock (each resolve's timeout, each hold's grace period) and futures. Everything
sleeps on the client's `Clock`, so a `FakeClock` drives timeouts and grace periods in tests.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .._errors import ClientClosedError
from .._protocol import DataError, Event, ResourceChanged
from .._runtime._clock import Clock
from ._registry import Registry
from ._resolve import Ask, Key, Outcome, ResolveBook, TimedOut
from ._watchers import CallbackWatcher, WatchHandle

__all__ = ["Resolver"]


class Resolver:
    """Resolves names on demand for one client (`XdsClient.resolve`)."""

    def __init__(self, registry: Registry, clock: Clock, *, grace: float) -> None:
        self._registry = registry
        self._clock = clock
        self.book = ResolveBook(grace=grace)
        self._holds: dict[Key, WatchHandle] = {}
        self._waiters: dict[Key, list[asyncio.Future[Outcome]]] = {}
        self._watcher = CallbackWatcher(self._on_event)

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
        deadline = self._clock.time() + timeout
        timer = asyncio.ensure_future(self._expire(key, future, deadline, timeout))
        try:
            outcome = await future
        finally:
            timer.cancel()
            waiting = self._waiters.get(key)
            if waiting is not None and future in waiting:
                waiting.remove(future)
        release_at = self.book.finished(type_url, name, outcome, self._clock.time())
        if release_at is not None:
            self._registry.start_task(self._release(release_at), name="xdsclient-resolve-grace")
        return outcome

    def _hold(self, type_url: str, names: list[str]) -> None:
        """Hold each of ``names``, in one synchronous step: their subscriptions go out in one
        request."""
        for name in names:
            self._holds[(type_url, name)] = self._registry.add_watcher(
                type_url, name, self._watcher, self._closed
            )

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

    async def _release(self, when: float) -> None:
        await self._clock.sleep_until(when)
        for key in self.book.due(self._clock.time()):
            handle = self._holds.pop(key, None)
            if handle is not None:
                handle.cancel()

    def mark_stale(self, type_url: str, prefix: str) -> list[str]:
        """Forget what the holds of ``type_url`` under ``prefix`` knew (see `ResolveBook.stale`);
        returns those names."""
        names = self.book.held(type_url, prefix)
        self.book.stale(type_url, names)
        return names

    def held(self) -> dict[Key, Any]:
        """The names held now, each with what its hold knows (for tests and dumps)."""
        return {key: self.book.known(*key) for key in self._holds}
