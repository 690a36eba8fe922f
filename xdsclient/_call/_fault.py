"""Fault injection per call (gRFC A33): which HTTP fault policy applies, and whether this call
is delayed, aborted, both, or neither.

Why apart: the policy comes from configuration (the listener's fault filters and their
per-route overrides), the decision from the call (its headers and a random draw), and the
execution from the front end (it sleeps and fails). Each rule, and where it comes from:

- Policy per fault filter of the HTTP connection manager, in filter order; the config that
  applies is the filter's ``typed_per_filter_config`` override on the chosen weighted cluster,
  else on the route, else on the virtual host, else the filter's own (C-core's
  ``XdsRouting::GeneratePerHTTPFilterConfigs``). An override replaces the whole config.
- Abort: ``grpc_status`` as is (out of range: UNKNOWN); ``http_status`` mapped by gRPC's
  HTTP-to-gRPC table, 200 included (UNKNOWN), as A33 says (C-core treats 200 as no abort; we
  follow the gRFC); ``header_abort`` takes the code from the call: ``x-envoy-fault-abort-request``
  (an HTTP status in [200, 600), mapped) before ``x-envoy-fault-abort-grpc-request`` (a
  non-negative integer), as Envoy orders them. The aborted call's details are ``Fault
  injected`` (C-core's message).
- Delay: ``fixed_delay``, or with ``header_delay`` ``x-envoy-fault-delay-request`` in
  milliseconds.
- Percentages are FractionalPercent with their denominator (100, 10 000, 1 000 000); absent
  means 0 (C-core's default). With header control, ``x-envoy-fault-abort-request-percentage``
  and ``x-envoy-fault-delay-request-percentage`` set the numerator, capped by the configured
  one (A33's header names; C-core reads ``x-envoy-fault-abort-percentage`` instead). A header
  that does not parse is ignored (A33). Delay and abort each draw their own number (A33:
  independent); a numerator at or above the denominator always applies, 0 never.
- ``max_active_faults`` (default unlimited) against one counter per process (`ActiveFaults`):
  a delay starts only while fewer faults are active and counts as one until it ends; an abort
  applies after a delay that started or, without one, only while fewer faults are active
  (C-core's ``InjectionDecision``). A call is delayed first, then aborted.

The same policies and decisions serve Envoy's HTTP fault filter (`HTTP_RULES`): Envoy reads
the same fields and headers, and the decision keeps the abort's HTTP status (`FaultDecision.
abort_http`: the configured ``http_status`` or the ``x-envoy-fault-abort-request`` header) for
the HTTP answer; only how an aborted call ends differs (`CallRules.abort_finish`).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from typing import Any

import attrs
from envoy.extensions.filters.http.fault.v3 import fault_pb2

from ..resources import ClusterWeight, HttpConnectionManager, Route, VirtualHost
from ._status import Code, Status, grpc_code_from_http, grpc_code_from_int

__all__ = [
    "FAULT_FILTER_TYPE",
    "FAULT_INJECTED",
    "ActiveFaults",
    "FaultDecision",
    "FaultPolicy",
    "decide_fault",
    "fault_policies",
]

FAULT_FILTER_TYPE = f"type.googleapis.com/{fault_pb2.HTTPFault.DESCRIPTOR.full_name}"
#: The details of an aborted call (C-core's abort message).
FAULT_INJECTED = "Fault injected"
ABORT_HTTP_HEADER = "x-envoy-fault-abort-request"
ABORT_GRPC_HEADER = "x-envoy-fault-abort-grpc-request"
ABORT_PERCENTAGE_HEADER = "x-envoy-fault-abort-request-percentage"
DELAY_HEADER = "x-envoy-fault-delay-request"
DELAY_PERCENTAGE_HEADER = "x-envoy-fault-delay-request-percentage"
_DENOMINATORS = {0: 100, 1: 10_000, 2: 1_000_000}


@attrs.frozen(kw_only=True)
class FaultPolicy:
    """One fault filter's effective config. ``abort_code`` None: no fixed abort."""

    abort_code: Code | None = None
    #: the configured ``http_status`` (HTTP front ends answer with it); None: a gRPC status
    abort_http: int | None = None
    abort_from_headers: bool = False
    abort_numerator: int = 0
    abort_denominator: int = 100
    #: seconds; 0: no fixed delay
    delay: float = 0.0
    delay_from_headers: bool = False
    delay_numerator: int = 0
    delay_denominator: int = 100
    #: None: unlimited
    max_active_faults: int | None = None

    @classmethod
    def from_proto(cls, message: fault_pb2.HTTPFault) -> FaultPolicy:
        """The policy of an ``HTTPFault`` (already validated by the listener's decoder)."""
        fields: dict[str, object] = {}
        if message.HasField("abort"):
            abort = message.abort
            kind = abort.WhichOneof("error_type")
            if kind == "grpc_status":
                fields["abort_code"] = grpc_code_from_int(abort.grpc_status)
            elif kind == "http_status":
                fields["abort_code"] = grpc_code_from_http(abort.http_status)
                fields["abort_http"] = abort.http_status
            elif kind == "header_abort":
                fields["abort_from_headers"] = True
            if abort.HasField("percentage"):
                fields["abort_numerator"] = abort.percentage.numerator
                fields["abort_denominator"] = _denominator(abort.percentage)
        if message.HasField("delay"):
            delay = message.delay
            kind = delay.WhichOneof("fault_delay_secifier")
            if kind == "fixed_delay":
                fields["delay"] = delay.fixed_delay.seconds + delay.fixed_delay.nanos / 1e9
            elif kind == "header_delay":
                fields["delay_from_headers"] = True
            if delay.HasField("percentage"):
                fields["delay_numerator"] = delay.percentage.numerator
                fields["delay_denominator"] = _denominator(delay.percentage)
        if message.HasField("max_active_faults"):
            fields["max_active_faults"] = message.max_active_faults.value
        return cls(**fields)  # type: ignore[arg-type]


