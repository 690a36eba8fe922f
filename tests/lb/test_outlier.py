"""Outlier detection alone (gRFC A50), fake time and a seeded random source: the sweep."""

from __future__ import annotations

import random

from xdsclient.lb import (
    ConnectivityState,
    OutlierDetector,
    PickOutcome,
    PickRequest,
    child_policy_for,
)
from xdsclient.resources import Endpoint, Locality, LocalityEndpoints, OutlierDetection, RoundRobin

READY = ConnectivityState.READY
PORTS = (1, 2, 3, 4, 5)
LOCALITY = LocalityEndpoints(
    Locality(zone="a"), 1, 0, tuple(Endpoint("127.0.0.1", p) for p in PORTS)
)
FAILURE_PERCENTAGE = OutlierDetection(
    interval=10.0,
    base_ejection_time=30.0,
    max_ejection_time=300.0,
    max_ejection_percent=50,
    failure_percentage_ejection=(50, 100, 5, 10),  # threshold, enforcement, hosts, volume
)
SUCCESS_RATE = OutlierDetection(
    interval=10.0,
    max_ejection_percent=20,
    success_rate_ejection=(1900, 100, 5, 10),  # stdev factor, enforcement, hosts, volume
)


def key(port: int) -> tuple[str, int]:
    return ("127.0.0.1", port)


def detector(config: OutlierDetection) -> OutlierDetector:
    d = OutlierDetector(child_policy_for(RoundRobin(), cluster="c"), config)
    d.update([LOCALITY], 0.0)
    for port in PORTS:
        d.set_endpoint_state(key(port), READY, 0.0)
    return d


def report(d: OutlierDetector, failing: dict[int, int], calls: int = 20) -> None:
    """``calls`` calls to every endpoint, ``failing[port]`` of them failed."""
    for port in PORTS:
        bad = failing.get(port, 0)
        for i in range(calls):
            d.call_finished(key(port), i >= bad)


def picked(d: OutlierDetector, rand: random.Random, now: float, n: int = 50) -> set[int]:
    ports = set()
    for _ in range(n):
        result = d.pick(PickRequest(), rand, now)
        assert result.outcome is PickOutcome.COMPLETE
        assert result.endpoint is not None
        ports.add(result.endpoint.port)
    return ports


def test_failure_percentage_ejects_at_the_sweep_and_the_child_stops_picking() -> None:
    """An endpoint failing over the threshold is ejected at the sweep, not before."""
    d = detector(FAILURE_PERCENTAGE)
    rand = random.Random(1)
    report(d, {1: 15})  # 75 % failures on port 1
    assert picked(d, rand, 9.9) == set(PORTS)  # no sweep yet
    assert d.next_deadline() == 10.0
    d.poll(rand, 10.0)
    assert d.ejected() == {key(1)}
    assert picked(d, rand, 10.0) == {2, 3, 4, 5}


def test_an_ejected_endpoint_returns_after_base_ejection_time() -> None:
    """Ejected at 10 s for 30 s x multiplier 1: back at the first sweep after 40 s."""
    d = detector(FAILURE_PERCENTAGE)
    rand = random.Random(2)
    report(d, {1: 15})
    d.poll(rand, 10.0)
    for now in (20.0, 30.0, 40.0):  # 40 is not *after* 10 + 30
        d.poll(rand, now)
        assert d.ejected() == {key(1)}
    d.poll(rand, 50.0)
    assert d.ejected() == frozenset()
    assert 1 in picked(d, rand, 50.0)


def test_a_second_ejection_lasts_longer_and_the_multiplier_decays() -> None:
    """Ejected again soon after: 2 x base ejection time; quiet sweeps bring it back down."""
    d = detector(FAILURE_PERCENTAGE)
    rand = random.Random(3)
    report(d, {1: 15})
    d.poll(rand, 10.0)
    d.poll(rand, 50.0)  # back, multiplier still 1 (it was ejected during the sweep)
    report(d, {1: 15})
    d.poll(rand, 60.0)  # ejected again: multiplier 2, for 60 s
    assert d.ejected() == {key(1)}
    d.poll(rand, 110.0)
    assert d.ejected() == {key(1)}  # 60 + 60 = 120 not reached
    d.poll(rand, 121.0)
    assert d.ejected() == frozenset()


