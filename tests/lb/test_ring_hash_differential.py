"""Ring hash against grpcio's C-core: for the same header values, exactly the same backend.

Each test serves one Cluster (RING_HASH), its assignment and a route with hash policies to
grpcio's xDS client and makes a few hundred RPCs to real backends; our `RingHashPolicy`, fed the
same messages decoded by our views with every endpoint READY, must pick the same backend for
every call. The shapes are chosen to expose C-core's details: localities listed out of order,
locality x endpoint weights (one product wrapping 32 bits), small rings, several hash policies.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from xdsclient.lb import ConnectivityState, PickRequest, RingHashPolicy, key_of, request_hash
from xdsclient.resources import (
    ClusterLoadAssignmentView,
    ClusterView,
    RingHash,
    RouteConfigurationView,
)
from xdsclient.testing import builders

from .differential_pickers import backends, grpc_picks

LISTENER = "ring"
CLUSTER = "ring-cluster"


def resources(
    assignment: Any,
    *,
    headers: Sequence[str] = ("x-key",),
    regex: tuple[str, str] | None = None,
    ring: tuple[int, int] | None = None,
) -> list[Any]:
    routes = builders.route_configuration(f"{LISTENER}-routes", CLUSTER)
    action = routes.virtual_hosts[0].routes[0].route
    for name in headers:
        policy = action.hash_policy.add()
        policy.header.header_name = name
        if regex is not None:
            policy.header.regex_rewrite.pattern.regex = regex[0]
            policy.header.regex_rewrite.substitution = regex[1]
    cluster = builders.cluster(CLUSTER, lb_policy="ring_hash")
    if ring is not None:
        cluster.ring_hash_lb_config.minimum_ring_size.value = ring[0]
        cluster.ring_hash_lb_config.maximum_ring_size.value = ring[1]
    return [builders.api_listener(LISTENER), routes, cluster, assignment]


def our_picks(
    messages: Sequence[Any], calls: Sequence[Mapping[str, str]], *, use_hash_key: bool = False
) -> list[int]:
    _, routes, cluster, assignment = messages
    view = ClusterView.from_proto(cluster)
    assert isinstance(view.lb_policy, RingHash)
    policies = RouteConfigurationView.from_proto(routes).virtual_hosts[0].routes[0].action
    assert policies is not None
    endpoints = ClusterLoadAssignmentView.from_proto(assignment)
    ring = RingHashPolicy(view.lb_policy, cluster=CLUSTER, use_hash_key=use_hash_key)
    ring.update(endpoints.priorities[0], 0.0)
    for locality in endpoints.priorities[0]:
        for endpoint in locality.endpoints:
            ring.set_endpoint_state(key_of(endpoint), ConnectivityState.READY, 0.0)
    rand = random.Random(0)
    out = []
    for headers in calls:
        hash_ = request_hash(policies.hash_policies, headers, 0, rand)
        result = ring.pick(PickRequest(headers=headers, request_hash=hash_), rand, 0.0)
        assert result.endpoint is not None
        out.append(result.endpoint.port)
    return out


def locality(zone: str, weight: int, endpoints: Sequence[tuple[int, int]]) -> Any:
    return builders.LocalitySpec(
        endpoints=[builders.EndpointSpec("127.0.0.1", port, weight=w) for port, w in endpoints],
        zone=zone,
        weight=weight,
    )


CALLS = [{"x-key": f"user-{i}"} for i in range(300)]


async def test_same_backend_as_grpc_with_weighted_localities_listed_out_of_order():
    """Localities out of (region, zone) order, locality and endpoint weights: every call goes
    to the backend C-core sends it to."""
    async with backends(6) as ports:
        assignment = builders.cluster_load_assignment(
            CLUSTER,
            [
                locality("zc", 3, [(ports[0], 1), (ports[1], 2)]),
                locality("za", 1, [(ports[2], 5), (ports[3], 1)]),
                locality("zb", 2, [(ports[4], 1), (ports[5], 3)]),
            ],
        )
        # ring sizes such that scale (1010) is no whole multiple: entries depend on the order
        messages = resources(assignment, ring=(1000, 1010))
        theirs = await grpc_picks(messages, LISTENER, CALLS)
        assert len(set(theirs)) >= 4
        assert our_picks(messages, CALLS) == theirs


async def test_same_backend_as_grpc_where_the_locality_order_decides_the_ring():
    """Three equal localities listed out of order on a ring of 10: the first locality in
    C-core's order (sorted by region, zone, sub-zone) gets the 10th entry; we agree."""
    async with backends(3) as ports:
        assignment = builders.cluster_load_assignment(
            CLUSTER,
            [
                locality("zc", 1, [(ports[0], 1)]),
                locality("za", 1, [(ports[1], 1)]),
                locality("zb", 1, [(ports[2], 1)]),
            ],
        )
        messages = resources(assignment, ring=(10, 10))
        theirs = await grpc_picks(messages, LISTENER, CALLS)
        assert our_picks(messages, CALLS) == theirs


