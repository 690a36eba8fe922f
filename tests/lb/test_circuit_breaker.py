"""Circuit breaking alone: the limit, drops without category, counters shared per cluster."""

from __future__ import annotations

from xdsclient.lb import DEFAULT_MAX_REQUESTS, CallCounters


def test_calls_over_the_limit_are_refused_and_counted_apart() -> None:
    """At ``max_requests`` calls in flight the next is refused and counted as a drop."""
    counter = CallCounters().counter("c", "svc")
    for _ in range(3):
        assert counter.admit(3)
        counter.call_started()
    assert not counter.admit(3)
    assert counter.dropped == 1
    counter.call_finished()
    assert counter.admit(3)
    assert counter.in_flight == 2


def test_the_default_limit_is_grpcs() -> None:
    """gRPC's default max_requests is 1024."""
    counter = CallCounters().counter("c")
    for _ in range(DEFAULT_MAX_REQUESTS):
        counter.call_started()
    assert not counter.admit(DEFAULT_MAX_REQUESTS)


def test_one_counter_per_cluster_and_service_name() -> None:
    """The same (cluster, EDS service name) shares one counter; another name has its own."""
    counters = CallCounters()
    assert counters.counter("c", "svc") is counters.counter("c", "svc")
    assert counters.counter("c", "svc") is not counters.counter("c", "other")
    assert counters.counter("c") is not counters.counter("d")


def test_pruning_keeps_counters_with_calls_in_flight() -> None:
    """A counter no configuration uses is forgotten only once its calls have finished."""
    counters = CallCounters()
    busy = counters.counter("busy")
    busy.call_started()
    idle = counters.counter("idle")
    counters.prune(set())
    assert counters.counter("busy") is busy
    assert counters.counter("idle") is not idle


def test_finishing_more_calls_than_started_never_goes_negative() -> None:
    """A stray finish does not open room beyond the limit."""
    counter = CallCounters().counter("c")
    counter.call_finished()
    assert counter.in_flight == 0
