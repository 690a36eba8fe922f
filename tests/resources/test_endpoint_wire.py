"""The wire reader never changes a ClusterLoadAssignment verdict (compiled or not).

`_endpoint_wire.read_fields` reads the common shape straight from the bytes and returns None
for anything else. Whatever it returns that is not None must be exactly what upb and ``_lean``
make of the same bytes; whatever upb rejects it must leave alone. These tests run the module
as it is imported: compiled under ``make test``, interpreted under ``make test-pure``
(tests/test_compiled.py makes sure the compiled build is the one under ``make test``).
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from envoy.config.endpoint.v3 import endpoint_pb2
from google.protobuf.message import DecodeError
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import endpoints
from tests.resources.differential import FUZZ_SETTINGS, plain
from tests.resources.test_endpoint_differential import _WEIGHTS, _rich, assignments
from tests.resources.wire_cases import mutated
from xdsclient import ResourceDecodeError
from xdsclient.resources import ENDPOINT, ClusterLoadAssignmentView, _endpoint, _endpoint_wire
from xdsclient.resources._endpoint import _lean, decode_cluster_load_assignment
from xdsclient.resources._view import is_ip_address


def upb_fields(data: bytes) -> Any:
    """What the upb path makes of ``data``: (name, lean fields), None when it gives up, or
    "unparsable"."""
    try:
        message = endpoint_pb2.ClusterLoadAssignment.FromString(data)
    except DecodeError:
        return "unparsable"
    fields = _lean(message)
    return None if fields is None else (message.cluster_name, fields)


def assert_agrees(data: bytes) -> None:
    """What the reader reads is upb's reading, and its check takes exactly what it reads (so a
    view the compiled decoder only checked builds later, as upb would build it)."""
    read = _endpoint_wire.read_fields(data)
    assert _endpoint_wire.check(data) == (None if read is None else read[0])
    if read is not None:
        assert plain(read) == plain(upb_fields(data))
        assert plain(_endpoint_wire.build(data)) == plain(read)  # reading what check took


def _common(i: int) -> Any:
    """The shape control planes send: a region, weighted locality, three endpoints with
    hostnames, health, weights and a dual-stack address."""
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=f"c{i}")
    for priority in (0, 1):
        group = message.endpoints.add(priority=priority)
        group.locality.region, group.locality.zone, group.locality.sub_zone = "r", "z", "s"
        group.load_balancing_weight.value = 3
        for j in range(3):
            lb = group.lb_endpoints.add(health_status=j)
            lb.endpoint.address.socket_address.address = f"10.{priority}.0.{j}"
            lb.endpoint.address.socket_address.port_value = 8000 + i
            lb.endpoint.hostname = f"host-{j}"
            lb.load_balancing_weight.value = j + 1
    extra = lb.endpoint.additional_addresses.add().address.socket_address
    extra.address, extra.port_value = "fd00::1", 8000 + i
    return message


def test_the_common_shape_is_read_from_the_bytes_with_upbs_fields() -> None:
    for message in (_common(7), endpoints("e"), endpoint_pb2.ClusterLoadAssignment()):
        data = message.SerializeToString()
        read = _endpoint_wire.read_fields(data)
        assert read is not None  # the fast path is taken, so the comparison is not vacuous
        assert plain(read) == plain(upb_fields(data))
        assert _endpoint_wire.check(data) == read[0]


def test_the_decoder_gives_the_same_view_by_either_path() -> None:
    data = _common(3).SerializeToString()
    name, view = decode_cluster_load_assignment(data)
    upb_view = ClusterLoadAssignmentView.from_proto(
        endpoint_pb2.ClusterLoadAssignment.FromString(data), data
    )
    assert name == "c3"
    assert plain(view) == plain(upb_view)
    assert view.raw is data


def _with(change: Any) -> bytes:
    message = _common(1)
    change(message)
    data: bytes = message.SerializeToString()
    return data


def _ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field (payloads under 128 bytes)."""
    return bytes([field << 3 | 2, len(payload)]) + payload


def _encoded_port(port: int) -> bytes:
    """An assignment of one endpoint at 10.0.0.1:``port``, encoded by hand: protobuf would not
    serialize a port above 32 bits."""
    varint = bytearray()
    while port >= 0x80:
        varint.append(port & 0x7F | 0x80)
        port >>= 7
    varint.append(port)
    socket = _ld(2, b"10.0.0.1") + b"\x18" + bytes(varint)
    lb = _ld(1, _ld(1, _ld(1, socket)))  # LbEndpoint.endpoint.address.socket_address
    return _ld(2, _ld(1, b"") + _ld(3, b"\x08\x01") + _ld(2, lb))


