"""The flattened picker (`FlatRoundRobin`, built by the composed picker's leaves after each
change of their tree) picks exactly as walking the tree does: the same endpoints, localities,
drops and failures, for the same draws, through state changes, failover timers, circuit
breaking, drops and new assignments."""

from __future__ import annotations

import random
from typing import Any

import pytest

from xdsclient.lb import ComposedPicker, ConnectivityState, PickResult, _composed
from xdsclient.lb._round_robin import FlatRoundRobin
from xdsclient.testing.builders import LocalitySpec

from .test_composed import HOST, eds, snapshot

STATES = (
    ConnectivityState.READY,
    ConnectivityState.READY,
    ConnectivityState.CONNECTING,
    ConnectivityState.TRANSIENT_FAILURE,
    ConnectivityState.IDLE,
)


def _localities(rand: random.Random) -> list[LocalitySpec]:
    """Two priorities: three localities of random weights over ports 1 to 6, then one of
    ports 7 and 8."""
    first = [
        LocalitySpec(
            endpoints=[(HOST, 2 * i + 1), (HOST, 2 * i + 2)],
            zone=f"z{i}",
            weight=rand.randint(1, 5),
        )
        for i in range(3)
    ]
    return [*first, LocalitySpec(endpoints=[(HOST, 7), (HOST, 8)], zone="f", priority=1)]


def _seen(result: PickResult) -> tuple[Any, ...]:
    endpoint = result.endpoint
    return (
        result.outcome,
        None if endpoint is None else endpoint.port,
        result.cluster,
        result.locality,
        result.drop_category,
        result.error,
    )


def _scenario(seed: int, flat_picks: list[int]) -> list[tuple[Any, ...]]:
    """A seeded run of 3,000 steps (picks, some finished, endpoint states, time passing, new
    assignments) on one picker: what each pick gave; ``flat_picks`` counts the picks a flat
    picker was ready for."""
    steps = random.Random(seed)
    rand = random.Random(seed + 1)
    picker = ComposedPicker()
    now = 0.0

    def update() -> None:
        clusters = (
            eds("c", _localities(steps)),
            eds("d", _localities(steps), max_requests=3, drops={"lb": 200_000}),
        )
        picker.update(snapshot("c", *clusters), now)

    update()
    seen = []
    held: list[PickResult] = []
    for _ in range(3000):
        kind = steps.random()
        if kind < 0.6:
            cluster = "c" if steps.random() < 0.7 else "d"
            leaf = picker._leaves.get(cluster)
            result = picker.pick_in(cluster, {}, rand, now)
            if leaf is not None and leaf.flat is not None and leaf.flat is not _composed._NOT_FLAT:
                flat_picks.append(1)
            seen.append(_seen(result))
            if result.endpoint is not None:
                held.append(result)
        elif kind < 0.75 and held:
            picker.call_finished(held.pop(steps.randrange(len(held))), steps.random() < 0.8, now)
        elif kind < 0.95:
            port = steps.randint(1, 8)
            picker.set_endpoint_state((HOST, port), steps.choice(STATES), now)
        elif kind < 0.99:
            now += steps.choice((0.5, 3.0, 11.0, 1000.0))
            if steps.random() < 0.5:
                picker.poll(rand, now)
        else:
            update()
    return seen


@pytest.mark.parametrize("seed", range(6))
def test_flat_picks_are_the_trees_picks(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run with the leaves' flat pickers and with every pick walking the tree gives
    the same pick results, and the flat pickers served many of the picks."""
    flat_picks: list[int] = []
    with monkeypatch.context() as patched:
        patched.setattr(_composed._Leaf, "flatten", lambda self: _composed._NOT_FLAT)
        walked = _scenario(seed, flat_picks)
    assert not flat_picks
    assert _scenario(seed, flat_picks) == walked
    assert len(flat_picks) > 300


def test_a_flat_picker_goes_on_from_the_trees_position() -> None:
    """Round robin's position is the tree's: picks alternate between the flat picker and the
    tree's own walk and still go in order, and a new picker starts where the last one was."""
    picker = ComposedPicker()
    picker.update(snapshot("c", eds("c", [LocalitySpec(endpoints=[(HOST, 1), (HOST, 2)])])), 0)
    for port in (1, 2):
        picker.set_endpoint_state((HOST, port), ConnectivityState.READY, 0.0)
    rand = random.Random(3)
    leaf = picker._leaves["c"]
    ports = []
    for i in range(6):
        result = picker.pick_in("c", {}, rand, 0.0)
        assert isinstance(leaf.flat, FlatRoundRobin)
        assert leaf.flat is not _composed._NOT_FLAT
        if i % 2:
            leaf.flat = None  # rebuilt at the next pick, from the round robin's position
        assert result.endpoint is not None
        ports.append(result.endpoint.port)
    assert ports in ([1, 2, 1, 2, 1, 2], [2, 1, 2, 1, 2, 1])
