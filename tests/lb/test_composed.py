"""The composed picker over real validated views: routes, weighted clusters, aggregate leaves,
drops, circuit breaking, priorities and outlier detection, kept across snapshots."""

from __future__ import annotations

import gc
import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

import attrs
import pytest

from xdsclient import ClusterConfig, XdsConfig
from xdsclient.lb import (
    FAILOVER_TIMEOUT,
    CallCounters,
    ComposedPicker,
    ConnectivityState,
    PickOutcome,
    PickResult,
)
from xdsclient.resources import (
    ClusterLoadAssignmentView,
    ClusterView,
    ListenerView,
    RouteConfigurationView,
)
from xdsclient.testing import builders
from xdsclient.testing.builders import LocalitySpec

READY = ConnectivityState.READY
FAILED = ConnectivityState.TRANSIENT_FAILURE
HOST = "127.0.0.1"


def cluster_view(name: str, **fields: Any) -> ClusterView:
    message = builders.cluster(name)
    for field, value in fields.items():
        if field == "choice_count":  # least request
            message.lb_policy = type(message).LEAST_REQUEST
            message.least_request_lb_config.choice_count.value = value
        elif field == "max_requests":
            message.circuit_breakers.thresholds.add().max_requests.value = value
        elif field == "outlier":
            message.outlier_detection.interval.seconds = 10
            message.outlier_detection.enforcing_failure_percentage.value = 100
            message.outlier_detection.failure_percentage_request_volume.value = 10
            message.outlier_detection.failure_percentage_minimum_hosts.value = 2
            message.outlier_detection.max_ejection_percent.value = 50
    return ClusterView.from_proto(message)


def assignment(name: str, localities: list[LocalitySpec], drops: Mapping[str, int] = {}) -> Any:
    message = builders.cluster_load_assignment(name, localities)
    for category, ppm in drops.items():
        drop = message.policy.drop_overloads.add(category=category)
        drop.drop_percentage.numerator = ppm
        drop.drop_percentage.denominator = 2  # MILLION
    return ClusterLoadAssignmentView.from_proto(message)


def eds(name: str, localities: list[LocalitySpec], **fields: Any) -> ClusterConfig:
    drops = fields.pop("drops", {})
    return ClusterConfig(
        name=name,
        cluster=cluster_view(name, **fields),
        endpoints=assignment(name, localities, drops),
    )


def snapshot(routes: Any, *clusters: ClusterConfig) -> XdsConfig:
    route_config = RouteConfigurationView.from_proto(builders.route_configuration("r", routes))
    return XdsConfig(
        listener=ListenerView.from_proto(builders.api_listener("l")),
        route_config=route_config,
        virtual_host=route_config.virtual_hosts[0],
        clusters={c.name: c for c in clusters},
    )


def one(port: int, zone: str = "a", priority: int = 0, weight: int = 1) -> LocalitySpec:
    return LocalitySpec(endpoints=[(HOST, port)], zone=zone, priority=priority, weight=weight)


def ready(picker: ComposedPicker, *ports: int, now: float = 0.0, state=READY) -> None:
    for port in ports:
        picker.set_endpoint_state((HOST, port), state, now)


def ports(picker: ComposedPicker, n: int, rand: random.Random, path: str = "/", now=0.0):
    counts: Counter[int | str] = Counter()
    for _ in range(n):
        result = picker.pick(path, {}, rand, now)
        if result.endpoint is not None:
            counts[result.endpoint.port] += 1
            picker.call_finished(result, True, now)
        else:
            counts[result.outcome.value] += 1
    return counts


def test_routes_choose_the_cluster_and_picks_say_where_they_went() -> None:
    """A path prefix routes to its cluster; the pick names the cluster and the locality."""
    picker = ComposedPicker()
    picker.update(
        snapshot({"/api": "api", "/": "web"}, eds("api", [one(1)]), eds("web", [one(2)])), 0.0
    )
    ready(picker, 1, 2)
    rand = random.Random(1)
    api = picker.pick("/api/x", {}, rand, 0.0)
    web = picker.pick("/index", {}, rand, 0.0)
    assert (api.cluster, api.endpoint and api.endpoint.port) == ("api", 1)
    assert (web.cluster, web.endpoint and web.endpoint.port) == ("web", 2)
    assert api.locality is not None
    assert api.locality.locality.zone == "a"


