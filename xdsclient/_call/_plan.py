"""One call's way through the data plane, as a state machine the front end drives.

Why: route, cluster, deadline, fault, attempts and retries are decided by the modules beside
this one; this ties them in gRPC's order (C-core: the config selector routes and hashes, the
fault filter delays and aborts, the retry filter runs attempts, each with a new pick) and
keeps the front end to three jobs: wait until a time, send an attempt, classify its outcome.
Nothing here knows the front end, reads a clock or sleeps.

    plan = CallPlan.begin(call, config, now=now, rng=rng, faults=faults)
    step = plan.start(now)
    # Delay(until) -> wait, then plan.delay_elapsed(now)
    # Attempt(...)  -> pick in step.cluster (step.request_hash for ring hash), send, then
    #                  plan.attempt_done(outcome, now)
    # RetryAt(at)   -> wait, then plan.backoff_elapsed(now)
    # Finish(status, at) -> the call ends with status (wait until ``at`` first)

Transitions are the table `_TRANSITIONS`; an input the current state does not allow raises
`ProtocolError`. `cancel` ends the call from any state and gives back its active fault.
"""

from __future__ import annotations

import enum
import random

import attrs

from .. import ProtocolError
from ..resources import HttpConnectionManager, ListenerView, RouteConfigurationView, VirtualHost
from ._deadline import capped_deadline, max_stream_duration
from ._fault import (
    FAULT_FILTER_TYPE,
    ActiveFaults,
    FaultDecision,
    decide_fault,
    fault_policies,
)
from ._hash import call_hash
from ._request import CallRequest
from ._retry import DEADLINE_EXCEEDED, AttemptOutcome, Finish, RetryAt, RetryState
from ._route import RouteChoice, Router
from ._status import Status

__all__ = ["Attempt", "AttemptRecord", "CallConfig", "CallPlan", "CallState", "Delay"]


@attrs.frozen(kw_only=True)
class CallConfig:
    """What a call is routed by: the listener's HTTP connection manager and, when its routes
    come from RDS, the RouteConfiguration it names; the virtual host when the configuration
    chose it (a snapshot's, which VHDS may have brought), else each call's authority selects
    one from the routes."""

    listener_name: str
    hcm: HttpConnectionManager
    route_config: RouteConfigurationView | None = None
    virtual_host: VirtualHost | None = None
    #: whether the listener runs a fault filter (most do not: their calls skip fault work)
    has_fault_filters: bool = attrs.field(init=False, eq=False, repr=False)
    #: this configuration's routing, its answers remembered while the configuration lasts
    router: Router = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        faulty = any(f.type_url == FAULT_FILTER_TYPE for f in self.hcm.http_filters)
        object.__setattr__(self, "has_fault_filters", faulty)
        router = Router(
            self.hcm,
            listener_name=self.listener_name,
            route_config=self.route_config,
            virtual_host=self.virtual_host,
        )
        object.__setattr__(self, "router", router)

    @classmethod
    def from_listener(
        cls,
        listener: ListenerView,
        route_config: RouteConfigurationView | None = None,
        virtual_host: VirtualHost | None = None,
    ) -> CallConfig:
        """The config of a client (API) listener."""
        if listener.api_listener is None:
            raise ValueError(f"listener {listener.name!r} is not a client (API) listener")
        return cls(
            listener_name=listener.name,
            hcm=listener.api_listener,
            route_config=route_config,
            virtual_host=virtual_host,
        )


@attrs.frozen(kw_only=True)
class Delay:
    """An injected fault delays the call until ``until``; then call `CallPlan.delay_elapsed`."""

    until: float


@attrs.frozen(kw_only=True)
class Attempt:
    """Send attempt ``number`` (1-based): a new pick in ``cluster``, under ``deadline``."""

    number: int
    cluster: str
    #: the ring-hash request hash (gRFC A42), the same for every attempt of the call
    request_hash: int
    deadline: float | None

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

Step = Delay | Attempt | RetryAt | Finish


