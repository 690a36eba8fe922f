"""Dynamic cluster subscriptions of one configuration watch: who holds which cluster, and when.

Why a sans-I/O part: a data plane asks a `ConfigWatch` at request time for a cluster its routes
do not name (a ``cluster_header`` route, Envoy's on-demand CDS; gRFC A74's cluster
subscriptions). Which of those clusters the walk includes, and until when, is a matter of counts
and times decided synchronously with ``now`` passed in; the shell (`_dynamic_clusters`) only
sleeps on the client's clock and re-walks.

Rules:
- A subscription holds its cluster from its creation until it is released; several holders
  of one name count once.
- A held cluster joins the walk ("admitted") once the client's resolve gave a decisive
  outcome for it (`Available` or `Missing`): until then the resolve's own subscription asks for
  it (batched as `resolve` batches), so the walk never sends a request of its own for a name
  the server has not answered yet.
- An admitted cluster leaves the walk ``grace`` seconds after its last holder released it,
  unless held again meanwhile; one never admitted is forgotten at its last release.
"""

from __future__ import annotations

import attrs

__all__ = ["ClusterHolds"]


@attrs.define
class _Hold:
    holders: int = 0
    admitted: bool = False
    release_at: float | None = None  # no holder since; leaves the walk then


class ClusterHolds:
    """The dynamic clusters of one configuration watch (see the module's rules)."""

    def __init__(self, *, grace: float) -> None:
        self.grace = grace
        self._holds: dict[str, _Hold] = {}

    def hold(self, name: str) -> None:
        """A subscription of ``name`` starts."""
        entry = self._holds.get(name)
        if entry is None:
            entry = self._holds[name] = _Hold()
        entry.holders += 1
        entry.release_at = None

    def admit(self, name: str) -> bool:
        """A resolve of the held ``name`` was decisive: it joins the walk. Whether it was not
        in it already (the walk must run again)."""
        entry = self._holds.get(name)
        if entry is None or entry.admitted:
            return False
        entry.admitted = True
        return True

    def release(self, name: str, now: float) -> float | None:
        """A subscription of ``name`` ended. Returns when its cluster is due to leave the walk,
        if this was its last holder and it is in the walk."""
        entry = self._holds[name]
        entry.holders -= 1
        if entry.holders:
            return None
        if not entry.admitted:
            del self._holds[name]
            return None
        entry.release_at = now + self.grace
        return entry.release_at

    def due(self, now: float) -> bool:
        """Drop the clusters whose grace period ended with no holder since; whether any left
        the walk (it must run again)."""
        gone = [
            name
            for name, entry in self._holds.items()
            if entry.holders == 0 and entry.release_at is not None and entry.release_at <= now
        ]
        for name in gone:
            del self._holds[name]
        return bool(gone)

    @property
    def admitted(self) -> tuple[str, ...]:
        """The clusters in the walk, in the order they joined it."""
        return tuple(name for name, entry in self._holds.items() if entry.admitted)

    def holders(self, name: str) -> int:
        """How many subscriptions hold ``name`` now."""
        entry = self._holds.get(name)
        return 0 if entry is None else entry.holders

    def __len__(self) -> int:
        return len(self._holds)
