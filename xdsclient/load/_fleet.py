"""What every simulated client of a run shares: the decoder, the measurements, the clock.

Why one object: measurements across clients (the fan-out of one version to the fleet, a push
reaching everyone) need one place that saw every client, and the per-client work on the hot
path must stay a few dict operations. Clients call these methods synchronously from their own
tasks; nothing here awaits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from .._runtime._clock import Clock
from ..resources import ResourceType
from ._lean import KINDS, Lean, SharedDecoder
from ._results import MessageCounts, RunResult

__all__ = ["Fleet", "MonotonicClock", "short_name"]

_SHORT = {type_url: type_url.rsplit(".", 1)[-1] for type_url in KINDS.values()}


def short_name(type_url: str) -> str:
    """``Listener`` for the Listener type URL (any other URL: its last part)."""
    name = _SHORT.get(type_url)
    return name if name is not None else type_url.rsplit(".", 1)[-1]


class MonotonicClock:
    """`time.monotonic` as a `Clock`: the clock the test control plane stamps its journal with."""

    def time(self) -> float:
        return time.monotonic()

    async def sleep_until(self, when: float) -> None:
        await asyncio.sleep(max(0.0, when - time.monotonic()))


class Fleet:
    """A run's shared state and the recording methods clients call."""

    def __init__(
        self, result: RunResult, decoder: SharedDecoder, *, clock: Clock | None = None
    ) -> None:
        """``clock``: what the clients read and sleep on (by default the monotonic clock of
        `now`; a test passes a `FakeClock` to move their timers and backoff itself)."""
        self.result = result
        self.decoder = decoder
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        #: (type URL, serial of a version) -> when the first client applied it as an update
        self._first_seen: dict[tuple[str, int], float] = {}
        #: when the latest push started (time.monotonic()), None before the first
        self.push_time: float | None = None
        self.connected_now = 0  #: clients with at least one stream open
        self.complete_now = 0  #: clients holding their complete configuration
        self.started = 0
        self.latest_connect: float | None = None
        self.latest_first_config: float | None = None
        self.latest_ack: float | None = None
        self.latest_push: float | None = None
        #: the walk's resource types of every client that does not NACK on purpose (shared,
        #: built by the first such client)
        self.resource_types: list[ResourceType[Any]] | None = None
        self._names: dict[frozenset[str], frozenset[str]] = {}
        #: why the run cannot go on: the server does not serve the clients' method
        self.unserved: str | None = None
        #: called once when `unserved` is first set (the run ends early)
        self.on_unserved: Callable[[], None] | None = None

    @staticmethod
    def now() -> float:
        """The run's clock: the same monotonic clock the test control plane stamps."""
        return time.monotonic()

    def time(self) -> float:
        """What the clients' clock says now (`now`, unless a test gave another clock)."""
        return self.clock.time()

    def intern(self, names: set[str] | frozenset[str]) -> frozenset[str]:
        """One frozenset for every client that wants the same names (most of a run's
        clients do): a set of ten names is 0.7 KB, held once instead of once a client."""
        key = frozenset(names)
        return self._names.setdefault(key, key)

    def counts(self, type_url: str) -> MessageCounts:
        """The message counts of a type (created on first use)."""
        messages = self.result.messages
        name = short_name(type_url)
        counts = messages.get(name)
        if counts is None:
            counts = messages[name] = MessageCounts()
        return counts

    def connected(self, seconds: float) -> None:
        """A connection became ready ``seconds`` after its dial started."""
        self.result.connect.record(seconds)
        self.latest_connect = seconds

    def first_config(self, seconds: float) -> None:
        """A client had its complete configuration ``seconds`` after it started."""
        self.result.first_config.record(seconds)
        self.latest_first_config = seconds

    def acked(self, seconds: float) -> None:
        """A response's ACK (or NACK) was handed to gRPC ``seconds`` after the response was read."""
        self.result.ack_latency.record(seconds)
        self.latest_ack = seconds

    def updated(self, type_url: str, value: Lean, now: float) -> None:
        """A client applied a new version of a resource it already held, at ``now``."""
        key = (type_url, value.serial)
        first = self._first_seen.get(key)
        if first is None:
            self._first_seen[key] = now
        else:
            self.result.fanout.record(now - first)
        push = self.push_time
        if push is not None and now >= push:
            self.result.push_to_applied.record(now - push)
            self.latest_push = now - push

    def not_served(self, reason: str) -> None:
        """A stream failed UNIMPLEMENTED before any client read a response: the server does
        not serve this xDS method, and the run has nothing to measure."""
        answered = any(counts.received for counts in self.result.messages.values())
        if answered or self.unserved is not None:
            return
        self.unserved = reason
        if self.on_unserved is not None:
            self.on_unserved()

    def error(self, status: str) -> None:
        """A stream ended with (or failed to open with) a gRPC status."""
        errors = self.result.errors
        errors[status] = errors.get(status, 0) + 1