class CallPlan:
    """The decisions of one call, in order (see the module's docstring)."""

    __slots__ = (
        "_allowed",
        "_delay_started",
        "_fault_index",
        "_faults",
        "_holding_fault",
        "_retry",
        "_rng",
        "active_faults",
        "attempts",
        "choice",
        "deadline",
        "failure",
        "request_hash",
        "state",
    )

    def __init__(
        self,
        *,
        choice: RouteChoice | None,
        failure: Status | None,
        deadline: float | None,
        faults: tuple[FaultDecision, ...],
        active_faults: ActiveFaults,
        retry: RetryState,
        request_hash: int,
        rng: random.Random,
    ) -> None:
        self.state = CallState.START
        #: the route and cluster, None when routing failed (``failure`` says why)
        self.choice = choice
        self.failure = failure
        #: the call's deadline after the route's max stream duration
        self.deadline = deadline
        self.request_hash = request_hash
        self.active_faults = active_faults
        #: every finished attempt, in order
        self.attempts: list[AttemptRecord] = []
        self._faults = faults
        self._fault_index = 0
        self._delay_started = False
        self._holding_fault = False
        self._retry = retry
        self._rng = rng
        self._allowed: frozenset[CallState] = frozenset()

    @classmethod
    def begin(
        cls,
        call: CallRequest,
        config: CallConfig,
        *,
        now: float,
        rng: random.Random,
        faults: ActiveFaults,
    ) -> CallPlan:
        """Route ``call`` and decide its deadline, faults, hash and retry policy at ``now``."""
        routed = config.router.route(call, rng)
        if isinstance(routed, Status):
            return cls(
                choice=None,
                failure=routed,
                deadline=call.deadline,
                faults=(),
                active_faults=faults,
                retry=RetryState(None, call.deadline),
                request_hash=0,
                rng=rng,
            )
        deadline = capped_deadline(
            call.deadline, now, max_stream_duration(routed.action, config.hcm)
        )
        faults_decided: tuple[FaultDecision, ...] = ()
        if config.has_fault_filters:
            policies = fault_policies(
                config.hcm, routed.virtual_host, routed.route, routed.cluster_weight
            )
            decided = (decide_fault(policy, call.headers, rng) for policy in policies)
            faults_decided = tuple(decision for decision in decided if decision is not None)
        retry_policy = routed.action.retry_policy or routed.virtual_host.retry_policy
        return cls(
            choice=routed,
            failure=None,
            deadline=deadline,
            faults=faults_decided,
            active_faults=faults,
            retry=RetryState(retry_policy, deadline),
            request_hash=call_hash(routed.action, call, rng),
            rng=rng,
        )

    # --- inputs ---

    def start(self, now: float) -> Step:
        """The first step of the call, at ``now``."""
        self._check("start")
        if self.failure is not None:
            return self._finish(self.failure, now)
        return self._run_faults(now)

    def delay_elapsed(self, now: float) -> Step:
        """The injected delay ended at ``now``."""
        self._check("delay_elapsed")
        return self._run_faults(now)

    def attempt_done(self, outcome: AttemptOutcome, now: float) -> Step:
        """The attempt in flight ended with ``outcome`` at ``now``."""
        self._check("attempt_done")
        assert self.choice is not None
        number = self._retry.attempts + 1
        self.attempts.append(
            AttemptRecord(number=number, cluster=self.choice.cluster, outcome=outcome)
        )
        decision = self._retry.on_attempt_done(outcome, now, self._rng)
        if isinstance(decision, Finish):
            return self._finish(decision.status, decision.at)
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
                return self._finish(DEADLINE_EXCEEDED, now)
            self._release_fault()
            abort = decision.abort
            if abort is not None and (
                decision.delay > 0 or self.active_faults.has_quota(decision.max_active_faults)
            ):
                return self._finish(abort, now)
            self._fault_index += 1
            self._delay_started = False
        return self._attempt(now)

    def _attempt(self, now: float) -> Step:
        if self._past_deadline(now):
            return self._finish(DEADLINE_EXCEEDED, now)
        assert self.choice is not None
        self._to(CallState.ATTEMPTING)
        return Attempt(
            number=self._retry.attempts + 1,
            cluster=self.choice.cluster,
            request_hash=self.request_hash,
            deadline=self.deadline,
        )

    def _finish(self, status: Status, at: float) -> Finish:
        self._release_fault()
        self._to(CallState.DONE)
        return Finish(status=status, at=at)

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
