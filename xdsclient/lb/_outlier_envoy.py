"""Envoy's outlier detection (``outlier_detection_impl.cc``), for front ends that follow Envoy.

Why apart from `OutlierDetector`: gRPC reads only gRFC A50's two interval rules and counts a
call as ok or not; Envoy also ejects on runs of consecutive failures, tells a 5xx from a
gateway failure (502, 503, 504) and from a local-origin one (`LocalFailure`), and differs in
small ways that change who is ejected. The gRPC channel keeps A50 exactly; the HTTP transport
builds its picker in the ``"envoy"`` `OutlierMode` and gets this detector. It wraps a child as
`OutlierDetector` does (an ejected endpoint is TRANSIENT_FAILURE to the child), per priority.

Counting, per endpoint (``call_outcome``), as Envoy's host monitor:
- without ``split_external_local_origin_errors`` everything is an HTTP status: a connect
  failure or a reset counts as 503, a timeout as 504;
- a status in [500, 600) adds one to the consecutive 5xx count, and 502/503/504 to the
  consecutive gateway count (any other 5xx resets that one); any other status resets both and
  is a success for the success-rate bucket;
- with the split, a local failure only adds to the consecutive local-origin count and the
  local bucket; a reset or timeout after connecting first counts the connection's success
  (Envoy's router reports the pool ready before the reset), which resets that count;
- a count reaching its threshold exactly (``==``) asks for an ejection. Envoy posts it to its
  main thread; here it waits for the next `poll` or pick (`next_deadline` says it is due now).
  The ejection is skipped when the endpoint is ejected already (the count is kept); otherwise
  the count is reset whether or not the ejection was enforced.

Ejecting (``ejectHost``): allowed when ``100 * (ejected + 1) / endpoints`` is at most
``max_ejection_percent`` (or none is ejected and ``always_eject_one_host``), then enforced when
a draw in [0, 100) is below the rule's enforcement percentage. It adds one to the backoff while
``backoff * base < max + base``.

The sweep every ``interval`` (``onIntervalTimer``): each ejected endpoint returns when
``min(base * backoff, max) + jitter <= now - ejected_at`` (its consecutive counts reset); the
buckets rotate; the success-rate and failure-percentage rules run over the endpoints not
ejected, once for the upstream's answers and once for local-origin outcomes (each with its own
enforcement); an endpoint not ejected, back for at least one interval, loses one backoff.
Failure percentage ejects at ``100 - success rate >= threshold`` (gRPC: ``>``).
"""

from __future__ import annotations

import math
import random
from typing import cast

from ..resources import OutlierDetection
from ._base import (
    ChildPolicy,
    ConnectivityState,
    EndpointKey,
    LocalFailure,
    PickRequest,
    PickResult,
)
from ._outlier import OutlierDetector, _Tracker

__all__ = ["EnvoyOutlierDetector"]

_5XX, _GATEWAY, _LOCAL = "5xx", "gateway", "local"
_GATEWAY_CODES = frozenset((502, 503, 504))
_FAILURE = ConnectivityState.TRANSIENT_FAILURE


class _EnvoyTracker(_Tracker):
    """An endpoint's counts for Envoy: the upstream's answers in the inherited buckets,
    local-origin outcomes in their own, the consecutive counts and the ejection's extras."""

    __slots__ = (
        "consecutive_5xx",
        "consecutive_gateway",
        "consecutive_local",
        "jitter",
        "last_local_failures",
        "last_local_successes",
        "local_failures",
        "local_successes",
        "unejected_at",
    )

    def __init__(self) -> None:
        super().__init__()
        self.consecutive_5xx = self.consecutive_gateway = self.consecutive_local = 0
        self.local_successes = self.local_failures = 0
        self.last_local_successes = self.last_local_failures = 0
        self.jitter = 0.0
        self.unejected_at: float | None = None

    def rotate(self) -> None:
        super().rotate()
        self.last_local_successes, self.last_local_failures = (
            self.local_successes,
            self.local_failures,
        )
        self.local_successes = self.local_failures = 0

    def restart(self) -> None:
        self.successes = self.failures = self.local_successes = self.local_failures = 0

    def bucket(self, local: bool) -> tuple[int, int]:
        """The last interval's (successes, calls) of one kind."""
        if local:
            return self.last_local_successes, self.last_local_successes + self.last_local_failures
        return self.last_successes, self.last_successes + self.last_failures


