"""The common cluster's wire reader never changes a Cluster verdict (compiled or not).

`_cluster_wire.read` takes the common EDS cluster straight from its bytes and returns None for
anything else, which upb and the full reader decide. What it takes must decode, through upb and
the full reading, to the view it builds, field for field; on every input the decoder in front of
upb must give upb's verdict: the same view, or the same NACK's name and text. These tests run the
module as it is imported: compiled under ``make test``, interpreted under ``make test-pure``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import attrs
import pytest
from envoy.config.cluster.v3 import cluster_pb2
from hypothesis import given
from hypothesis import strategies as st

from tests.resources.differential import FUZZ_SETTINGS
from tests.resources.wire_cases import Edit, edited, edits, mutated
from xdsclient import ResourceDecodeError
from xdsclient.resources import _cluster, _cluster_wire
from xdsclient.resources._cluster import ClusterView, _decode_upb

#: The wire reader in front of upb, as the compiled build decodes (whether or not it is compiled)
wire_decode = partial(_cluster_wire.decode, _decode_upb)


def verdict(decode: Any, data: bytes) -> tuple[str, Any]:
    """("accepted", (name, every field of the view)) or ("rejected", (name, message))."""
    try:
        name, view = decode(data)
    except ResourceDecodeError as exc:
        return "rejected", (exc.name, exc.message)
    return "accepted", (name, *(getattr(view, f.name) for f in attrs.fields(ClusterView)))


def assert_agrees(data: bytes) -> None:
    """What the reader takes, upb parses and the full reading builds to the same view; on any
    input, the wire reader in front of upb gives upb's verdict."""
    read = _cluster_wire.read(data)
    if read is not None:
        message = cluster_pb2.Cluster.FromString(data)
        full = ClusterView.from_proto(message)  # no raw bytes: the full reading
        assert read == (message.name, message.eds_cluster_config.service_name)
        name, view = wire_decode(data)
        assert type(view) is ClusterView
        assert name == message.name
        for field in attrs.fields(ClusterView)[:-1]:  # all but raw: the full reading's is its own
            assert getattr(view, field.name) == getattr(full, field.name), field.name
        assert repr(view) == repr(full)
        assert view.raw is data
    assert verdict(wire_decode, data) == verdict(_decode_upb, data)


def eds(name: str = "c", service: str = "") -> Any:
    message = cluster_pb2.Cluster(name=name, type=cluster_pb2.Cluster.EDS)
    message.eds_cluster_config.eds_config.ads.SetInParent()
    message.eds_cluster_config.service_name = service
    return message


def bench_shape(i: int) -> Any:
    """The cluster bench/e2e.py serves: ADS with its API version, a service name, a timeout."""
    message = eds(f"cluster-{i}", f"cluster-{i}")
    message.eds_cluster_config.eds_config.resource_api_version = 2  # V3
    message.connect_timeout.seconds = 1
    return message


def from_self() -> Any:
    message = cluster_pb2.Cluster(name="s", type=cluster_pb2.Cluster.EDS)
    message.eds_cluster_config.eds_config.self.transport_api_version = 2
    return message


@pytest.mark.parametrize(
    "message",
    [eds(), eds("", "s"), bench_shape(7), from_self(), eds("xdstp://a/t/c", "s")],
)
def test_the_common_cluster_is_read_from_its_bytes_as_the_full_reading_builds_it(
    message: Any,
) -> None:
    """Each common shape is taken by the reader (so the comparison is not vacuous) and built
    as the full reading builds it."""
    data = message.SerializeToString()
    assert _cluster_wire.read(data) is not None
    assert_agrees(data)


def test_the_cluster_decoder_takes_the_wire_reader_exactly_when_it_runs_compiled() -> None:
    """The compiled build decodes clusters through the reader, the pure-Python build through
    upb alone (interpreted, the reader is slower)."""
    data = bench_shape(3).SerializeToString()
    name, view = _cluster.decode_cluster(data)
    assert name == "cluster-3"
    assert view.raw is data
    assert (_cluster._DECODE is not _decode_upb) == _cluster_wire.COMPILED
    decode: Any = _cluster.cluster_type(["p"]).decode
    assert (getattr(decode, "func", None) is _cluster_wire.decode) == _cluster_wire.COMPILED


def _with(change: Any, seed: Any = None) -> bytes:
    message = eds("c", "s") if seed is None else seed
    change(message)
    data: bytes = message.SerializeToString()
    return data


