"""Weighted round robin over one locality's READY endpoints (gRFC A58, C-core's
``weighted_round_robin.cc`` and ``static_stride_scheduler.cc``).

Why C-core's scheduler: it is deterministic given its sequence counter, so a test can replay it.
Weights, per endpoint, from ORCA load reports (the per-call reports of calls it picked reach
it through the ``call_ended`` hook; `report` takes them from anywhere else):
``qps / (utilization + eps / qps * error_utilization_penalty)`` (a report without qps or
utilization is ignored). A weight counts
only after ``blackout_period`` of continuous reports (restarted when the endpoint becomes READY
again or its reports lapsed) and is dropped ``weight_expiration_period`` after the last report.
The scheduler is rebuilt every ``weight_update_period`` (at the first pick after it) and
whenever the READY set changes (then with a new random sequence start).

The static stride scheduler: weights are stored as float32; endpoints without a weight get the
mean of the others; a weight above 10x the mean is capped there; weights are scaled so the
largest is 65535 and rounded (half away from zero), none below max(1, 1% of the mean). Pick: take
sequence s, endpoint i = s mod n, generation g = s div n; pick i unless
``(w_i * g + i * 32767) mod 65535 < 65535 - w_i``, else try s + 1. Fewer than two endpoints, or
no weight at all: round robin from a random start.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Sequence
from typing import Any

from ..resources import Endpoint, WeightedRoundRobin
from ._base import CallEnd, ConnectivityState, EndpointKey, PickRequest, PickResult, key_of
from ._endpoint_list import EndpointList
from ._round_robin import no_ready_result

__all__ = ["WeightedRoundRobinPicker", "scheduler_weights"]

_MAX_WEIGHT = 65535
_OFFSET = _MAX_WEIGHT // 2
_MAX_RATIO = 10.0
_MIN_RATIO = 0.01
_UINT32 = (1 << 32) - 1
_READY = ConnectivityState.READY


def _float32(value: float) -> float:
    result: float = struct.unpack("f", struct.pack("f", value))[0]
    return result


def _lround(value: float) -> int:
    return math.floor(value + 0.5)


def scheduler_weights(weights: Sequence[float]) -> list[int] | None:
    """C-core's 16-bit scheduler weights for these float weights (0: unknown), or None when it
    falls back to round robin (fewer than two endpoints, or no weight known)."""
    n = len(weights)
    known = [w for w in weights if w != 0]
    if n < 2 or not known:
        return None
    unscaled_mean = sum(weights) / len(known)
    unscaled_max = max(weights)
    if unscaled_max / unscaled_mean > _MAX_RATIO:
        unscaled_max = _float32(_MAX_RATIO * unscaled_mean)
    scaling = _MAX_WEIGHT / unscaled_max
    mean = _lround(scaling * unscaled_mean)
    lower = max(1, _lround(scaling * unscaled_mean * _MIN_RATIO))
    return [
        mean if w == 0 else max(_lround(min(w, unscaled_max) * scaling), lower) for w in weights
    ]


class _Weight:
    __slots__ = ("last_update", "non_empty_since", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.non_empty_since: float | None = None
        self.last_update: float | None = None

    def get(self, now: float, config: WeightedRoundRobin) -> float:
        """The usable weight now: 0 when stale or still in blackout (C-core's GetWeight)."""
        if self.last_update is None or now - self.last_update >= config.weight_expiration_period:
            self.non_empty_since = None
            return 0.0
        if self.non_empty_since is None or (
            config.blackout_period > 0 and now - self.non_empty_since < config.blackout_period
        ):
            return 0.0
        return self.value


class WeightedRoundRobinPicker:
    """A58's weighted round robin for one locality; feed it load reports with `report`."""

    def __init__(self, config: WeightedRoundRobin | None = None) -> None:
        self._config = config or WeightedRoundRobin()
        self._endpoints = EndpointList()
        self._weights: dict[EndpointKey, _Weight] = {}
        #: (READY endpoints, 16-bit weights or None for round robin, next rebuild time)
        self._scheduler: tuple[tuple[Endpoint, ...], list[int] | None, float] | None = None
        self._sequence = 0

    def update(self, endpoints: Sequence[Endpoint], now: float) -> None:
        """A new endpoint list; states and weights kept by key."""
        if not self._endpoints.update(endpoints):
            self._scheduler = None
            return
        old = self._weights
        self._weights = {
            key_of(e): old.get(key_of(e)) or _Weight() for e in self._endpoints.endpoints
        }
        self._scheduler = None

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The user's transport reports an endpoint's connectivity; becoming READY restarts the
        endpoint's blackout period."""
        was = self._endpoints.states.get(key)
        if self._endpoints.set_state(key, state):
            self._scheduler = None
            if state is _READY and was is not _READY:
                self._weights[key].non_empty_since = None

    def report(
        self, key: EndpointKey, qps: float, eps: float, utilization: float, now: float
    ) -> None:
        """A load report from endpoint ``key``: queries and errors per second and its
        utilization (ORCA's application utilization, else CPU utilization)."""
        weight = self._weights.get(key)
        if weight is None or qps <= 0 or utilization <= 0:
            return
        penalty = self._config.error_utilization_penalty
        extra = eps / qps * penalty if eps > 0 and penalty > 0 else 0.0
        weight.value = _float32(qps / (utilization + extra))
        if weight.non_empty_since is None:
            weight.non_empty_since = now
        weight.last_update = now

    def call_ended(self, key: EndpointKey, end: CallEnd) -> None:
        """A call on ``key`` ended: its per-call ORCA report (A51), when it has one, is a
        `load_report`, unless the config asks for out-of-band reports (then only those
        count, as in C-core)."""
        if end.load_report is not None and not self._config.enable_oob_load_report:
            self.load_report(key, end.load_report, end.now)

    def load_report(self, key: EndpointKey, orca: Any, now: float) -> None:
        """An ORCA report (``OrcaLoadReport``) from endpoint ``key``, per call or out of band:
        a `report` of ``rps_fractional``, ``eps`` and ``application_utilization``
        (``cpu_utilization`` when that is not positive), as gRFC A58 reads it."""
        utilization = orca.application_utilization
        if utilization <= 0:
            utilization = orca.cpu_utilization
        self.report(key, orca.rps_fractional, orca.eps, utilization, now)

    def weight(self, key: EndpointKey, now: float) -> float:
        """The weight the scheduler would use for ``key`` now (0: none yet, or stale)."""
        weight = self._weights.get(key)
        return 0.0 if weight is None else weight.get(now, self._config)

    def state(self) -> ConnectivityState:
        """READY if any endpoint is, else CONNECTING, IDLE, TRANSIENT_FAILURE (gRPC's rule)."""
        return self._endpoints.state()

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """Every endpoint, as round robin."""
        return self._endpoints.endpoints

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """The next endpoint of the static stride schedule."""
        ready = self._endpoints.ready()
        if not ready:
            return no_ready_result(self._endpoints, "weighted_round_robin")
        scheduler = self._scheduler
        if scheduler is None:
            self._sequence = rand.getrandbits(32)
        if scheduler is None or now >= scheduler[2]:
            weights = [self._weights[key_of(e)].get(now, self._config) for e in ready]
            scheduler = (ready, scheduler_weights(weights), now + self._config.weight_update_period)
            self._scheduler = scheduler
        return self._endpoints.ready_results()[self._next(scheduler[1], len(ready))]

    def _next(self, weights: list[int] | None, n: int) -> int:
        while True:
            sequence = self._sequence
            self._sequence = (sequence + 1) & _UINT32
            index = sequence % n
            if weights is None:
                return index
            weight = weights[index]
            if (weight * (sequence // n) + index * _OFFSET) % _MAX_WEIGHT >= _MAX_WEIGHT - weight:
                return index
