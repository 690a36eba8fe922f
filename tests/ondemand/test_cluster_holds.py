"""`ClusterHolds`, the sans-I/O book of a configuration watch's dynamic clusters: holders
count once per name, only a decisive resolve admits a name to the walk, and an admitted name
leaves the walk a grace period after its last holder (time passed in)."""

from __future__ import annotations

from xdsclient._watch._cluster_holds import ClusterHolds


def walked(holds: ClusterHolds) -> list[str]:
    """The names the walk includes now."""
    return list(holds.admitted)


def test_a_name_joins_the_walk_once_admitted_and_only_once() -> None:
    """Holding does not walk a name; the first decisive resolve admits it (re-walk), the
    next changes nothing."""
    holds = ClusterHolds(grace=10.0)
    holds.hold("b")
    assert walked(holds) == []
    assert holds.admit("b") is True
    assert holds.admit("b") is False
    assert walked(holds) == ["b"]


def test_an_admitted_name_leaves_a_grace_period_after_its_last_holder() -> None:
    """Two holders: the first release changes nothing; after the last, the name is due at
    ``now + grace`` and not a moment before."""
    holds = ClusterHolds(grace=10.0)
    holds.hold("b")
    holds.hold("b")
    holds.admit("b")
    assert holds.release("b", 1.0) is None
    assert holds.release("b", 2.0) == 12.0
    assert holds.due(11.9) is False
    assert walked(holds) == ["b"]
    assert holds.due(12.0) is True
    assert walked(holds) == []
    assert len(holds) == 0


def test_holding_again_in_the_grace_period_keeps_the_name() -> None:
    """A new holder before the grace period ends cancels the release."""
    holds = ClusterHolds(grace=10.0)
    holds.hold("b")
    holds.admit("b")
    holds.release("b", 0.0)
    holds.hold("b")
    assert holds.due(100.0) is False
    assert holds.holders("b") == 1


def test_a_name_never_admitted_is_forgotten_at_its_last_release() -> None:
    """A resolve that timed out never walked its name: nothing to release later."""
    holds = ClusterHolds(grace=10.0)
    holds.hold("b")
    assert holds.release("b", 0.0) is None
    assert len(holds) == 0
    assert holds.due(100.0) is False
