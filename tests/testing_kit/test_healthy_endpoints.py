"""`ClusterLoadAssignmentView.healthy_endpoints`: the endpoints gRPC balances over, without the
priority -> locality -> endpoint loop every program writes."""

from __future__ import annotations

from xdsclient.resources import ClusterLoadAssignmentView, HealthStatus
from xdsclient.testing.builders import EndpointSpec, LocalitySpec, cluster_load_assignment


def view() -> ClusterLoadAssignmentView:
    return ClusterLoadAssignmentView.from_proto(
        cluster_load_assignment(
            "web",
            [
                LocalitySpec(
                    [EndpointSpec("10.0.0.1", 80), EndpointSpec("10.0.0.2", 80, health="unknown")],
                    zone="a",
                ),
                LocalitySpec(
                    [
                        EndpointSpec("10.0.1.1", 80, health="draining"),
                        EndpointSpec("10.0.1.2", 80, health="unhealthy"),
                        EndpointSpec("10.0.1.3", 80),
                    ],
                    zone="b",
                ),
                LocalitySpec(
                    [EndpointSpec("10.0.2.1", 80, health="degraded"), EndpointSpec("10.0.2.2", 80)],
                    zone="c",
                    priority=1,
                ),
                LocalitySpec([EndpointSpec("10.0.3.1", 80)], zone="d", priority=1, weight=0),
            ],
        )
    )


def test_healthy_endpoints_are_flat_in_priority_then_locality_order() -> None:
    """UNKNOWN and HEALTHY endpoints come out in order; every other health is left out."""
    endpoints = list(view().healthy_endpoints())
    assert [e.address for e in endpoints] == ["10.0.0.1", "10.0.0.2", "10.0.1.3", "10.0.2.2"]
    assert {e.health_status for e in endpoints} == {HealthStatus.HEALTHY, HealthStatus.UNKNOWN}


def test_healthy_endpoints_of_one_priority() -> None:
    """With a priority, only that priority's endpoints; none for a priority not there."""
    assignment = view()
    assert [e.address for e in assignment.healthy_endpoints(priority=1)] == ["10.0.2.2"]
    assert (
        list(assignment.healthy_endpoints(priority=0)) == list(assignment.healthy_endpoints())[:3]
    )
    assert list(assignment.healthy_endpoints(priority=2)) == []


def test_a_locality_of_weight_zero_is_not_balanced_over() -> None:
    """gRPC skips a locality without a positive weight, so its endpoints are not healthy ones."""
    assert "10.0.3.1" not in {e.address for e in view().healthy_endpoints()}


def test_an_assignment_with_no_healthy_endpoint_yields_none() -> None:
    """Nothing usable is an empty iteration, not an error."""
    assignment = ClusterLoadAssignmentView.from_proto(
        cluster_load_assignment("web", [EndpointSpec("10.0.0.1", 80, health="unhealthy")])
    )
    assert list(assignment.healthy_endpoints()) == []
