"""Retries of one call (gRFC A44, over gRFC A6's retry rules): after each attempt, retry when,
or finish with which status.

Why a value per call: the decision needs the attempts so far, the backoff reached and the
call's deadline, and returns a time, not a sleep, so either front end can wait its own way.
The rules, in C-core's order (``RetryFilter::CallAttempt::ShouldRetry``):

- OK, or a code not in the policy's ``retry_on`` (A44 knows cancelled, deadline-exceeded,
  internal, resource-exhausted, unavailable), finishes with the attempt's status;
- a committed attempt (the server's response headers or a message reached the caller) is
  never retried;
- at most ``num_retries + 1`` attempts, capped at 5 (A6's ``maxAttempts`` limit);
- server pushback (``grpc-retry-pushback-ms``): a non-negative integer retries after exactly
  that many milliseconds and resets the backoff; anything else present stops retrying (A6);
- otherwise the n-th retry waits ``uniform(0, min(base * 2**(n-1), max))`` (A6's formula with
  A44's ``base_interval``/``max_interval``, defaults 25 ms / 250 ms, multiplier 2). C-core
  instead jitters the exponential backoff by +-20%; we follow the gRFC.
- never an attempt at or after the deadline: a retry that would start there waits for the
  deadline and finishes with DEADLINE_EXCEEDED, as gRPC's deadline timer does.

The route's retry policy wins over the virtual host's (A44).
"""

from __future__ import annotations

import random

import attrs

from ..resources import RetryPolicy
from ._reply import LocalReply, code_of_http
from ._status import OK_STATUS, Code, Status

__all__ = [
    "DEADLINE_EXCEEDED",
    "MAX_ATTEMPTS",
    "AttemptOutcome",
    "Finish",
    "RetryAt",
    "RetryState",
    "retry_codes",
]

#: A6: the most attempts a retry policy may ask for.
MAX_ATTEMPTS = 5
#: The status of a call whose deadline passed (gRPC's details).
DEADLINE_EXCEEDED = Status(code=Code.DEADLINE_EXCEEDED, details="Deadline Exceeded")
_CODES = {
    "cancelled": Code.CANCELLED,
    "deadline-exceeded": Code.DEADLINE_EXCEEDED,
    "internal": Code.INTERNAL,
    "resource-exhausted": Code.RESOURCE_EXHAUSTED,
    "unavailable": Code.UNAVAILABLE,
}


def _derived_code(outcome: AttemptOutcome) -> Code:
    """An HTTP outcome's code when the front end gives none (`code_of_http`; a per-try
    timeout is DEADLINE_EXCEEDED, a reset or connect failure UNAVAILABLE)."""
    if outcome.http_status is not None:
        return code_of_http(outcome.http_status)
    if outcome.reply is not None:
        return code_of_http(outcome.reply.status)
    if outcome.timed_out:
        return Code.DEADLINE_EXCEEDED
    return Code.UNAVAILABLE


@attrs.frozen(kw_only=True)
class AttemptOutcome:
    """How one attempt ended, as the front end classified it. gRPC gives ``code`` (and the
    fields after it); HTTP gives the fields before it, and ``code`` is derived when not
    given (`code_of_http`)."""

    #: HTTP: the response's status; None when no response came (a reset, a connect failure,
    #: the per-try timeout)
    http_status: int | None = None
    #: HTTP: the response's headers (lower-case names), for ``retriable-headers``
    headers: tuple[tuple[str, str], ...] = ()
    #: HTTP: the stream was reset (or the connection lost) before a response
    reset: bool = False
    #: HTTP: no connection could be made (refused, TLS handshake, timeout)
    connect_failure: bool = False
    #: HTTP: the attempt's deadline (`Attempt.deadline`) passed before a response
    timed_out: bool = False
    #: HTTP: the endpoint tried (host, port), for the ``previous_hosts`` retry predicate
    endpoint: tuple[str, int] | None = None
    #: HTTP: the front end answered locally (no healthy upstream: 503, a drop, the cluster
    #: is missing): the call ends with this reply, never retried, as Envoy's router does
    reply: LocalReply | None = None
    code: Code = attrs.field(default=attrs.Factory(_derived_code, takes_self=True))
    details: str = ""
    #: the attempt reached the caller (response headers or a message): no retry
    committed: bool = False
    #: the raw ``grpc-retry-pushback-ms`` trailer, None when absent
    pushback: str | None = None

    @property
    def status(self) -> Status:
        """The attempt's status (`OK_STATUS` itself for a plain OK)."""
        if self.code is Code.OK and not self.details:
            return OK_STATUS
        return Status(code=self.code, details=self.details)