class EnvoyOutlierDetector(OutlierDetector):
    """A `ChildPolicy` wrapper ejecting outliers by Envoy's rules (see the module's
    docstring), fed by ``call_outcome``."""

    _tracker_type = _EnvoyTracker

    def __init__(self, child: ChildPolicy, config: OutlierDetection) -> None:
        super().__init__(child, config)
        #: consecutive-failure ejections asked for, in order, not yet decided
        self._pending: list[tuple[EndpointKey, str]] = []
        self._pending_at: float | None = None

    @property
    def counting(self) -> bool:
        """Always: the consecutive rules need no interval rule configured."""
        return True

    def call_finished(self, key: EndpointKey, ok: bool) -> None:
        """Passed to the child only: this detector counts by ``call_outcome``."""
        if self._finished is not None:
            self._finished(key, ok)

    def call_outcome(
        self,
        key: EndpointKey,
        ok: bool,
        http_status: int | None,
        local_failure: LocalFailure | None,
        now: float,
    ) -> None:
        """How a call on ``key`` ended: the response's status, or how it failed locally
        (neither: ``ok`` counts as 200, else as 500, Envoy's request failure)."""
        tracker = cast("_EnvoyTracker | None", self._trackers.get(key))
        if tracker is None:
            return
        if self.config.envoy.split_external_local_origin_errors:
            if local_failure is not LocalFailure.CONNECT:
                self._local(key, tracker, failed=False, now=now)  # it connected
            if local_failure is not None:
                self._local(key, tracker, failed=True, now=now)
                return
        elif local_failure is not None:
            http_status = 504 if local_failure is LocalFailure.TIMEOUT else 503
        if http_status is None:
            http_status = 200 if ok else 500
        self._status(key, tracker, http_status, now)

    def _status(self, key: EndpointKey, tracker: _EnvoyTracker, status: int, now: float) -> None:
        rules = self.config.envoy
        if not 500 <= status < 600:
            tracker.successes += 1
            tracker.consecutive_5xx = tracker.consecutive_gateway = 0
            return
        tracker.failures += 1
        if status in _GATEWAY_CODES:
            tracker.consecutive_gateway += 1
            if tracker.consecutive_gateway == rules.consecutive_gateway_failure:
                self._ask(key, _GATEWAY, now)
        else:
            tracker.consecutive_gateway = 0
        tracker.consecutive_5xx += 1
        if tracker.consecutive_5xx == rules.consecutive_5xx:
            self._ask(key, _5XX, now)

    def _local(self, key: EndpointKey, tracker: _EnvoyTracker, *, failed: bool, now: float) -> None:
        if not failed:
            tracker.local_successes += 1
            tracker.consecutive_local = 0
            return
        tracker.local_failures += 1
        tracker.consecutive_local += 1
        if tracker.consecutive_local == self.config.envoy.consecutive_local_origin_failure:
            self._ask(key, _LOCAL, now)

    def _ask(self, key: EndpointKey, kind: str, now: float) -> None:
        self._pending.append((key, kind))
        if self._pending_at is None:
            self._pending_at = now

    # -- time ---------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When an asked-for ejection or the next sweep is due."""
        if self._pending_at is None:
            return self._next_sweep
        if self._next_sweep is None:
            return self._pending_at
        return min(self._pending_at, self._next_sweep)

    def poll(self, rand: random.Random, now: float) -> None:
        """Decide the ejections asked for, then run the sweep if it is due."""
        if self._pending:
            self._decide_pending(rand, now)
        if self._next_sweep is not None and now >= self._next_sweep:
            self.sweep(rand, now)

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """Whatever is due, then the child's pick."""
        self.poll(rand, now)
        return self.child.pick(request, rand, now)

    def _decide_pending(self, rand: random.Random, now: float) -> None:
        pending, self._pending, self._pending_at = self._pending, [], None
        rules = self.config.envoy
        enforcement = {
            _5XX: rules.enforcing_consecutive_5xx,
            _GATEWAY: rules.enforcing_consecutive_gateway_failure,
            _LOCAL: rules.enforcing_consecutive_local_origin_failure,
        }
        for key, kind in pending:
            tracker = cast("_EnvoyTracker | None", self._trackers.get(key))
            if tracker is None or tracker.ejected_at is not None:
                continue  # gone, or ejected already: the count is kept (as Envoy)
            self._try_eject(key, tracker, enforcement[kind], rand, now)
            if kind == _5XX:
                tracker.consecutive_5xx = 0
            elif kind == _GATEWAY:
                tracker.consecutive_gateway = 0
            else:
                tracker.consecutive_local = 0

    def sweep(self, rand: random.Random, now: float) -> None:
        """One interval timer at ``now``: returns, rotation, the interval rules, backoff."""
        config = self.config
        self._next_sweep = now + config.interval
        trackers = cast("dict[EndpointKey, _EnvoyTracker]", self._trackers)
        base = config.base_ejection_time
        most = max(base, config.max_ejection_time)
        for key, tracker in trackers.items():
            ejected_at = tracker.ejected_at
            due = ejected_at is not None and (
                min(base * tracker.multiplier, most) + tracker.jitter <= now - ejected_at
            )
            if due:
                self._uneject(key, tracker, now)
            tracker.rotate()
        self._interval_rules(rand, now, local=False)
        self._interval_rules(rand, now, local=True)
        for tracker in trackers.values():
            back = tracker.unejected_at
            if tracker.ejected_at is None and back is not None and now - back >= config.interval:
                tracker.multiplier = max(0, tracker.multiplier - 1)

    def _interval_rules(self, rand: random.Random, now: float, *, local: bool) -> None:
        """Success rate and failure percentage over one kind of outcome (Envoy's
        ``processSuccessRateEjections``)."""
        rules = self.config.envoy
        stdev_factor, rate_hosts, rate_volume = rules.success_rate
        threshold, percentage_hosts, percentage_volume = rules.failure_percentage
        trackers = cast("dict[EndpointKey, _EnvoyTracker]", self._trackers)
        if len(trackers) < rate_hosts and len(trackers) < percentage_hosts:
            return
        by_rate: list[tuple[EndpointKey, _EnvoyTracker, float]] = []
        by_percentage: list[tuple[EndpointKey, _EnvoyTracker, float]] = []
        for key, tracker in trackers.items():
            if tracker.ejected_at is not None:
                continue
            successes, calls = tracker.bucket(local)
            if not calls:
                continue
            rate = 100.0 * successes / calls
            if calls >= rate_volume:
                by_rate.append((key, tracker, rate))
            if calls >= percentage_volume:
                by_percentage.append((key, tracker, rate))
        if by_rate and len(by_rate) >= rate_hosts:
            mean = sum(rate for _, _, rate in by_rate) / len(by_rate)
            stdev = math.sqrt(sum((rate - mean) ** 2 for _, _, rate in by_rate) / len(by_rate))
            below = mean - stdev_factor / 1000.0 * stdev
            enforce = (
                rules.enforcing_local_origin_success_rate if local else rules.enforcing_success_rate
            )
            for key, tracker, rate in by_rate:
                if rate < below:
                    self._try_eject(key, tracker, enforce, rand, now)
        if by_percentage and len(by_percentage) >= percentage_hosts:
            enforce = (
                rules.enforcing_failure_percentage_local_origin
                if local
                else rules.enforcing_failure_percentage
            )
            for key, tracker, rate in by_percentage:
                if tracker.ejected_at is None and 100.0 - rate >= threshold:
                    self._try_eject(key, tracker, enforce, rand, now)

    # -- ejection -----------------------------------------------------------------------------

    def _try_eject(
        self,
        key: EndpointKey,
        tracker: _EnvoyTracker,
        enforcement: int,
        rand: random.Random,
        now: float,
    ) -> None:
        """Envoy's ``ejectHost``: within ``max_ejection_percent`` (counting this one), then
        enforced by a draw."""
        config = self.config
        ejected = sum(t.ejected_at is not None for t in self._trackers.values())
        allowed = 100.0 * (ejected + 1) / len(self._trackers) <= min(
            100, config.max_ejection_percent
        )
        if config.envoy.always_eject_one_host and ejected == 0:
            allowed = True
        if not allowed or not _enforced(enforcement, rand):
            return
        base = config.base_ejection_time
        jitter = config.envoy.max_ejection_time_jitter
        tracker.jitter = rand.uniform(0.0, jitter) if jitter > 0 else 0.0
        if tracker.multiplier * base < max(base, config.max_ejection_time) + base:
            tracker.multiplier += 1
        tracker.ejected_at = now
        self.child.set_endpoint_state(key, _FAILURE, now)

    def _eject(self, key: EndpointKey, tracker: _Tracker, now: float) -> None:
        raise AssertionError("Envoy's rules eject through _try_eject")  # pragma: no cover

    def _uneject(self, key: EndpointKey, tracker: _Tracker, now: float) -> None:
        super()._uneject(key, tracker, now)
        assert isinstance(tracker, _EnvoyTracker)
        tracker.consecutive_5xx = tracker.consecutive_gateway = tracker.consecutive_local = 0
        tracker.unejected_at = now

    def _start(self, now: float) -> None:
        self._next_sweep = now + self.config.interval
        for tracker in self._trackers.values():
            cast("_EnvoyTracker", tracker).restart()


def _enforced(percentage: int, rand: random.Random) -> bool:
    """Envoy's runtime ``featureEnabled``: a draw in [0, 100) below ``percentage``."""
    if percentage >= 100:
        return True
    return percentage > 0 and rand.randrange(100) < percentage
