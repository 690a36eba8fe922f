"""Envoy's HTTP router as call rules (`HTTP_RULES`): how `CallPlan` decides an HTTP request.

Why: the plan's state machine is the same for both front ends (`_rules`); this fills it the
way Envoy's HTTP connection manager does for a request: the router's route (`_http_route`:
virtual host, route, local answers, rewrites, header changes), the fault filter
(`_fault`, the same policies as gRPC's, answering an abort with its HTTP status), the route's
timeout and retry policy (`_http_retry`) and the hash policies (`_http_hash`). The request's
headers are read as sent (`CallRequest.grpc_rules` False: no gRPC view), repeated values
joined with ``,`` for matching, as Envoy's header matchers see them.

- timeout: the route action's ``timeout``, Envoy's 15 s when unset, 0 for none; the earlier
  of it and the request's own deadline is the request's deadline (``max_stream_duration``
  and ``grpc_timeout_header_max`` are gRPC's and not read);
- retry policy: the route's, else the virtual host's (Envoy's ``include_vh_rate_limits``
  aside, the route's wins whole);
- a fault abort answers ``fault filter abort`` with the abort's HTTP status (an
  ``http_status``, or the ``x-envoy-fault-abort-request`` header); an abort with only a gRPC
  status answers 200 with ``grpc-status`` and ``grpc-message`` headers, Envoy's local reply to
  a gRPC request;
- the deadline passing before an attempt, or during a delay or back-off: Envoy's 504
  ``upstream request timeout``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from ..resources import DEFAULT_ROUTE_TIMEOUT, RouteConfigurationView
from ._config import CallConfig
from ._fault import ActiveFaults, FaultDecision
from ._http_hash import http_request_hash
from ._http_retry import HttpRetryState, timeout_finish
from ._http_route import DirectRoute, HttpRoute, RouteMemo, route_http
from ._plan import Attempt, CallPlan
from ._reply import LocalReply, code_of_http
from ._request import CallRequest
from ._retry import Finish
from ._rules import CallRules, Decisions, decide_faults
from ._status import Code, Status

__all__ = ["FAULT_ABORT_BODY", "HTTP_RULES", "DirectRoute", "HttpRules", "route_timeout"]

#: Envoy's fault filter's body for an aborted request.
FAULT_ABORT_BODY = b"fault filter abort"


def route_timeout(timeout: float | None) -> float | None:
    """A route's timeout in seconds (None: none): Envoy's default when unset, 0 for none."""
    if timeout is None:
        return DEFAULT_ROUTE_TIMEOUT
    return timeout or None


class HttpRules(CallRules):
    """Envoy's HTTP router (see the module's docstring). With a ``memo`` (`memoized`: one per
    configuration), route choices that depend on the authority and path alone are kept."""

    __slots__ = ("_last", "_memo")

    def __init__(self, name: str = "HTTP", *, memo: RouteMemo | None = None) -> None:
        super().__init__(name)
        self._memo = memo
        #: with a memo: the last configuration, its route configuration and how errors name it
        self._last: tuple[CallConfig, RouteConfigurationView, str] | None = None

    def memoized(self) -> HttpRules:
        """These rules with a memo of their own."""
        return HttpRules(self.name, memo=RouteMemo())

    def direct(self, config: CallConfig, authority: str, path: str) -> DirectRoute | None:
        """The fixed plan of a request to ``authority`` and ``path`` by ``config``, once an
        earlier request found it fixed (`DirectRoute`); None: decide it (`CallPlan.begin`).
        It holds for a request without the retry headers Envoy's router reads and consumes
        (`carries_retry_headers`): the caller checks those."""
        last, memo = self._last, self._memo
        if last is None or last[0] is not config or memo is None:
            return None
        return memo.direct((authority, path))

    def direct_plan(
        self,
        direct: DirectRoute,
        headers: Mapping[str, str],
        *,
        now: float,
        deadline: float | None,
        request_hash: int,
        rng: random.Random,
        faults: ActiveFaults,
    ) -> tuple[CallPlan, Attempt]:
        """The plan `CallPlan.begin` would have made at ``now`` for a request to ``direct``
        (with its ``deadline`` and ``request_hash``, already drawn), started: its first
        attempt in flight. For a direct request whose attempt did not simply answer."""
        plan = CallPlan(rules=self, active_faults=faults, rng=rng)
        plan.decided(
            choice=direct.route.choice,
            deadline=deadline,
            retry=HttpRetryState(None, deadline, headers),
            request_hash=request_hash,
            path=direct.route.path,
            authority=direct.route.authority,
        )
        step = plan.start(now)
        assert isinstance(step, Attempt)
        return plan, step

    def decide(
        self,
        plan: Decisions,
        call: CallRequest,
        config: CallConfig,
        *,
        now: float,
        rng: random.Random,
    ) -> None:
        last = self._last
        if last is not None and last[0] is config:  # the memo's configuration: known
            routes, source = last[1], last[2]
        else:
            routes, source = _routes_of(config)
            if self._memo is not None:
                self._last = (config, routes, source)
        routed = route_http(routes, call, rng, source=source, memo=self._memo)
        if isinstance(routed, LocalReply):
            plan.decided(
                choice=None,
                failure=_status_of(routed),
                reply=routed,
                deadline=call.deadline,
                retry=HttpRetryState(None, call.deadline, call.headers),
            )
        else:
            self._forward(plan, routed, call, config, now, rng)

    def _forward(
        self,
        plan: Decisions,
        routed: HttpRoute,
        call: CallRequest,
        config: CallConfig,
        now: float,
        rng: random.Random,
    ) -> None:
        choice = routed.choice
        deadline = call.deadline
        timeout = route_timeout(choice.action.timeout)
        if timeout is not None:
            deadline = now + timeout if deadline is None else min(deadline, now + timeout)
        policy = choice.action.retry_policy or choice.virtual_host.retry_policy
        if (
            self._memo is not None
            and policy is None
            and call.deadline is None
            and not choice.action.http_hash_policies
            and not config.has_fault_filters
            and routed.path == call.path
            and routed.authority == call.authority
        ):  # every request to this authority and path goes the same way
            self._memo.set_direct(
                (call.authority, call.path),
                DirectRoute(route=routed, cluster=choice.cluster, timeout=timeout),
            )
        plan.decided(
            choice=choice,
            deadline=deadline,
            faults=decide_faults(call, config, choice, rng),
            retry=HttpRetryState(policy, deadline, call.headers),
            request_hash=http_request_hash(choice.action.http_hash_policies, call, rng),
            path=routed.path,
            authority=routed.authority,
            headers_to_add=routed.headers_to_add,
            headers_to_remove=routed.headers_to_remove,
            per_try_timeout=policy.per_try_timeout if policy is not None else None,
            avoid_previous=policy is not None and policy.avoids_previous_hosts,
        )

    def deadline_finish(self, at: float) -> Finish:
        return timeout_finish(at)

    def abort_finish(self, decision: FaultDecision, at: float) -> Finish:
        abort = decision.abort
        assert abort is not None
        if decision.abort_http is not None:
            reply = LocalReply(status=decision.abort_http, body=FAULT_ABORT_BODY)
        else:
            reply = LocalReply(
                status=200,
                headers=(
                    ("content-type", "application/grpc"),
                    ("grpc-status", str(int(abort.code))),
                    ("grpc-message", FAULT_ABORT_BODY.decode()),
                ),
            )
        return Finish(status=abort, at=at, reply=reply)


def _routes_of(config: CallConfig) -> tuple[RouteConfigurationView, str]:
    """The route configuration ``config`` routes by, and how errors name it (``RDS resource
    <name>``, or ``LDS resource <listener>`` for routes inline in the listener)."""
    hcm = config.hcm
    routes = hcm.route_config if hcm.route_config is not None else config.route_config
    if routes is None:
        raise ValueError(f"RouteConfiguration {hcm.route_config_name!r} is needed to route")
    if hcm.route_config is not None:
        return routes, f"LDS resource {config.listener_name}"
    return routes, f"RDS resource {routes.name}"


def _status_of(reply: LocalReply) -> Status:
    """The status a local answer counts as (`code_of_http`; a 404 is an error here)."""
    code = code_of_http(reply.status)
    if reply.status == 404:
        code = Code.NOT_FOUND  # no route: the request failed, though not by a 5xx
    details = dict(reply.headers).get("x-xdsclient-error", "")
    return Status(code=code, details=details)


#: Envoy's HTTP router's rules, for the httpx transport.
HTTP_RULES: CallRules = HttpRules("HTTP")
