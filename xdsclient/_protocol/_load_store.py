"""The load store: what calls did per cluster, EDS service and locality, until a report takes it.

Why pure and here: counting is the whole of load reporting but the stream, so it is plain
synchronous code with time passed in, tested with fake time. It lives in the client (not in
`xdsclient.lb`) because the client's load reporting stream reads it and the client never
imports the packages beside it (tests/test_imports.py).

What a report carries follows gRFC A27 (and A64 for named metrics):
- per locality: issued, succeeded, errored since the last report, and in progress (a gauge: it
  is never reset, so a call started before a report and finished after it is counted once in
  each field it belongs to); named metrics as a sum and a count per name;
- per (cluster, EDS service): drops by category, and a total of drops that also counts the
  circuit-breaker drops (which have no category);
- ``load_report_interval``: the time since this (cluster, service)'s last report (or since it
  was first counted).

Rules: a report takes only what it carries, so counts made while no stream is up (or for a
cluster the server did not ask about) wait for the next one; a locality whose every count is
zero and that has nothing in progress is left out, and a (cluster, service) with nothing to
say is left out of a report (our choice: grpcio's C-core lists
zero localities; docs/load-balancing.md, tests/lrs/test_grpc_differential.py). A report lists
its (cluster, service) pairs and, in each, its localities sorted (region, zone, sub-zone), as
C-core's maps order them.

A `ClusterLoad` is one object for the life of the client, but the server it reports to follows
the server its cluster came from (gRFC A71 fallback and return). Moving it (`LoadStore.remove`
then `LoadStore.add` on the other server's store) leaves what it counted since its last report
with the store it leaves, for that server's next report (as C-core's stats objects leave a
final snapshot); the calls in progress move with it (they finish where it now reports).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

import attrs

from ..resources._endpoint import LocalityEndpoints
from ..resources._locality import Locality

__all__ = [
    "ClusterLoad",
    "ClusterLoadReport",
    "LoadStore",
    "LocalityLoadReport",
    "MetricLoad",
]


@attrs.frozen(kw_only=True)
class MetricLoad:
    """One named metric over a report's interval (``EndpointLoadMetricStats``)."""

    name: str
    #: calls that finished with this metric
    count: int
    #: the sum of the metric's values
    total: float


@attrs.frozen(kw_only=True)
class LocalityLoadReport:
    """One locality's load over a report's interval (``UpstreamLocalityStats``)."""

    locality: Locality
    issued: int
    succeeded: int
    errored: int
    #: calls in progress when the report was taken (a gauge)
    in_progress: int
    metrics: tuple[MetricLoad, ...] = ()


@attrs.frozen(kw_only=True)
class ClusterLoadReport:
    """One (cluster, EDS service)'s load over a report's interval (``ClusterStats``)."""

    cluster: str
    service: str
    localities: tuple[LocalityLoadReport, ...]
    #: drops by category, sorted by category
    dropped: tuple[tuple[str, int], ...]
    #: every drop: by category and by the circuit breaker
    total_dropped: int
    #: seconds since the last report of this (cluster, service)
    interval: float


class _LocalityCounts:
    __slots__ = ("errored", "in_progress", "issued", "metrics", "succeeded")

    def __init__(self) -> None:
        self.issued = self.succeeded = self.errored = self.in_progress = 0
        #: name -> [count, total]
        self.metrics: dict[str, list[float]] = {}

    def take(self, locality: Locality) -> LocalityLoadReport | None:
        report = LocalityLoadReport(
            locality=locality,
            issued=self.issued,
            succeeded=self.succeeded,
            errored=self.errored,
            in_progress=self.in_progress,
            metrics=tuple(
                MetricLoad(name=name, count=int(count), total=total)
                for name, (count, total) in sorted(self.metrics.items())
            ),
        )
        self.issued = self.succeeded = self.errored = 0
        self.metrics = {}
        empty = not (report.issued or report.succeeded or report.errored or report.in_progress)
        return None if empty and not report.metrics else report


