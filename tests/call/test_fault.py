"""Fault injection per call (gRFC A33): policy with overrides, delays, aborts, percentages,
header control and max_active_faults."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdsclient._call import (
    ActiveFaults,
    CallRequest,
    Code,
    FaultPolicy,
    RouteChoice,
    decide_fault,
    fault_policies,
    grpc_code_from_http,
    grpc_header_view,
    route_call,
)

from .builders import add_route, call, config, fault, override, route_config


def _policies(
    routes: Any, faults: tuple[Any, ...], request: CallRequest | None = None
) -> tuple[FaultPolicy, ...]:
    cfg = config(routes, faults=faults)
    choice = route_call(cfg.hcm, request or call(), random.Random(0), listener_name="svc")
    assert isinstance(choice, RouteChoice)
    return fault_policies(cfg.hcm, choice.virtual_host, choice.route, choice.cluster_weight)


def _simple_routes() -> Any:
    routes = route_config()
    add_route(routes.virtual_hosts[0], "", "c")
    return routes


def _headers(*pairs: tuple[str, str]) -> Mapping[str, str]:
    return grpc_header_view(pairs)


def test_filter_config_applies_without_overrides() -> None:
    """The HCM fault filter's own config is the policy when nothing overrides it."""
    (policy,) = _policies(_simple_routes(), (fault(abort_grpc=5, abort_percent=(100, 0)),))
    assert policy.abort_code is Code.NOT_FOUND
    assert (policy.abort_numerator, policy.abort_denominator) == (100, 100)


def test_override_order_is_cluster_then_route_then_virtual_host() -> None:
    """A weighted cluster's override beats the route's, which beats the virtual host's."""
    routes = route_config()
    vhost = routes.virtual_hosts[0]
    vhost.typed_per_filter_config["fault0"].Pack(override(fault(abort_grpc=1)))
    route = add_route(vhost, "", cluster=None)
    route.typed_per_filter_config["fault0"].Pack(override(fault(abort_grpc=2)))
    entry = route.route.weighted_clusters.clusters.add(name="w")
    entry.weight.value = 1
    entry.typed_per_filter_config["fault0"].Pack(override(fault(abort_grpc=3)))
    (policy,) = _policies(routes, (fault(abort_grpc=4),))
    assert policy.abort_code is Code.INVALID_ARGUMENT
    del entry.typed_per_filter_config["fault0"]
    (policy,) = _policies(routes, (fault(abort_grpc=4),))
    assert policy.abort_code is Code.UNKNOWN  # the route's: 2
    del route.typed_per_filter_config["fault0"]
    (policy,) = _policies(routes, (fault(abort_grpc=4),))
    assert policy.abort_code is Code.CANCELLED  # the virtual host's: 1


def test_an_override_replaces_the_whole_config() -> None:
    """An empty override disables the filter's delay and abort for that route."""
    routes = route_config()
    route = add_route(routes.virtual_hosts[0], "", "c")
    route.typed_per_filter_config["fault0"].Pack(override(fault()))
    (policy,) = _policies(routes, (fault(abort_grpc=14, delay_s=1.0),))
    assert policy == FaultPolicy()


def test_every_fault_filter_has_its_policy_in_order() -> None:
    """Two fault filters give two policies, in filter order."""
    policies = _policies(_simple_routes(), (fault(abort_grpc=1), fault(abort_grpc=2)))
    assert [p.abort_code for p in policies] == [Code.CANCELLED, Code.UNKNOWN]


@pytest.mark.parametrize(
    ("http", "code"),
    [
        (200, Code.UNKNOWN),
        (400, Code.INTERNAL),
        (401, Code.UNAUTHENTICATED),
        (403, Code.PERMISSION_DENIED),
        (404, Code.UNIMPLEMENTED),
        (429, Code.UNAVAILABLE),
        (500, Code.UNKNOWN),
        (502, Code.UNAVAILABLE),
        (503, Code.UNAVAILABLE),
        (504, Code.UNAVAILABLE),
    ],
)
def test_http_abort_status_maps_to_grpc(http: int, code: Code) -> None:
    """An ``http_status`` abort becomes gRPC's mapped code (200 is UNKNOWN, as A33 says)."""
    policy = FaultPolicy.from_proto(fault(abort_http=http))
    assert policy.abort_code is code
    assert grpc_code_from_http(http) is code


def test_full_abort_aborts_with_fault_injected() -> None:
    """A 100% abort aborts every call with its code and ``Fault injected``."""
    policy = FaultPolicy.from_proto(fault(abort_grpc=14, abort_percent=(100, 0)))
    decision = decide_fault(policy, _headers(), random.Random(0))
    assert decision is not None
    assert decision.abort is not None
    assert decision.abort.code is Code.UNAVAILABLE
    assert decision.abort.details == "Fault injected"
    assert decision.delay == 0


def test_absent_percentage_never_injects() -> None:
    """A fault without a percentage is 0%: never injected (C-core's default)."""
    policy = FaultPolicy.from_proto(fault(abort_grpc=14, delay_s=1.0))
    rng = random.Random(0)
    assert all(decide_fault(policy, _headers(), rng) is None for _ in range(1000))


