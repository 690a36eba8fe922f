"""The sans-I/O call path shared by the data-plane front ends (a grpc.aio channel, an httpx
transport): a call as data in, decisions out, in gRPC's order.

Why a package of small pure parts: the front ends differ only in how they match their
protocol to a `CallRequest`, open connections, send attempts and classify outcomes; every
decision between (virtual host and route, cluster, deadline, fault, request hash, retries) is
made here once, synchronously, with ``now`` and a random source passed in. `CallPlan` ties
them together per call. Private: the front ends are the public surface. Beside the client,
as ``lb`` is (it hashes with ``lb``): it builds on the public API and the validated views, and
the client never imports it.
"""

from __future__ import annotations

from ._deadline import capped_deadline, max_stream_duration
from ._fault import ActiveFaults, FaultDecision, FaultPolicy, decide_fault, fault_policies
from ._hash import call_hash
from ._plan import Attempt, AttemptRecord, CallConfig, CallPlan, CallState, Delay
from ._request import CallRequest, grpc_header_view
from ._retry import AttemptOutcome, Finish, RetryAt, RetryState
from ._route import RouteChoice, route_call
from ._status import Code, Status, grpc_code_from_http, grpc_code_from_int

__all__ = [
    "ActiveFaults",
    "Attempt",
    "AttemptOutcome",
    "AttemptRecord",
    "CallConfig",
    "CallPlan",
    "CallRequest",
    "CallState",
    "Code",
    "Delay",
    "FaultDecision",
    "FaultPolicy",
    "Finish",
    "RetryAt",
    "RetryState",
    "RouteChoice",
    "Status",
    "call_hash",
    "capped_deadline",
    "decide_fault",
    "fault_policies",
    "grpc_code_from_http",
    "grpc_code_from_int",
    "grpc_header_view",
    "max_stream_duration",
    "route_call",
]
