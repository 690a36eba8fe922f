"""The data model every load report reads: histograms and results that merge exactly."""

from __future__ import annotations

import json
import random

import pytest

from xdsclient.load import ClientResult, Histogram, MessageCounts, RunResult


def test_histogram_percentiles_are_within_a_thousandth_of_the_exact_value():
    """A percentile is the exact order statistic to within 0.1 %, min and max exact."""
    rng = random.Random(7)
    values = [rng.lognormvariate(-6, 2) for _ in range(5000)]
    histogram = Histogram()
    for value in values:
        histogram.record(value)
    ordered = sorted(values)
    for p in (1, 50, 90, 99, 99.9):
        exact = ordered[max(0, -(-len(values) * p // 100) - 1).__int__()]
        assert histogram.percentile(p) == pytest.approx(exact, rel=1.1e-3, abs=1e-9)
    assert histogram.min == min(values)
    assert histogram.max == max(values)
    assert histogram.percentile(100) == max(values)
    assert histogram.count == 5000
    assert histogram.mean == pytest.approx(sum(values) / 5000)


def test_histogram_keeps_microseconds_that_millisecond_rounding_loses():
    """Values a few microseconds apart stay apart (Locust would round both to 0 ms)."""
    histogram = Histogram()
    for value in (0.000_010, 0.000_020, 0.000_030):
        histogram.record(value)
    assert histogram.percentile(50) == pytest.approx(0.000_020, rel=1e-3)


def test_merged_histograms_equal_one_histogram_of_all_values():
    """Merging is exact: two halves merged equal the whole."""
    rng = random.Random(3)
    values = [rng.expovariate(100) for _ in range(2000)]
    whole, left, right = Histogram(), Histogram(), Histogram()
    for index, value in enumerate(values):
        whole.record(value)
        (left if index % 2 else right).record(value)
    left.merge(right)
    assert left.count == whole.count
    assert left.to_dict()["buckets"] == whole.to_dict()["buckets"]
    assert (left.min, left.max) == (whole.min, whole.max)


def test_histogram_round_trips_through_json():
    """`to_dict` / `from_dict` through JSON gives back an equal histogram."""
    histogram = Histogram()
    for value in (0.001, 0.5, 12.0, 0.0):
        histogram.record(value)
    again = Histogram.from_dict(json.loads(json.dumps(histogram.to_dict())))
    assert again == histogram
    assert again.percentile(99) == histogram.percentile(99)


def test_empty_histogram_reports_zeros():
    """An empty histogram answers 0.0 rather than failing."""
    histogram = Histogram()
    assert (histogram.percentile(99), histogram.mean, histogram.count) == (0.0, 0.0, 0)
    with pytest.raises(ValueError, match="between 0 and 100"):
        histogram.percentile(101)


def _result(clients: int, started: float) -> RunResult:
    result = RunResult(
        clients=clients,
        connected=clients,
        complete=clients,
        started=started,
        duration=10.0,
        nacks=1,
        errors={"UNAVAILABLE": 2},
        messages={"Listener": MessageCounts(received=clients, sent=2 * clients)},
        per_client=[ClientResult(index=i, node_id=f"n{i}") for i in range(clients)],
    )
    result.first_config.record(0.5)
    return result


def test_run_results_merge_counts_histograms_and_span():
    """Two workers' results add up, and the merged run spans both."""
    total = RunResult.merged([_result(3, 100.0), _result(2, 105.0)])
    assert (total.clients, total.nacks, total.errors, total.processes) == (
        5,
        2,
        {"UNAVAILABLE": 4},
        2,
    )
    assert total.messages["Listener"].sent == 10
    assert total.first_config.count == 2
    assert (total.started, total.duration) == (100.0, 15.0)
    assert len(total.per_client) == 5


def test_run_result_round_trips_through_json():
    """A result crosses a JSON message unchanged."""
    result = _result(3, 100.0)
    again = RunResult.from_dict(json.loads(result.to_json()))
    assert again.to_dict() == result.to_dict()
