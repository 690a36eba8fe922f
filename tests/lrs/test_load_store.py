"""The load store with fake time: what a report carries and what stays for the next one."""

from __future__ import annotations

from xdsclient._protocol._load_store import LoadStore, MetricLoad
from xdsclient._settings._config import Locality
from xdsclient.resources._endpoint import LocalityEndpoints

EAST = Locality(region="r", zone="east")
WEST = Locality(region="r", zone="west")


def test_a_report_carries_the_calls_per_locality_since_the_last_one() -> None:
    """Issued, succeeded and errored count per locality and are reset by a report; the
    interval is the time since the load was first counted."""
    store = LoadStore()
    load = store.load("c", "svc", now=100.0)
    for _ in range(3):
        load.call_started(EAST)
    load.call_finished(EAST, ok=True)
    load.call_finished(EAST, ok=False)
    load.call_started(WEST)
    load.call_finished(WEST, ok=True)
    (report,) = store.snapshot(110.0)
    assert (report.cluster, report.service, report.interval) == ("c", "svc", 10.0)
    by = {r.locality: r for r in report.localities}
    assert (by[EAST].issued, by[EAST].succeeded, by[EAST].errored) == (3, 1, 1)
    assert (by[WEST].issued, by[WEST].succeeded, by[WEST].errored) == (1, 1, 0)


def test_in_progress_is_a_gauge_that_a_report_does_not_reset() -> None:
    """A call in flight at a report is in progress in that report and the next; finishing it
    later counts it once, in the report of the interval it finished in."""
    store = LoadStore()
    load = store.load("c", "", now=0.0)
    load.call_started(EAST)
    (first,) = store.snapshot(1.0)
    assert (first.localities[0].issued, first.localities[0].in_progress) == (1, 1)
    (second,) = store.snapshot(2.0)
    assert (second.localities[0].issued, second.localities[0].in_progress) == (0, 1)
    load.call_finished(EAST, ok=True)
    (third,) = store.snapshot(3.0)
    assert (third.localities[0].succeeded, third.localities[0].in_progress) == (1, 0)
    assert store.snapshot(4.0) == []


def test_a_cancelled_call_is_issued_and_ends_neither_a_success_nor_an_error() -> None:
    """A call its caller gave up on leaves the in-progress gauge and counts in neither
    succeeded nor errored (Envoy's report of a downstream reset)."""
    store = LoadStore()
    load = store.load("c", "", now=0.0)
    load.call_started(EAST)
    load.call_started(EAST)
    load.call_cancelled(EAST)
    load.call_finished(EAST, ok=True)
    (report,) = store.snapshot(1.0)
    counts = report.localities[0]
    assert (counts.issued, counts.succeeded, counts.errored, counts.in_progress) == (2, 1, 0, 0)
    assert store.snapshot(2.0) == []


def test_named_metrics_are_summed_and_counted_per_name() -> None:
    """Each named metric of a finished call adds its value to the name's total and one to its
    count (``EndpointLoadMetricStats``)."""
    store = LoadStore()
    load = store.load("c", "", now=0.0)
    for value in (0.5, 1.5):
        load.call_started(EAST)
        load.call_finished(EAST, ok=True, metrics={"cpu": value, "mem": 2.0})
    (report,) = store.snapshot(1.0)
    assert report.localities[0].metrics == (
        MetricLoad(name="cpu", count=2, total=2.0),
        MetricLoad(name="mem", count=2, total=4.0),
    )


def test_circuit_breaker_drops_count_in_the_total_only() -> None:
    """Drops are counted by category; drops without a category (the circuit breaker's) only
    in the total, which counts every drop."""
    store = LoadStore()
    load = store.load("c", "", now=0.0)
    load.call_dropped("lb")
    load.call_dropped("lb")
    load.call_dropped("throttle")
    load.call_dropped(None)
    (report,) = store.snapshot(5.0)
    assert report.dropped == (("lb", 2), ("throttle", 1))
    assert report.total_dropped == 4
    assert report.localities == ()


def test_the_interval_runs_from_each_clusters_last_report() -> None:
    """A report of some clusters leaves the others' counts and intervals alone."""
    store = LoadStore()
    a = store.load("a", "", now=0.0)
    b = store.load("b", "", now=0.0)
    a.call_dropped("x")
    b.call_dropped("x")
    assert [r.cluster for r in store.snapshot(4.0, clusters={"a"})] == ["a"]
    a.call_dropped("x")
    reports = {r.cluster: r for r in store.snapshot(10.0)}
    assert (reports["a"].interval, reports["b"].interval) == (6.0, 10.0)
    assert (reports["a"].total_dropped, reports["b"].total_dropped) == (1, 1)


