"""The life of one xDS stream, as rules: when requests may go out, whether a stream that ended
is a failure to report, how long to wait before the next one, and which status it ended with.

Why one pure module: two loops run streams of the protocol core, the client's `StreamDriver`
and the load tester's simulated client (which drives its gRPC calls itself, for its memory and
CPU targets). Each had its own copy of these rules and they drifted apart (the load tester
started does-not-exist timers at the dial, and reconnected at once after a stream the server
ended with OK before any response). Both now ask this object; it does no I/O and reads no clock
or random source (the caller passes a uniform draw in), so every rule is tested without a stream.

Rules (gRFC A57, and gRPC's connection backoff):
- Requests, and with them does-not-exist timers, go out only once the stream is established,
  not when it is dialled.
- A stream that ends, with any status including OK, before a response was received on it is a
  connectivity failure: it is reported and the next stream waits out the backoff, which grows
  over consecutive failures.
- A stream that ended after a response resets the backoff and the next one opens at once
  (a server may end streams now and then). Polling (REST-JSON) has no stream to end: every
  failed poll is a failure, backed off from the first step again once a poll was answered.
- A stream we ended ourselves (a reset the load tester injects) is no failure: the next opens at
  once, and the backoff resets only if it had been answered.
- The status a stream ended with is the one the server sent: a write that failed because the
  call had just ended makes gRPC report its own INTERNAL ("Internal error from Core") just after
  (or just before) the server's status, and that says nothing of why.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs

from .._call_status import LOCAL_WRITE_FAILURE, stream_status
from .._settings._config import Backoff

__all__ = ["LOCAL_WRITE_FAILURE", "End", "Phase", "StreamLife", "Verdict", "stream_status"]


class Phase(enum.Enum):
    """Where a stream is in its life."""

    IDLE = "idle"  #: no stream (none yet, or between two)
    OPENING = "opening"  #: dialled, not yet established: nothing may be written
    ESTABLISHED = "established"  #: requests may be written; no response yet
    ANSWERED = "answered"  #: at least one response received on this stream


class End(enum.Enum):
    """How a stream ended."""

    FAILED = "failed"  #: the server or the connection ended it (any status, OK included)
    OURS = "ours"  #: we ended it on purpose (a reset), not a failure


@attrs.frozen(kw_only=True, slots=True)
class Verdict:
    """What to do after a stream ended."""

    #: a connectivity failure: report it (watchers hear of it, A57)
    report: bool
    #: seconds to wait before the next stream (0: at once)
    delay: float


@attrs.frozen(kw_only=True, slots=True)
class _Rule:
    report: bool
    back_off: bool
    reset: bool


#: (answered, how it ended, polling) -> the rule (see the module's docstring)
_AFTER_END: dict[tuple[bool, End, bool], _Rule] = {
    (False, End.FAILED, False): _Rule(report=True, back_off=True, reset=False),
    (True, End.FAILED, False): _Rule(report=False, back_off=False, reset=True),
    (False, End.FAILED, True): _Rule(report=True, back_off=True, reset=False),
    (True, End.FAILED, True): _Rule(report=True, back_off=True, reset=True),
    (False, End.OURS, False): _Rule(report=False, back_off=False, reset=False),
    (True, End.OURS, False): _Rule(report=False, back_off=False, reset=True),
    (False, End.OURS, True): _Rule(report=False, back_off=False, reset=False),
    (True, End.OURS, True): _Rule(report=False, back_off=False, reset=True),
}

#: (phase, event) -> the next phase; an event missing here is a bug in the loop
_NEXT: dict[tuple[Phase, str], Phase] = {
    (Phase.IDLE, "open"): Phase.OPENING,
    (Phase.OPENING, "established"): Phase.ESTABLISHED,
    (Phase.ESTABLISHED, "response"): Phase.ANSWERED,
    (Phase.ANSWERED, "response"): Phase.ANSWERED,
}


class StreamLife:
    """The rules for one stream slot: one object lives across all its reconnects."""

    __slots__ = ("_attempt", "_backoff", "_phase", "_polling")

    def __init__(self, backoff: Backoff, *, polling: bool = False) -> None:
        """``polling``: the transport polls (REST-JSON): a failure after a response is a
        failure too."""
        self._backoff = backoff
        self._polling = polling
        self._phase = Phase.IDLE
        self._attempt = 0

    @property
    def phase(self) -> Phase:
        """Where the current stream is."""
        return self._phase

    @property
    def may_write(self) -> bool:
        """Whether requests may be written now: only on an established stream (gRFC A57: the
        does-not-exist timers of the names they carry start as they are written)."""
        return self._phase is Phase.ESTABLISHED or self._phase is Phase.ANSWERED

    @property
    def failures(self) -> int:
        """Consecutive failures so far (the next backoff step)."""
        return self._attempt

    def opening(self) -> None:
        """A stream is being dialled."""
        self._step("open")

    def established(self) -> None:
        """The stream is established: requests may go out from now."""
        self._step("established")

    def received(self) -> None:
        """A response was read on the stream."""
        self._step("response")

    def ended(self, how: End, uniform: Callable[[], float]) -> Verdict:
        """The stream ended; ``uniform`` draws the backoff's jitter in [0, 1) (called only
        when the next stream must wait)."""
        answered = self._phase is Phase.ANSWERED
        self._phase = Phase.IDLE
        rule = _AFTER_END[answered, how, self._polling]
        if rule.reset:
            self._attempt = 0
        if not rule.back_off:
            return Verdict(report=rule.report, delay=0.0)
        delay = self._backoff.delay(self._attempt, uniform())
        self._attempt += 1
        return Verdict(report=rule.report, delay=delay)

    def _step(self, event: str) -> None:
        following = _NEXT.get((self._phase, event))
        if following is None:
            raise RuntimeError(f"stream life: {event!r} while {self._phase.value}")
        self._phase = following
