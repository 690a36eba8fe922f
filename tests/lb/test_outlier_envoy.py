"""Envoy's outlier detection alone (``outlier_detection_impl.cc``), fake time and a seeded
random source: the consecutive rules, their enforcement, ejection time and its cap, the
ejection limit, returns, the local-origin split, and Envoy's edges of the interval rules."""

from __future__ import annotations

import random

import attrs

from xdsclient.lb import (
    ConnectivityState,
    EnvoyOutlierDetector,
    LocalFailure,
    PickOutcome,
    PickRequest,
    child_policy_for,
)
from xdsclient.resources import (
    Endpoint,
    EnvoyOutlierRules,
    Locality,
    LocalityEndpoints,
    OutlierDetection,
    RoundRobin,
)

READY = ConnectivityState.READY
PORTS = (1, 2, 3, 4, 5)
LOCALITY = LocalityEndpoints(
    Locality(zone="a"), 1, 0, tuple(Endpoint("127.0.0.1", p) for p in PORTS)
)
#: Envoy's defaults but for an ejection limit that lets two of five go, and no interval rule
#: that could eject anyone in these tests (too few calls)
CONFIG = OutlierDetection(
    interval=10.0, base_ejection_time=30.0, max_ejection_time=300.0, max_ejection_percent=40
)


def key(port: int) -> tuple[str, int]:
    return ("127.0.0.1", port)


def config(**rules: object) -> OutlierDetection:
    """`CONFIG` with some of Envoy's rules changed (``OutlierDetection`` fields too)."""
    top = {k: rules.pop(k) for k in list(rules) if k in attrs.fields_dict(OutlierDetection)}
    return attrs.evolve(CONFIG, envoy=EnvoyOutlierRules(**rules), **top)  # type: ignore[arg-type]


def detector(settings: OutlierDetection = CONFIG) -> EnvoyOutlierDetector:
    d = EnvoyOutlierDetector(child_policy_for(RoundRobin(), cluster="c"), settings)
    d.update([LOCALITY], 0.0)
    for port in PORTS:
        d.set_endpoint_state(key(port), READY, 0.0)
    return d


def answer(d: EnvoyOutlierDetector, port: int, *statuses: int, now: float = 1.0) -> None:
    for status in statuses:
        d.call_outcome(key(port), status < 500, status, None, now)


def fail(d: EnvoyOutlierDetector, port: int, failure: LocalFailure, times: int) -> None:
    for _ in range(times):
        d.call_outcome(key(port), False, None, failure, 1.0)


def picked(d: EnvoyOutlierDetector, rand: random.Random, now: float) -> set[int]:
    ports = set()
    for _ in range(30):
        result = d.pick(PickRequest(), rand, now)
        assert result.outcome is PickOutcome.COMPLETE
        assert result.endpoint is not None
        ports.add(result.endpoint.port)
    return ports


def ejected_ports(d: EnvoyOutlierDetector) -> set[int]:
    return {port for _, port in d.ejected()}


def test_five_consecutive_5xx_eject_at_the_next_pick_and_traffic_moves() -> None:
    """The fifth 5xx in a row asks for an ejection, due at once; the next pick decides it."""
    d = detector()
    rand = random.Random(1)
    answer(d, 1, 500, 500, 500, 500)
    assert d.next_deadline() == 10.0  # four: nothing asked
    answer(d, 1, 500, now=2.5)
    assert d.next_deadline() == 2.5
    assert d.ejected() == frozenset()  # decided on the next poll or pick, as Envoy posts it
    assert picked(d, rand, 2.5) == {2, 3, 4, 5}
    assert ejected_ports(d) == {1}
    assert d.next_deadline() == 10.0


def test_a_success_resets_the_consecutive_count() -> None:
    """Four 5xx, one 200, four 5xx: never five in a row, never ejected."""
    d = detector()
    answer(d, 1, 503, 503, 503, 503, 200, 503, 503, 503, 503)
    d.poll(random.Random(2), 1.0)
    assert d.ejected() == frozenset()
    answer(d, 1, 503)
    d.poll(random.Random(2), 1.0)
    assert ejected_ports(d) == {1}


