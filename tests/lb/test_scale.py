"""The composed picker at scale: work per connectivity change and per update does not grow
with the endpoints it does not touch, and state follows the current assignment only.

Work is counted, not timed: the Python calls a step makes (``sys.setprofile`` sees every
Python function, those C code calls too, such as an enum's ``__hash__`` while a set or a
counter is built, and every builtin called from Python), so the checks cannot flake on a busy
machine."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from xdsclient import ClusterConfig, XdsConfig
from xdsclient.lb import ComposedPicker, ConnectivityState, PickOutcome, PriorityPolicy
from xdsclient.resources import (
    ClusterLoadAssignmentView,
    ClusterView,
    ListenerView,
    RouteConfigurationView,
)
from xdsclient.testing import builders
from xdsclient.testing.builders import LocalitySpec

READY = ConnectivityState.READY
IDLE = ConnectivityState.IDLE
HOST = "10.0.0.1"
POLICIES = ["round_robin", "ring_hash"]


def eds(name: str, ports: list[int], lb_policy: str = "round_robin", zones: int = 10) -> Any:
    """A cluster ``name`` over ``ports`` in (at most) ``zones`` localities of equal size."""
    size = -(-len(ports) // zones)
    groups = [ports[i : i + size] for i in range(0, len(ports), size)]
    localities = [
        LocalitySpec(endpoints=[(HOST, p) for p in zone], zone=f"z{z}")
        for z, zone in enumerate(groups)
    ]
    return ClusterConfig(
        name=name,
        cluster=ClusterView.from_proto(builders.cluster(name, lb_policy=lb_policy)),
        endpoints=ClusterLoadAssignmentView.from_proto(
            builders.cluster_load_assignment(name, localities)
        ),
    )


def snapshot(*clusters: ClusterConfig) -> XdsConfig:
    route_config = RouteConfigurationView.from_proto(
        builders.route_configuration("r", clusters[0].name)
    )
    return XdsConfig(
        listener=ListenerView.from_proto(builders.api_listener("l")),
        route_config=route_config,
        virtual_host=route_config.virtual_hosts[0],
        clusters={c.name: c for c in clusters},
    )


def calls(step: Callable[[], object]) -> int:
    """How many Python calls (and builtin calls from Python) ``step`` makes."""
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
    return count


def all_ready_calls(lb_policy: str, endpoints: int) -> int:
    picker = ComposedPicker()
    picker.update(snapshot(eds("c", list(range(1, endpoints + 1)), lb_policy)), 0.0)

    def report() -> None:
        for port in range(1, endpoints + 1):
            picker.set_endpoint_state((HOST, port), READY, 0.0)

    work = calls(report)
    assert picker.cluster_state("c") is READY
    return work


@pytest.mark.parametrize("lb_policy", POLICIES)
def test_making_endpoints_ready_costs_the_same_per_endpoint_at_any_size(lb_policy: str) -> None:
    """Reporting 4x the endpoints READY one at a time (in 10 localities) makes at most 4.5x
    the calls: a connectivity change costs the same with 400 endpoints as with 1,600 (it was
    quadratic)."""
    small = all_ready_calls(lb_policy, 400)
    large = all_ready_calls(lb_policy, 1600)
    assert large <= 4.5 * small, (small, large)


@pytest.mark.parametrize("lb_policy", POLICIES)
def test_an_update_changing_one_endpoint_works_on_its_locality_only(lb_policy: str) -> None:
    """With 2,000 READY endpoints in 10 localities, an update replacing one endpoint makes
    fewer Python calls than there are endpoints (the locality it changed costs, the other
    nine do not), and the endpoint gone no longer serves."""
    ports = list(range(1, 2001))
    picker = ComposedPicker()
    picker.update(snapshot(eds("c", ports, lb_policy)), 0.0)
    for port in ports:
        picker.set_endpoint_state((HOST, port), READY, 0.0)
    ports[0] = 5000
    changed = snapshot(eds("c", ports, lb_policy))
    work = calls(lambda: picker.update(changed, 1.0))
    assert work < len(ports), work
    rand = random.Random(0)
    picked = {picker.pick("/", {"user": str(i)}, rand, 1.0).endpoint for i in range(4000)}
    served = {endpoint.port for endpoint in picked if endpoint is not None}
    assert 1 not in served
    assert len(served) > 100


@pytest.mark.parametrize("lb_policy", POLICIES)
def test_state_of_endpoints_that_left_every_assignment_is_forgotten(lb_policy: str) -> None:
    """After 200 pushes each moving a 3-endpoint assignment to 3 new READY endpoints, the
    picker keeps 3 states (it kept 603), and its priority policy 3."""
    picker = ComposedPicker()
    for push in range(200):
        ports = [3 * push + i for i in range(1, 4)]
        picker.update(snapshot(eds("c", ports, lb_policy)), float(push))
        for port in ports:
            picker.set_endpoint_state((HOST, port), READY, float(push))
    assert sorted(picker.endpoint_states()) == [(HOST, 598), (HOST, 599), (HOST, 600)]


def test_an_endpoint_back_after_leaving_every_assignment_starts_idle() -> None:
    """An endpoint that left the assignment and comes back is IDLE again (its old READY is
    not replayed): the picker asks for its connection instead of picking it unconnected."""
    picker = ComposedPicker()
    picker.update(snapshot(eds("c", [1])), 0.0)
    picker.set_endpoint_state((HOST, 1), READY, 0.0)
    picker.update(snapshot(eds("c", [2])), 1.0)
    picker.update(snapshot(eds("c", [1])), 2.0)
    assert picker.cluster_state("c") is IDLE
    result = picker.pick("/", {}, random.Random(0), 2.0)
    assert result.outcome is PickOutcome.QUEUE
    assert [e.port for e in result.connect] == [1]


def test_a_state_held_by_another_cluster_reaches_a_cluster_the_endpoint_joins() -> None:
    """An endpoint READY in cluster b that joins cluster a (a new cluster, then again after
    leaving it) is READY in a at once: what the transport said is kept while some cluster
    holds the endpoint."""
    picker = ComposedPicker()
    picker.update(snapshot(eds("b", [1, 2])), 0.0)
    picker.set_endpoint_state((HOST, 1), READY, 0.0)
    picker.update(snapshot(eds("a", [1]), eds("b", [1, 2])), 1.0)
    assert picker.cluster_state("a") is READY
    picker.update(snapshot(eds("a", [3]), eds("b", [1, 2])), 2.0)
    picker.update(snapshot(eds("a", [1]), eds("b", [1, 2])), 3.0)
    assert picker.cluster_state("a") is READY
    picker.update(snapshot(eds("a", [3])), 4.0)
    assert (HOST, 1) not in picker.endpoint_states()


def test_a_priority_policy_keeps_the_states_of_its_assignment_only() -> None:
    """`PriorityPolicy` forgets the state of an endpoint its assignment no longer holds, and
    of one reported that it never held, at the next update."""
    from xdsclient.lb import child_policy_for
    from xdsclient.resources import RoundRobin

    policy = PriorityPolicy(lambda: child_policy_for(RoundRobin()))
    view = eds("c", [1, 2]).endpoints
    policy.update(view.priorities, 0.0)
    for port in (1, 2, 9):
        policy.set_endpoint_state((HOST, port), READY, 0.0)
    policy.update(eds("c", [2, 3]).endpoints.priorities, 1.0)
    assert sorted(policy.endpoint_states()) == [(HOST, 2)]
    assert policy.added_keys == ((HOST, 3),)
    assert policy.removed_keys == ((HOST, 1),)


def test_an_endpoint_moving_between_priorities_keeps_its_state() -> None:
    """An endpoint that moves from priority 1 to priority 0 neither leaves nor joins the
    assignment: its reported state is kept, and a priority's child created later gets it."""
    from xdsclient.lb import child_policy_for
    from xdsclient.resources import RoundRobin

    def two_priorities(first: list[int], second: list[int]) -> Any:
        message = builders.cluster_load_assignment(
            "c",
            [
                LocalitySpec(endpoints=[(HOST, p) for p in first], zone="a", priority=0),
                LocalitySpec(endpoints=[(HOST, p) for p in second], zone="b", priority=1),
            ],
        )
        return ClusterLoadAssignmentView.from_proto(message).priorities

    policy = PriorityPolicy(lambda: child_policy_for(RoundRobin()))
    policy.update(two_priorities([1], [2, 3]), 0.0)
    policy.set_endpoint_state((HOST, 3), READY, 0.0)
    policy.update(two_priorities([1, 3], [2]), 1.0)
    assert (policy.added_keys, policy.removed_keys) == ((), ())
    assert policy.endpoint_states() == {(HOST, 3): READY}
    assert policy.state() is READY  # priority 0's child picked the state up
    assert policy.wants((HOST, 3))


def test_an_endpoint_moving_between_localities_stays_ready() -> None:
    """An endpoint READY in locality a that moves to a new locality b of the same priority
    stays READY there (no new report needed) and is picked."""
    picker = ComposedPicker()
    picker.update(snapshot(eds("c", [1, 2], zones=2)), 0.0)  # zones z0: [1], z1: [2]
    picker.set_endpoint_state((HOST, 1), READY, 0.0)
    moved = ClusterConfig(
        name="c",
        cluster=ClusterView.from_proto(builders.cluster("c")),
        endpoints=ClusterLoadAssignmentView.from_proto(
            builders.cluster_load_assignment(
                "c",
                [
                    LocalitySpec(endpoints=[(HOST, 2)], zone="z1"),
                    LocalitySpec(endpoints=[(HOST, 1)], zone="z2"),
                ],
            )
        ),
    )
    picker.update(snapshot(moved), 1.0)
    assert picker.cluster_state("c") is READY
    result = picker.pick("/", {}, random.Random(0), 1.0)
    assert result.endpoint is not None
    assert result.endpoint.port == 1
    assert result.locality is not None
    assert result.locality.locality.zone == "z2"
