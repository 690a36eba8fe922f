"""Retries and timeouts of one HTTP request, as Envoy's router decides them.

Why a value per request, beside gRPC's `RetryState`: Envoy's conditions read the response
(status, headers) or how the attempt failed (reset, connect failure, per-try timeout), not a
gRPC status, and its back-off differs from gRPC's. It has the same interface (`Retries`), so
`CallPlan` runs both. What it follows, from Envoy's ``router/retry_state_impl.cc``,
``router.cc`` and ``common/backoff_strategy.cc``:

- ``retry_on`` conditions: ``5xx`` (any 5xx response, and a reset, a connect failure or a
  per-try timeout: no response), ``gateway-error`` (502, 503, 504, and the same failures
  without a response), ``reset`` (no response: a reset, a connect failure, a per-try
  timeout), ``connect-failure``, ``retriable-4xx`` (409), ``retriable-status-codes`` (the
  policy's ``retriable_status_codes`` and those the request's
  ``x-envoy-retriable-status-codes`` lists), ``retriable-headers`` (any of the policy's response
  header matchers, or a response header named in the request's
  ``x-envoy-retriable-header-names``: a comma-separated list of names, each matching when
  the header is present, Envoy's name-only matchers), and the gRPC conditions
  (``cancelled``, ``unavailable``...) on a response's ``grpc-status`` header; a response
  carrying ``x-envoy-ratelimited`` is retried only under ``envoy-ratelimited``.
  ``refused-stream`` and ``reset-before-request`` are not told apart from a reset (the front
  end does not report them): they retry nothing here.
- ``num_retries`` retries at most (Envoy's default 1 when a policy is present; the resource
  decoder reads it); the request headers ``x-envoy-retry-on`` (conditions added to the
  policy's), ``x-envoy-max-retries`` (replaces ``num_retries`` when any condition is on),
  ``x-envoy-retriable-status-codes`` and ``x-envoy-retriable-header-names`` are read, and
  never forwarded.
- back-off: Envoy's ``JitteredExponentialBackOffStrategy``: the n-th retry waits a whole
  number of milliseconds drawn uniformly from [0, min(base * 2^(n-1), max)), with ``base``
  25 ms and ``max`` 10 x base unless the policy says otherwise (the decoder fills both).
  Envoy's older ``JitteredBackOffStrategy`` drew from [0, (2^n - 1) * base) instead; we
  follow the current one.
- timeouts: the route's ``timeout`` (Envoy's default 15 s, 0: none; the request's own
  deadline too, whichever is earlier) covers the whole request, retries and back-off
  included: when it passes the request ends with Envoy's 504 ``upstream request timeout``; a
  retry that would start at or after it is not made. ``per_try_timeout`` bounds each attempt
  (`CallPlan` caps `Attempt.deadline` with it): one that passes is retried as a reset, or
  ends the request with the same 504.
- an attempt that produced a response which is not retried is the answer, whatever its
  status; one that failed without a response answers Envoy's 503 ``upstream connect error or
  disconnect/reset before headers. reset reason: ...``; one the front end answered locally
  (`AttemptOutcome.reply`: no healthy upstream, a drop) is the answer, never retried.
- ``previous_hosts`` (the retry host predicate): `avoid` is every endpoint tried so far.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from ..resources import RetryPolicy
from ._reply import LocalReply
from ._retry import AttemptOutcome, Finish, RetryAt
from ._status import Code, Status

__all__ = [
    "CONSUMED_HEADERS",
    "MAX_RETRIES_HEADER",
    "RETRIABLE_HEADER_NAMES_HEADER",
    "RETRIABLE_STATUS_CODES_HEADER",
    "RETRY_ON_HEADER",
    "UPSTREAM_TIMEOUT",
    "HttpRetryState",
    "carries_retry_headers",
    "timeout_finish",
]

RETRY_ON_HEADER = "x-envoy-retry-on"
MAX_RETRIES_HEADER = "x-envoy-max-retries"
#: names response headers whose presence makes a response retriable (``retriable-headers``)
RETRIABLE_HEADER_NAMES_HEADER = "x-envoy-retriable-header-names"
#: lists statuses added to the policy's for ``retriable-status-codes``
RETRIABLE_STATUS_CODES_HEADER = "x-envoy-retriable-status-codes"
#: Request headers Envoy's router reads (for the retry state) and never forwards.
CONSUMED_HEADERS = (
    RETRY_ON_HEADER,
    MAX_RETRIES_HEADER,
    RETRIABLE_HEADER_NAMES_HEADER,
    RETRIABLE_STATUS_CODES_HEADER,
)
#: Envoy's body when the route's timeout or a per-try timeout passes.
UPSTREAM_TIMEOUT = b"upstream request timeout"
_HEADER_CONDITIONS = frozenset(
    {
        "5xx",
        "gateway-error",
        "reset",
        "connect-failure",
        "envoy-ratelimited",
        "retriable-4xx",
        "refused-stream",
        "retriable-status-codes",
        "retriable-headers",
    }
)
_GRPC_CODES = {
    "cancelled": Code.CANCELLED,
    "deadline-exceeded": Code.DEADLINE_EXCEEDED,
    "internal": Code.INTERNAL,
    "resource-exhausted": Code.RESOURCE_EXHAUSTED,
    "unavailable": Code.UNAVAILABLE,
}
_NO_RESPONSE = frozenset({"5xx", "gateway-error", "reset"})
_GATEWAY_ERRORS = (502, 503, 504)


def carries_retry_headers(headers: Mapping[str, str]) -> bool:
    """Whether a request's ``headers`` (by lower-case name) hold any of `CONSUMED_HEADERS`:
    the router reads and removes them, so such a request is planned and its headers changed."""
    return not headers.keys().isdisjoint(CONSUMED_HEADERS)


def _listed(headers: Mapping[str, str], name: str) -> tuple[str, ...]:
    """The items of a comma-separated request header (lower case, stripped, none empty)."""
    value = headers.get(name)
    if not value:
        return ()
    return tuple(item for item in (part.strip().lower() for part in value.split(",")) if item)


def timeout_finish(at: float) -> Finish:
    """Envoy's 504 when a request's timeout passes."""
    reply = LocalReply(status=504, body=UPSTREAM_TIMEOUT)
    return Finish(
        status=Status(code=Code.DEADLINE_EXCEEDED, details="upstream request timeout"),
        at=at,
        reply=reply,
    )


class HttpRetryState:
    """The retry decisions of one HTTP request."""

    __slots__ = (
        "_codes",
        "_grpc_codes",
        "_header_names",
        "_interval",
        "_max_interval",
        "_policy",
        "_retry_on",
        "_tried",
        "attempts",
        "deadline",
        "retries_left",
    )

    def __init__(
        self, policy: RetryPolicy | None, deadline: float | None, headers: Mapping[str, str]
    ) -> None:
        self._policy = policy
        #: attempts finished so far
        self.attempts = 0
        self.deadline = deadline
        self._tried: set[tuple[str, int]] = set()
        header = headers.get(RETRY_ON_HEADER)
        if policy is None and header is None:  # the usual request: nothing to retry on
            self._retry_on: frozenset[str] = frozenset()
            self._grpc_codes: frozenset[Code] = frozenset()
            self._codes: frozenset[int] = frozenset()
            #: the response headers the request names as retriable (lower case)
            self._header_names: tuple[str, ...] = ()
            #: retries still allowed (none without a condition)
            self.retries_left = 0
            self._interval = self._max_interval = 25
            return
        retry_on = set(policy.http_retry_on) if policy else set()
        for condition in (header or "").split(","):
            condition = condition.strip()
            if condition in _HEADER_CONDITIONS:
                retry_on.add(condition)
        self._retry_on = frozenset(retry_on)
        self._grpc_codes = (
            frozenset(_GRPC_CODES[name] for name in policy.retry_on) if policy else frozenset()
        )
        codes = _listed(headers, RETRIABLE_STATUS_CODES_HEADER)
        self._codes = frozenset(policy.retriable_status_codes if policy else ()).union(
            int(code) for code in codes if code.isascii() and code.isdigit()
        )
        self._header_names = _listed(headers, RETRIABLE_HEADER_NAMES_HEADER)
        retries = policy.num_retries if policy else 1
        count = headers.get(MAX_RETRIES_HEADER, "").strip()
        on = bool(self._retry_on or self._grpc_codes)
        if on and count.isascii() and count.isdigit():
            retries = int(count)
        self.retries_left = retries if on else 0
        base = policy.base_interval if policy else 0.025
        self._interval = max(1, round(base * 1000))  # ms, Envoy's integer milliseconds
        self._max_interval = max(
            self._interval, round((policy.max_interval if policy else 10 * base) * 1000)
        )

    @property
    def max_attempts(self) -> int:
        """The attempts the request may make in all (those made, the next, the retries
        left)."""
        return self.attempts + 1 + self.retries_left

    @property
    def avoid(self) -> frozenset[tuple[str, int]]:
        """Every endpoint tried so far (the ``previous_hosts`` predicate)."""
        return frozenset(self._tried)

    def on_attempt_done(
        self, outcome: AttemptOutcome, now: float, rng: random.Random
    ) -> RetryAt | Finish:
        """The decision after an attempt ended with ``outcome`` at ``now``."""
        self.attempts += 1
        if outcome.endpoint is not None:
            self._tried.add(outcome.endpoint)
        if outcome.reply is not None:
            return Finish(status=outcome.status, at=now, reply=outcome.reply)
        if outcome.timed_out and self.deadline is not None and now >= self.deadline:
            return timeout_finish(now)  # the route's timeout, not the per-try one
        if self.retries_left <= 0 or outcome.committed or not self._would_retry(outcome):
            return self._final(outcome, now)
        self.retries_left -= 1
        at = now + self._backoff(rng)
        if self.deadline is not None and at >= self.deadline:
            return timeout_finish(max(now, self.deadline))
        return RetryAt(at=at, attempt=self.attempts + 1)

    def _would_retry(self, outcome: AttemptOutcome) -> bool:
        retry_on = self._retry_on
        status = outcome.http_status
        if status is None:  # no response: reset, connect failure or per-try timeout
            if outcome.connect_failure and "connect-failure" in retry_on:
                return True
            return not retry_on.isdisjoint(_NO_RESPONSE)
        headers = dict(outcome.headers)
        if "x-envoy-ratelimited" in headers:
            return "envoy-ratelimited" in retry_on
        if status >= 500 and "5xx" in retry_on:
            return True
        if status in _GATEWAY_ERRORS and "gateway-error" in retry_on:
            return True
        if status == 409 and "retriable-4xx" in retry_on:
            return True
        if status in self._codes and "retriable-status-codes" in retry_on:
            return True
        if "retriable-headers" in retry_on and self._retriable_headers(headers):
            return True
        return self._grpc_retry(headers)

    def _retriable_headers(self, headers: Mapping[str, str]) -> bool:
        """Whether a response header matches one of the policy's matchers or is present
        under a name the request listed."""
        policy = self._policy
        if policy is not None and any(m.matches(headers) for m in policy.retriable_headers):
            return True
        return any(name in headers for name in self._header_names)

    def _grpc_retry(self, headers: Mapping[str, str]) -> bool:
        value = headers.get("grpc-status", "").strip()
        if not self._grpc_codes or not value.isdigit():
            return False
        return int(value) in self._grpc_codes

    def _backoff(self, rng: random.Random) -> float:
        """The next back-off, seconds (Envoy's JitteredExponentialBackOffStrategy)."""
        interval = self._interval
        self._interval = interval * 2 if interval < self._max_interval // 2 else self._max_interval
        return min(rng.randrange(interval), self._max_interval) / 1000

    def _final(self, outcome: AttemptOutcome, now: float) -> Finish:
        if outcome.http_status is not None:
            return Finish(status=outcome.status, at=now)
        if outcome.timed_out:
            return timeout_finish(now)
        reason = "connection failure" if outcome.connect_failure else "remote reset"
        body = f"upstream connect error or disconnect/reset before headers. reset reason: {reason}"
        reply = LocalReply.error(503, outcome.details or reason, body.encode())
        return Finish(status=outcome.status, at=now, reply=reply)
