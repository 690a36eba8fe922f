"""The per-resource status transition table."""

from __future__ import annotations

import pytest

from xdsclient import ProtocolError, ResourceStatus
from xdsclient._protocol._status import TRANSITIONS, Input, next_status

S = ResourceStatus


@pytest.mark.parametrize("status", list(S))
@pytest.mark.parametrize("event", list(Input))
def test_every_pair_either_has_a_transition_or_raises(status: S, event: Input) -> None:
    if (status, event) in TRANSITIONS:
        assert isinstance(next_status(status, event), S)
    else:
        with pytest.raises(ProtocolError, match=f"status {status.value} cannot take {event.value}"):
            next_status(status, event)


@pytest.mark.parametrize(
    ("status", "event", "expected"),
    [
        (S.REQUESTED, Input.VALID, S.ACKED),
        (S.NACKED_BUT_CACHED, Input.VALID, S.ACKED),
        (S.REQUESTED, Input.INVALID, S.NACKED),
        (S.ACKED, Input.INVALID, S.NACKED_BUT_CACHED),
        (S.ACKED, Input.DELETED, S.DOES_NOT_EXIST),
        (S.ACKED, Input.DELETION_IGNORED, S.DOES_NOT_EXIST_BUT_CACHED),
        (S.NACKED, Input.DELETION_IGNORED, S.DOES_NOT_EXIST),
        (S.REQUESTED, Input.TIMED_OUT, S.DOES_NOT_EXIST),
        (S.REQUESTED, Input.TIMED_OUT_TRANSIENT, S.TIMEOUT),
        (S.ACKED, Input.EXPIRED, S.EXPIRED),
        (S.ACKED, Input.DATA_ERROR, S.RECEIVED_ERROR),
        (S.ACKED, Input.TRANSIENT_ERROR, S.RECEIVED_ERROR_BUT_CACHED),
        (S.TIMEOUT, Input.TRANSIENT_ERROR, S.RECEIVED_ERROR),
    ],
)
def test_transitions(status: S, event: Input, expected: S) -> None:
    assert next_status(status, event) is expected


@pytest.mark.parametrize("event", [Input.TIMED_OUT, Input.TIMED_OUT_TRANSIENT])
@pytest.mark.parametrize("status", [s for s in S if s is not S.REQUESTED])
def test_the_does_not_exist_timer_cannot_fire_once_anything_was_heard(
    status: S, event: Input
) -> None:
    with pytest.raises(ProtocolError):
        next_status(status, event)


@pytest.mark.parametrize("status", [s for s in S if not s.holds_value])
def test_a_ttl_cannot_expire_without_a_cached_value(status: S) -> None:
    with pytest.raises(ProtocolError):
        next_status(status, Input.EXPIRED)


def test_only_errors_that_leave_the_value_usable_keep_it() -> None:
    for (status, event), target in TRANSITIONS.items():
        if target.holds_value:
            assert event is Input.VALID or status.holds_value, (status, event, target)
        if event in (Input.DELETED, Input.DATA_ERROR, Input.EXPIRED):
            assert not target.holds_value