def _denominator(percent: Any) -> int:
    """A FractionalPercent's denominator; a value the enum does not name is 100 (C-core)."""
    return _DENOMINATORS.get(percent.denominator, 100)


@functools.lru_cache(maxsize=256)
def _policy_of(config: bytes) -> FaultPolicy:
    return FaultPolicy.from_proto(fault_pb2.HTTPFault.FromString(config))


def fault_policies(
    hcm: HttpConnectionManager,
    virtual_host: VirtualHost,
    route: Route,
    cluster_weight: ClusterWeight | None = None,
) -> tuple[FaultPolicy, ...]:
    """The policy of each fault filter, in filter order, after the per-route overrides."""
    policies = []
    scopes = (
        cluster_weight.typed_per_filter_config if cluster_weight is not None else {},
        route.typed_per_filter_config,
        virtual_host.typed_per_filter_config,
    )
    for http_filter in hcm.http_filters:
        if http_filter.type_url != FAULT_FILTER_TYPE:
            continue
        config = http_filter.config
        for overrides in scopes:
            override = overrides.get(http_filter.name)
            if override is not None:
                type_url, config = override[0], override[1]
                if type_url != FAULT_FILTER_TYPE:
                    config = b""  # another filter's override type: no fault config
                break
        policies.append(_policy_of(config))
    return tuple(policies)


@attrs.frozen(kw_only=True)
class FaultDecision:
    """What one fault filter does to one call: delay it (seconds, 0: not), then maybe abort."""

    delay: float = 0.0
    abort: Status | None = None
    #: the HTTP status of the abort, when it has one (an ``http_status`` or the
    #: ``x-envoy-fault-abort-request`` header); None with a gRPC status only
    abort_http: int | None = None
    max_active_faults: int | None = None


def decide_fault(
    policy: FaultPolicy, headers: Mapping[str, str], rng: random.Random
) -> FaultDecision | None:
    """The decision for a call with ``headers`` (gRPC's view); None: no fault."""
    abort_code, abort_numerator = policy.abort_code, policy.abort_numerator
    abort_http = policy.abort_http
    delay, delay_numerator = policy.delay, policy.delay_numerator
    if policy.abort_from_headers:
        abort_code, abort_http = _abort_code_header(headers)
        abort_numerator = _capped(headers.get(ABORT_PERCENTAGE_HEADER), abort_numerator)
    if policy.delay_from_headers:
        millis = _non_negative(headers.get(DELAY_HEADER))
        delay = 0.0 if millis is None else millis / 1000
        delay_numerator = _capped(headers.get(DELAY_PERCENTAGE_HEADER), delay_numerator)
    delayed = delay > 0 and _under(delay_numerator, policy.delay_denominator, rng)
    aborted = abort_code is not None and _under(abort_numerator, policy.abort_denominator, rng)
    if not delayed and not aborted:
        return None
    abort = None
    if aborted and abort_code is not None:
        abort = Status(code=abort_code, details=FAULT_INJECTED)
    return FaultDecision(
        delay=delay if delayed else 0.0,
        abort=abort,
        abort_http=abort_http if abort is not None else None,
        max_active_faults=policy.max_active_faults,
    )


def _abort_code_header(headers: Mapping[str, str]) -> tuple[Code | None, int | None]:
    """The abort's code and HTTP status (None when it has none) from the headers."""
    http_status = _non_negative(headers.get(ABORT_HTTP_HEADER))
    if http_status is not None and 200 <= http_status < 600:
        return grpc_code_from_http(http_status), http_status
    grpc_status = _non_negative(headers.get(ABORT_GRPC_HEADER))
    return (None if grpc_status is None else grpc_code_from_int(grpc_status)), None


def _non_negative(value: str | None) -> int | None:
    if value is None or not value.isascii() or not value.isdigit():
        return None
    return int(value)


def _capped(value: str | None, configured: int) -> int:
    number = _non_negative(value)
    return configured if number is None else min(number, configured)


def _under(numerator: int, denominator: int, rng: random.Random) -> bool:
    if numerator <= 0:
        return False
    if numerator >= denominator:
        return True
    return rng.randrange(denominator) < numerator


class ActiveFaults:
    """The process's count of calls inside an injected fault (A33's ``max_active_faults``
    gauge). The front end shares one across its channels; the call path moves it."""

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = 0

    def has_quota(self, limit: int | None) -> bool:
        """Whether one more fault may start under ``limit`` (None: unlimited)."""
        return limit is None or self.active < limit

    def begin(self, limit: int | None) -> bool:
        """Count one more active fault if ``limit`` allows; whether it did."""
        if not self.has_quota(limit):
            return False
        self.active += 1
        return True

    def end(self) -> None:
        """One active fault ended."""
        self.active -= 1
