"""ORCA load reports and call ends through the composed picker: a report handed to
``call_finished`` reaches weighted round robin's weights (gRFC A58's inputs), and the
``endpoint-load-metrics-bin`` trailer parses into the report load reporting reads."""

from __future__ import annotations

import random
from collections import Counter

from envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3 import (
    client_side_weighted_round_robin_pb2 as wrr_pb2,
)
from xds.data.orca.v3 import orca_load_report_pb2

from xdsclient import ClusterConfig
from xdsclient.grpc._orca import ORCA_TRAILER, load_report_of, named_metrics
from xdsclient.lb import ComposedPicker, ConnectivityState, PickOutcome, key_of
from xdsclient.resources import ClusterView
from xdsclient.testing import builders
from xdsclient.testing.builders import LocalitySpec

from .test_composed import HOST, assignment, snapshot

Report = orca_load_report_pb2.OrcaLoadReport


def wrr_cluster(name: str) -> ClusterView:
    message = builders.cluster(name)
    wrr = wrr_pb2.ClientSideWeightedRoundRobin()
    wrr.blackout_period.FromMilliseconds(0)
    wrr.weight_update_period.FromMilliseconds(100)
    message.load_balancing_policy.policies.add().typed_extension_config.typed_config.Pack(wrr)
    return ClusterView.from_proto(message)


def test_orca_reports_given_with_call_ends_set_weighted_round_robin_weights() -> None:
    """Calls on port 1 end with reports of qps 100 at utilization 0.1 (weight 1000), on port 2
    at utilization 1.0 (weight 100): after the next scheduler rebuild port 1 gets about ten
    picks for each of port 2's; with no reports the two share evenly."""
    config = ClusterConfig(
        name="c",
        cluster=wrr_cluster("c"),
        endpoints=assignment("c", [LocalitySpec(endpoints=[(HOST, 1), (HOST, 2)])]),
    )
    picker = ComposedPicker()
    picker.update(snapshot("c", config), 0.0)
    for port in (1, 2):
        picker.set_endpoint_state((HOST, port), ConnectivityState.READY, 0.0)
    rand = random.Random(1)
    reports = {
        1: Report(rps_fractional=100, application_utilization=0.1),
        2: Report(rps_fractional=100, cpu_utilization=1.0),
    }

    def run(now: float, calls: int, report: bool) -> Counter[int]:
        seen: Counter[int] = Counter()
        for _ in range(calls):
            result = picker.pick("/svc/M", {}, rand, now)
            assert result.outcome is PickOutcome.COMPLETE
            assert result.endpoint is not None
            port = key_of(result.endpoint)[1]
            seen[port] += 1
            picker.call_finished(
                result, True, now, elapsed=0.01, load_report=reports[port] if report else None
            )
        return seen

    assert run(0.0, 100, report=False) == {1: 50, 2: 50}
    run(1.0, 10, report=True)
    after = run(2.0, 110, report=True)
    assert after[1] >= 9 * after[2]


def test_the_orca_trailer_parses_and_its_named_metrics_are_what_is_reported() -> None:
    """The trailer's bytes give the report; its named metrics are what load reporting counts
    (utilizations are not, as C-core reports named metrics only); a trailer that does not
    parse, or none, gives no report."""
    report = Report(cpu_utilization=0.5, named_metrics={"queue": 3.0})
    trailers = [("x-other", "v"), (ORCA_TRAILER, report.SerializeToString())]
    parsed = load_report_of(trailers)
    assert parsed == report
    assert named_metrics(parsed) == {"queue": 3.0}
    assert named_metrics(None) == {}
    assert load_report_of([(ORCA_TRAILER, b"\xff\xff")]) is None
    assert load_report_of(None) is None
