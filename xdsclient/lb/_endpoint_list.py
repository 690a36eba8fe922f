"""One locality's endpoints and their connectivity, kept by key across updates.

Why a module of its own: round robin, weighted round robin and least request all keep the same
state (gRPC's ``EndpointList``): the endpoints gRPC balances over, each one's connectivity as
the transport reports it, and the READY ones in list order. Only the choice among the READY
ones differs.

Rules (C-core, where each endpoint is a pick_first child):
- only endpoints with health UNKNOWN or HEALTHY are balanced over, as gRPC's xDS client keeps;
- a new endpoint starts IDLE; an endpoint keeps its state across updates while its key stays;
- TRANSIENT_FAILURE is sticky per endpoint: an endpoint that failed stays counted as failed
  through its reconnect attempts (CONNECTING, IDLE) until it is READY again (gRFC A62);
- the aggregated state is `aggregate_state` over the endpoints (none: TRANSIENT_FAILURE).

A pick's result is a frozen value, so the COMPLETE result of each READY endpoint is built once
per change of the READY set (`ready_results`) and returned by every pick that chooses it.

Cost: a connectivity change is O(1) (the number of endpoints in each state is kept as states
change, so the aggregated state is read, not recounted); the READY list is rebuilt lazily, at
the next pick after a change. An update handed the very list it already holds (the priority
policy hands unchanged localities on as the same objects) keeps everything.
"""

from __future__ import annotations

import collections
import itertools
import operator
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from ..resources import Endpoint, HealthStatus, LocalityEndpoints
from ._base import (
    ConnectivityState,
    EndpointKey,
    PickOutcome,
    PickResult,
    key_of,
    keys_of,
)

__all__ = ["EndpointList", "KeyCounts", "count_in", "count_out"]

_IDLE = ConnectivityState.IDLE
_READY = ConnectivityState.READY
_FAILED = ConnectivityState.TRANSIENT_FAILURE


def usable(endpoints: Sequence[Endpoint]) -> tuple[Endpoint, ...]:
    """The endpoints gRPC balances over: health UNKNOWN or HEALTHY, in order (at C speed
    when all are, the common case)."""
    healths = list(map(_health_of, endpoints))
    if healths.count(_UNKNOWN) + healths.count(_HEALTHY) == len(healths):
        return tuple(endpoints)
    return tuple(endpoint for endpoint in endpoints if endpoint.healthy)


_health_of: Callable[[Endpoint], HealthStatus] = operator.attrgetter("health_status")
_UNKNOWN, _HEALTHY = HealthStatus.UNKNOWN, HealthStatus.HEALTHY


class EndpointList:
    """The endpoints of one picker with their states; `ready` is cached until a change."""

    __slots__ = (
        "_counts",
        "_ready",
        "_ready_results",
        "_results",
        "_source",
        "endpoints",
        "states",
    )

    def __init__(self) -> None:
        #: the list last given to `update` (an update with the same object changes nothing)
        self._source: Sequence[Endpoint] | None = None
        #: how many endpoints are in each state (invariant: the counts of ``states.values()``)
        self._counts: Counter[ConnectivityState] = Counter()
        #: the usable endpoints, in the assignment's order
        self.endpoints: tuple[Endpoint, ...] = ()
        #: each endpoint's state by key; sticky TRANSIENT_FAILURE already applied
        self.states: dict[EndpointKey, ConnectivityState] = {}
        self._ready: tuple[Endpoint, ...] | None = None
        self._ready_results: tuple[PickResult, ...] | None = None
        #: each endpoint's COMPLETE result, by key (for this list's endpoint objects)
        self._results: dict[EndpointKey, PickResult] = {}

    def update(self, endpoints: Sequence[Endpoint]) -> bool:
        """A new list: states kept for keys that stay, IDLE for new ones. False (nothing
        done) when ``endpoints`` is the list this one already holds."""
        if endpoints is self._source:
            return False
        self._source = endpoints
        self.endpoints = usable(endpoints)
        old = self.states
        keys = list(map(keys_of, self.endpoints))
        self.states = dict(zip(keys, map(old.get, keys, itertools.repeat(_IDLE)), strict=True))
        self._counts = Counter(self.states.values())
        self._ready = self._ready_results = None
        self._results = {}
        return True

    def set_state(self, key: EndpointKey, state: ConnectivityState) -> bool:
        """Record a reported state; False when the key is not ours or nothing changed."""
        old = self.states.get(key)
        if old is None:
            return False
        if old is _FAILED and state is not _READY:
            return False  # sticky: still failed until it connects
        if old is state:
            return False
        self.states[key] = state
        counts = self._counts
        counts[old] -= 1
        counts[state] += 1
        self._ready = self._ready_results = None
        return True

    def rekey(
        self,
        endpoints: tuple[Endpoint, ...],
        added: Iterable[EndpointKey],
        removed: Iterable[EndpointKey],
    ) -> None:
        """A new list told by its difference: ``endpoints`` (usable ones, in order) whose
        keys are the old ones with ``added`` (IDLE unless known) and without ``removed``."""
        self._source = self.endpoints = endpoints
        states, counts = self.states, self._counts
        for key in removed:
            state = states.pop(key, None)
            if state is not None:
                counts[state] -= 1
        for key in added:
            if key not in states:
                states[key] = _IDLE
                counts[_IDLE] += 1
        self._ready = self._ready_results = None
        self._results = {}

    def ready(self) -> tuple[Endpoint, ...]:
        """The READY endpoints, in list order."""
        if self._ready is None:
            states = self.states
            self._ready = tuple(e for e in self.endpoints if states[key_of(e)] is _READY)
        return self._ready

    def ready_results(self) -> tuple[PickResult, ...]:
        """A COMPLETE pick result for each READY endpoint, in the order of `ready`."""
        if self._ready_results is None:
            results = self._results
            built = []
            for endpoint in self.ready():
                result = results.get(key_of(endpoint))
                if result is None:
                    result = results[key_of(endpoint)] = PickResult(
                        outcome=PickOutcome.COMPLETE, endpoint=endpoint
                    )
                built.append(result)
            self._ready_results = tuple(built)
        return self._ready_results

    def idle(self) -> tuple[Endpoint, ...]:
        """The IDLE endpoints, in list order."""
        return tuple(e for e in self.endpoints if self.states[key_of(e)] is _IDLE)

    def count(self, state: ConnectivityState) -> int:
        """How many endpoints are in ``state`` now."""
        return self._counts[state]

    def state(self) -> ConnectivityState:
        """The aggregated state (gRPC's rule), from the counts."""
        counts = self._counts
        for state in (_READY, ConnectivityState.CONNECTING, _IDLE):
            if counts[state]:
                return state
        return _FAILED