async def test_same_backend_as_grpc_on_a_small_ring_with_a_weight_product_past_32_bits():
    """A ring of 7 to 11 entries, and a locality x endpoint weight that wraps past 32 bits
    (C-core multiplies in uint32): the same backend for every call."""
    async with backends(4) as ports:
        assignment = builders.cluster_load_assignment(
            CLUSTER,
            [
                locality("z1", 65536, [(ports[0], 65537)]),  # product 2**32 + 65536 -> 65536
                locality("z2", 40000, [(ports[1], 60000)]),  # 2.4e9: a negative int -> 1
                locality("z3", 30000, [(ports[2], 3), (ports[3], 1)]),
            ],
        )
        messages = resources(assignment, ring=(7, 11))
        theirs = await grpc_picks(messages, LISTENER, CALLS)
        assert our_picks(messages, CALLS) == theirs


async def test_same_backend_as_grpc_with_two_header_policies_and_a_regex_rewrite():
    """Two header policies (one header missing on some calls), each rewritten by a regex: the
    combined hash sends every call where C-core sends it."""
    calls = [
        {"x-key": f"tenant-{i % 17}/user-{i}", **({"x-other": f"o{i % 5}"} if i % 3 else {})}
        for i in range(300)
    ]
    async with backends(5) as ports:
        assignment = builders.cluster_load_assignment(
            CLUSTER, [locality("z", 1, [(port, 1) for port in ports])]
        )
        messages = resources(assignment, headers=("x-key", "x-other"), regex=("/user-[0-9]+", ""))
        theirs = await grpc_picks(messages, LISTENER, calls)
        assert len(set(theirs)) >= 3
        assert our_picks(messages, calls) == theirs


def with_hash_keys(assignment: Any, keys: Sequence[str]) -> Any:
    endpoints = [e for group in assignment.endpoints for e in group.lb_endpoints]
    for endpoint, key in zip(endpoints, keys, strict=True):
        endpoint.metadata.filter_metadata["envoy.lb"].fields["hash_key"].string_value = key
    return assignment


async def test_endpoint_hash_keys_are_ignored_as_grpcio_ignores_them_by_default():
    """Endpoints with ``envoy.lb`` ``hash_key`` metadata (gRFC A76): grpcio's C-core ignores
    the keys unless ``GRPC_XDS_ENDPOINT_HASH_KEY_BACKWARD_COMPAT=false``, and so does our
    default; with the keys used on both sides, the rings agree again."""
    async with backends(4) as ports:
        assignment = builders.cluster_load_assignment(
            CLUSTER, [locality("z", 1, [(port, 1) for port in ports])]
        )
        messages = resources(with_hash_keys(assignment, ["k-a", "k-b", "k-c", "k-d"]))
        theirs = await grpc_picks(messages, LISTENER, CALLS)
        assert our_picks(messages, CALLS) == theirs
        assert our_picks(messages, CALLS, use_hash_key=True) != theirs
        keyed = await grpc_picks(
            messages,
            LISTENER,
            CALLS,
            env={"GRPC_XDS_ENDPOINT_HASH_KEY_BACKWARD_COMPAT": "false"},
        )
        assert our_picks(messages, CALLS, use_hash_key=True) == keyed