def test_routes_that_match_headers_are_matched_on_every_call() -> None:
    """A route matching a header decides per call, not once per path: the same path goes to
    the header's cluster with the header and to the next route without it."""
    picker = ComposedPicker()
    config = snapshot("web", eds("canary", [one(1)]), eds("web", [one(2)]))
    routes = builders.route_configuration("r", {"/": "canary"})
    matcher = routes.virtual_hosts[0].routes[0].match.headers.add(name="x-env")
    matcher.exact_match = "canary"
    routes.virtual_hosts[0].routes.add().match.prefix = "/"
    routes.virtual_hosts[0].routes[1].route.cluster = "web"
    view = RouteConfigurationView.from_proto(routes)
    picker.update(attrs.evolve(config, route_config=view, virtual_host=view.virtual_hosts[0]), 0.0)
    ready(picker, 1, 2)
    rand = random.Random(4)
    clusters = [
        picker.pick("/a", headers, rand, 0.0).cluster
        for headers in ({"x-env": "canary"}, {}, {"x-env": "canary"}, {})
    ]
    assert clusters == ["canary", "web", "canary", "web"]


def test_weighted_clusters_split_by_weight() -> None:
    """Weighted clusters 3:1 share the calls about 3:1 with a seeded source."""
    picker = ComposedPicker()
    picker.update(snapshot({"a": 3, "b": 1}, eds("a", [one(1)]), eds("b", [one(2)])), 0.0)
    ready(picker, 1, 2)
    counts = ports(picker, 4000, random.Random(2))
    assert 2800 < counts[1] < 3200
    assert counts[1] + counts[2] == 4000


def test_an_aggregate_cluster_uses_its_first_leaf_not_failing() -> None:
    """Aggregate leaves in order: the first leaf serves until its tree fails."""
    picker = ComposedPicker()
    aggregate = ClusterConfig(
        name="agg",
        cluster=ClusterView.from_proto(builders.aggregate_cluster("agg", ["p", "s"])),
        leaves=("p", "s"),
    )
    picker.update(snapshot("agg", aggregate, eds("p", [one(1)]), eds("s", [one(2)])), 0.0)
    ready(picker, 1, 2)
    rand = random.Random(3)
    assert ports(picker, 10, rand) == {1: 10}
    ready(picker, 1, state=FAILED)
    result = picker.pick("/", {}, rand, 0.0)
    assert (result.cluster, result.endpoint and result.endpoint.port) == ("s", 2)


def test_priority_failover_inside_a_cluster() -> None:
    """Priority 0 failing sends calls to priority 1; READY again, back to priority 0."""
    picker = ComposedPicker()
    picker.update(snapshot("c", eds("c", [one(1), one(2, "b", priority=1)])), 0.0)
    rand = random.Random(4)
    ready(picker, 1, state=FAILED)
    ready(picker, 2)
    assert ports(picker, 5, rand) == {2: 5}
    ready(picker, 1, now=1.0)
    assert ports(picker, 5, rand, now=1.0) == {1: 5}


def test_the_init_timer_runs_on_time_passed_in() -> None:
    """A priority that stays CONNECTING queues calls until its 10 s timer, then fails over."""
    picker = ComposedPicker()
    picker.update(snapshot("c", eds("c", [one(1), one(2, "b", priority=1)])), 0.0)
    ready(picker, 1, state=ConnectivityState.CONNECTING)
    ready(picker, 2)
    rand = random.Random(5)
    assert picker.pick("/", {}, rand, 9.0).outcome is PickOutcome.QUEUE
    assert picker.next_deadline() == FAILOVER_TIMEOUT
    result = picker.pick("/", {}, rand, FAILOVER_TIMEOUT)
    assert result.endpoint is not None
    assert result.endpoint.port == 2