def test_4xx_are_successes_for_the_consecutive_rules() -> None:
    """A 404 between 5xx breaks the run, as any status below 500 does."""
    d = detector()
    answer(d, 1, 500, 500, 500, 404, 500, 500, 500)
    d.poll(random.Random(3), 1.0)
    assert d.ejected() == frozenset()


def test_only_502_503_504_count_as_gateway_failures() -> None:
    """With the 5xx rule out of reach, three gateway failures in a row eject; a 500 breaks a
    gateway run without being one."""
    d = detector(
        config(
            consecutive_5xx=100,
            consecutive_gateway_failure=3,
            enforcing_consecutive_gateway_failure=100,
        )
    )
    rand = random.Random(4)
    answer(d, 1, 502, 503, 500, 504)  # 500 resets the gateway count
    answer(d, 2, 500, 500, 500, 500)  # no gateway failure at all
    d.poll(rand, 1.0)
    assert d.ejected() == frozenset()
    answer(d, 3, 502, 503, 504)
    d.poll(rand, 1.0)
    assert ejected_ports(d) == {3}


def test_gateway_failures_are_not_enforced_by_default() -> None:
    """Envoy's default ``enforcing_consecutive_gateway_failure`` is 0: five 503 in a row
    eject only through the 5xx rule, here out of reach."""
    d = detector(config(consecutive_5xx=100))
    answer(d, 1, *[503] * 12)
    d.poll(random.Random(5), 1.0)
    assert d.ejected() == frozenset()


def test_an_unenforced_run_resets_its_count() -> None:
    """With enforcement 0 the fifth failure is decided (not ejected) and the count starts over,
    also losing failures counted before the decision (Envoy resets on its main thread);
    raising the enforcement later needs five new failures."""
    d = detector(config(enforcing_consecutive_5xx=0))
    rand = random.Random(6)
    answer(d, 1, 500, 500, 500, 500, 500, 500, 500)  # five asked (refused), then two
    d.poll(rand, 1.0)
    assert d.ejected() == frozenset()
    d.update_config(config(), 1.0)
    answer(d, 1, 500, 500, 500, 500)
    d.poll(rand, 1.0)
    assert d.ejected() == frozenset()  # four in the new run
    answer(d, 1, 500)
    d.poll(rand, 1.0)
    assert ejected_ports(d) == {1}


def test_enforcement_percentage_ejects_about_that_share_of_runs() -> None:
    """``enforcing_consecutive_5xx`` 30: about 30 % of decided runs eject (200 detectors)."""
    rand = random.Random(7)
    ejections = 0
    for _ in range(200):
        d = detector(config(enforcing_consecutive_5xx=30))
        answer(d, 1, *[500] * 5)
        d.poll(rand, 1.0)
        ejections += len(d.ejected())
    assert 35 <= ejections <= 85  # 60 expected; binomial sd 6.5


def test_ejection_time_grows_with_each_ejection_and_stops_at_max_ejection_time() -> None:
    """base 10 s, max 25 s: ejected for 10, then 20, then 25 s (not 30), each return at the
    first sweep at or after it."""
    d = detector(config(interval=1.0, base_ejection_time=10.0, max_ejection_time=25.0))
    rand = random.Random(8)
    now = 0.0
    for lasts in (10.0, 20.0, 25.0, 25.0):
        answer(d, 1, *[500] * 5, now=now)
        d.poll(rand, now)
        assert ejected_ports(d) == {1}
        at = now
        while ejected_ports(d):
            now += 1.0
            d.poll(rand, now)
        assert now - at == lasts


def test_the_backoff_decays_one_per_interval_once_back() -> None:
    """Back after 10 s, then two intervals not ejected: the next ejection lasts 10 s again
    only once the backoff went down, one interval at a time."""
    d = detector(config(interval=1.0, base_ejection_time=10.0))
    rand = random.Random(9)
    answer(d, 1, *[500] * 5, now=0.0)
    d.poll(rand, 0.0)
    for now in range(1, 11):
        d.poll(rand, float(now))
    assert d.ejected() == frozenset()  # back at 10 s, backoff 1
    d.poll(rand, 11.0)  # one interval after its return: backoff 0
    answer(d, 1, *[500] * 5, now=11.0)
    d.poll(rand, 11.0)
    for now in range(12, 21):
        d.poll(rand, float(now))
        assert ejected_ports(d) == {1}
    d.poll(rand, 21.0)
    assert d.ejected() == frozenset()  # 10 s again, not 20


