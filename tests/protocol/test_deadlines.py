"""The deadline heap: arm (one key or a batch), move, cancel, expire in order, bounded
tombstones."""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from xdsclient._protocol._deadlines import Deadlines


def test_expire_returns_due_keys_earliest_first_and_removes_them() -> None:
    d: Deadlines[str] = Deadlines()
    d.arm("b", 2.0)
    d.arm("a", 1.0)
    d.arm("c", 3.0)
    assert d.next_deadline() == 1.0
    assert d.expire(2.0) == ["a", "b"]
    assert d.next_deadline() == 3.0
    assert len(d) == 1


def test_rearming_moves_a_key_and_cancelling_forgets_it() -> None:
    d: Deadlines[str] = Deadlines()
    d.arm("a", 1.0)
    d.arm("a", 5.0)
    assert d.expire(4.0) == []
    assert d.when("a") == 5.0
    assert d.cancel("a") is True
    assert d.cancel("a") is False
    assert d.next_deadline() is None
    assert "a" not in d


def test_tombstones_do_not_accumulate() -> None:
    d: Deadlines[int] = Deadlines()
    for i in range(10_000):
        d.arm(i % 10, float(i))
    assert len(d) == 10
    assert len(d._heap) <= 2 * 64 + 10


def test_a_batch_expires_in_the_order_it_was_armed_without_its_moved_or_cancelled_keys() -> None:
    d: Deadlines[str] = Deadlines()
    d.arm_all(["c", "a", "b", "d"], 1.0)
    d.arm("z", 1.0)  # armed later, due at the same time: after the batch
    d.cancel("c")
    d.arm("b", 7.0)
    assert d.next_deadline() == 1.0
    assert d.expire(1.0) == ["a", "d", "z"]
    assert d.next_deadline() == 7.0
    d.arm_all([], 0.5)  # nothing to arm
    assert d.next_deadline() == 7.0


def test_a_batch_whose_keys_all_left_no_longer_sets_the_next_deadline() -> None:
    d: Deadlines[int] = Deadlines()
    d.arm_all(range(1000), 1.0)
    d.arm(5000, 9.0)
    for key in range(1000):
        d.cancel(key)
    assert d.next_deadline() == 9.0
    assert len(d) == 1
    assert len(d._heap) == 1


# an op: (key, when, kind) with kind 0 cancel, 1 arm, 2 arm with the next two keys in one batch
@given(
    st.lists(st.tuples(st.integers(0, 20), st.floats(0, 100), st.integers(0, 2)), max_size=200),
    st.floats(0, 100),
)
def test_expire_matches_a_plain_dict_model(ops: list[tuple[int, float, int]], now: float) -> None:
    d: Deadlines[int] = Deadlines()
    model: dict[int, float] = {}
    for key, when, kind in ops:
        if kind == 0:
            d.cancel(key)
            model.pop(key, None)
            continue
        keys = [key] if kind == 1 else [key, (key + 1) % 21, (key + 2) % 21]
        if kind == 2:
            d.arm_all(keys, when)
        else:
            d.arm(key, when)
        model.update(dict.fromkeys(keys, when))
        d.next_deadline()  # drops dead batches on the way, as the driver's loop does
    assert d.next_deadline() == (min(model.values()) if model else None)
    due = sorted((w, k) for k, w in model.items() if w <= now)
    assert sorted(d.expire(now)) == sorted(k for _, k in due)
    assert [d.when(k) for k in sorted(model) if model[k] > now] == [
        model[k] for k in sorted(model) if model[k] > now
    ]


def test_cancelling_the_last_of_many_keys_lets_go_of_their_table() -> None:
    """Once 10,000 armed keys are all cancelled, what is left is the size of an empty table."""
    d: Deadlines[int] = Deadlines()
    d.arm_all(range(10_000), 15.0)
    for key in range(10_000):
        assert d.cancel(key)
    assert not d.cancel(0)
    assert sys.getsizeof(d._live) == sys.getsizeof({})
    assert d.next_deadline() is None