LEFT_TO_UPB = {
    "STATIC": _with(lambda m: setattr(m, "type", cluster_pb2.Cluster.STATIC)),
    "no type": _with(lambda m: m.ClearField("type")),
    "LOGICAL_DNS": _with(lambda m: setattr(m, "type", cluster_pb2.Cluster.LOGICAL_DNS)),
    "no eds_cluster_config": _with(lambda m: m.ClearField("eds_cluster_config")),
    "no eds_config": _with(lambda m: m.eds_cluster_config.ClearField("eds_config")),
    "a path source": _with(lambda m: setattr(m.eds_cluster_config.eds_config, "path", "/p")),
    "an initial fetch timeout": _with(
        lambda m: m.eds_cluster_config.eds_config.initial_fetch_timeout.SetInParent()
    ),
    "another policy": _with(lambda m: setattr(m, "lb_policy", cluster_pb2.Cluster.RING_HASH)),
    "circuit breakers": _with(lambda m: m.circuit_breakers.SetInParent()),
    "an ignored field of a high number": _with(lambda m: setattr(m, "alt_stat_name", "x")),
    "an xdstp name without a service name": _with(
        lambda m: setattr(m, "name", "xdstp://a/t/c"), eds()
    ),
    "the name given twice": eds("c", "s").SerializeToString() + b"\x0a\x01x",
    "the type given twice": eds("c", "s").SerializeToString() + b"\x10\x03",
    "ads and self": eds("c", "s").SerializeToString() + b"\x1a\x04\x0a\x02\x2a\x00",
    "a field inside ads": b"\x10\x03\x1a\x06\x0a\x04\x1a\x02\x08\x01",
    "truncated": bench_shape(1).SerializeToString()[:-1],
    "invalid UTF-8 in the name": b"\x0a\x02\xc3\x28" + eds("").SerializeToString(),
    "invalid UTF-8 in the service name": b"\x10\x03\x1a\x08\x0a\x02\x1a\x00\x12\x02\xc3\x28",
    "a wrong wire type": b"\x08\x01" + eds("").SerializeToString(),  # the name as a varint
    "a 64-bit overlong varint": b"\x10" + b"\xff" * 10 + b"\x01",
    "a negative API version": _with(
        lambda m: setattr(m.eds_cluster_config.eds_config.self, "transport_api_version", -1)
    ),
}


@pytest.mark.parametrize("case", LEFT_TO_UPB)
def test_what_the_reader_does_not_take_is_left_to_upb(case: str) -> None:
    """Each unusual input goes to upb, which gives the verdict (and the NACK's text)."""
    data = LEFT_TO_UPB[case]
    assert _cluster_wire.read(data) is None
    assert_agrees(data)


def test_an_explicit_round_robin_and_a_timeouts_fields_are_taken() -> None:
    """``lb_policy`` given as its zero and a Duration with both fields are the common shape."""
    data = eds("c", "s").SerializeToString() + b"\x30\x00" + b"\x22\x04\x08\x01\x10\x05"
    assert _cluster_wire.read(data) == ("c", "s")
    assert_agrees(data)


@st.composite
def common_shapes(draw: st.DrawFn) -> bytes:
    """Clusters near the common shape, from few values so its rules collide: each part present
    or not, EDS or another type, ADS or self, names old-style or not, values given as zeros."""
    message = cluster_pb2.Cluster(name=draw(st.sampled_from(["c", "", "xdstp://a/t/c", "é"])))
    message.type = draw(st.sampled_from([3, 3, 3, 0, 1, 2, 7]))
    if draw(st.integers(0, 7)):
        config = message.eds_cluster_config
        config.service_name = draw(st.sampled_from(["", "s", "ü"]))
        source = draw(st.sampled_from(["ads", "self", "self-v3", "path", "none"]))
        if source == "ads":
            config.eds_config.ads.SetInParent()
        elif source.startswith("self"):
            config.eds_config.self.SetInParent()
            if source == "self-v3":
                config.eds_config.self.transport_api_version = 2
        elif source == "path":
            config.eds_config.path = "/p"
        if draw(st.booleans()):
            config.eds_config.resource_api_version = draw(st.sampled_from([0, 2, 5]))
    if draw(st.booleans()):
        message.connect_timeout.seconds = draw(st.sampled_from([0, 1, -1, 2**40]))
        message.connect_timeout.nanos = draw(st.sampled_from([0, 5, -1]))
    message.lb_policy = draw(st.sampled_from([0, 0, 0, 1, 2, 9]))
    data: bytes = message.SerializeToString()
    return data + draw(st.sampled_from([b"", b"\x30\x00", b"\x10\x03", b"\x22\x00"]))


@FUZZ_SETTINGS
@given(data=common_shapes())
def test_clusters_near_the_common_shape_get_upbs_verdict(data: bytes) -> None:
    assert_agrees(data)


@FUZZ_SETTINGS
@given(seed=st.sampled_from([eds("c", "s"), bench_shape(2), from_self()]), data=st.data())
def test_mutated_clusters_get_upbs_verdict(seed: Any, data: st.DataObject) -> None:
    assert_agrees(mutated(seed, data, 3).SerializeToString())


@FUZZ_SETTINGS
@given(
    seed=st.sampled_from([eds("c", "s"), bench_shape(2), from_self()]),
    changes=edits(63),
)
def test_clusters_with_edited_bytes_get_upbs_verdict(seed: Any, changes: list[Edit]) -> None:
    """Bytes replaced, inserted or cut (keys, lengths and values alike) give upb's verdict."""
    assert_agrees(edited(seed.SerializeToString(), changes))