class KeyCounts:
    """How many of the localities last given hold each endpoint key, kept by difference.

    Why: a balancer over thousands of endpoints must not walk them all when one locality of an
    update changed. Localities are told apart by identity (the priority policy hands an
    unchanged locality on as the same object), so an update costs the endpoints of the
    localities that came and went only. ``healthy_only`` counts only the endpoints gRPC
    balances over.
    """

    __slots__ = ("_healthy_only", "_held", "counts")

    def __init__(self, *, healthy_only: bool = False) -> None:
        self._healthy_only = healthy_only
        #: each key's number of holders (invariant: only keys held at least once)
        self.counts: dict[EndpointKey, int] = {}
        #: the localities counted, by id: the locality, how many times it is listed, its keys
        self._held: dict[int, tuple[LocalityEndpoints, int, list[EndpointKey]]] = {}

    def update(
        self, localities: Iterable[LocalityEndpoints]
    ) -> tuple[list[EndpointKey], list[EndpointKey]]:
        """Count ``localities`` instead of the last ones: the keys that came (held by none
        before), and the keys that went (held by none now), each in list order."""
        old = self._held
        held: dict[int, tuple[LocalityEndpoints, int, list[EndpointKey]]] = {}
        for locality in localities:
            entry = held.get(id(locality)) or old.get(id(locality))
            if entry is None or entry[0] is not locality:
                held[id(locality)] = (locality, 1, self._keys(locality))
            elif id(locality) in held:
                held[id(locality)] = (locality, entry[1] + 1, entry[2])
            else:
                held[id(locality)] = (locality, 1, entry[2])
        self._held = held
        counts = self.counts
        added: list[EndpointKey] = []
        for ident, (locality, times, keys) in held.items():
            before = old.get(ident)
            more = times - (before[1] if before is not None and before[0] is locality else 0)
            for _ in range(more):
                count_in(counts, keys, added)
        removed: list[EndpointKey] = []
        for ident, (locality, times, keys) in old.items():
            now = held.get(ident)
            fewer = times - (now[1] if now is not None and now[0] is locality else 0)
            for _ in range(fewer):
                count_out(counts, keys, removed)
        return list(dict.fromkeys(added)), removed

    def _keys(self, locality: LocalityEndpoints) -> list[EndpointKey]:
        endpoints = usable(locality.endpoints) if self._healthy_only else locality.endpoints
        return list(map(keys_of, endpoints))


def count_in(
    counts: dict[EndpointKey, int], keys: list[EndpointKey], added: list[EndpointKey]
) -> None:
    """Count ``keys`` once more, listing in ``added`` those new to ``counts``; at C speed
    in the common case (distinct keys, none counted yet)."""
    if not any(map(counts.__contains__, keys)) and len(set(keys)) == len(keys):
        counts.update(zip(keys, itertools.repeat(1)))
        added.extend(keys)
        return
    for key in keys:
        seen = counts.get(key, 0)
        if not seen:
            added.append(key)
        counts[key] = seen + 1


def count_out(
    counts: dict[EndpointKey, int], keys: list[EndpointKey], removed: list[EndpointKey]
) -> None:
    """Count ``keys`` once less, listing in ``removed`` those no longer counted; at C speed
    in the common case (distinct keys, each counted once)."""
    if len(set(keys)) == len(keys) and set(map(counts.get, keys)) <= {1}:
        collections.deque(map(counts.pop, keys), maxlen=0)
        removed.extend(keys)
        return
    for key in keys:
        left = counts[key] - 1
        if left:
            counts[key] = left
        else:
            del counts[key]
            removed.append(key)