LEFT_TO_UPB = {
    "metadata": _with(
        lambda m: m.endpoints[0].lb_endpoints[0].metadata.filter_metadata["a"].SetInParent()
    ),
    "a policy": _with(lambda m: m.policy.overprovisioning_factor.SetInParent()),
    "a named port": _with(
        lambda m: setattr(
            m.endpoints[0].lb_endpoints[0].endpoint.address.socket_address, "named_port", "http"
        )
    ),
    "a pipe": _with(
        lambda m: setattr(m.endpoints[0].lb_endpoints[0].endpoint.address.pipe, "path", "/p")
    ),
    "a field given twice": _common(1).SerializeToString() + b"\x0a\x01x",  # cluster_name again
    "truncated": _common(1).SerializeToString()[:-3],
    "invalid UTF-8": b"\x0a\x02\xc3\x28",
    "a wrong wire type": b"\x08\x01",  # cluster_name as a varint: upb keeps it as unknown
    "a port above 32 bits": _encoded_port(2**32 + 80),  # upb keeps the low 32 bits
    "a 64-bit overlong varint": b"\x0a" + b"\xff" * 11,
}


@pytest.mark.parametrize("case", LEFT_TO_UPB)
def test_what_the_reader_does_not_know_is_left_to_upb(case: str) -> None:
    assert _endpoint_wire.read_fields(LEFT_TO_UPB[case]) is None
    assert _endpoint_wire.check(LEFT_TO_UPB[case]) is None


@st.composite
def common_shapes(draw: st.DrawFn) -> Any:
    """Assignments of the shape the reader takes, from few values so that its rules collide:
    duplicate localities and addresses, zero and huge weights, priority gaps, hosts that are
    not IP addresses, ports out of range, unknown health values, empty parts."""
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=draw(st.sampled_from(["c", ""])))
    for _ in range(draw(st.integers(0, 3))):
        group = message.endpoints.add(priority=draw(st.integers(0, 2)))
        if draw(st.integers(0, 5)):
            group.locality.region = draw(st.sampled_from(["", "r1", "r2"]))
            group.locality.zone = draw(st.sampled_from(["", "z"]))
            group.locality.sub_zone = draw(st.sampled_from(["", "s"]))
        weight = draw(_WEIGHTS)
        if weight is not None:
            group.load_balancing_weight.value = weight
        for _ in range(draw(st.integers(0, 3))):
            lb = group.lb_endpoints.add(health_status=draw(st.integers(0, 7)))
            weight = draw(_WEIGHTS)
            if weight is not None:
                lb.load_balancing_weight.value = weight
            if draw(st.integers(0, 5)):
                _socket(draw, lb.endpoint.address)
            lb.endpoint.hostname = draw(st.sampled_from(["", "h"]))
            for _ in range(draw(st.integers(0, 2))):
                extra = lb.endpoint.additional_addresses.add()
                if draw(st.integers(0, 5)):
                    _socket(draw, extra.address)
    return message


def _socket(draw: st.DrawFn, address: Any) -> None:
    socket = address.socket_address
    socket.address = draw(st.sampled_from(["10.0.0.1", "10.0.0.2", "::1", "[::1]", "h", ""]))
    socket.port_value = draw(st.sampled_from([0, 80, 81, 65535, 65536, 2**32 - 1]))


@FUZZ_SETTINGS
@given(message=common_shapes())
def test_assignments_of_the_common_shape_are_read_as_upb_reads_them(message: Any) -> None:
    data = message.SerializeToString()
    assert _endpoint_wire.read_fields(data) is not None or upb_fields(data) is None
    assert_agrees(data)


@FUZZ_SETTINGS
@given(message=assignments())
def test_generated_assignments_are_read_as_upb_reads_them(message: Any) -> None:
    assert_agrees(message.SerializeToString())


@FUZZ_SETTINGS
@given(seed=st.sampled_from([_common(0), endpoints("e"), _rich()]), data=st.data())
def test_mutated_assignments_are_read_as_upb_reads_them(seed: Any, data: st.DataObject) -> None:
    assert_agrees(mutated(seed, data, 4).SerializeToString())


@FUZZ_SETTINGS
@given(data=st.data())
def test_corrupted_bytes_are_read_as_upb_reads_them_or_left_to_it(data: st.DataObject) -> None:
    wire = bytearray(_common(data.draw(st.integers(0, 9))).SerializeToString())
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(wire) - 1))
        wire[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(wire)))
    assert_agrees(bytes(wire[:cut]))


def test_the_decoder_reads_with_the_wire_reader_exactly_when_it_runs_compiled() -> None:
    """The compiled reader's `decode` is the ENDPOINT decoder; interpreted, it is left out (upb
    is faster than it then)."""
    expected = _endpoint_wire.decode if _endpoint_wire.COMPILED else _endpoint._decode_upb
    assert _endpoint.decode_cluster_load_assignment is expected
    assert ENDPOINT.decode is expected