def test_max_ejection_percent_counts_the_next_ejection() -> None:
    """Envoy allows an ejection while (ejected + 1) / hosts <= max_ejection_percent: with 40 %
    of five, two go and the third stays."""
    d = detector()
    rand = random.Random(10)
    for port in (1, 2, 3):
        answer(d, port, *[500] * 5)
    d.poll(rand, 1.0)
    assert ejected_ports(d) == {1, 2}


def test_max_ejection_percent_below_one_host_ejects_none_unless_always_eject_one_host() -> None:
    """Envoy's default 10 % of five hosts allows no ejection (gRPC always lets one go);
    ``always_eject_one_host`` lets the first go."""
    d = detector(config(max_ejection_percent=10))
    answer(d, 1, *[500] * 5)
    d.poll(random.Random(11), 1.0)
    assert d.ejected() == frozenset()
    d = detector(config(max_ejection_percent=10, always_eject_one_host=True))
    answer(d, 1, *[500] * 5)
    answer(d, 2, *[500] * 5)
    d.poll(random.Random(11), 1.0)
    assert ejected_ports(d) == {1}


def test_a_returning_endpoint_starts_its_counts_afresh() -> None:
    """Failures reported while ejected (calls in flight) are dropped on return: it takes five
    new ones to eject it again."""
    d = detector(config(interval=1.0, base_ejection_time=2.0))
    rand = random.Random(12)
    answer(d, 1, *[500] * 5, now=0.0)
    d.poll(rand, 0.0)
    answer(d, 1, 500, 500, 500, now=0.5)  # in flight when it was ejected
    d.poll(rand, 1.0)
    d.poll(rand, 2.0)
    assert d.ejected() == frozenset()
    assert 1 in picked(d, rand, 2.0)
    answer(d, 1, 500, 500, now=2.0)
    d.poll(rand, 2.0)
    assert d.ejected() == frozenset()


def test_local_origin_failures_count_apart_with_the_split() -> None:
    """With ``split_external_local_origin_errors`` five connect failures eject by the
    local-origin rule and leave the 5xx run alone; without it they are five 503."""
    split = detector(config(split_external_local_origin_errors=True, consecutive_5xx=6))
    answer(split, 1, 500, 500)
    fail(split, 1, LocalFailure.CONNECT, 5)
    answer(split, 2, 500)
    fail(split, 2, LocalFailure.CONNECT, 4)
    answer(split, 2, 500, 500, 500, 500)  # 5xx run: 5, the local run: 4 then reset
    split.poll(random.Random(13), 1.0)
    assert ejected_ports(split) == {1}
    plain = detector(config(consecutive_5xx=6))
    answer(plain, 1, 500)
    fail(plain, 1, LocalFailure.CONNECT, 3)
    fail(plain, 1, LocalFailure.TIMEOUT, 2)  # 504: six in a row
    plain.poll(random.Random(13), 1.0)
    assert ejected_ports(plain) == {1}


def test_resets_after_connecting_never_make_a_local_run_with_the_split() -> None:
    """Envoy's router reports the connection's success before a reset or a timeout, so with
    the split those never reach the local-origin threshold; connect failures do."""
    d = detector(config(split_external_local_origin_errors=True))
    fail(d, 1, LocalFailure.RESET, 10)
    fail(d, 2, LocalFailure.TIMEOUT, 10)
    d.poll(random.Random(14), 1.0)
    assert d.ejected() == frozenset()


def test_failure_percentage_ejects_at_the_threshold_itself() -> None:
    """Envoy ejects at ``100 - success rate >= threshold`` (gRPC needs more than it)."""
    d = detector(
        config(
            max_ejection_percent=100,
            consecutive_5xx=1000,
            enforcing_failure_percentage=100,
            failure_percentage=(50, 5, 10),
        )
    )
    for port in PORTS:
        answer(d, port, *[200, 500] * 5 if port == 1 else [200] * 10)
    d.poll(random.Random(15), 10.0)
    assert ejected_ports(d) == {1}


