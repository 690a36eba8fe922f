"""The lean ClusterLoadAssignment decoder gives the verdicts of the reference one.

The reference (tests/resources/reference_endpoint.py) is the decoder as it was before the lean
rewrite. For generated assignments built to hit every rule's edge (weights 0 and 2**32-1,
duplicate addresses and localities, priority gaps, unknown drop denominators) and for random
mutations of real ones, both must accept with field-for-field equal views, or both reject with
the same name and message.
"""

from __future__ import annotations

from typing import Any

from envoy.config.endpoint.v3 import endpoint_pb2
from hypothesis import example, given
from hypothesis import strategies as st

from tests.builders import endpoints
from tests.resources import reference_endpoint
from tests.resources.differential import FUZZ_SETTINGS, verdict
from tests.resources.test_mutations import _mutate
from xdsclient.resources import ClusterLoadAssignmentView


def assert_same_verdict(message: Any) -> None:
    ours = verdict(ClusterLoadAssignmentView, message)
    reference = verdict(reference_endpoint.ClusterLoadAssignmentView, message)
    assert ours == reference


_WEIGHTS = st.sampled_from([None, 0, 1, 3, 2**31, 2**32 - 1])


@st.composite
def assignments(draw: st.DrawFn) -> Any:
    """A ClusterLoadAssignment made of few distinct values, so rules collide often."""
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=draw(st.sampled_from(["c", ""])))
    for _ in range(draw(st.integers(0, 4))):
        group = message.endpoints.add(priority=draw(st.integers(0, 3)))
        group.locality.region = draw(st.sampled_from(["", "r1", "r2"]))
        group.locality.zone = draw(st.sampled_from(["", "z"]))
        weight = draw(_WEIGHTS)
        if weight is not None:
            group.load_balancing_weight.value = weight
        for _ in range(draw(st.integers(0, 3))):
            lb = group.lb_endpoints.add(health_status=draw(st.integers(0, 7)))
            weight = draw(_WEIGHTS)
            if weight is not None:
                lb.load_balancing_weight.value = weight
            for target in [lb.endpoint.address] + [
                lb.endpoint.additional_addresses.add().address
                for _ in range(draw(st.integers(0, 2)))
            ]:
                _address(draw, target)
            lb.endpoint.hostname = draw(st.sampled_from(["", "h"]))
            if draw(st.booleans()):
                lb.metadata.filter_metadata["m"].fields["k"].number_value = 1
    for _ in range(draw(st.integers(0, 2))):
        drop = message.policy.drop_overloads.add(category=draw(st.sampled_from(["a", "b"])))
        drop.drop_percentage.numerator = draw(st.sampled_from([0, 1, 50, 10**7]))
        drop.drop_percentage.denominator = draw(st.integers(0, 3))  # 3: unknown
    if draw(st.booleans()):
        message.policy.overprovisioning_factor.value = draw(st.integers(0, 200))
    return message


def _address(draw: st.DrawFn, address: Any) -> None:
    kind = draw(st.sampled_from(["port", "port", "port", "named", "none", "pipe"]))
    if kind == "pipe":
        address.pipe.path = "/p"
    elif kind != "none":
        socket = address.socket_address
        socket.address = draw(st.sampled_from(["10.0.0.1", "10.0.0.2", ""]))
        if kind == "port":
            socket.port_value = draw(st.sampled_from([0, 80, 81]))
        else:
            socket.named_port = "http"


def _weights_summing_to(total: int) -> Any:
    message = endpoints("e")
    lb = message.endpoints[0].lb_endpoints
    lb[0].load_balancing_weight.value = total - 1
    extra = lb.add()
    extra.endpoint.address.socket_address.address = "10.0.0.2"
    extra.endpoint.address.socket_address.port_value = 1
    return message


@FUZZ_SETTINGS
@given(message=assignments())
@example(message=_weights_summing_to(2**32 - 1))
@example(message=_weights_summing_to(2**32))
def test_generated_assignments_get_the_reference_verdict(message: Any) -> None:
    assert_same_verdict(message)


def _rich() -> Any:
    message = endpoints("e")
    group = message.endpoints.add(priority=1)
    group.locality.region = "r2"
    group.load_balancing_weight.value = 2
    lb = group.lb_endpoints.add()
    lb.endpoint.address.socket_address.address = "10.0.0.9"
    lb.endpoint.address.socket_address.port_value = 9
    extra = lb.endpoint.additional_addresses.add().address.socket_address
    extra.address, extra.port_value = "::1", 9
    lb.metadata.filter_metadata["m"].fields["k"].string_value = "v"
    drop = message.policy.drop_overloads.add(category="x")
    drop.drop_percentage.numerator = 5
    return message


@FUZZ_SETTINGS
@given(seed=st.sampled_from([endpoints("e"), _rich()]), data=st.data())
def test_mutated_assignments_get_the_reference_verdict(seed: Any, data: st.DataObject) -> None:
    message = endpoint_pb2.ClusterLoadAssignment()
    message.CopyFrom(seed)
    for _ in range(data.draw(st.integers(1, 4))):
        _mutate(message, data)
    assert_same_verdict(message)


def test_both_decoders_accept_the_rich_seed_with_equal_views() -> None:
    """The comparison is not vacuous: the rich seed is accepted with every part filled in."""
    outcome, fields = verdict(ClusterLoadAssignmentView, _rich())
    assert outcome == "accepted"
    assert fields == verdict(reference_endpoint.ClusterLoadAssignmentView, _rich())[1]
    view = ClusterLoadAssignmentView.from_proto(_rich())
    assert [len(group) for group in view.priorities] == [1, 1]
    assert view.priorities[1][0].endpoints[0].additional_addresses == (("::1", 9),)