def test_the_wire_readers_view_is_the_one_its_init_builds() -> None:
    """`_endpoint_wire.decode` builds the view through its slots: every field as ``__init__``
    sets it, for the common shape it reads and for what it leaves to upb."""
    for data in (
        _common(5).SerializeToString(),
        _with(
            lambda m: m.policy.drop_overloads.add(category="c", drop_percentage={"numerator": 1})
        ),
    ):
        name, view = (
            _endpoint_wire.decode(data)
            if _endpoint_wire.COMPILED
            else (_endpoint._decode_upb(data))
        )
        fields = upb_fields(data)
        assert name == fields[0]
        same = ClusterLoadAssignmentView(
            name=name,
            priorities=fields[1][0],
            drop_overloads=fields[1][1],
            overprovisioning_factor=fields[1][2],
            raw=data,
        )
        assert type(view) is ClusterLoadAssignmentView
        assert view.priorities == same.priorities  # built from the bytes on this first read
        assert attrs.asdict(view, recurse=False) == attrs.asdict(same, recurse=False)
        assert plain(view) == plain(same)
        assert view.raw is data


def test_a_view_built_through_its_slots_is_the_one_its_init_builds() -> None:
    """``_of`` sets the view's slots directly: every field as ``__init__`` sets it."""
    data = _common(3).SerializeToString()
    name, fields = upb_fields(data)
    fast = ClusterLoadAssignmentView._of(name, fields, data)
    slow = ClusterLoadAssignmentView(
        name=name,
        priorities=fields[0],
        drop_overloads=fields[1],
        overprovisioning_factor=fields[2],
        raw=data,
    )
    for field in attrs.fields(ClusterLoadAssignmentView):
        assert getattr(fast, field.name) == getattr(slow, field.name), field.name
    assert fast == slow
    assert repr(fast) == repr(slow)


@given(st.ip_addresses(v=4).map(str) | st.text("0123456789.", max_size=16))
def test_a_plain_ipv4_host_is_told_apart_as_is_ip_address_tells_it(host: str) -> None:
    """The wire reader's dotted-quad check accepts only hosts `is_ip_address` accepts, and
    every IPv4 address in its plain form."""
    data = b"\x00" + host.encode() + b"\x00"  # read in place, between other bytes
    plain_ipv4 = _endpoint_wire._dotted_quad(data, 1, len(data) - 1)
    if plain_ipv4:
        assert is_ip_address(host)
    canonical = host.count(".") == 3 and all(
        part.isdigit() and str(int(part)) == part and int(part) <= 255 for part in host.split(".")
    )
    assert plain_ipv4 == canonical


def test_the_compiled_decoder_builds_a_checked_views_localities_only_when_first_read() -> None:
    """Compiled, the decoder only checks the bytes of the common shape: the view's localities
    are read from its bytes on the first read of ``priorities`` (after the ACK, in the client),
    once, and are what upb's view holds; a message left to upb is built at once."""
    data = _common(4).SerializeToString()
    name, view = decode_cluster_load_assignment(data)
    upb_view = _endpoint._decode_upb(data)[1]
    assert name == "c4"
    assert (view._priorities is None) == _endpoint_wire.COMPILED
    assert view.priorities == upb_view.priorities
    assert plain(view) == plain(upb_view)
    assert view._priorities is view.priorities  # built once, then kept
    assert list(view.healthy_endpoints()) == list(upb_view.healthy_endpoints())
    assert repr(decode_cluster_load_assignment(data)[1]) == repr(upb_view)
    left = LEFT_TO_UPB["metadata"]
    assert decode_cluster_load_assignment(left)[1]._priorities is not None


@FUZZ_SETTINGS
@given(seed=st.sampled_from([_common(0), endpoints("e"), _rich()]), data=st.data())
def test_a_view_the_decoder_accepted_always_builds_as_upbs(seed: Any, data: st.DataObject) -> None:
    """An ACKed view never fails to build later: whatever the decoder accepts without building,
    its localities read from the bytes are upb's, and an invalid message raises at decode."""
    raw = mutated(seed, data, 3, least=0).SerializeToString()
    try:
        upb_view = _endpoint._decode_upb(raw)[1]
    except ResourceDecodeError as exc:
        nack = str(exc)
    else:
        nack = ""
    if nack:
        with pytest.raises(ResourceDecodeError) as caught:
            decode_cluster_load_assignment(raw)
        assert str(caught.value) == nack  # the same NACK text
        return
    name, view = decode_cluster_load_assignment(raw)
    assert name == upb_view.name
    assert plain(view) == plain(upb_view)