@pytest.mark.parametrize(
    ("numerator", "denominator", "share"),
    [(25, 0, 0.25), (2_500, 1, 0.25), (100_000, 2, 0.1), (7, 0, 0.07)],
)
def test_percentages_use_their_denominator(numerator: int, denominator: int, share: float) -> None:
    """Delay and abort percentages apply at numerator/denominator (seeded, 20 000 calls)."""
    policy = FaultPolicy.from_proto(
        fault(
            abort_grpc=14,
            abort_percent=(numerator, denominator),
            delay_s=0.5,
            delay_percent=(numerator, denominator),
        )
    )
    rng = random.Random(3)
    n = 20_000
    delays = aborts = both = 0
    for _ in range(n):
        decision = decide_fault(policy, _headers(), rng)
        if decision is None:
            continue
        delays += decision.delay > 0
        aborts += decision.abort is not None
        both += decision.delay > 0 and decision.abort is not None
    assert abs(delays / n - share) < 0.012
    assert abs(aborts / n - share) < 0.012
    # independent draws (A33): both happen at share**2, not share
    assert abs(both / n - share * share) < 0.01


def test_unknown_denominator_is_a_hundred() -> None:
    """A FractionalPercent denominator the enum does not name counts as 100 (C-core)."""
    policy = FaultPolicy.from_proto(fault(abort_grpc=14, abort_percent=(30, 7)))
    assert (policy.abort_numerator, policy.abort_denominator) == (30, 100)


def test_header_abort_reads_grpc_code_and_percentage_capped() -> None:
    """With header_abort the call's headers give the code, and the percentage is capped by the
    configured one."""
    policy = FaultPolicy.from_proto(fault(header_abort=True, abort_percent=(50, 0)))
    rng = random.Random(4)
    headers = _headers(
        ("x-envoy-fault-abort-grpc-request", "8"),
        ("x-envoy-fault-abort-request-percentage", "90"),
    )
    n = 10_000
    aborted = 0
    for _ in range(n):
        decision = decide_fault(policy, headers, rng)
        if decision is not None:
            assert decision.abort is not None
            assert decision.abort.code is Code.RESOURCE_EXHAUSTED
            aborted += 1
    assert abs(aborted / n - 0.5) < 0.02  # capped at 50, not 90
    lowered = _headers(
        ("x-envoy-fault-abort-grpc-request", "8"),
        ("x-envoy-fault-abort-request-percentage", "0"),
    )
    assert decide_fault(policy, lowered, rng) is None


def test_header_abort_http_status_wins_over_grpc_header() -> None:
    """``x-envoy-fault-abort-request`` (mapped) is used before the gRPC header, as Envoy."""
    policy = FaultPolicy.from_proto(fault(header_abort=True, abort_percent=(100, 0)))
    headers = _headers(
        ("x-envoy-fault-abort-request", "503"), ("x-envoy-fault-abort-grpc-request", "8")
    )
    decision = decide_fault(policy, headers, random.Random(0))
    assert decision is not None
    assert decision.abort is not None
    assert decision.abort.code is Code.UNAVAILABLE


@given(st.sampled_from(["abc", "-1", "", "1.5", "٣"]))
def test_invalid_fault_headers_are_ignored(value: str) -> None:
    """A fault header that is not a non-negative integer is ignored (A33)."""
    policy = FaultPolicy.from_proto(
        fault(header_abort=True, abort_percent=(100, 0), header_delay=True, delay_percent=(100, 0))
    )
    headers = _headers(
        ("x-envoy-fault-abort-grpc-request", value), ("x-envoy-fault-delay-request", value)
    )
    assert decide_fault(policy, headers, random.Random(0)) is None


def test_header_delay_is_in_milliseconds() -> None:
    """With header_delay, ``x-envoy-fault-delay-request`` delays that many milliseconds."""
    policy = FaultPolicy.from_proto(fault(header_delay=True, delay_percent=(100, 0)))
    decision = decide_fault(
        policy, _headers(("x-envoy-fault-delay-request", "250")), random.Random(0)
    )
    assert decision is not None
    assert decision.delay == 0.25
    assert decision.abort is None


def test_fault_headers_do_nothing_without_header_control() -> None:
    """Fault headers are read only when the policy says header_abort / header_delay."""
    policy = FaultPolicy.from_proto(fault(abort_grpc=14, abort_percent=(0, 0)))
    headers = _headers(
        ("x-envoy-fault-abort-grpc-request", "8"),
        ("x-envoy-fault-abort-request-percentage", "100"),
        ("x-envoy-fault-delay-request", "100"),
    )
    assert decide_fault(policy, headers, random.Random(0)) is None


def test_max_active_faults_from_config() -> None:
    """``max_active_faults`` is carried into the decision; absent is unlimited."""
    limited = FaultPolicy.from_proto(fault(abort_grpc=1, abort_percent=(100, 0), max_active=2))
    decision = decide_fault(limited, _headers(), random.Random(0))
    assert decision is not None
    assert decision.max_active_faults == 2
    assert FaultPolicy.from_proto(fault()).max_active_faults is None


def test_active_faults_counter_respects_the_limit() -> None:
    """The counter admits faults up to the limit and again after one ends."""
    faults = ActiveFaults()
    assert faults.begin(2)
    assert faults.begin(2)
    assert not faults.begin(2)
    assert not faults.has_quota(2)
    assert faults.has_quota(None)
    faults.end()
    assert faults.begin(2)
    assert faults.active == 2