def test_local_origin_interval_rules_use_their_own_buckets_and_enforcement() -> None:
    """With the split, connect failures feed only the local-origin failure percentage, which
    ejects by its own enforcement (Envoy's default 0: none; 100: the failing one)."""

    def run(enforcement: int) -> set[int]:
        d = detector(
            config(
                split_external_local_origin_errors=True,
                consecutive_local_origin_failure=1000,
                enforcing_failure_percentage=100,
                enforcing_failure_percentage_local_origin=enforcement,
                failure_percentage=(50, 5, 10),
            )
        )
        for port in PORTS:
            answer(d, port, *[200] * 10)
            fail(d, port, LocalFailure.CONNECT, 20 if port == 3 else 0)
        d.poll(random.Random(16), 10.0)
        return ejected_ports(d)

    assert run(0) == set()
    assert run(100) == {3}


def test_an_outcome_without_status_or_failure_counts_by_ok() -> None:
    """A caller that knows only ``ok`` feeds the 5xx rule with 500 for a failure."""
    d = detector()
    for _ in range(5):
        d.call_outcome(key(1), False, None, None, 1.0)
    d.poll(random.Random(17), 1.0)
    assert ejected_ports(d) == {1}


def test_a_run_past_its_threshold_before_the_decision_is_one_draw() -> None:
    """Twenty 5xx before the next poll ask once (the count must equal the threshold), so the
    share of ejections stays the enforcement's (about 30 % of 200), not one draw per failure."""
    rand = random.Random(18)
    ejections = 0
    for _ in range(200):
        d = detector(config(enforcing_consecutive_5xx=30))
        answer(d, 1, *[500] * 20)
        d.poll(rand, 1.0)
        ejections += len(d.ejected())
    assert 35 <= ejections <= 85


def test_local_failures_without_the_split_are_gateway_failures() -> None:
    """Connect failures (503), resets (503) and timeouts (504) feed the gateway rule."""
    d = detector(
        config(
            consecutive_5xx=100,
            consecutive_gateway_failure=3,
            enforcing_consecutive_gateway_failure=100,
        )
    )
    fail(d, 1, LocalFailure.CONNECT, 1)
    fail(d, 1, LocalFailure.RESET, 1)
    fail(d, 1, LocalFailure.TIMEOUT, 1)
    d.poll(random.Random(19), 1.0)
    assert ejected_ports(d) == {1}


def test_two_rules_tripping_at_once_eject_once() -> None:
    """Five 503 trip the gateway and the 5xx rules together: one ejection (backoff 1), so the
    endpoint is back after one ``base_ejection_time``."""
    d = detector(
        config(interval=1.0, base_ejection_time=10.0, enforcing_consecutive_gateway_failure=100)
    )
    rand = random.Random(20)
    answer(d, 1, *[503] * 5, now=0.0)
    d.poll(rand, 0.0)
    assert ejected_ports(d) == {1}
    for now in range(1, 11):
        d.poll(rand, float(now))
    assert d.ejected() == frozenset()


def test_the_backoff_stops_growing_once_it_reaches_max_ejection_time() -> None:
    """Six ejections in a row with base 10 s and max 25 s leave the backoff at 4 (Envoy stops
    at ``backoff * base >= max + base``): four intervals later it is 0 and the next ejection
    lasts 10 s (from a backoff of 6 it would still last 25 s)."""
    d = detector(config(interval=1.0, base_ejection_time=10.0, max_ejection_time=25.0))
    rand = random.Random(21)
    now = 0.0
    for _ in range(6):
        answer(d, 1, *[500] * 5, now=now)
        d.poll(rand, now)
        while ejected_ports(d):
            now += 1.0
            d.poll(rand, now)
    for _ in range(4):  # back: one backoff less per interval
        now += 1.0
        d.poll(rand, now)
    answer(d, 1, *[500] * 5, now=now)
    d.poll(rand, now)
    ejected_at = now
    while ejected_ports(d):
        now += 1.0
        d.poll(rand, now)
    assert now - ejected_at == 10.0