@attrs.frozen(kw_only=True)
class RetryAt:
    """Start attempt number ``attempt`` (1-based) at ``at`` (the caller's clock)."""

    at: float
    attempt: int


@attrs.frozen(kw_only=True)
class Finish:
    """The call ends with ``status`` at ``at`` (later than now only to wait for the
    deadline); for HTTP, with ``reply`` when the answer is local."""

    status: Status
    at: float
    #: HTTP: the local answer to give (None: the last attempt's response is the answer)
    reply: LocalReply | None = None


_NO_CODES: frozenset[Code] = frozenset()
#: the ``retry_on`` codes of the policies seen lately, by the policy's identity (each value
#: holds its policy, so an id is not reused while its entry lives); a configuration keeps its
#: policies, so a call looks its codes up instead of building them
_CODES_OF: dict[int, tuple[RetryPolicy, frozenset[Code]]] = {}
_CODES_KEPT = 256


def retry_codes(policy: RetryPolicy) -> frozenset[Code]:
    """The codes ``policy`` retries on (built once per policy while it is in use)."""
    found = _CODES_OF.get(id(policy))
    if found is not None and found[0] is policy:
        return found[1]
    if len(_CODES_OF) >= _CODES_KEPT:
        _CODES_OF.clear()  # policies of configurations long gone
    codes = frozenset(_CODES[name] for name in policy.retry_on)
    _CODES_OF[id(policy)] = (policy, codes)
    return codes


class RetryState:
    """The retry decisions of one call."""

    __slots__ = ("_backoff_step", "_codes", "_policy", "attempts", "deadline", "max_attempts")

    #: gRPC retries never avoid a host (no retry host predicates in gRPC)
    avoid: frozenset[tuple[str, int]] = frozenset()

    def __init__(self, policy: RetryPolicy | None, deadline: float | None) -> None:
        self._policy = policy
        if policy is None:
            self._codes = _NO_CODES
            #: attempts allowed in all
            self.max_attempts = 1
        else:
            self._codes = retry_codes(policy)
            self.max_attempts = min(policy.num_retries + 1, MAX_ATTEMPTS)
        #: attempts finished so far
        self.attempts = 0
        self.deadline = deadline
        self._backoff_step = 0  # retries since the last pushback

    def on_attempt_done(
        self, outcome: AttemptOutcome, now: float, rng: random.Random
    ) -> RetryAt | Finish:
        """The decision after an attempt ended with ``outcome`` at ``now``."""
        self.attempts += 1
        code = outcome.code
        if (
            code is Code.OK
            or code not in self._codes
            or outcome.committed
            or self.attempts >= self.max_attempts
        ):
            ok = code is Code.OK and not outcome.details
            return Finish(status=OK_STATUS if ok else outcome.status, at=now)
        delay = self._delay(outcome.pushback, rng)
        if delay is None:
            return Finish(status=outcome.status, at=now)
        at = now + delay
        if self.deadline is not None and at >= self.deadline:
            return Finish(status=DEADLINE_EXCEEDED, at=max(now, self.deadline))
        return RetryAt(at=at, attempt=self.attempts + 1)

    def _delay(self, pushback: str | None, rng: random.Random) -> float | None:
        if pushback is not None:
            value = pushback.strip()
            if not value.isascii() or not value.isdigit():
                return None  # negative or malformed: the server says do not retry
            self._backoff_step = 0
            return int(value) / 1000
        assert self._policy is not None
        ceiling = min(self._policy.base_interval * 2**self._backoff_step, self._policy.max_interval)
        self._backoff_step += 1
        return rng.uniform(0, ceiling)
