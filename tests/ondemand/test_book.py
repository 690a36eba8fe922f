"""The sans-I/O bookkeeping of `resolve` (`ResolveBook`), decision by decision, with the time
passed in."""

from __future__ import annotations

from xdsclient import (
    Available,
    DataError,
    Missing,
    ResourceChanged,
    ResourceDoesNotExistError,
    ResourceValidationError,
    TimedOut,
)
from xdsclient._watch._resolve import Ask, ResolveBook

C = "type.googleapis.com/envoy.config.cluster.v3.Cluster"


def changed(name: str) -> ResourceChanged:
    return ResourceChanged(type_url=C, name=name, value=f"view of {name}", version="1")


def test_the_first_name_holds_and_later_ones_queue_until_it_is_answered() -> None:
    """NOT_STARTED -> hold; while unanswered, new names queue and a repeat joins; the answer
    releases the queue in one batch; after it, names hold at once."""
    book = ResolveBook(grace=30.0)
    assert book.ask(C, "a", cached=False) is Ask.HOLD
    assert book.ask(C, "a", cached=False) is Ask.JOIN
    assert book.ask(C, "b", cached=False) is Ask.QUEUE
    assert book.ask(C, "b", cached=False) is Ask.JOIN
    assert book.ask(C, "c", cached=True) is Ask.HOLD  # cached elsewhere: no request needed
    assert book.event(C, "a", changed("a")) == Available(view="view of a")
    assert book.answered(C, "a") == ["b"]
    assert book.answered(C, "a") == []
    assert book.ask(C, "d", cached=False) is Ask.HOLD


def test_what_an_event_settles() -> None:
    """A value is Available, a does-not-exist is Missing, an invalid value settles nothing."""
    book = ResolveBook(grace=30.0)
    book.ask(C, "a", cached=False)
    gone = ResourceDoesNotExistError(C, "a", "removed")
    invalid = ResourceValidationError(C, "a", "bad")
    assert book.event(C, "a", DataError(type_url=C, name="a", error=invalid)) is None
    missing = book.event(C, "a", DataError(type_url=C, name="a", error=gone))
    assert isinstance(missing, Missing)
    assert missing.error is gone
    assert book.ask(C, "a", cached=False) is Ask.ANSWER


def test_a_hold_is_due_a_grace_period_after_its_last_waiter() -> None:
    """Released only when no waiter came back within the grace period; counted by outcome."""
    book = ResolveBook(grace=30.0)
    book.ask(C, "a", cached=False)
    book.ask(C, "a", cached=False)
    book.event(C, "a", changed("a"))
    outcome = Available(view="view of a")
    assert book.finished(C, "a", outcome, now=10.0) is None  # another still waits
    assert book.finished(C, "a", outcome, now=12.0) == 42.0
    assert book.due(41.9) == []
    assert book.ask(C, "a", cached=True) is Ask.ANSWER  # back within the grace period
    assert book.finished(C, "a", outcome, now=50.0) == 80.0
    assert book.due(42.0) == []  # the old deadline no longer counts
    assert book.due(80.0) == [(C, "a")]
    assert len(book) == 0
    assert book.counts == {"available": 3, "missing": 0, "timed_out": 0}


def test_a_stale_hold_answers_nothing_until_the_server_sends_it_again() -> None:
    """After `stale`, a resolve joins; `fresh` (the copy sent again) answers it."""
    book = ResolveBook(grace=30.0)
    book.ask(C, "a", cached=False)
    book.event(C, "a", changed("a"))
    book.stale(C, ["a"])
    assert book.ask(C, "a", cached=True) is Ask.JOIN
    assert book.fresh(C, "a", "view again") == Available(view="view again")
    assert book.fresh(C, "a", "view again") is None  # known already


def test_a_queued_name_dropped_before_its_turn_is_not_held() -> None:
    """A queued name whose resolves all timed out and whose grace ran out leaves the queue."""
    book = ResolveBook(grace=5.0)
    book.ask(C, "a", cached=False)
    book.ask(C, "b", cached=False)
    assert book.finished(C, "b", TimedOut(timeout=1.0), now=1.0) == 6.0
    assert book.due(6.0) == [(C, "b")]
    assert book.answered(C, "a") == []


def test_a_name_asked_again_does_not_hold_back_a_later_name_s_release() -> None:
    """Releases queue in time order; a name asked again is released at its new time, and
    names queued behind its old record are still released at theirs."""
    book = ResolveBook(grace=30.0)
    for name in ("a", "b"):
        book.ask(C, name, cached=True)
    outcome = Available(view="view")
    assert book.finished(C, "a", outcome, now=0.0) == 30.0
    assert book.finished(C, "b", outcome, now=1.0) == 31.0
    assert book.ask(C, "a", cached=True) is Ask.JOIN  # held: its next outcome is awaited
    assert book.finished(C, "a", outcome, now=2.0) == 32.0
    assert book.next_release() == 30.0
    assert book.due(30.0) == []  # a's old record: asked again since
    assert book.due(31.0) == [(C, "b")]
    assert book.due(31.9) == []
    assert book.due(32.0) == [(C, "a")]
    assert book.next_release() is None
    assert len(book) == 0


def test_a_clock_that_goes_back_keeps_the_releases_in_order() -> None:
    """A release computed earlier than the last one queued waits for it (never out of order)."""
    book = ResolveBook(grace=10.0)
    for name in ("a", "b"):
        book.ask(C, name, cached=True)
    assert book.finished(C, "a", TimedOut(timeout=1.0), now=5.0) == 15.0
    assert book.finished(C, "b", TimedOut(timeout=1.0), now=4.0) == 15.0
    assert book.due(15.0) == [(C, "a"), (C, "b")]
