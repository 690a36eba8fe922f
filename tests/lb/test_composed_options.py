"""The composed picker's edges: why a call was dropped, the ring hash options a channel sets
(ring size cap, endpoint hash keys), and headers given as gRPC metadata."""

from __future__ import annotations

import random
from typing import Any

import pytest

from xdsclient import ClusterConfig, XdsConfig
from xdsclient.lb import (
    CallCounters,
    ComposedPicker,
    ConnectivityState,
    PickOutcome,
    PickRequest,
    RingHashPolicy,
    header_map,
)
from xdsclient.lb.aio import PickFailed
from xdsclient.resources import (
    ClusterLoadAssignmentView,
    ClusterView,
    ListenerView,
    RouteConfigurationView,
)
from xdsclient.testing import builders
from xdsclient.testing.builders import LocalitySpec

READY = ConnectivityState.READY
HOST = "127.0.0.1"
PORTS = [1, 2, 3, 4, 5, 6]


def config(*, lb_policy: str = "round_robin", max_requests: int = 0, drop: str = "") -> Any:
    """One cluster ``c`` over `PORTS`, its route hashing the ``user`` header."""
    routes = builders.route_configuration("r", "c")
    routes.virtual_hosts[0].routes[0].route.hash_policy.add().header.header_name = "user"
    cluster = builders.cluster("c", lb_policy=lb_policy)
    if max_requests:
        cluster.circuit_breakers.thresholds.add().max_requests.value = max_requests
    assignment = builders.cluster_load_assignment(
        "c", [LocalitySpec(endpoints=[(HOST, p) for p in PORTS])]
    )
    for index, endpoint in enumerate(assignment.endpoints[0].lb_endpoints):
        metadata = endpoint.metadata.filter_metadata["envoy.lb"]
        metadata.fields["hash_key"].string_value = f"key-{index}"
    if drop:
        overload = assignment.policy.drop_overloads.add(category=drop)
        overload.drop_percentage.numerator = 1_000_000
        overload.drop_percentage.denominator = 2  # MILLION
    route_config = RouteConfigurationView.from_proto(routes)
    entry = ClusterConfig(
        name="c",
        cluster=ClusterView.from_proto(cluster),
        endpoints=ClusterLoadAssignmentView.from_proto(assignment),
    )
    return XdsConfig(
        listener=ListenerView.from_proto(builders.api_listener("l")),
        route_config=route_config,
        virtual_host=route_config.virtual_hosts[0],
        clusters={"c": entry},
    )


def ready_picker(snapshot: XdsConfig, **options: Any) -> ComposedPicker:
    picker = ComposedPicker(**options)
    picker.update(snapshot, 0.0)
    for port in PORTS:
        picker.set_endpoint_state((HOST, port), READY, 0.0)
    return picker


def composed_picks(picker: ComposedPicker, hashes: list[int]) -> list[int]:
    rand = random.Random(0)
    picks = [picker.pick("/", {}, rand, 0.0, request_hash=h).endpoint for h in hashes]
    return [endpoint.port for endpoint in picks if endpoint is not None]


def ring_picks(snapshot: XdsConfig, hashes: list[int], **options: Any) -> list[int]:
    entry = snapshot.clusters["c"]
    assert entry.cluster is not None
    assert entry.endpoints is not None
    ring = RingHashPolicy(entry.cluster.lb_policy, cluster="c", **options)  # type: ignore[arg-type]
    ring.update(entry.endpoints.priorities[0], 0.0)
    for port in PORTS:
        ring.set_endpoint_state((HOST, port), READY, 0.0)
    rand = random.Random(0)
    picks = [ring.pick(PickRequest(request_hash=h), rand, 0.0).endpoint for h in hashes]
    return [endpoint.port for endpoint in picks if endpoint is not None]


_SOURCE = random.Random(3)
HASHES = [_SOURCE.getrandbits(64) for _ in range(300)]


def test_a_circuit_breaker_drop_names_the_cluster_and_the_limit() -> None:
    """A call over ``max_requests`` is dropped with C-core's "circuit breaker drop" reason,
    naming the cluster, the calls in flight and the limit; `PickFailed` (deprecated) says it."""
    picker = ready_picker(config(max_requests=2), counters=CallCounters())
    rand = random.Random(1)
    for _ in range(2):
        assert picker.pick("/", {}, rand, 0.0).outcome is PickOutcome.COMPLETE
    dropped = picker.pick("/", {}, rand, 0.0)
    assert (dropped.outcome, dropped.drop_category) == (PickOutcome.DROP, "")
    assert dropped.error.startswith("circuit breaker drop: cluster c")
    assert "2 calls in flight" in dropped.error
    assert "max_requests of 2" in dropped.error
    assert "circuit breaker drop: cluster c" in str(PickFailed(dropped))