def test_drops_by_category_only_while_ready() -> None:
    """A drop overload of 100 % drops with its category once the cluster is READY."""
    picker = ComposedPicker()
    picker.update(snapshot("c", eds("c", [one(1)], drops={"lb": 1_000_000})), 0.0)
    rand = random.Random(6)
    assert picker.pick("/", {}, rand, 0.0).outcome is PickOutcome.QUEUE  # IDLE: no drop
    ready(picker, 1)
    result = picker.pick("/", {}, rand, 0.0)
    assert (result.outcome, result.drop_category, result.cluster) == (PickOutcome.DROP, "lb", "c")


def test_drop_results_of_categories_no_longer_configured_are_let_go() -> None:
    """A control plane that names a new drop category in every assignment: the picker keeps
    the drop result of the current category only, not one per category ever seen."""
    picker = ComposedPicker()
    rand = random.Random(6)
    for generation in range(50):
        drops = {f"gen-{generation}": 1_000_000}
        picker.update(snapshot("c", eds("c", [one(1)], drops=drops)), 0.0)
        ready(picker, 1)
        assert picker.pick("/", {}, rand, 0.0).drop_category == f"gen-{generation}"
    gc.collect()
    held = [
        o.drop_category
        for o in gc.get_objects()
        if isinstance(o, PickResult) and o.drop_category.startswith("gen-")
    ]
    assert held == ["gen-49"]


def test_circuit_breaking_drops_over_max_requests_until_calls_finish() -> None:
    """With max_requests 2, the third call in flight is dropped without category."""
    counters = CallCounters()
    picker = ComposedPicker(counters=counters)
    picker.update(snapshot("c", eds("c", [one(1)], max_requests=2)), 0.0)
    ready(picker, 1)
    rand = random.Random(7)
    first, _second = (picker.pick("/", {}, rand, 0.0) for _ in range(2))
    third = picker.pick("/", {}, rand, 0.0)
    assert (third.outcome, third.drop_category) == (PickOutcome.DROP, "")
    assert counters.counter("c", "c").dropped == 1  # the view names the EDS service "c"
    picker.call_finished(first, True, 0.1)
    assert picker.pick("/", {}, rand, 0.1).outcome is PickOutcome.COMPLETE


def test_calls_in_flight_survive_a_new_snapshot() -> None:
    """The call counter is kept across updates, as gRPC keeps it per cluster."""
    picker = ComposedPicker()
    picker.update(snapshot("c", eds("c", [one(1)], max_requests=1)), 0.0)
    ready(picker, 1)
    rand = random.Random(8)
    assert picker.pick("/", {}, rand, 0.0).outcome is PickOutcome.COMPLETE
    picker.update(snapshot("c", eds("c", [one(1), one(2, "b")], max_requests=1)), 1.0)
    assert picker.pick("/", {}, rand, 1.0).outcome is PickOutcome.DROP


def test_endpoint_states_survive_a_new_assignment() -> None:
    """An endpoint that stays in the assignment keeps its reported state (no new report)."""
    picker = ComposedPicker()
    picker.update(snapshot("c", eds("c", [one(1)])), 0.0)
    ready(picker, 1)
    picker.update(snapshot("c", eds("c", [one(1), one(2, "b")])), 1.0)
    result = picker.pick("/", {}, random.Random(9), 1.0)
    assert result.endpoint is not None
    assert result.endpoint.port == 1


def test_outlier_detection_ejects_a_failing_endpoint_from_call_outcomes() -> None:
    """Calls reported failed on one endpoint get it ejected at the sweep."""
    picker = ComposedPicker()
    spec = LocalitySpec(endpoints=[(HOST, 1), (HOST, 2)], zone="a")
    picker.update(snapshot("c", eds("c", [spec], outlier=True)), 0.0)
    ready(picker, 1, 2)
    rand = random.Random(10)
    for _ in range(40):
        result = picker.pick("/", {}, rand, 1.0)
        assert result.endpoint is not None
        picker.call_finished(result, result.endpoint.port == 2, 1.0)
    assert picker.next_deadline() == 10.0
    picker.poll(rand, 10.0)
    assert ports(picker, 10, rand, now=10.0) == {2: 10}


