"""Outlier detection (gRFC A50): eject endpoints whose calls fail more than their peers'.

Why a wrapper: gRPC's outlier_detection policy sits between a priority and its child, counts
each call's outcome per endpoint, and makes an ejected endpoint look TRANSIENT_FAILURE to the
child, so any child (round robin, ring hash...) stops picking it without knowing why.
`OutlierDetector` is that wrapper around a `ChildPolicy`, and is a `ChildPolicy` itself.

The sweep (C-core ``outlier_detection.cc``, ``EjectionTimer::OnTimerLocked``), every
``interval`` seconds from the first update, the next one ``interval`` after it ran:

1. each endpoint's call counts rotate: the bucket filled since the last sweep is read, a fresh
   one starts; endpoints with no calls in it are not candidates;
2. success rate: candidates with at least ``request_volume`` calls; when there are at least
   ``minimum_hosts`` of them, each whose success rate (a percentage) is below
   ``mean - stdev * stdev_factor / 1000`` (population deviation) is ejected if a draw in
   [1, 100) is below ``enforcement_percentage`` and fewer than ``max_ejection_percent`` of all
   endpoints are ejected already (one may always be);
3. failure percentage: the same with its own volume and host minimums, for each candidate not
   just ejected whose failure percentage is above ``threshold``;
4. an endpoint not ejected loses one from its multiplier (down to 0); an ejected one returns
   once ``now`` is past its ejection time plus
   ``min(base_ejection_time * multiplier, max(base_ejection_time, max_ejection_time))``.

Ejection adds one to the multiplier. Endpoints that leave the assignment lose their data; with
neither algorithm configured nothing is counted and every endpoint returns.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from ..resources import Endpoint, LocalityEndpoints, OutlierDetection
from ._base import (
    CallEnd,
    ChildPolicy,
    ConnectivityState,
    EndpointKey,
    PickRequest,
    PickResult,
    key_of,
)

__all__ = ["OutlierDetector"]

_FAILURE = ConnectivityState.TRANSIENT_FAILURE


class _Tracker:
    """One endpoint's counts and ejection. Invariant: ``ejected_at`` is set while ejected."""

    __slots__ = (
        "ejected_at",
        "failures",
        "last_failures",
        "last_successes",
        "multiplier",
        "successes",
    )

    def __init__(self) -> None:
        self.successes = self.failures = 0
        self.last_successes = self.last_failures = 0
        self.multiplier = 0
        self.ejected_at: float | None = None

    def rotate(self) -> None:
        self.last_successes, self.last_failures = self.successes, self.failures
        self.successes = self.failures = 0

    @property
    def volume(self) -> int:
        return self.last_successes + self.last_failures

    @property
    def success_rate(self) -> float:
        return 100.0 * self.last_successes / self.volume