class ClusterLoad:
    """The load of one (cluster, EDS service name): what a user's transport reports its calls
    to (`XdsClient.load_reporter` returns one). ``locality`` arguments take a `Locality` or the
    `LocalityEndpoints` a pick went to (`PickResult.locality`)."""

    def __init__(self, cluster: str, service: str, now: float) -> None:
        self.cluster = cluster
        self.service = service
        self._localities: dict[Locality, _LocalityCounts] = {}
        self._dropped: Counter[str] = Counter()
        self._uncategorized = 0
        self._since = now
        #: how many reports `take` has made: a call that records it as it starts can tell
        #: whether a report has carried it since (`call_not_sent`)
        self.taken = 0

    def call_started(self, locality: Locality | LocalityEndpoints) -> None:
        """A call was sent to an endpoint of ``locality``."""
        counts = self._counts(locality)
        counts.issued += 1
        counts.in_progress += 1

    def call_finished(
        self,
        locality: Locality | LocalityEndpoints,
        ok: bool,
        metrics: Mapping[str, float] | None = None,
    ) -> None:
        """A call started in ``locality`` ended, ``ok`` or in error, with its named
        ``metrics`` (each summed and counted per name)."""
        counts = self._counts(locality)
        if counts.in_progress > 0:
            counts.in_progress -= 1
        if ok:
            counts.succeeded += 1
        else:
            counts.errored += 1
        for name, value in (metrics or {}).items():
            entry = counts.metrics.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += value

    def call_cancelled(self, locality: Locality | LocalityEndpoints) -> None:
        """A call started in ``locality`` was given up by its caller before any answer came:
        no longer in progress, and counted neither successful nor in error (Envoy's load
        report for a downstream reset; gRPC counts a cancelled call in error, through
        `call_finished`)."""
        counts = self._counts(locality)
        if counts.in_progress > 0:
            counts.in_progress -= 1

    def call_not_sent(self, locality: Locality | LocalityEndpoints, taken: int) -> None:
        """A call counted by `call_started` was never sent: gRPC refused it before its pick
        (metadata it rejects, a request that is not bytes), which C-core counts nowhere, so it
        is neither issued nor in progress. ``taken`` is `taken` as the call started: if a
        report has been taken since, it carried the call as issued, and the issued count now
        is other calls', so it stays."""
        counts = self._counts(locality)
        if taken == self.taken and counts.issued > 0:
            counts.issued -= 1
        if counts.in_progress > 0:
            counts.in_progress -= 1

    def call_dropped(self, category: str | None = None) -> None:
        """A call was dropped: by a ``drop_overloads`` category, or by the circuit breaker
        (None: counted in the total only)."""
        if category:
            self._dropped[category] += 1
        else:
            self._uncategorized += 1

    def take(self, now: float) -> ClusterLoadReport | None:
        """What a report carries since the last one (None: nothing to say); starts the next
        interval at ``now``."""
        localities = []
        for locality, counts in sorted(self._localities.items(), key=_locality_order):
            report = counts.take(locality)
            if report is not None:
                localities.append(report)
        dropped = tuple(sorted(self._dropped.items()))
        total = sum(self._dropped.values()) + self._uncategorized
        interval, self._since = now - self._since, now
        self.taken += 1
        self._dropped, self._uncategorized = Counter(), 0
        self._localities = {k: c for k, c in self._localities.items() if c.in_progress}
        if not localities and not total:
            return None
        return ClusterLoadReport(
            cluster=self.cluster,
            service=self.service,
            localities=tuple(localities),
            dropped=dropped,
            total_dropped=total,
            interval=interval,
        )

    def _counts(self, locality: Locality | LocalityEndpoints) -> _LocalityCounts:
        if isinstance(locality, LocalityEndpoints):
            locality = locality.locality
        counts = self._localities.get(locality)
        if counts is None:
            counts = self._localities[locality] = _LocalityCounts()
        return counts


def _place(where: Locality) -> tuple[str, str, str]:
    """C-core's order of localities: by region, then zone, then sub-zone."""
    return (where.region, where.zone, where.sub_zone)


def _locality_order(item: tuple[Locality, _LocalityCounts]) -> tuple[str, str, str]:
    return _place(item[0])