@pytest.mark.parametrize("outlier", [False, True], ids=["bare", "under-outlier-detection"])
def test_least_request_counts_the_calls_the_composed_picker_starts_and_finishes(
    outlier: bool,
) -> None:
    """Least request sees the composed picker's calls in flight: held calls spread evenly over
    two endpoints, and once one endpoint's calls finish it takes the next calls."""
    fields: dict[str, Any] = {"choice_count": 10}
    if outlier:
        fields["outlier"] = True
    picker = ComposedPicker()
    both = LocalitySpec(endpoints=[(HOST, 1), (HOST, 2)])
    picker.update(snapshot("lr", eds("lr", [both], **fields)), 0.0)
    ready(picker, 1, 2)
    rand = random.Random(7)
    held = [picker.pick("/", {}, rand, 0.0) for _ in range(20)]
    by_port = Counter(r.endpoint.port for r in held if r.endpoint is not None)
    assert by_port == {1: 10, 2: 10}
    for result in held:
        if result.endpoint is not None and result.endpoint.port == 1:
            picker.call_finished(result, True, 0.0)
    assert ports(picker, 10, rand) == {1: 10}  # each call finishes before the next pick


def test_no_route_and_unusable_clusters_fail_with_a_reason() -> None:
    """A path no route matches, or a cluster in error, fails the call and says why."""
    picker = ComposedPicker()
    picker.update(snapshot({"/api": "api"}, eds("api", [one(1)])), 0.0)
    rand = random.Random(11)
    missing = picker.pick("/other", {}, rand, 0.0)
    assert missing.outcome is PickOutcome.FAIL
    assert "no route" in missing.error


def test_picks_before_any_snapshot_queue() -> None:
    """Before the first snapshot every pick waits."""
    assert ComposedPicker().pick("/", {}, random.Random(12), 0.0).outcome is PickOutcome.QUEUE


def test_wanted_connections_cover_the_serving_priorities() -> None:
    """The transport is asked to connect the endpoints of the priorities in use only."""
    picker = ComposedPicker()
    picker.update(snapshot("c", eds("c", [one(1), one(2, "b", priority=1)])), 0.0)
    assert {e.port for e in picker.wanted_connections()} == {1}
    ready(picker, 1, state=FAILED)
    assert {e.port for e in picker.wanted_connections()} == {1, 2}


def test_ring_hash_clusters_hash_the_routes_header_policy() -> None:
    """A ring hash cluster sends the same header value to the same endpoint every time."""
    routes = builders.route_configuration("r", "c")
    policy = routes.virtual_hosts[0].routes[0].route.hash_policy.add()
    policy.header.header_name = "user"
    route_config = RouteConfigurationView.from_proto(routes)
    cluster = ClusterView.from_proto(builders.cluster("c", lb_policy="ring_hash"))
    spec = LocalitySpec(endpoints=[(HOST, p) for p in range(1, 6)], zone="a")
    config = XdsConfig(
        listener=ListenerView.from_proto(builders.api_listener("l")),
        route_config=route_config,
        virtual_host=route_config.virtual_hosts[0],
        clusters={"c": ClusterConfig(name="c", cluster=cluster, endpoints=assignment("c", [spec]))},
    )
    picker = ComposedPicker()
    picker.update(config, 0.0)
    ready(picker, 1, 2, 3, 4, 5)
    rand = random.Random(13)
    for user in ("ann", "bob", "cy"):
        chosen = {picker.pick("/", {"user": user}, rand, 0.0).endpoint for _ in range(10)}
        assert len(chosen) == 1
    spread = {picker.pick("/", {"user": f"u{i}"}, rand, 0.0).endpoint for i in range(100)}
    assert len(spread) == 5
