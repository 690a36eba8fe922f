"""The stream-life rules both stream loops follow (the client's driver and the load tester's
simulated client), without a stream: when requests may go out, what an ended stream means,
how long the next one waits."""

from __future__ import annotations

import pytest

from xdsclient import Backoff
from xdsclient._shell._stream_life import (
    LOCAL_WRITE_FAILURE,
    End,
    Phase,
    StreamLife,
    stream_status,
)

BACKOFF = Backoff(jitter=0.0)


def _half() -> float:
    return 0.5


def _answered(life: StreamLife) -> None:
    life.opening()
    life.established()
    life.received()


def test_requests_may_go_out_only_once_the_stream_is_established() -> None:
    """Dialled is not enough (gRFC A57): writes wait for the established stream."""
    life = StreamLife(BACKOFF)
    seen = [(life.phase, life.may_write)]
    for step in (life.opening, life.established, life.received):
        step()
        seen.append((life.phase, life.may_write))
    life.ended(End.FAILED, _half)
    seen.append((life.phase, life.may_write))
    assert seen == [
        (Phase.IDLE, False),
        (Phase.OPENING, False),
        (Phase.ESTABLISHED, True),
        (Phase.ANSWERED, True),
        (Phase.IDLE, False),
    ]


@pytest.mark.parametrize("established", [False, True], ids=["while-dialling", "established"])
def test_streams_that_end_before_any_response_are_reported_and_back_off_growing(
    established: bool,
) -> None:
    """Any end before a response (OK included) is a failure: 1 s, 1.6 s, 2.56 s..."""
    life = StreamLife(BACKOFF)
    delays = []
    for _ in range(3):
        life.opening()
        if established:
            life.established()
        verdict = life.ended(End.FAILED, _half)
        assert verdict.report
        delays.append(verdict.delay)
    assert delays == pytest.approx([1.0, 1.6, 2.56])


def test_a_stream_that_answered_resets_the_backoff_and_the_next_opens_at_once() -> None:
    """After a response the end is no failure: no report, no wait, and the next failure waits
    the first step again."""
    life = StreamLife(BACKOFF)
    for _ in range(2):
        life.opening()
        life.ended(End.FAILED, _half)
    _answered(life)
    verdict = life.ended(End.FAILED, _half)
    assert (verdict.report, verdict.delay) == (False, 0.0)
    life.opening()
    assert life.ended(End.FAILED, _half).delay == pytest.approx(1.0)


def test_a_poll_that_fails_after_an_answer_is_reported_and_waits_the_first_step() -> None:
    """Polling has no stream a server ends now and then: every failed poll is a failure."""
    life = StreamLife(BACKOFF, polling=True)
    life.opening()
    life.ended(End.FAILED, _half)
    _answered(life)
    verdict = life.ended(End.FAILED, _half)
    assert verdict.report
    assert verdict.delay == pytest.approx(1.0)


def test_a_stream_we_reset_reconnects_at_once_and_keeps_the_failure_count() -> None:
    """Our own reset is no failure; without an answer it does not reset the backoff either."""
    life = StreamLife(BACKOFF)
    life.opening()
    life.ended(End.FAILED, _half)
    life.opening()
    verdict = life.ended(End.OURS, _half)
    assert (verdict.report, verdict.delay, life.failures) == (False, 0.0, 1)
    _answered(life)
    life.ended(End.OURS, _half)
    assert life.failures == 0


def test_the_jitter_is_drawn_only_when_the_next_stream_must_wait() -> None:
    """No draw after an answered stream (a simulated client makes its random source lazily)."""
    draws = []

    def uniform() -> float:
        draws.append(1)
        return 0.5

    life = StreamLife(BACKOFF)
    _answered(life)
    life.ended(End.FAILED, uniform)
    assert draws == []
    life.opening()
    life.ended(End.FAILED, uniform)
    assert draws == [1]


def test_an_event_out_of_order_is_refused() -> None:
    """A response before the stream is established is a bug of the loop, said at once."""
    life = StreamLife(BACKOFF)
    life.opening()
    with pytest.raises(RuntimeError, match="'response' while opening"):
        life.received()


def test_a_streams_status_is_the_servers_not_grpcs_own_for_a_failed_write() -> None:
    """gRPC's INTERNAL for a write on a call that just ended, reported before or after the
    server's status, gives way to it; alone, it is all there is."""
    server = ("UNAVAILABLE", "going away")
    assert stream_status([server, LOCAL_WRITE_FAILURE]) == "UNAVAILABLE"
    assert stream_status([LOCAL_WRITE_FAILURE, server]) == "UNAVAILABLE"
    assert stream_status([LOCAL_WRITE_FAILURE]) == "INTERNAL"
    assert stream_status([("INTERNAL", "a server's own")]) == "INTERNAL"
    assert stream_status([]) is None
