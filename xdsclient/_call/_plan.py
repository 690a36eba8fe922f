"""One call's way through the data plane, as a state machine the front end drives.

Why: route, cluster, deadline, fault, attempts and retries are decided by the modules beside
this one; this ties them in gRPC's order (C-core: the config selector routes and hashes, the
fault filter delays and aborts, the retry filter runs attempts, each with a new pick), which
is also Envoy's (router, fault filter, router's retries), and keeps the front end to three
jobs: wait until a time, send an attempt, classify its outcome. Nothing here knows the front
end, reads a clock or sleeps. What differs between gRPC and HTTP (routing, the deadline and
retry rules, the request hash, how a call ends by itself) is the ``rules`` object
(`GRPC_RULES`, `HTTP_RULES`); the state machine is one.

    plan = CallPlan.begin(call, config, now=now, rng=rng, faults=faults, rules=HTTP_RULES)
    step = plan.start(now)
    # Delay(until) -> wait, then plan.delay_elapsed(now)
    # Attempt(...)  -> pick in step.cluster (step.request_hash for ring hash; HTTP: avoid
    #                  step.avoid where possible), send step.path / step.authority with the
    #                  header changes, then plan.attempt_done(outcome, now)
    # RetryAt(at)   -> wait, then plan.backoff_elapsed(now)
    # Finish(status, at, reply) -> the call ends with status (wait until ``at`` first); HTTP:
    #                  answer ``reply`` when set, else the last attempt's response

Transitions are the table `_TRANSITIONS`; an input the current state does not allow raises
`ProtocolError`. `cancel` ends the call from any state and gives back its active fault.
"""

from __future__ import annotations

import enum
import random

import attrs

from .. import ProtocolError
from ._config import CallConfig
from ._fault import ActiveFaults, FaultDecision
from ._reply import LocalReply
from ._request import CallRequest
from ._retry import AttemptOutcome, Finish, RetryAt
from ._route import RouteChoice
from ._rules import GRPC_RULES, CallRules, Retries
from ._status import Status

__all__ = ["Attempt", "AttemptRecord", "CallConfig", "CallPlan", "CallState", "Delay"]


@attrs.frozen(kw_only=True)
class Delay:
    """An injected fault delays the call until ``until``; then call `CallPlan.delay_elapsed`."""

    until: float


@attrs.frozen(kw_only=True)
class Attempt:
    """Send attempt ``number`` (1-based): a new pick in ``cluster``, under ``deadline``."""

    number: int
    cluster: str
    #: the ring-hash request hash (gRFC A42; Envoy's hash policies for HTTP), the same for
    #: every attempt of the call
    request_hash: int
    #: gRPC: the call's; HTTP: the earlier of the call's and the retry policy's per-try timeout
    deadline: float | None
    #: the path and authority to send (HTTP: after the route's rewrites)
    path: str = ""
    authority: str = ""
    #: HTTP: remove every request header named here, then add these (name, value) pairs, in
    #: order (`apply_header_changes`): the route's, virtual host's and route configuration's
    #: header mutations in Envoy's order, with the retry headers the router consumes removed
    headers_to_add: tuple[tuple[str, str], ...] = ()
    headers_to_remove: tuple[str, ...] = ()
    #: HTTP: endpoints (host, port) to avoid in this pick where another is available (the
    #: ``previous_hosts`` retry predicate: those already tried)
    avoid: frozenset[tuple[str, int]] = frozenset()

    @property
    def previous_attempts(self) -> int:
        """The ``grpc-previous-rpc-attempts`` value to send (A6), 0 on the first attempt."""
        return self.number - 1


@attrs.frozen(kw_only=True)
class AttemptRecord:
    """One finished attempt, for load reporting and outlier detection."""

    number: int
    cluster: str
    outcome: AttemptOutcome


class CallState(enum.Enum):
    """Where a call is."""

    START = "start"
    DELAYING = "delaying"  #: inside an injected delay
    ATTEMPTING = "attempting"  #: an attempt is in flight
    BACKOFF = "backoff"  #: waiting to retry
    DONE = "done"

    # Members are singletons: identity hashing (in C) keeps the table lookups cheap per call.
    __hash__ = object.__hash__


_S = CallState
#: (state, input) -> the states the input may lead to.
_TRANSITIONS: dict[tuple[CallState, str], frozenset[CallState]] = {
    (_S.START, "start"): frozenset({_S.DELAYING, _S.ATTEMPTING, _S.DONE}),
    (_S.DELAYING, "delay_elapsed"): frozenset({_S.DELAYING, _S.ATTEMPTING, _S.DONE}),
    (_S.ATTEMPTING, "attempt_done"): frozenset({_S.BACKOFF, _S.DONE}),
    (_S.BACKOFF, "backoff_elapsed"): frozenset({_S.ATTEMPTING, _S.DONE}),
    **{(state, "cancel"): frozenset({_S.DONE}) for state in _S if state is not _S.DONE},
}

