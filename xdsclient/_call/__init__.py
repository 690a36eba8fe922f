"""The sans-I/O call path shared by the data-plane front ends (a grpc.aio channel, an httpx
transport): a call as data in, decisions out, in gRPC's order.

Why a package of small pure parts: the front ends differ only in how they match their
protocol to a `CallRequest`, open connections, send attempts and classify outcomes; every
decision between (virtual host and route, cluster, deadline, fault, request hash, retries) is
made here once, synchronously, with ``now`` and a random source passed in. `CallPlan` ties
them together per call, by gRPC's rules (`GRPC_RULES`: C-core's) or Envoy's HTTP router's
(`HTTP_RULES`, the ``_http_*`` modules). Private: the front ends are the public surface.
Beside the client, as ``lb`` is (it hashes with ``lb``): it builds on the public API and the
validated views, and the client never imports it.
"""

from __future__ import annotations

from ._deadline import capped_deadline, max_stream_duration
from ._fault import ActiveFaults, FaultDecision, FaultPolicy, decide_fault, fault_policies
from ._hash import call_hash
from ._http_hash import http_request_hash
from ._http_retry import UPSTREAM_TIMEOUT, HttpRetryState
from ._http_route import HttpRoute, apply_header_changes, route_http
from ._http_rules import FAULT_ABORT_BODY, HTTP_RULES, HttpRules, route_timeout
from ._plan import Attempt, AttemptRecord, CallConfig, CallPlan, CallState, Delay
from ._reply import ERROR_HEADER, LocalReply, code_of_http
from ._request import CallRequest, LazyHeaderView, grpc_header_view
from ._retry import AttemptOutcome, Finish, RetryAt, RetryState
from ._route import RouteChoice, route_call
from ._rules import GRPC_RULES, CallRules, Decisions, GrpcRules, direct_cluster
from ._status import Code, Status, grpc_code_from_http, grpc_code_from_int

__all__ = [
    "ERROR_HEADER",
    "FAULT_ABORT_BODY",
    "GRPC_RULES",
    "HTTP_RULES",
    "UPSTREAM_TIMEOUT",
    "ActiveFaults",
    "Attempt",
    "AttemptOutcome",
    "AttemptRecord",
    "CallConfig",
    "CallPlan",
    "CallRequest",
    "CallRules",
    "CallState",
    "Code",
    "Decisions",
    "Delay",
    "FaultDecision",
    "FaultPolicy",
    "Finish",
    "GrpcRules",
    "HttpRetryState",
    "HttpRoute",
    "HttpRules",
    "LazyHeaderView",
    "LocalReply",
    "RetryAt",
    "RetryState",
    "RouteChoice",
    "Status",
    "apply_header_changes",
    "call_hash",
    "capped_deadline",
    "code_of_http",
    "decide_fault",
    "direct_cluster",
    "fault_policies",
    "grpc_code_from_http",
    "grpc_code_from_int",
    "grpc_header_view",
    "http_request_hash",
    "max_stream_duration",
    "route_call",
    "route_http",
    "route_timeout",
]
