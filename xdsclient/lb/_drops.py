"""EDS drop overloads: drop a share of calls by category, as gRPC's xds_cluster_impl does.

Why: a control plane sheds load by asking clients to drop calls (``drop_overloads``, parts per
million per category). The rule is gRPC's (grpc-go ``clusterimpl/picker.go``; C-core
``xds_cluster_impl.cc`` draws the same way):

- categories are checked in the assignment's order, one uniform draw in [0, 1e6) each from
  the random source passed in; the first whose draw falls below its parts per million drops
  the call, with that category;
- drops apply only while the cluster's picker is READY (grpc-go: a cluster that cannot serve
  anyway queues or fails its calls instead of counting them as dropped);
- every drop is counted by category (load reports read the counts).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from ..resources import DropOverload
from ._base import ConnectivityState

__all__ = ["DropPolicy"]

_PPM = 1_000_000


class DropPolicy:
    """One cluster's drop overloads and the drops made so far (``dropped``, by category)."""

    def __init__(self, overloads: Sequence[DropOverload] = ()) -> None:
        self.overloads: tuple[DropOverload, ...] = tuple(overloads)
        #: drops made, by category
        self.dropped: Counter[str] = Counter()

    def update(self, overloads: Sequence[DropOverload]) -> None:
        """New overloads from a new assignment; the counts stay."""
        self.overloads = tuple(overloads)

    def drop(self, state: ConnectivityState, rand: random.Random) -> str | None:
        """The category dropping this call, or None to let it through."""
        if not self.overloads or state is not ConnectivityState.READY:
            return None
        for category, parts_per_million in self.overloads:
            if rand.randrange(_PPM) < parts_per_million:
                self.dropped[category] += 1
                return category
        return None