# Every input may end the call, and each input that leads to an attempt allows it: the steps
# below set those two states directly (the table still decides every input and the others).
assert all(_S.DONE in allowed for allowed in _TRANSITIONS.values())
#: what the two inputs of every call allow, read directly when the call is where they expect
_AFTER_START = _TRANSITIONS[_S.START, "start"]
_AFTER_ATTEMPT = _TRANSITIONS[_S.ATTEMPTING, "attempt_done"]
_TO_ATTEMPT = ((_S.START, "start"), (_S.DELAYING, "delay_elapsed"), (_S.BACKOFF, "backoff_elapsed"))
assert all(_S.ATTEMPTING in _TRANSITIONS[key] for key in _TO_ATTEMPT)

Step = Delay | Attempt | RetryAt | Finish
_NO_HOSTS: frozenset[tuple[str, int]] = frozenset()


class CallPlan:
    """The decisions of one call, in order (see the module's docstring)."""

    __slots__ = (
        "_allowed",
        "_authority",
        "_avoid_previous",
        "_delay_started",
        "_fault_index",
        "_faults",
        "_headers_to_add",
        "_headers_to_remove",
        "_holding_fault",
        "_outcomes",
        "_path",
        "_per_try_timeout",
        "_retry",
        "_rng",
        "_rules",
        "active_faults",
        "choice",
        "deadline",
        "failure",
        "reply",
        "request_hash",
        "state",
    )

    #: the route and cluster, None when the call ends at start (``failure`` says why)
    choice: RouteChoice | None
    failure: Status | None
    #: HTTP: the local answer when the call ends at start
    reply: LocalReply | None
    #: the call's deadline (gRPC: after the route's max stream duration; HTTP: the route's
    #: timeout)
    deadline: float | None
    request_hash: int

    def __init__(self, *, rules: CallRules, active_faults: ActiveFaults, rng: random.Random):
        """A plan before its decisions: `begin` makes one and has ``rules`` decide it."""
        self.state = CallState.START
        self.active_faults = active_faults
        #: every finished attempt's outcome, in order (the records are built when asked for)
        self._outcomes: list[AttemptOutcome] = []
        self._rules = rules
        self._fault_index = 0
        self._delay_started = False
        self._holding_fault = False
        self._rng = rng
        self._allowed: frozenset[CallState] = frozenset()

    def decided(
        self,
        *,
        choice: RouteChoice | None,
        retry: Retries,
        failure: Status | None = None,
        reply: LocalReply | None = None,
        deadline: float | None = None,
        faults: tuple[FaultDecision, ...] = (),
        request_hash: int = 0,
        path: str = "",
        authority: str = "",
        headers_to_add: tuple[tuple[str, str], ...] = (),
        headers_to_remove: tuple[str, ...] = (),
        per_try_timeout: float | None = None,
        avoid_previous: bool = False,
    ) -> None:
        """The rules' decisions (`CallRules.decide`, once, from `begin`): the route (None
        with ``failure``, and for HTTP the local ``reply``, when the call ends at start), the
        retry state, the deadline, the faults, the request hash, and what each attempt sends
        (HTTP: the rewritten path and authority, the header changes, the per-try timeout,
        whether retries avoid the endpoints tried)."""
        self.choice = choice
        self.failure = failure
        self.reply = reply
        self.deadline = deadline
        self.request_hash = request_hash
        self._retry = retry
        self._faults = faults
        self._path = path
        self._authority = authority
        self._headers_to_add = headers_to_add
        self._headers_to_remove = headers_to_remove
        self._per_try_timeout = per_try_timeout
        self._avoid_previous = avoid_previous

    @classmethod
    def begin(
        cls,
        call: CallRequest,
        config: CallConfig,
        *,
        now: float,
        rng: random.Random,
        faults: ActiveFaults,
        rules: CallRules = GRPC_RULES,
    ) -> CallPlan:
        """Route ``call`` and decide its deadline, faults, hash and retry policy at ``now``, by
        ``rules`` (gRPC's unless told otherwise)."""
        plan = cls(rules=rules, active_faults=faults, rng=rng)
        rules.decide(plan, call, config, now=now, rng=rng)
        return plan

    @property
    def attempts(self) -> list[AttemptRecord]:
        """Every finished attempt, in order."""
        cluster = self.choice.cluster if self.choice is not None else ""
        return [
            AttemptRecord(number=number, cluster=cluster, outcome=outcome)
            for number, outcome in enumerate(self._outcomes, 1)
        ]

    @property
    def max_attempts(self) -> int:
        """The attempts the call may make in all (1: its route retries nothing)."""
        return self._retry.max_attempts

    # --- inputs ---

    def start(self, now: float) -> Step:
        """The first step of the call, at ``now``."""
        if self.state is CallState.START:
            self._allowed = _AFTER_START
        else:
            self._check("start")  # raises: only a new call starts
        if self.failure is not None:
            return self._finish(Finish(status=self.failure, at=now, reply=self.reply))
        if self._faults:
            return self._run_faults(now)
        return self._attempt(now)  # the usual call: no fault filter, or none decided

    def delay_elapsed(self, now: float) -> Step:
        """The injected delay ended at ``now``."""
        self._check("delay_elapsed")
        return self._run_faults(now)

    def attempt_done(self, outcome: AttemptOutcome, now: float) -> Step:
        """The attempt in flight ended with ``outcome`` at ``now``."""
        if self.state is CallState.ATTEMPTING:
            self._allowed = _AFTER_ATTEMPT
        else:
            self._check("attempt_done")  # raises: only an attempt in flight ends
        assert self.choice is not None
        retry = self._retry
        self._outcomes.append(outcome)  # `attempts` makes the records
        decision = retry.on_attempt_done(outcome, now, self._rng)
        if isinstance(decision, Finish):  # `_finish`, inline: the end of most calls
            if self._holding_fault:
                self._release_fault()
            self.state = CallState.DONE
            return decision
        self._to(CallState.BACKOFF)
        return decision

    def backoff_elapsed(self, now: float) -> Step:
        """The retry backoff ended at ``now``: the next attempt."""
        self._check("backoff_elapsed")
        return self._attempt(now)

    def cancel(self) -> None:
        """The caller cancelled the call (or its deadline passed): it ends now."""
        self._check("cancel")
        self._release_fault()
        self._to(CallState.DONE)

    # --- steps ---

    def _run_faults(self, now: float) -> Step:
        while self._fault_index < len(self._faults):
            decision = self._faults[self._fault_index]
            if not self._delay_started:
                self._delay_started = True
                if decision.delay > 0 and self.active_faults.begin(decision.max_active_faults):
                    self._holding_fault = True
                    self._to(CallState.DELAYING)
                    return Delay(until=self._cap(now + decision.delay))
            if self._past_deadline(now):
                return self._finish(self._rules.deadline_finish(now))
            self._release_fault()
            if decision.abort is not None and (
                decision.delay > 0 or self.active_faults.has_quota(decision.max_active_faults)
            ):
                return self._finish(self._rules.abort_finish(decision, now))
            self._fault_index += 1
            self._delay_started = False
        return self._attempt(now)

    def _attempt(self, now: float) -> Step:
        deadline = self.deadline
        if deadline is not None and now >= deadline:
            return self._finish(self._rules.deadline_finish(now))
        assert self.choice is not None
        self.state = CallState.ATTEMPTING  # allowed after every input that gets here
        if self._per_try_timeout:
            per_try = now + self._per_try_timeout
            deadline = per_try if deadline is None else min(deadline, per_try)
        return Attempt(
            number=self._retry.attempts + 1,
            cluster=self.choice.cluster,
            request_hash=self.request_hash,
            deadline=deadline,
            path=self._path,
            authority=self._authority,
            headers_to_add=self._headers_to_add,
            headers_to_remove=self._headers_to_remove,
            avoid=self._retry.avoid if self._avoid_previous else _NO_HOSTS,
        )

    def _finish(self, finish: Finish) -> Finish:
        if self._holding_fault:
            self._release_fault()
        self.state = CallState.DONE  # allowed after every input
        return finish

    def _release_fault(self) -> None:
        if self._holding_fault:
            self._holding_fault = False
            self.active_faults.end()

    def _past_deadline(self, now: float) -> bool:
        return self.deadline is not None and now >= self.deadline

    def _cap(self, at: float) -> float:
        return at if self.deadline is None else min(at, self.deadline)

    def _check(self, event: str) -> None:
        allowed = _TRANSITIONS.get((self.state, event))
        if allowed is None:
            raise ProtocolError(f"call in state {self.state.value} cannot take {event}")
        self._allowed = allowed

    def _to(self, state: CallState) -> None:
        if state not in self._allowed:  # pragma: no cover - a bug in this module
            raise ProtocolError(f"call in state {self.state.value} cannot go to {state.value}")
        self.state = state
