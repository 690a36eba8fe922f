"""A SotW response's resources read from its bytes (`resource_values`, what the compiled build
classifies) give what upb's accessors give (`upb_values`), or None where the reader stops, and
a session reading them reaches the same verdicts."""

from __future__ import annotations

from typing import Any

from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2

from tests.builders import EDS, connected, endpoints, invalid_endpoints, sotw_response, wrapped
from xdsclient import ResourceChanged, ResourceStatus
from xdsclient._protocol._classify import resource_values, upb_values
from xdsclient.resources import ENDPOINT

TYPE = EDS.encode()


def _both(response: Any) -> tuple[list[bytes | None] | None, list[bytes | None]]:
    wire = response.SerializeToString()
    return resource_values(wire, TYPE), upb_values(response.resources, EDS)


def test_bare_wrapped_wrong_type_and_empty_resources_read_as_upb_reads_them() -> None:
    response = sotw_response(
        EDS,
        [endpoints("a"), wrapped(endpoints("b"), name="b"), endpoints("c")],
        version="1",
        nonce="n",
        errors=[("d", 5, "gone")],
    )
    response.resources.add(type_url="type.googleapis.com/other.Type", value=b"\x0a\x01x")
    response.resources.add(type_url=EDS)  # no value: empty bytes
    response.resources.add()  # no type URL either
    ours, upb = _both(response)
    assert ours == upb
    assert ours is not None
    assert [v is None for v in ours] == [False, True, False, True, False, True]


def test_unknown_fields_and_field_order_do_not_change_what_is_read() -> None:
    value = endpoints("a").SerializeToString()
    url = bytes([10, len(TYPE)]) + TYPE
    # value first, an unknown varint, fixed64, fixed32 and bytes field, then the type URL
    odd = bytes([18, len(value)]) + value + b"\x18\x07" + b"\x21" + bytes(8) + b"\x2d" + bytes(4)
    odd += b"\x32\x02hi" + url
    twice = bytes([10, 3]) + b"abc" + url + bytes([18, 1]) + b"x" + bytes([18, len(value)]) + value
    response = discovery_pb2.DiscoveryResponse.FromString(
        bytes([18, len(odd)])
        + odd
        + b"\x0a\x011"
        + bytes([18, len(twice)])
        + twice
        + b"\x98\x06\x01"
    )  # a response field between the resources, and an unknown response field (99) at the end
    ours, upb = _both(response)
    assert ours == upb == [value, value]


def test_bytes_it_does_not_read_leave_the_response_to_upb() -> None:
    group = b"\x0b\x0c"  # a group (field 1, start and end): proto2's, left to upb
    assert resource_values(group, TYPE) is None
    assert resource_values(b"\x12\x05abc", TYPE) is None  # a resource cut short
    assert resource_values(b"\x12\x02\x0a\x05", TYPE) is None  # its type URL cut short
    assert resource_values(b"\x12", TYPE) is None  # a length missing
    assert resource_values(b"\x12\x80", TYPE) is None  # a varint cut short
    assert resource_values(b"\x21\x00", TYPE) is None  # a fixed64 cut short
    assert resource_values(b"", TYPE) == []


def test_a_session_classifies_a_mixed_response_the_same_through_either_reading() -> None:
    s, _ = connected(ENDPOINT, subscribe={EDS: ["a", "b", "c"]})
    packed = any_pb2.Any(type_url="type.googleapis.com/other.Type", value=b"")
    response = sotw_response(
        EDS,
        [endpoints("a"), wrapped(endpoints("b"), name="b"), invalid_endpoints("c"), packed],
        version="1",
        nonce="n1",
    )
    events = s.receive(response, 1.0)
    assert sorted(e.name for e in events if isinstance(e, ResourceChanged)) == ["a", "b"]
    (nack,) = s.requests_to_send(1.0)
    assert "resource 3: type type.googleapis.com/other.Type" in nack.error_detail.message
    assert "socket_address.address" in nack.error_detail.message
    state = s.resource_state(EDS, "c")
    assert state is not None
    assert state.status is ResourceStatus.NACKED
