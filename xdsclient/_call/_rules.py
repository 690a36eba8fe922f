"""What differs between the front ends' calls: `CallRules`, and gRPC's (`GRPC_RULES`).

Why an object and not a flag: `CallPlan` is one state machine for both front ends (fault
delay, attempts, backoff, the deadline); what a front end's protocol changes is how a call is
routed and which deadline, retry policy and request hash follow from the route (`decide`), and
how the call ends when the path itself ends it (a fault abort, the deadline). gRPC's rules are
C-core's (`_route`, `_deadline`, `_retry`, `_hash`); Envoy's HTTP router's are
`_http_rules.HTTP_RULES`. A rules object holds no state: one serves every call.
"""

from __future__ import annotations

import random
from typing import Protocol

from ..resources import Route
from ._config import CallConfig
from ._deadline import capped_deadline, max_stream_duration
from ._fault import FaultDecision, decide_fault, fault_policies
from ._hash import call_hash
from ._reply import LocalReply
from ._request import CallRequest
from ._retry import DEADLINE_EXCEEDED, AttemptOutcome, Finish, RetryAt, RetryState
from ._route import RouteChoice
from ._status import Status

__all__ = [
    "GRPC_RULES",
    "CallRules",
    "Decisions",
    "GrpcRules",
    "Retries",
    "decide_faults",
    "direct_cluster",
]


class Retries(Protocol):
    """The retry decisions of one call (`RetryState` for gRPC, `HttpRetryState` for HTTP)."""

    #: attempts finished so far
    attempts: int

    @property
    def max_attempts(self) -> int:
        """The attempts the call may make in all, counted from its start (1: no retry)."""

    @property
    def avoid(self) -> frozenset[tuple[str, int]]:
        """The endpoints the next attempt should avoid (read only with ``avoid_previous``)."""

    def on_attempt_done(
        self, outcome: AttemptOutcome, now: float, rng: random.Random
    ) -> RetryAt | Finish:
        """The decision after an attempt ended with ``outcome`` at ``now``."""


class Decisions(Protocol):
    """What the rules write their decisions to: the call's plan (`CallPlan.decided`)."""

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
        """Record a call's decisions (see `CallPlan.decided`)."""


class CallRules:
    """How one front end's calls are decided (see the module's docstring)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name} call rules>"

    def decide(
        self,
        plan: Decisions,
        call: CallRequest,
        config: CallConfig,
        *,
        now: float,
        rng: random.Random,
    ) -> None:
        """Route ``call`` and decide its deadline, faults, hash and retries at ``now``, into
        ``plan`` (one `Decisions.decided` call)."""
        raise NotImplementedError

    def deadline_finish(self, at: float) -> Finish:
        """How a call whose deadline passed ends."""
        raise NotImplementedError

    def abort_finish(self, decision: FaultDecision, at: float) -> Finish:
        """How a call an injected fault aborts ends."""
        raise NotImplementedError


def decide_faults(
    call: CallRequest, config: CallConfig, routed: RouteChoice, rng: random.Random
) -> tuple[FaultDecision, ...]:
    """The fault decisions of the listener's fault filters for ``call`` on ``routed``."""
    if not config.has_fault_filters:
        return ()
    policies = fault_policies(config.hcm, routed.virtual_host, routed.route, routed.cluster_weight)
    decided = (decide_fault(policy, call.headers, rng) for policy in policies)
    return tuple(decision for decision in decided if decision is not None)


class GrpcRules(CallRules):
    """gRPC's rules (C-core's order): `route_call` (remembered by the configuration's
    `Router`), the deadline capped by the route's max
    stream duration (A31), A33 faults, the A42 hash, A44 retries; a call ends with a gRPC
    status."""

    __slots__ = ()

    def decide(
        self,
        plan: Decisions,
        call: CallRequest,
        config: CallConfig,
        *,
        now: float,
        rng: random.Random,
    ) -> None:
        routed = config.router.route(call, rng)
        if isinstance(routed, Status):
            plan.decided(
                choice=None,
                failure=routed,
                deadline=call.deadline,
                retry=RetryState(None, call.deadline),
            )
            return
        action = routed.action
        deadline = call.deadline
        if action.max_stream_duration is not None or config.hcm.max_stream_duration:
            deadline = capped_deadline(deadline, now, max_stream_duration(action, config.hcm))
        retry_policy = action.retry_policy or routed.virtual_host.retry_policy
        plan.decided(
            choice=routed,
            deadline=deadline,
            faults=decide_faults(call, config, routed, rng) if config.has_fault_filters else (),
            retry=RetryState(retry_policy, deadline),
            request_hash=(
                call_hash(action, call, rng) if action.hash_policies else rng.getrandbits(64)
            ),
            path=call.path,
            authority=call.authority,
        )

    def deadline_finish(self, at: float) -> Finish:
        return Finish(status=DEADLINE_EXCEEDED, at=at)

    def abort_finish(self, decision: FaultDecision, at: float) -> Finish:
        assert decision.abort is not None
        return Finish(status=decision.abort, at=at)


#: gRPC's rules: what `CallPlan.begin` uses unless told otherwise.
GRPC_RULES: CallRules = GrpcRules("gRPC")
#: the random source of `direct_cluster`'s routing (it draws only on the way to a route that is
#: then not direct), so the channel's own source is left to the calls' draws
_NO_DRAWS = random.Random(0)


def direct_cluster(
    config: CallConfig, authority: str, path: str, retries: bool, metadata: bool = False
) -> str | None:
    """The cluster every gRPC call to ``path`` goes to when `GrpcRules` would decide nothing
    else for it, None when they would: one attempt (no retry policy, or ``retries`` off), the
    call's own deadline (no max stream duration), no fault filter, a random request hash (no
    hash policy), and a route and cluster that no draw chooses (no runtime fraction in the
    virtual host, no weighted clusters). For calls with ``metadata``, also a route that no
    header chooses: no route up to and including the path's own tests a header (a call
    without metadata sees only gRPC's fixed ``content-type``, so the answer for it is its
    own). Such a call's plan is the attempt alone: a front end may send it without one
    (with the call's metadata as the plan's attempt sends it), drawing the request hash
    itself (``rng.getrandbits(64)``, the draw `GrpcRules.decide` makes), and end the call
    with the attempt's status, or DEADLINE_EXCEEDED when the deadline passed before it."""
    if config.has_fault_filters or config.hcm.max_stream_duration:
        return None
    routed = config.router.route(CallRequest(authority=authority, path=path), _NO_DRAWS)
    if isinstance(routed, Status) or routed.cluster_weight is not None:
        return None
    action = routed.action
    if action.max_stream_duration is not None or action.hash_policies:
        return None
    if retries and (action.retry_policy or routed.virtual_host.retry_policy):
        return None
    routes = routed.virtual_host.routes
    if any(route.match.runtime_fraction_ppm is not None for route in routes):
        return None
    if metadata and _tests_headers(routes, routed.route):
        return None
    return routed.cluster


def _tests_headers(routes: tuple[Route, ...], chosen: Route) -> bool:
    """Whether a route of ``routes`` up to and including ``chosen`` tests a header (a call's
    metadata could then take it to another route)."""
    for route in routes:
        if route.match.headers:
            return True
        if route is chosen:
            return False
    return True  # not found: decide nothing by it
