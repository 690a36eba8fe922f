"""The deadline heap: arm, move, cancel, expire in order, bounded tombstones."""

from __future__ import annotations

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


@given(
    st.lists(st.tuples(st.integers(0, 20), st.floats(0, 100), st.booleans()), max_size=200),
    st.floats(0, 100),
)
def test_expire_matches_a_plain_dict_model(ops: list[tuple[int, float, bool]], now: float) -> None:
    d: Deadlines[int] = Deadlines()
    model: dict[int, float] = {}
    for key, when, cancel in ops:
        if cancel:
            d.cancel(key)
            model.pop(key, None)
        else:
            d.arm(key, when)
            model[key] = when
    assert d.next_deadline() == (min(model.values()) if model else None)
    due = sorted((w, k) for k, w in model.items() if w <= now)
    assert sorted(d.expire(now)) == sorted(k for _, k in due)
    assert [d.when(k) for k in sorted(model) if model[k] > now] == [
        model[k] for k in sorted(model) if model[k] > now
    ]
