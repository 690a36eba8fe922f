"""Circuit breaking: at most ``max_requests`` calls in flight per (cluster, EDS service name).

Why shared counters: gRPC keeps one call counter per (cluster, EDS service name) for the whole
process (grpc-go ``xdsclient/load`` ``GetClusterRequestsCounter``; C-core
``CircuitBreakerCallCounterMap``), so calls in flight when a new configuration arrives still
count against the limit, and two pickers built for the same cluster share it. Here the map is a
`CallCounters` object: one per composed picker by default, or one passed to several.

The rule (C-core ``xds_cluster_impl``): before the child picks, a call is dropped when the
counter is at the limit (``in_flight >= max_requests``); it counts as in flight only once the
pick completes (`CallCounter.call_started`) until the transport reports it finished
(`CallCounter.call_finished`). Circuit-breaker drops have no category: they are counted apart
(``dropped``), as load reports put them in the total only; the pick result's ``error`` names
the cluster, the calls in flight and the limit.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_REQUESTS", "CallCounter", "CallCounters"]

#: gRPC's default ``max_requests`` when a cluster sets no circuit breaker thresholds.
DEFAULT_MAX_REQUESTS = 1024


class CallCounter:
    """Calls in flight for one (cluster, EDS service name), and the calls it dropped."""

    __slots__ = ("dropped", "in_flight")

    def __init__(self) -> None:
        #: calls picked and not yet finished
        self.in_flight = 0
        #: calls dropped because the limit was reached (no category)
        self.dropped = 0

    def admit(self, max_requests: int) -> bool:
        """Whether a new call may go ahead under ``max_requests``; counts the drop if not."""
        if self.in_flight >= max_requests:
            self.dropped += 1
            return False
        return True

    def call_started(self) -> None:
        """A pick completed: one more call in flight."""
        self.in_flight += 1

    def call_finished(self) -> None:
        """A call ended (whatever its outcome)."""
        if self.in_flight > 0:
            self.in_flight -= 1


class CallCounters:
    """The counters by (cluster, EDS service name), shared by every picker given this map."""

    def __init__(self) -> None:
        self._counters: dict[tuple[str, str], CallCounter] = {}

    def counter(self, cluster: str, eds_service_name: str = "") -> CallCounter:
        """The counter of ``(cluster, eds_service_name)``, created on first use."""
        key = (cluster, eds_service_name)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = CallCounter()
        return counter

    def prune(self, keep: set[tuple[str, str]]) -> None:
        """Forget idle counters no configuration uses any more (those with calls in flight
        stay, so the calls still count when their cluster comes back)."""
        for key in [k for k, c in self._counters.items() if k not in keep and not c.in_flight]:
            del self._counters[key]