class LoadStore:
    """Every (cluster, EDS service)'s load for one LRS server, and what loads that moved to
    another server left to report here."""

    def __init__(self) -> None:
        self._loads: dict[tuple[str, str], ClusterLoad] = {}
        #: (cluster, service) -> (when its interval began, what a load left when it moved away)
        self._left: dict[tuple[str, str], tuple[float, ClusterLoadReport]] = {}

    def __bool__(self) -> bool:
        """Whether anything is (or is still to be) reported here."""
        return bool(self._loads or self._left)

    def load(self, cluster: str, service: str, now: float) -> ClusterLoad:
        """The load of ``(cluster, service)``, created (its interval starting ``now``) on
        first use."""
        key = (cluster, service)
        load = self._loads.get(key)
        if load is None:
            load = self._loads[key] = ClusterLoad(cluster, service, now)
        return load

    def add(self, load: ClusterLoad) -> None:
        """Report ``load`` here from now on (it was `remove`d from another store)."""
        self._loads[(load.cluster, load.service)] = load

    def remove(self, cluster: str, service: str, now: float) -> ClusterLoad | None:
        """Stop reporting the load of ``(cluster, service)`` here; what it counted since its
        last report stays, for the next report here (the calls in progress leave with it)."""
        load = self._loads.pop((cluster, service), None)
        if load is None:
            return None
        report = load.take(now)
        if report is not None:
            report = _without_in_progress(report)
        if report is not None:
            self._left[(cluster, service)] = _merge(self._left.get((cluster, service)), report, now)
        return load

    @property
    def clusters(self) -> list[str]:
        """The clusters counted, in the order they were first counted."""
        return list(dict.fromkeys(cluster for cluster, _ in self._loads))

    def snapshot(
        self, now: float, clusters: Collection[str] | None = None
    ) -> list[ClusterLoadReport]:
        """Take a report of ``clusters`` (None: every cluster): each (cluster, service) with
        something to say, counts since its last report, sorted; counts of clusters left out
        stay."""
        taken = []
        for key in sorted({*self._loads, *self._left}):
            if clusters is not None and key[0] not in clusters:
                continue
            load, left = self._loads.get(key), self._left.pop(key, None)
            report = None if load is None else load.take(now)
            if left is not None:
                start, earlier = left
                report = _combine(earlier, report, interval=now - start)
            if report is not None:
                taken.append(report)
        return taken


def _without_in_progress(report: ClusterLoadReport) -> ClusterLoadReport | None:
    """What a load leaves behind when it moves: its counts, not its calls in progress."""
    localities = tuple(
        attrs.evolve(loc, in_progress=0)
        for loc in report.localities
        if loc.issued or loc.succeeded or loc.errored or loc.metrics
    )
    if not localities and not report.total_dropped:
        return None
    return attrs.evolve(report, localities=localities)


def _merge(
    left: tuple[float, ClusterLoadReport] | None, report: ClusterLoadReport, now: float
) -> tuple[float, ClusterLoadReport]:
    """A leftover added to an earlier one: (when the earliest interval began, the sum)."""
    start = now - report.interval
    if left is None:
        return start, report
    return left[0], _combine(left[1], report, interval=now - left[0])


def _combine(
    earlier: ClusterLoadReport, later: ClusterLoadReport | None, *, interval: float
) -> ClusterLoadReport:
    """Two reports of one (cluster, service) as one over ``interval``: counts summed, the
    later one's calls in progress."""
    if later is None:
        return attrs.evolve(earlier, interval=interval)
    by: dict[Locality, LocalityLoadReport] = {r.locality: r for r in earlier.localities}
    for loc in later.localities:
        before = by.get(loc.locality)
        by[loc.locality] = loc if before is None else _add_locality(before, loc)
    dropped: Counter[str] = Counter(dict(earlier.dropped))
    dropped.update(dict(later.dropped))
    order = sorted(
        by.values(), key=lambda r: (r.locality.region, r.locality.zone, r.locality.sub_zone)
    )
    return attrs.evolve(
        later,
        localities=tuple(order),
        dropped=tuple(sorted(dropped.items())),
        total_dropped=earlier.total_dropped + later.total_dropped,
        interval=interval,
    )


def _add_locality(a: LocalityLoadReport, b: LocalityLoadReport) -> LocalityLoadReport:
    metrics: dict[str, tuple[int, float]] = {m.name: (m.count, m.total) for m in a.metrics}
    for m in b.metrics:
        count, total = metrics.get(m.name, (0, 0.0))
        metrics[m.name] = (count + m.count, total + m.total)
    return LocalityLoadReport(
        locality=a.locality,
        issued=a.issued + b.issued,
        succeeded=a.succeeded + b.succeeded,
        errored=a.errored + b.errored,
        in_progress=b.in_progress,
        metrics=tuple(
            MetricLoad(name=name, count=count, total=total)
            for name, (count, total) in sorted(metrics.items())
        ),
    )
