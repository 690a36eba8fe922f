"""ClusterLoadAssignment view: gRPC's EDS validation, one case per rule, exact messages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from envoy.config.endpoint.v3 import endpoint_pb2

from xdsclient import Locality, ResourceDecodeError
from xdsclient.resources._endpoint import (
    ClusterLoadAssignmentView,
    DropOverload,
    HealthStatus,
    decode_cluster_load_assignment,
)


def cla(*groups: tuple[str, int, int, list[tuple[str, int]]]) -> Any:
    """(zone, weight, priority, [(address, port)...]) per locality."""
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name="svc")
    for zone, weight, priority, addresses in groups:
        group = message.endpoints.add(priority=priority)
        group.locality.zone = zone
        if weight:
            group.load_balancing_weight.value = weight
        for address, port in addresses:
            socket = group.lb_endpoints.add().endpoint.address.socket_address
            socket.address, socket.port_value = address, port
    return message


def test_a_valid_assignment_decodes_into_priorities_localities_and_endpoints() -> None:
    message = cla(
        ("a", 3, 0, [("10.0.0.1", 80), ("10.0.0.2", 80)]), ("b", 1, 1, [("10.0.1.1", 80)])
    )
    lb = message.endpoints[0].lb_endpoints[1]
    lb.health_status = 3  # DRAINING
    lb.load_balancing_weight.value = 5
    lb.endpoint.hostname = "two.example"
    lb.endpoint.additional_addresses.add().address.socket_address.address = "fd00::2"
    lb.endpoint.additional_addresses[0].address.socket_address.port_value = 80
    lb.metadata.filter_metadata["envoy.lb"].update({"canary": True})
    drop = message.policy.drop_overloads.add(category="throttle")
    drop.drop_percentage.numerator, drop.drop_percentage.denominator = 25, 0  # 25 %
    message.policy.overprovisioning_factor.value = 200
    name, view = decode_cluster_load_assignment(message.SerializeToString())
    assert name == "svc"
    assert len(view.priorities) == 2
    (zone_a,) = view.priorities[0]
    assert (zone_a.locality, zone_a.weight, zone_a.priority) == (Locality(zone="a"), 3, 0)
    first, second = zone_a.endpoints
    assert (first.address, first.port, first.weight, first.healthy) == ("10.0.0.1", 80, 1, True)
    assert second.health_status is HealthStatus.DRAINING
    assert not second.healthy
    assert (second.weight, second.hostname) == (5, "two.example")
    assert second.additional_addresses == (("fd00::2", 80),)
    assert second.metadata == {"envoy.lb": {"canary": True}}
    assert view.drop_overloads == (DropOverload(category="throttle", parts_per_million=250_000),)
    assert view.overprovisioning_factor == 200
    assert [loc.locality.zone for loc in view.localities] == ["a", "b"]


def test_defaults_and_skipped_localities() -> None:
    view = ClusterLoadAssignmentView.from_proto(
        cla(("a", 1, 0, [("10.0.0.1", 80)]), ("skipped", 0, 0, []))
    )
    assert view.overprovisioning_factor == 140
    assert view.drop_overloads == ()
    assert [loc.locality.zone for loc in view.localities] == ["a"]


def test_the_view_keeps_its_protobuf_and_compares_by_content() -> None:
    message = cla(("a", 1, 0, [("10.0.0.1", 80)]))
    raw = message.SerializeToString()
    _, view = decode_cluster_load_assignment(raw)
    _, same = decode_cluster_load_assignment(raw)
    _, other = decode_cluster_load_assignment(
        cla(("a", 1, 0, [("10.0.0.9", 80)])).SerializeToString()
    )
    assert view.proto == message
    assert view == same
    assert hash(view) == hash(same)
    assert view != other


def _mutate(change: Callable[[Any], None]) -> bytes:
    message = cla(("a", 1, 0, [("10.0.0.1", 80)]), ("b", 1, 1, [("10.0.1.1", 80)]))
    change(message)
    return bytes(message.SerializeToString())


def _first(m: Any) -> Any:
    return m.endpoints[0].lb_endpoints[0]


def zero_weight(m: Any) -> None:
    _first(m).load_balancing_weight.SetInParent()


def pipe_address(m: Any) -> None:
    _first(m).endpoint.address.pipe.path = "/tmp/socket"


def empty_address(m: Any) -> None:
    _first(m).endpoint.address.socket_address.address = ""


def hostname_address(m: Any) -> None:
    _first(m).endpoint.address.socket_address.address = "backend.example.com"


def nul_in_address(m: Any) -> None:
    _first(m).endpoint.address.socket_address.address = "10.0.0.1\x00"


def port_out_of_range(m: Any) -> None:
    _first(m).endpoint.address.socket_address.port_value = 65536


def no_locality(m: Any) -> None:
    m.endpoints[0].ClearField("locality")


def drop_without_category(m: Any) -> None:
    m.policy.drop_overloads.add().drop_percentage.numerator = 5


def duplicate_address(m: Any) -> None:
    m.endpoints[1].lb_endpoints[0].endpoint.address.socket_address.address = "10.0.0.1"
    m.endpoints[1].lb_endpoints[0].endpoint.address.socket_address.port_value = 80


def duplicate_locality(m: Any) -> None:
    m.endpoints[1].priority = 0
    m.endpoints[1].locality.zone = "a"


def priority_gap(m: Any) -> None:
    m.endpoints[1].priority = 2


def weight_overflow(m: Any) -> None:
    m.endpoints[0].load_balancing_weight.value = 2**32 - 1
    m.endpoints[1].priority = 0


def bad_denominator(m: Any) -> None:
    m.policy.drop_overloads.add(category="x").drop_percentage.denominator = 7


ENDPOINT = "endpoints[0].lb_endpoints[0]"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (zero_weight, f"{ENDPOINT}.load_balancing_weight: must be greater than 0"),
        (pipe_address, f"{ENDPOINT}.endpoint.address: must be a socket_address"),
        (empty_address, f"{ENDPOINT}.endpoint.address.socket_address.address: must not be empty"),
        (
            hostname_address,
            f"{ENDPOINT}.endpoint.address.socket_address.address: "
            "'backend.example.com' is not an IP address",
        ),
        (  # inet_pton raises ValueError here, not OSError: still a verdict naming the field
            nul_in_address,
            f"{ENDPOINT}.endpoint.address.socket_address.address: "
            "'10.0.0.1\\x00' is not an IP address",
        ),
        (
            port_out_of_range,
            f"{ENDPOINT}.endpoint.address.socket_address.port_value: must be at most 65535",
        ),
        (no_locality, "endpoints[0].locality: required"),
        (drop_without_category, "policy.drop_overloads[0].category: must not be empty"),
        (
            duplicate_address,
            "endpoints[1].lb_endpoints[0].endpoint.address: duplicate address 10.0.0.1:80",
        ),
        (duplicate_locality, "endpoints[1].locality: duplicate locality /a/ at priority 0"),
        (priority_gap, "endpoints: priorities must run from 0 without gaps; missing 1"),
        (weight_overflow, "endpoints: locality weights at priority 0 sum above 4294967295"),
        (
            bad_denominator,
            "policy.drop_overloads[0].drop_percentage.denominator: unknown denominator",
        ),
    ],
)
def test_invalid_assignments_name_the_field(change: Callable[[Any], None], message: str) -> None:
    with pytest.raises(ResourceDecodeError) as caught:
        decode_cluster_load_assignment(_mutate(change))
    assert caught.value.message == message
    assert caught.value.name == "svc"


def test_unparsable_bytes_are_a_decode_error() -> None:
    with pytest.raises(
        ResourceDecodeError,
        match=r"cannot parse envoy\.config\.endpoint\.v3\.ClusterLoadAssignment",
    ):
        decode_cluster_load_assignment(b"\xff")


def test_drop_percentages_convert_to_parts_per_million_and_are_capped() -> None:
    message = cla(("a", 1, 0, [("10.0.0.1", 80)]))
    for numerator, denominator in ((5, 1), (7, 2), (300, 0)):
        drop = message.policy.drop_overloads.add(category=f"{numerator}")
        drop.drop_percentage.numerator, drop.drop_percentage.denominator = numerator, denominator
    view = ClusterLoadAssignmentView.from_proto(message)
    assert [d.parts_per_million for d in view.drop_overloads] == [500, 7, 1_000_000]


def test_to_dataclass_gives_the_betterproto_object() -> None:
    view = ClusterLoadAssignmentView.from_proto(cla(("a", 1, 0, [("10.0.0.1", 80)])))
    dataclass = view.to_dataclass()
    assert type(dataclass).__module__.startswith("envoy_data_plane.")
    assert dataclass.cluster_name == "svc"
    assert dataclass.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value == 80


def test_to_dataclass_names_the_extra_when_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    view = ClusterLoadAssignmentView.from_proto(cla(("a", 1, 0, [("10.0.0.1", 80)])))
    for module in [m for m in sys.modules if m.startswith("envoy_data_plane")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "envoy_data_plane", None)  # makes the import fail
    with pytest.raises(ImportError, match=r"pip install 'xdsclient\[dataclasses\]'"):
        view.to_dataclass()


def test_an_endpoint_without_metadata_has_an_empty_read_only_mapping() -> None:
    _, view = decode_cluster_load_assignment(
        cla(("a", 1, 0, [("10.0.0.1", 80)])).SerializeToString()
    )
    (endpoint,) = view.priorities[0][0].endpoints
    assert endpoint.metadata == {}
    with pytest.raises(TypeError):
        endpoint.metadata["k"] = 1  # type: ignore[index]
