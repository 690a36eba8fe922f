"""Weighted round robin (A58) alone: the scheduler, weights from reports, blackout, expiry."""

from __future__ import annotations

import random
from collections import Counter

from xdsclient.lb import PickRequest, WeightedRoundRobinPicker, key_of, scheduler_weights
from xdsclient.resources import WeightedRoundRobin

from .test_pickers import READY, ep

CONFIG = WeightedRoundRobin(
    blackout_period=10.0, weight_expiration_period=180.0, weight_update_period=1.0
)


def ready_picker(*ports: int, config: WeightedRoundRobin = CONFIG) -> WeightedRoundRobinPicker:
    picker = WeightedRoundRobinPicker(config)
    picker.update([ep(p) for p in ports], 0.0)
    for port in ports:
        picker.set_endpoint_state(("127.0.0.1", port), READY, 0.0)
    return picker


def shares(picker: WeightedRoundRobinPicker, now: float, n: int = 3000) -> Counter[int]:
    rand = random.Random(4)
    return Counter(picker.pick(PickRequest(), rand, now).endpoint.port for _ in range(n))  # type: ignore[union-attr]


def test_scheduler_weights_scale_to_uint16_and_give_unknown_endpoints_the_mean():
    """The largest weight becomes 65535; an endpoint without a weight gets the mean."""
    assert scheduler_weights([1.0, 2.0, 0.0]) == [32768, 65535, 49151]  # 1.5 * 65535 / 2


def test_scheduler_weights_cap_at_ten_times_the_mean_and_floor_at_one_percent_of_it():
    """A weight above 10x the mean is capped there (and scaled to 65535); a small weight is
    raised to 1% of the scaled mean."""
    capped = scheduler_weights([1.0] * 20 + [1000.0])  # mean 48.57: the cap is 485.7
    assert capped is not None
    assert (capped[0], capped[-1]) == (135, 65535)  # 65535 / 485.7 = 134.9
    floored = scheduler_weights([1.0, 1.0, 1.0, 1000.0])  # ratio 4: no cap
    assert floored == [164, 164, 164, 65535]  # 1 -> 66, raised to 1% of 65.535 * 250.75


def test_scheduler_falls_back_to_round_robin_with_fewer_than_two_or_no_weights():
    """One endpoint, or no weights known: None (round robin)."""
    assert scheduler_weights([5.0]) is None
    assert scheduler_weights([0.0, 0.0]) is None


def test_picks_follow_reported_weights_after_the_blackout():
    """qps / utilization weights share the picks once the blackout period is over."""
    picker = ready_picker(1, 2)
    for now in (0.0, 11.0):
        picker.report(("127.0.0.1", 1), qps=100, eps=0, utilization=0.5, now=now)
        picker.report(("127.0.0.1", 2), qps=100, eps=0, utilization=0.25, now=now)
    counts = shares(picker, now=11.0)
    assert 0.63 < counts[2] / 3000 < 0.70


def test_weights_are_ignored_during_the_blackout_period():
    """Inside blackout_period of the first report every endpoint is equal (round robin)."""
    picker = ready_picker(1, 2)
    picker.report(("127.0.0.1", 1), qps=100, eps=0, utilization=0.1, now=0.0)
    picker.report(("127.0.0.1", 2), qps=1, eps=0, utilization=0.9, now=0.0)
    assert picker.weight(("127.0.0.1", 1), 9.9) == 0
    counts = shares(picker, now=9.9)
    assert counts[1] == counts[2] == 1500


def test_weights_expire_after_the_expiration_period_and_blackout_starts_again():
    """No report for weight_expiration_period: the weight is dropped; a new report waits out
    a new blackout period."""
    picker = ready_picker(1, 2)
    picker.report(("127.0.0.1", 1), qps=10, eps=0, utilization=1.0, now=0.0)
    assert picker.weight(("127.0.0.1", 1), 100.0) == 10.0
    assert picker.weight(("127.0.0.1", 1), 180.0) == 0.0
    picker.report(("127.0.0.1", 1), qps=10, eps=0, utilization=1.0, now=181.0)
    assert picker.weight(("127.0.0.1", 1), 185.0) == 0.0
    assert picker.weight(("127.0.0.1", 1), 191.0) == 10.0


def test_errors_lower_the_weight_by_the_penalty():
    """weight = qps / (utilization + eps / qps * error_utilization_penalty)."""
    config = WeightedRoundRobin(blackout_period=0.0, error_utilization_penalty=2.0)
    picker = ready_picker(1, config=config)
    picker.report(("127.0.0.1", 1), qps=100, eps=25, utilization=0.5, now=0.0)
    assert picker.weight(("127.0.0.1", 1), 0.0) == 100 / (0.5 + 0.25 * 2.0)


def test_becoming_ready_again_restarts_the_blackout():
    """An endpoint that reconnects serves its weight only after a new blackout period."""
    picker = ready_picker(1)
    picker.report(("127.0.0.1", 1), qps=10, eps=0, utilization=1.0, now=0.0)
    picker.report(("127.0.0.1", 1), qps=10, eps=0, utilization=1.0, now=20.0)
    assert picker.weight(("127.0.0.1", 1), 20.0) == 10.0
    picker.set_endpoint_state(("127.0.0.1", 1), READY.__class__.IDLE, 20.0)
    picker.set_endpoint_state(("127.0.0.1", 1), READY, 20.0)
    picker.report(("127.0.0.1", 1), qps=10, eps=0, utilization=1.0, now=21.0)
    assert picker.weight(("127.0.0.1", 1), 25.0) == 0.0


def test_the_schedule_is_rebuilt_only_every_weight_update_period():
    """New weights take effect at the first pick a weight_update_period after the last build."""
    config = WeightedRoundRobin(blackout_period=0.0, weight_update_period=5.0)
    picker = ready_picker(1, 2, config=config)
    rand = random.Random(0)
    picker.pick(PickRequest(), rand, 0.0)  # builds the schedule with no weights
    picker.report(("127.0.0.1", 1), qps=1, eps=0, utilization=1.0, now=1.0)
    picker.report(("127.0.0.1", 2), qps=9, eps=0, utilization=1.0, now=1.0)
    early = Counter(picker.pick(PickRequest(), rand, 4.0).endpoint.port for _ in range(1000))  # type: ignore[union-attr]
    assert early[1] == early[2]
    late = Counter(picker.pick(PickRequest(), rand, 5.0).endpoint.port for _ in range(1000))  # type: ignore[union-attr]
    assert late[2] > 5 * late[1]


def test_weights_survive_an_update_by_key():
    """An update keeps the weights of endpoints that stay."""
    picker = ready_picker(1, 2)
    picker.report(("127.0.0.1", 1), qps=10, eps=0, utilization=1.0, now=0.0)
    picker.update([ep(1), ep(3)], 1.0)
    assert picker.weight(key_of(ep(1)), 15.0) == 10.0
