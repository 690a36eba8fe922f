"""The wire primitives the compiled readers share (`xdsclient._wire`), against protobuf's own
encoding: what they read, and the -1 position (`NO`) at what they leave to upb.

Run on the module as it is imported: compiled under ``make test``, interpreted under
``make test-pure``.
"""

from __future__ import annotations

from google.protobuf import wrappers_pb2
from hypothesis import given
from hypothesis import strategies as st

from tests.resources.differential import FUZZ_SETTINGS
from xdsclient._wire import NO, skip, span, text, varint


def _uint64(value: int) -> bytes:
    """A UInt64Value's value as protobuf encodes it: its varint, after the one-byte key."""
    return wrappers_pb2.UInt64Value(value=value).SerializeToString()[1:]


@FUZZ_SETTINGS
@given(value=st.integers(0, 2**63 - 1))
def test_a_varint_of_up_to_63_bits_reads_as_protobuf_wrote_it(value: int) -> None:
    encoded = _uint64(value) if value else b"\x00"
    assert varint(b"x" + encoded + b"y", 1, 1 + len(encoded)) == (value, 1 + len(encoded))


def test_a_varint_cut_short_or_beyond_63_bits_is_left_to_upb() -> None:
    encoded = _uint64(2**40)
    assert varint(encoded, 0, len(encoded) - 1)[1] == NO  # its end lies past ``end``
    assert varint(_uint64(2**63), 0, 10)[1] == NO
    assert varint(b"", 0, 0)[1] == NO


def test_a_span_gives_its_bounds_or_none_when_it_does_not_fit() -> None:
    short = wrappers_pb2.StringValue(value="abc").SerializeToString()
    assert span(short, 1, len(short)) == (2, 5)
    long = wrappers_pb2.StringValue(value="a" * 300).SerializeToString()  # a 2-byte length
    assert span(long, 1, len(long)) == (3, 303)
    assert span(long, 1, len(long) - 1) == (NO, NO)
    assert span(short, len(short), len(short)) == (NO, NO)  # no length at all
    assert span(b"\xff", 0, 1) == (NO, NO)  # a length cut short


def test_skip_passes_each_wire_type_and_leaves_groups_to_upb() -> None:
    data = b"\x96\x01" + bytes(8) + b"\x02ab"
    assert skip(data, 0, 0, len(data)) == 2
    assert skip(data, 1, 2, len(data)) == 10
    assert skip(data, 5, 2, len(data)) == 6
    assert skip(data, 2, 10, len(data)) == 13
    assert skip(data, 1, 10, len(data)) == NO  # 8 bytes past the end
    assert skip(data, 2, 10, 12) == NO
    for wire in (3, 4, 6, 7):
        assert skip(data, wire, 0, len(data)) == NO


def test_text_is_none_for_invalid_utf8() -> None:
    assert text("zé".encode(), 0, 3) == "zé"
    assert text(b"\xc3(", 0, 2) is None


@FUZZ_SETTINGS
@given(data=st.binary(max_size=24), wire=st.integers(0, 7), cut=st.integers(0, 24))
def test_no_primitive_gives_a_position_past_the_end_it_was_given(
    data: bytes, wire: int, cut: int
) -> None:
    """Whatever the bytes, a position is `NO` or lies within the part read."""
    end = min(cut, len(data))
    _, pos = varint(data, 0, end)
    assert pos == NO or 0 < pos <= end
    start, stop = span(data, 0, end)
    assert (start, stop) == (NO, NO) or 0 < start <= stop <= end
    after = skip(data, wire, 0, end)
    assert after == NO or 0 < after <= end