def test_a_locality_is_taken_from_the_pick_result_and_idle_ones_are_left_out() -> None:
    """`LocalityEndpoints` (what a pick names) counts as its locality; a locality with nothing
    to report is not in the report, and a cluster with nothing to report is left out."""
    store = LoadStore()
    load = store.load("c", "", now=0.0)
    load.call_started(LocalityEndpoints(locality=EAST, weight=1, priority=0, endpoints=()))
    load.call_finished(EAST, ok=True)
    assert [r.locality for r in store.snapshot(1.0)[0].localities] == [EAST]
    load.call_started(WEST)
    load.call_finished(WEST, ok=False)
    assert [r.locality for r in store.snapshot(2.0)[0].localities] == [WEST]
    assert store.snapshot(3.0) == []
    assert store.clusters == ["c"]


def test_clusters_and_localities_are_listed_sorted_as_c_core_lists_them() -> None:
    """A report lists its (cluster, service) pairs sorted, and in each its localities by
    region, then zone, then sub-zone, whatever order they were first counted in."""
    store = LoadStore()
    for cluster, service in (("b", "y"), ("a", "z"), ("b", "x")):
        store.load(cluster, service, now=0.0).call_dropped("d")
    load = store.load("a", "z", now=0.0)
    places = [
        Locality(region="r2", zone="a"),
        Locality(region="r1", zone="b", sub_zone="2"),
        Locality(region="r1", zone="b", sub_zone="1"),
        Locality(region="r1", zone="a"),
    ]
    for place in places:
        load.call_started(place)
    reports = store.snapshot(1.0)
    assert [(r.cluster, r.service) for r in reports] == [("a", "z"), ("b", "x"), ("b", "y")]
    assert [r.locality for r in reports[0].localities] == [
        places[3],
        places[2],
        places[1],
        places[0],
    ]


def test_a_load_that_moves_leaves_its_unreported_counts_with_the_store_it_left() -> None:
    """Removed from one store and added to another, a load reports there from then on; what
    it counted before is in the next report of the store it left (its calls in progress go
    with it), over the interval since that store's last report, and nowhere else."""
    old, new = LoadStore(), LoadStore()
    load = old.load("c", "svc", now=0.0)
    load.call_started(EAST)
    load.call_finished(EAST, ok=True)
    load.call_started(EAST)  # still in progress when the load moves
    load.call_dropped("lb")
    assert old.remove("c", "svc", now=4.0) is load
    new.add(load)
    load.call_finished(EAST, ok=False)
    load.call_started(WEST)
    assert old
    (left,) = old.snapshot(10.0)
    assert (left.interval, left.total_dropped) == (10.0, 1)
    (east,) = left.localities
    assert (east.issued, east.succeeded, east.errored, east.in_progress) == (2, 1, 0, 0)
    assert not old
    assert old.snapshot(11.0) == []
    (moved,) = new.snapshot(10.0)
    assert moved.interval == 6.0
    by = {r.locality: r for r in moved.localities}
    assert (by[EAST].issued, by[EAST].errored, by[EAST].in_progress) == (0, 1, 0)
    assert (by[WEST].issued, by[WEST].in_progress) == (1, 1)


def test_a_load_that_comes_back_before_a_report_is_reported_once_with_what_it_left() -> None:
    """A load that leaves and comes back before the next report: that report sums what it
    left and what it counted since, over the whole interval."""
    here, there = LoadStore(), LoadStore()
    load = here.load("c", "", now=0.0)
    load.call_started(EAST)
    load.call_finished(EAST, ok=True)
    here.remove("c", "", now=2.0)
    there.add(load)
    load.call_started(EAST)
    load.call_finished(EAST, ok=True)
    there.remove("c", "", now=3.0)
    here.add(load)
    load.call_started(EAST)
    (report,) = here.snapshot(5.0)
    assert report.interval == 5.0
    (east,) = report.localities
    assert (east.issued, east.succeeded, east.in_progress) == (2, 1, 1)
    (other,) = there.snapshot(5.0)
    assert (other.localities[0].issued, other.interval) == (1, 3.0)


def test_a_call_not_sent_leaves_the_report_unless_a_report_already_carried_it() -> None:
    """A refused call is neither issued nor in progress; once a report has carried it as
    issued, its refusal takes nothing from the calls issued after that report."""
    store = LoadStore()
    load = store.load("c", "", now=0.0)
    started = load.taken
    load.call_started(EAST)
    load.call_not_sent(EAST, started)
    assert store.snapshot(1.0) == []
    refused = load.taken
    load.call_started(EAST)  # refused later, after a report carried it
    (first,) = store.snapshot(2.0)
    assert (first.localities[0].issued, first.localities[0].in_progress) == (1, 1)
    load.call_started(EAST)  # sent and answered
    load.call_not_sent(EAST, refused)
    load.call_finished(EAST, ok=True)
    (second,) = store.snapshot(3.0)
    counts = second.localities[0]
    assert (counts.issued, counts.succeeded, counts.errored, counts.in_progress) == (1, 1, 0, 0)