def test_a_drop_the_assignment_asks_for_names_its_category() -> None:
    """A drop overload's drop carries its category and C-core's "EDS-configured drop" text."""
    picker = ready_picker(config(drop="throttle"))
    dropped = picker.pick("/", {}, random.Random(1), 0.0)
    assert (dropped.outcome, dropped.drop_category) == (PickOutcome.DROP, "throttle")
    assert dropped.error == "EDS-configured drop: throttle (cluster c)"


def test_ring_size_cap_reaches_the_ring_hash_children() -> None:
    """``ComposedPicker(ring_size_cap=16)`` picks as a ring hash capped at 16 entries, which
    differs from the default cap's ring."""
    snapshot = config(lb_policy="ring_hash")
    capped = composed_picks(ready_picker(snapshot, ring_size_cap=16), HASHES)
    assert capped == ring_picks(snapshot, HASHES, ring_size_cap=16)
    assert capped != composed_picks(ready_picker(snapshot), HASHES)


def test_use_hash_key_reaches_the_ring_hash_children() -> None:
    """``ComposedPicker(use_hash_key=True)`` places endpoints on the ring by their
    ``envoy.lb`` ``hash_key`` (A76), which moves picks from the address-keyed ring."""
    snapshot = config(lb_policy="ring_hash")
    keyed = composed_picks(ready_picker(snapshot, use_hash_key=True), HASHES)
    assert keyed == ring_picks(snapshot, HASHES, use_hash_key=True)
    assert keyed != composed_picks(ready_picker(snapshot), HASHES)


def test_ring_options_do_not_go_with_a_child_factory() -> None:
    """The ring options configure the default children: with a custom child factory, or a
    cap below 1, the picker refuses them."""
    with pytest.raises(ValueError, match="child_factory"):
        ComposedPicker(child_factory=lambda cluster: RingHashPolicy(), use_hash_key=True)
    with pytest.raises(ValueError, match="ring_size_cap"):
        ComposedPicker(ring_size_cap=0)


def test_metadata_pairs_join_repeated_headers_and_leave_binary_ones_out() -> None:
    """(name, value) pairs become one value per lower-case name, repeats joined with ","
    in order; ``-bin`` headers and bytes values are left out; a mapping is taken as it is."""
    pairs: list[tuple[str, str | bytes]] = [
        ("User", "a"),
        ("x-tag", "t"),
        ("user", "b"),
        ("trace-bin", "\x00"),
        ("k", b"v"),
    ]
    assert header_map(pairs) == {"user": "a,b", "x-tag": "t"}
    mapping = {"user": "a"}
    assert header_map(mapping) is mapping
    assert PickRequest(headers=pairs).headers == {"user": "a,b", "x-tag": "t"}


def test_a_pick_with_repeated_headers_hashes_their_joined_value() -> None:
    """Picking with metadata pairs that repeat ``user`` goes where the joined value
    ``"a,b"`` goes, for every value tried (and not always where ``"a"`` alone goes)."""
    picker = ready_picker(config(lb_policy="ring_hash"))
    rand = random.Random(0)
    paired, joined, first = [], [], []
    for i in range(100):
        a, b = f"a{i}", f"b{i}"
        paired.append(picker.pick("/", [("user", a), ("user", b)], rand, 0.0).endpoint)
        joined.append(picker.pick("/", {"user": f"{a},{b}"}, rand, 0.0).endpoint)
        first.append(picker.pick("/", {"user": a}, rand, 0.0).endpoint)
    assert paired == joined
    assert paired != first


def test_a_route_matches_repeated_headers_on_their_joined_value() -> None:
    """A route whose header matcher wants ``x-env`` to be exactly ``"a,b"`` matches a call
    sending ``x-env`` twice, as gRPC matches the joined value."""
    snapshot = config()
    routes = builders.route_configuration("r", "c")
    matcher = routes.virtual_hosts[0].routes[0].match.headers.add(name="x-env")
    matcher.exact_match = "a,b"
    view = RouteConfigurationView.from_proto(routes)
    snapshot = XdsConfig(
        listener=snapshot.listener,
        route_config=view,
        virtual_host=view.virtual_hosts[0],
        clusters=snapshot.clusters,
    )
    picker = ready_picker(snapshot)
    rand = random.Random(0)
    both = picker.pick("/", [("x-env", "a"), ("x-env", "b")], rand, 0.0)
    assert both.outcome is PickOutcome.COMPLETE
    assert picker.pick("/", [("x-env", "a")], rand, 0.0).outcome is PickOutcome.FAIL
