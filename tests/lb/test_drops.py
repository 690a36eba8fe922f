"""Drop overloads alone, with a seeded random source: categories in order, only while READY."""

from __future__ import annotations

import random

from xdsclient.lb import ConnectivityState, DropPolicy
from xdsclient.resources import DropOverload

READY = ConnectivityState.READY


def test_categories_drop_their_share_in_order() -> None:
    """Each category drops about its parts per million of what the earlier ones let through."""
    drops = DropPolicy([DropOverload("lb", 200_000), DropOverload("throttle", 500_000)])
    rand = random.Random(1)
    outcomes = [drops.drop(READY, rand) for _ in range(10_000)]
    assert 1_800 < outcomes.count("lb") < 2_200  # 20 %
    assert 3_700 < outcomes.count("throttle") < 4_300  # 50 % of the remaining 80 %
    assert drops.dropped == {"lb": outcomes.count("lb"), "throttle": outcomes.count("throttle")}


def test_drops_apply_only_while_the_cluster_is_ready() -> None:
    """A cluster that is not READY drops nothing (its calls queue or fail instead)."""
    drops = DropPolicy([DropOverload("all", 1_000_000)])
    rand = random.Random(2)
    for state in (
        ConnectivityState.IDLE,
        ConnectivityState.CONNECTING,
        ConnectivityState.TRANSIENT_FAILURE,
    ):
        assert drops.drop(state, rand) is None
    assert drops.drop(READY, rand) == "all"


def test_a_million_parts_drop_everything_and_zero_nothing() -> None:
    """1e6 parts per million drop every call; 0 never drops."""
    rand = random.Random(3)
    assert {DropPolicy([DropOverload("x", 0)]).drop(READY, rand) for _ in range(1000)} == {None}
    assert {DropPolicy([DropOverload("x", 10**6)]).drop(READY, rand) for _ in range(1000)} == {"x"}


def test_the_same_seed_drops_the_same_calls() -> None:
    """Drops are a function of the random source: a seed replays them exactly."""
    overloads = [DropOverload("a", 300_000)]
    first = [DropPolicy(overloads).drop(READY, r) for r in [random.Random(9)] for _ in range(100)]
    second = [DropPolicy(overloads).drop(READY, r) for r in [random.Random(9)] for _ in range(100)]
    assert first == second
