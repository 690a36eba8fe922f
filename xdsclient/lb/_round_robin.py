"""Round robin over one locality's READY endpoints (gRPC's ``round_robin``).

Why as gRPC does it: each new picker in gRPC starts at a random index among the READY endpoints
and then goes in order, so many clients started together do not all hit the first endpoint
first. A new picker is built whenever the READY set changes; here the next pick after such a
change draws the new start from the random source the pick is given.

No READY endpoint: the pick queues (asking IDLE endpoints to connect) unless every endpoint
failed, then it fails. Round robin wants every endpoint connected.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence

from ..resources import Endpoint
from ._base import ConnectivityState, EndpointKey, PickOutcome, PickRequest, PickResult
from ._endpoint_list import EndpointList

__all__ = ["FlatRoundRobin", "RoundRobinPicker", "no_ready_result"]

_FAILED = ConnectivityState.TRANSIENT_FAILURE


def no_ready_result(endpoints: EndpointList, policy: str) -> PickResult:
    """What an endpoint-list picker returns with no READY endpoint: FAIL when all failed (or
    there are none), else QUEUE asking the IDLE ones to connect."""
    if endpoints.state() is _FAILED:
        what = "no endpoints" if not endpoints.endpoints else "all endpoints failed to connect"
        return PickResult(outcome=PickOutcome.FAIL, error=f"{policy}: {what}")
    return PickResult(outcome=PickOutcome.QUEUE, connect=endpoints.idle())


class RoundRobinPicker:
    """gRPC's round_robin for one locality: a random start, then in order over READY."""

    __slots__ = ("_endpoints", "_next")

    def __init__(self) -> None:
        self._endpoints = EndpointList()
        #: the index of the next pick among the READY endpoints; None: draw a random start
        self._next: int | None = None

    def update(self, endpoints: Sequence[Endpoint], now: float) -> None:
        """A new endpoint list; states kept for endpoints whose key stays."""
        self._endpoints.update(endpoints)
        self._next = None

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The user's transport reports an endpoint's connectivity."""
        if self._endpoints.set_state(key, state):
            self._next = None

    def state(self) -> ConnectivityState:
        """READY if any endpoint is, else CONNECTING, IDLE, TRANSIENT_FAILURE (gRPC's rule)."""
        return self._endpoints.state()

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """Every endpoint: round robin keeps all of them connected."""
        return self._endpoints.endpoints

    def ready_results(self) -> tuple[PickResult, ...]:
        """The results of the READY endpoints, in pick order."""
        return self._endpoints.ready_results()

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """The next READY endpoint in order."""
        ready = self._endpoints.ready_results()
        if not ready:
            return no_ready_result(self._endpoints, "round_robin")
        index = self._next
        if index is None:
            index = rand.randrange(len(ready))
        self._next = index + 1
        return ready[index % len(ready)]


class FlatRoundRobin:
    """A READY weighted target of round-robin localities as one picker: a locality by weight,
    then its round robin's next READY endpoint, with no policy in between (C-core builds a new
    picker at each change of its tree; here one is built, by `WeightedTarget.flat`, after each
    change its owner sees). The draws and each locality's position are the tree's own (the
    round robin's ``_next``), so picks go on as the tree's would, and the tree may pick again
    at any time. It is valid until the tree changes: its owner drops it then."""

    __slots__ = ("_choices", "_sums", "until")

    def __init__(
        self,
        choices: Sequence[tuple[RoundRobinPicker, Sequence[PickResult]]],
        sums: Sequence[int],
    ) -> None:
        #: (locality's round robin, its READY endpoints' results with cluster and locality)
        self._choices = tuple(choices)
        #: the running sums of the localities' weights
        self._sums = tuple(sums)
        #: when the tree's next timer is due (set by the owner): no flat pick from then on
        self.until = float("-inf")

    def pick(self, rand: random.Random) -> PickResult:
        """The tree's pick (see `WeightedTarget.pick` and `RoundRobinPicker.pick`)."""
        choices = self._choices
        if len(choices) == 1:
            picker, results = choices[0]
        else:
            sums = self._sums
            picker, results = choices[bisect.bisect_right(sums, rand.randrange(sums[-1]))]
        index = picker._next
        if index is None:
            index = rand.randrange(len(results))
        picker._next = index + 1
        return results[index % len(results)]
