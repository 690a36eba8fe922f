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
"""

from __future__ import annotations

from collections.abc import Sequence

from ..resources import Endpoint
from ._base import (
    ConnectivityState,
    EndpointKey,
    PickOutcome,
    PickResult,
    aggregate_state,
    key_of,
)

__all__ = ["EndpointList"]

_IDLE = ConnectivityState.IDLE
_READY = ConnectivityState.READY
_FAILED = ConnectivityState.TRANSIENT_FAILURE


def usable(endpoints: Sequence[Endpoint]) -> tuple[Endpoint, ...]:
    """The endpoints gRPC balances over: health UNKNOWN or HEALTHY, in order."""
    return tuple(endpoint for endpoint in endpoints if endpoint.healthy)


class EndpointList:
    """The endpoints of one picker with their states; `ready` is cached until a change."""

    __slots__ = ("_ready", "_ready_results", "_results", "endpoints", "states")

    def __init__(self) -> None:
        #: the usable endpoints, in the assignment's order
        self.endpoints: tuple[Endpoint, ...] = ()
        #: each endpoint's state by key; sticky TRANSIENT_FAILURE already applied
        self.states: dict[EndpointKey, ConnectivityState] = {}
        self._ready: tuple[Endpoint, ...] | None = None
        self._ready_results: tuple[PickResult, ...] | None = None
        #: each endpoint's COMPLETE result, by key (for this list's endpoint objects)
        self._results: dict[EndpointKey, PickResult] = {}

    def update(self, endpoints: Sequence[Endpoint]) -> None:
        """A new list: states kept for keys that stay, IDLE for new ones."""
        self.endpoints = usable(endpoints)
        old = self.states
        self.states = {key_of(e): old.get(key_of(e), _IDLE) for e in self.endpoints}
        self._ready = self._ready_results = None
        self._results = {}

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
        self._ready = self._ready_results = None
        return True

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

    def state(self) -> ConnectivityState:
        """The aggregated state (gRPC's rule)."""
        return aggregate_state(self.states.values())
