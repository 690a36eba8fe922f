"""The composed picker's outlier rules by front end (gRPC's A50 by default, Envoy's for HTTP)
and picks handed back unused: fake time, real validated views."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from xdsclient.lb import CallCounters, ComposedPicker, LocalFailure, OutlierMode
from xdsclient.testing.builders import LocalitySpec

from .test_composed import HOST, eds, ports, ready, snapshot

BOTH = LocalitySpec(endpoints=[(HOST, 1), (HOST, 2)], zone="a")


def picker_for(mode: OutlierMode, **fields: object) -> ComposedPicker:
    """Two READY endpoints in cluster ``c`` under the test suite's failure-percentage outlier
    detection (``interval`` 10 s, 50 % of hosts)."""
    picker = ComposedPicker(outlier_mode=mode)
    picker.update(snapshot("c", eds("c", [BOTH], outlier=True, **fields)), 0.0)
    ready(picker, 1, 2)
    return picker


def report_on(
    picker: ComposedPicker, port: int, rand: random.Random, ok: bool = False, **outcome: object
) -> None:
    """One call picked on ``port`` (handing back the other picks until it comes) and ended
    ``ok`` or not, as ``outcome`` says."""
    for _ in range(100):
        result = picker.pick("/", {}, rand, 1.0)
        assert result.endpoint is not None
        if result.endpoint.port == port:
            picker.call_finished(result, ok, 1.0, **outcome)  # type: ignore[arg-type]
            return
        picker.call_abandoned(result)
    raise AssertionError(f"port {port} was never picked")


@pytest.mark.parametrize("mode", ["grpc", "envoy"])
def test_five_consecutive_503_eject_under_envoy_rules_only(mode: OutlierMode) -> None:
    """Envoy's default consecutive 5xx rule ejects after five 503 before any sweep; gRPC
    (C-core) ignores the consecutive fields and waits for the interval's verdict."""
    picker = picker_for(mode)
    rand = random.Random(1)
    for _ in range(5):
        report_on(picker, 2, rand, http_status=503)
    counts = ports(picker, 10, rand, now=1.0)
    assert counts == ({1: 10} if mode == "envoy" else {1: 5, 2: 5})


def test_envoy_rules_read_local_failures_as_503_and_504() -> None:
    """Connect failures and timeouts without the split feed the same 5xx run."""
    picker = picker_for("envoy")
    rand = random.Random(2)
    failures = (LocalFailure.CONNECT, LocalFailure.RESET, LocalFailure.TIMEOUT) * 2
    for failure in failures[:5]:
        report_on(picker, 1, rand, local_failure=failure)
    assert ports(picker, 6, rand, now=1.0) == {2: 6}


def test_the_grpc_channel_keeps_a50_by_default() -> None:
    """A picker built without a mode follows gRFC A50."""
    assert ComposedPicker().outlier_mode == "grpc"
    with pytest.raises(ValueError, match="outlier_mode"):
        ComposedPicker(outlier_mode="nginx")  # type: ignore[arg-type]


def test_abandoned_picks_are_neither_successes_nor_failures() -> None:
    """Ten failures on endpoint 2 among picks handed back: its failure rate stays 100 % and
    it is ejected at the sweep (counted as successes they would have hidden it)."""
    picker = picker_for("grpc")
    rand = random.Random(3)
    for _ in range(10):
        report_on(picker, 2, rand)  # hands back the picks of endpoint 1 on the way
        result = picker.pick("/", {}, rand, 1.0)
        picker.call_abandoned(result)
    for _ in range(10):  # endpoint 1's own successes, so it has the volume
        report_on(picker, 1, rand, ok=True)
    picker.poll(rand, 10.0)
    assert ports(picker, 6, rand, now=10.0) == {1: 6}


def test_abandoned_picks_leave_circuit_breaking_and_least_request() -> None:
    """A pick handed back frees its circuit-breaking slot and its least-request count: with
    one call held on endpoint 1 and its other picks handed back, picks go to endpoint 2."""
    counters = CallCounters()
    picker = ComposedPicker(counters=counters)
    picker.update(snapshot("lr", eds("lr", [BOTH], choice_count=10)), 0.0)
    ready(picker, 1, 2)
    rand = random.Random(4)
    held = picker.pick("/", {}, rand, 0.0)
    assert held.endpoint is not None
    for _ in range(20):
        picker.call_abandoned(picker.pick("/", {}, rand, 0.0))
    assert counters.counter("lr", "lr").in_flight == 1
    other = {1: 2, 2: 1}[held.endpoint.port]
    seen: Counter[int] = Counter()
    for _ in range(5):
        result = picker.pick("/", {}, rand, 0.0)
        assert result.endpoint is not None
        seen[result.endpoint.port] += 1
        picker.call_abandoned(result)
    assert seen == {other: 5}