def test_max_ejection_percent_bounds_the_ejections() -> None:
    """With every endpoint failing, at most max_ejection_percent of them are ejected."""
    d = detector(FAILURE_PERCENTAGE)  # 50 %: 2 of 5, then the 3rd would make 60 %
    report(d, dict.fromkeys(PORTS, 20))
    d.poll(random.Random(4), 10.0)
    assert len(d.ejected()) == 3  # ejected while the share was below 50 %: 0, 20, 40 %


def test_too_few_hosts_with_enough_calls_means_no_ejection() -> None:
    """Fewer than minimum_hosts endpoints with request_volume calls: the algorithm is skipped."""
    d = detector(FAILURE_PERCENTAGE)
    for _ in range(20):
        d.call_finished(key(1), False)
    d.poll(random.Random(5), 10.0)
    assert d.ejected() == frozenset()


def test_success_rate_ejects_the_endpoint_below_mean_minus_stdev_factor() -> None:
    """One endpoint at 50 % among four at 100 %: below mean - 1.9 stdev, ejected."""
    d = detector(SUCCESS_RATE)
    report(d, {3: 10})
    d.poll(random.Random(6), 10.0)
    assert d.ejected() == {key(3)}


def test_success_rate_ejects_nobody_when_all_are_alike() -> None:
    """Equal success rates have no outlier (stdev 0, nobody below the mean)."""
    d = detector(SUCCESS_RATE)
    report(d, dict.fromkeys(PORTS, 5))
    d.poll(random.Random(7), 10.0)
    assert d.ejected() == frozenset()


def test_enforcement_percentage_zero_never_ejects() -> None:
    """Detected outliers are ejected only by the enforcement draw."""
    config = OutlierDetection(failure_percentage_ejection=(50, 0, 5, 10))
    d = detector(config)
    report(d, {1: 20})
    d.poll(random.Random(8), 10.0)
    assert d.ejected() == frozenset()


def test_calls_before_the_last_sweep_do_not_count_twice() -> None:
    """Each sweep reads only the calls since the previous one."""
    d = detector(FAILURE_PERCENTAGE)
    rand = random.Random(9)
    report(d, {})
    d.poll(rand, 10.0)
    report(d, {1: 4})  # 20 % failures: under the threshold
    d.poll(rand, 20.0)
    assert d.ejected() == frozenset()


def test_an_ejected_endpoint_keeps_its_transport_state_for_its_return() -> None:
    """States reported while ejected are held back, and replayed when it returns."""
    d = detector(FAILURE_PERCENTAGE)
    rand = random.Random(10)
    report(d, {1: 15})
    d.poll(rand, 10.0)
    d.set_endpoint_state(key(1), ConnectivityState.CONNECTING, 15.0)
    d.set_endpoint_state(key(1), READY, 16.0)
    assert 1 not in picked(d, rand, 16.0)
    d.poll(rand, 50.0)
    assert 1 in picked(d, rand, 50.0)


def test_turning_detection_off_returns_every_endpoint() -> None:
    """A configuration with neither algorithm un-ejects all and stops the sweep."""
    d = detector(FAILURE_PERCENTAGE)
    rand = random.Random(11)
    report(d, {1: 15})
    d.poll(rand, 10.0)
    d.update_config(OutlierDetection(), 12.0)
    assert d.ejected() == frozenset()
    assert d.next_deadline() is None
    assert 1 in picked(d, rand, 12.0)


def test_endpoints_leaving_the_assignment_lose_their_data() -> None:
    """An endpoint removed and added back starts clean (not ejected)."""
    d = detector(FAILURE_PERCENTAGE)
    rand = random.Random(12)
    report(d, {1: 15})
    d.poll(rand, 10.0)
    others = LocalityEndpoints(LOCALITY.locality, 1, 0, LOCALITY.endpoints[1:])
    d.update([others], 11.0)
    d.update([LOCALITY], 12.0)
    assert d.ejected() == frozenset()