class OutlierDetector:
    """A `ChildPolicy` wrapper ejecting outliers (gRFC A50) by the calls reported to it."""

    #: what keeps one endpoint's counts (a subclass counts more)
    _tracker_type: type[_Tracker] = _Tracker

    def __init__(self, child: ChildPolicy, config: OutlierDetection) -> None:
        self.child = child
        self.config = config
        #: the child's call hooks (least request counts calls), None when it has none
        self._started: Callable[[EndpointKey], None] | None = getattr(child, "call_started", None)
        self._finished: Callable[[EndpointKey, bool], None] | None = getattr(
            child, "call_finished", None
        )
        self._ended: Callable[[EndpointKey, CallEnd], None] | None = getattr(
            child, "call_ended", None
        )
        self._reported: Callable[[EndpointKey, Any, float], None] | None = getattr(
            child, "load_report", None
        )
        #: the child's ``call_ended`` and ``load_report`` hooks passed on (None: it has none)
        self.call_ended: Callable[[EndpointKey, CallEnd], None] | None = self._ended
        self.load_report: Callable[[EndpointKey, Any, float], None] | None = self._reported
        self._trackers: dict[EndpointKey, _Tracker] = {}
        #: the transport's last state per endpoint (the child sees TRANSIENT_FAILURE instead
        #: while the endpoint is ejected)
        self._states: dict[EndpointKey, ConnectivityState] = {}
        self._next_sweep: float | None = None

    @property
    def counting(self) -> bool:
        """Whether either algorithm is configured (nothing is counted otherwise)."""
        return (
            self.config.success_rate_ejection is not None
            or self.config.failure_percentage_ejection is not None
        )

    def ejected(self) -> frozenset[EndpointKey]:
        """The endpoints ejected now."""
        return frozenset(k for k, t in self._trackers.items() if t.ejected_at is not None)

    def update_config(self, config: OutlierDetection, now: float) -> None:
        """New settings: a changed interval keeps the sweep's start; turning counting off
        returns every endpoint."""
        old, self.config = self.config, config
        if not self.counting:
            self._next_sweep = None
            for key, tracker in self._trackers.items():
                tracker.multiplier = 0
                if tracker.ejected_at is not None:
                    self._uneject(key, tracker, now)
        elif self._next_sweep is None:
            self._start(now)
        elif old.interval != config.interval:
            self._next_sweep += config.interval - old.interval

    def update(self, localities: Sequence[LocalityEndpoints], now: float) -> None:
        """The priority's localities: trackers kept by endpoint key, new ones start clean."""
        keys = [key_of(e) for loc in localities for e in loc.endpoints]
        make = self._tracker_type
        self._trackers = {k: self._trackers.get(k) or make() for k in keys}
        self._states = {k: s for k, s in self._states.items() if k in self._trackers}
        self.child.update(localities, now)
        for key, tracker in self._trackers.items():
            if tracker.ejected_at is not None:
                self.child.set_endpoint_state(key, _FAILURE, now)
        if self.counting and self._next_sweep is None:
            self._start(now)

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The transport's state; an ejected endpoint stays TRANSIENT_FAILURE to the child."""
        self._states[key] = state
        tracker = self._trackers.get(key)
        if tracker is None or tracker.ejected_at is None:
            self.child.set_endpoint_state(key, state, now)

    def state(self) -> ConnectivityState:
        """The child's state (what it makes of the ejections)."""
        return self.child.state()

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """What the child wants connected."""
        return self.child.wanted_connections()

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """A sweep if one is due, then the child's pick."""
        if self._next_sweep is not None and now >= self._next_sweep:
            self.sweep(rand, now)
        return self.child.pick(request, rand, now)

    def call_started(self, key: EndpointKey) -> None:
        """A call picked on ``key`` started: passed to the child if it counts calls."""
        if self._started is not None:
            self._started(key)

    def call_finished(self, key: EndpointKey, ok: bool) -> None:
        """A call to ``key`` ended, successfully or not: counted when counting is on, and
        passed to the child if it counts calls."""
        if self._finished is not None:
            self._finished(key, ok)
        tracker = self._trackers.get(key)
        if tracker is None or not self.counting:
            return
        if ok:
            tracker.successes += 1
        else:
            tracker.failures += 1

    def call_abandoned(self, key: EndpointKey) -> None:
        """A call picked on ``key`` was not made (the caller picked again): not counted, and
        passed to the child as ended (least request) by its ``call_abandoned`` hook, else
        its ``call_finished``."""
        abandoned: Callable[[EndpointKey], None] | None = getattr(
            self.child, "call_abandoned", None
        )
        if abandoned is not None:
            abandoned(key)
        elif self._finished is not None:
            self._finished(key, True)

    def next_deadline(self) -> float | None:
        """When the next sweep is due (None when nothing is counted)."""
        return self._next_sweep

    def poll(self, rand: random.Random, now: float) -> None:
        """Run the sweep if it is due."""
        if self._next_sweep is not None and now >= self._next_sweep:
            self.sweep(rand, now)

    def sweep(self, rand: random.Random, now: float) -> None:
        """One ejection sweep at ``now`` (the timer firing); the next is ``interval`` later."""
        self._next_sweep = now + self.config.interval
        for tracker in self._trackers.values():
            tracker.rotate()
        ejected = sum(t.ejected_at is not None for t in self._trackers.values())
        ejected = self._success_rate(rand, now, ejected)
        self._failure_percentage(rand, now, ejected)
        base, most = self.config.base_ejection_time, self.config.max_ejection_time
        for key, tracker in self._trackers.items():
            if tracker.ejected_at is None:
                tracker.multiplier = max(0, tracker.multiplier - 1)
            elif now > tracker.ejected_at + min(base * tracker.multiplier, max(base, most)):
                self._uneject(key, tracker, now)

    # -- the two algorithms ------------------------------------------------------------------

    def _candidates(self, volume: int, minimum_hosts: int) -> list[tuple[EndpointKey, _Tracker]]:
        """The endpoints with at least ``volume`` calls last interval, or none when fewer than
        ``minimum_hosts`` have (both algorithms, gRFC A50)."""
        found = [(k, t) for k, t in self._trackers.items() if t.volume and t.volume >= volume]
        return found if len(found) >= minimum_hosts else []

    def _success_rate(self, rand: random.Random, now: float, ejected: int) -> int:
        settings = self.config.success_rate_ejection
        if settings is None:
            return ejected
        stdev_factor, enforcement, minimum_hosts, volume = settings
        candidates = self._candidates(volume, minimum_hosts)
        if not candidates:
            return ejected
        rates = [t.success_rate for _, t in candidates]
        mean = sum(rates) / len(rates)
        stdev = math.sqrt(sum((r - mean) ** 2 for r in rates) / len(rates))
        threshold = mean - stdev * (stdev_factor / 1000)
        for key, tracker in candidates:
            if tracker.success_rate < threshold and self._may_eject(rand, enforcement, ejected):
                self._eject(key, tracker, now)
                ejected += 1
        return ejected

    def _failure_percentage(self, rand: random.Random, now: float, ejected: int) -> int:
        settings = self.config.failure_percentage_ejection
        if settings is None:
            return ejected
        threshold, enforcement, minimum_hosts, volume = settings
        candidates = self._candidates(volume, minimum_hosts)
        if not candidates:
            return ejected
        for key, tracker in candidates:
            if tracker.ejected_at is not None:
                continue
            if 100.0 - tracker.success_rate > threshold and self._may_eject(
                rand, enforcement, ejected
            ):
                self._eject(key, tracker, now)
                ejected += 1
        return ejected

    def _may_eject(self, rand: random.Random, enforcement: int, ejected: int) -> bool:
        """C-core draws in [1, 100) and ejects below the enforcement percentage, while fewer
        than ``max_ejection_percent`` of all endpoints are ejected (one always may be)."""
        draw = rand.randrange(1, 100)
        share = 100.0 * ejected / len(self._trackers)
        return draw < enforcement and (ejected == 0 or share < self.config.max_ejection_percent)

    def _eject(self, key: EndpointKey, tracker: _Tracker, now: float) -> None:
        tracker.ejected_at = now
        tracker.multiplier += 1
        self.child.set_endpoint_state(key, _FAILURE, now)

    def _uneject(self, key: EndpointKey, tracker: _Tracker, now: float) -> None:
        tracker.ejected_at = None
        # never reported by the transport: IDLE, as a new endpoint is
        state = self._states.get(key, ConnectivityState.IDLE)
        self.child.set_endpoint_state(key, state, now)

    def _start(self, now: float) -> None:
        self._next_sweep = now + self.config.interval
        for tracker in self._trackers.values():  # counts restart with the timer
            tracker.successes = tracker.failures = 0
