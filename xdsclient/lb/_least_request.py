"""Least request over one locality's READY endpoints (gRFC A48, grpc-go/grpc-java's picker).

Why as A48: ``choice_count`` endpoints are drawn at random (with replacement) among the READY
ones and the one with the fewest outstanding calls wins, the first drawn on a tie;
``choice_count`` above 10 is treated as 10. The outstanding counts are the user's transport's to
report (`call_started` when a call starts on an endpoint, `call_finished` when it ends), as
gRPC's picker counts from its pick to the call's end; they survive updates by endpoint key.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..resources import Endpoint
from ._base import ConnectivityState, EndpointKey, PickRequest, PickResult, key_of
from ._endpoint_list import EndpointList
from ._round_robin import no_ready_result

__all__ = ["LeastRequestPicker"]

_MAX_CHOICES = 10


class LeastRequestPicker:
    """A48's least request: the least loaded of ``choice_count`` random READY endpoints."""

    __slots__ = ("_choices", "_endpoints", "_outstanding")

    def __init__(self, choice_count: int = 2) -> None:
        self._choices = max(2, min(choice_count, _MAX_CHOICES))
        self._endpoints = EndpointList()
        self._outstanding: dict[EndpointKey, int] = {}

    def update(self, endpoints: Sequence[Endpoint], now: float) -> None:
        """A new endpoint list; states and outstanding counts kept by key."""
        if not self._endpoints.update(endpoints):
            return
        old = self._outstanding
        self._outstanding = {key_of(e): old.get(key_of(e), 0) for e in self._endpoints.endpoints}

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The user's transport reports an endpoint's connectivity."""
        self._endpoints.set_state(key, state)

    def call_started(self, key: EndpointKey) -> None:
        """A call started on the endpoint ``key`` (unknown keys ignored)."""
        if key in self._outstanding:
            self._outstanding[key] += 1

    def call_finished(self, key: EndpointKey, ok: bool = True) -> None:
        """A call on the endpoint ``key`` ended, whatever its outcome ``ok`` (the count never
        goes below 0)."""
        if self._outstanding.get(key, 0) > 0:
            self._outstanding[key] -= 1

    def outstanding(self, key: EndpointKey) -> int:
        """The calls in progress on ``key``."""
        return self._outstanding.get(key, 0)

    def state(self) -> ConnectivityState:
        """READY if any endpoint is, else CONNECTING, IDLE, TRANSIENT_FAILURE (gRPC's rule)."""
        return self._endpoints.state()

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """Every endpoint, as round robin."""
        return self._endpoints.endpoints

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """The endpoint with the fewest outstanding calls among ``choice_count`` random ones."""
        ready = self._endpoints.ready()
        if not ready:
            return no_ready_result(self._endpoints, "least_request")
        outstanding = self._outstanding
        size = len(ready)
        best = rand.randrange(size)
        fewest = outstanding[key_of(ready[best])]
        for _ in range(self._choices - 1):
            candidate = rand.randrange(size)
            count = outstanding[key_of(ready[candidate])]
            if count < fewest:
                best, fewest = candidate, count
        return self._endpoints.ready_results()[best]
