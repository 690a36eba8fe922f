"""The common route configuration's wire reader never changes an RDS verdict (compiled or not).

`_route_wire.read` takes the common route configuration straight from its bytes and returns None
for anything else, which upb and the full reader decide. What it takes must decode, through upb
and the full reading, to the view it builds, field for field; on every input the decoder in
front of upb must give upb's verdict: the same view, or the same NACK's name and text. These
tests run the module as it is imported: compiled under ``make test``, interpreted under
``make test-pure``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import attrs
import pytest
from envoy.config.route.v3 import route_pb2
from hypothesis import given
from hypothesis import strategies as st

from tests.resources.differential import FUZZ_SETTINGS
from tests.resources.wire_cases import Edit, edited, edits, mutate, mutated
from xdsclient import ResourceDecodeError
from xdsclient.resources import _route, _route_wire
from xdsclient.resources._route import RouteConfigurationView, _decode_upb

#: The wire reader in front of upb, as the compiled build decodes (whether or not it is compiled)
wire_decode = partial(_route_wire.decode, _decode_upb)


def verdict(decode: Any, data: bytes) -> tuple[str, Any]:
    """("accepted", (name, every field of the view)) or ("rejected", (name, message))."""
    try:
        name, view = decode(data)
    except ResourceDecodeError as exc:
        return "rejected", (exc.name, exc.message)
    fields = attrs.fields(RouteConfigurationView)
    return "accepted", (name, *(getattr(view, f.name) for f in fields))


def assert_agrees(data: bytes) -> None:
    """What the reader takes, upb parses and the full reading builds to the same view; on any
    input, the wire reader in front of upb gives upb's verdict."""
    read = _route_wire.read(data)
    if read is not None:
        message = route_pb2.RouteConfiguration.FromString(data)
        full = RouteConfigurationView.from_proto(message)  # no raw bytes: the full reading
        assert read[0] == message.name
        name, view = wire_decode(data)
        assert type(view) is RouteConfigurationView
        assert name == message.name
        for field in attrs.fields(RouteConfigurationView):
            if field.name != "raw":  # the full reading's is its own
                assert getattr(view, field.name) == getattr(full, field.name), field.name
        assert repr(view) == repr(full)
        assert view.raw is data
        for host, full_host in zip(view.virtual_hosts, full.virtual_hosts, strict=True):
            assert host.http_routes is host.routes  # the same tuple, as the full reader's
            assert full_host.http_routes is full_host.routes
            for route in host.routes:
                assert route.typed_per_filter_config is _route._NO_CONFIGS
                assert repr(route) == repr(full_host.routes[host.routes.index(route)])
    assert verdict(wire_decode, data) == verdict(_decode_upb, data)


def configuration(routes: int = 3, *, path: bool = False, hosts: int = 1) -> Any:
    """``routes`` prefix (or path) routes to one cluster each, in ``hosts`` virtual hosts."""
    message = route_pb2.RouteConfiguration(name="rc")
    for h in range(hosts):
        vhost = message.virtual_hosts.add(name=f"vh{h}", domains=["*"] if h == 0 else [f"h{h}"])
        for i in range(routes):
            route = vhost.routes.add()
            if path:
                route.match.path = f"/svc{i}/Method"
            else:
                route.match.prefix = f"/svc{i}/"
            route.route.cluster = f"cluster-{i}"
    return message


def bench_shape(n: int = 50) -> Any:
    """The route configuration bench/e2e.py serves (bench/xds_config.py's, built alike)."""
    message = configuration(n)
    message.name = "bench-route"
    message.virtual_hosts[0].name = "bench"
    return message


def istio_shape() -> Any:
    """What Istio sends gRPC in the common case (the fields gRPC ignores included): named
    routes with a decorator, validate_clusters false, include_request_attempt_count."""
    message = configuration(2)
    message.validate_clusters.value = False
    message.validate_clusters.SetInParent()
    vhost = message.virtual_hosts[0]
    vhost.domains.extend(["svc.ns.svc.cluster.local", "svc.ns.svc.cluster.local:8080"])
    vhost.include_request_attempt_count = True
    for i, route in enumerate(vhost.routes):
        route.name = f"r{i}"
        route.decorator.operation = f"svc{i}.ns.svc.cluster.local:8080/*"
    return message


def long_and_wide() -> Any:
    """Names past 127 bytes (two-byte lengths), non-ASCII text, an empty prefix and three hosts."""
    message = configuration(2, hosts=3)
    message.name = "é" * 100
    message.virtual_hosts[1].routes[0].match.prefix = ""
    message.virtual_hosts[2].routes[1].route.cluster = "ü" * 300
    message.virtual_hosts[2].domains.append("*.example.com")
    message.virtual_hosts[2].domains.append("api.*")
    message.ignore_port_in_host_matching = True
    return message


def empty_host() -> Any:
    message = route_pb2.RouteConfiguration(name="rc")
    message.virtual_hosts.add(domains=["*"])
    return message


@pytest.mark.parametrize(
    "message",
    [
        configuration(),
        configuration(path=True),
        bench_shape(),
        istio_shape(),
        long_and_wide(),
        empty_host(),
        route_pb2.RouteConfiguration(name="rc"),
        route_pb2.RouteConfiguration(),
    ],
    ids=["prefix", "path", "bench", "istio", "long-and-wide", "no-routes", "no-hosts", "empty"],
)
def test_the_common_configuration_is_read_from_its_bytes_as_the_full_reading_builds_it(
    message: Any,
) -> None:
    """Each common shape is taken by the reader (so the comparison is not vacuous) and built
    as the full reading builds it."""
    data = message.SerializeToString()
    assert _route_wire.read(data) is not None
    assert_agrees(data)


def test_the_route_decoder_takes_the_wire_reader_exactly_when_it_runs_compiled() -> None:
    """The compiled build decodes route configurations through the reader, the pure-Python
    build through upb alone (interpreted, the reader is slower than the short path)."""
    data = bench_shape(3).SerializeToString()
    name, view = _route.decode_route_configuration(data)
    assert name == "bench-route"
    assert view.raw is data
    assert view.clusters == {"cluster-0", "cluster-1", "cluster-2"}
    assert (_route._DECODE is not _decode_upb) == _route_wire.COMPILED


def test_binding_values_of_another_shape_is_refused() -> None:
    """A value class that gained or lost a field fails at import, not as a half-set value."""
    with pytest.raises(ValueError, match=r"\(7, 12, 8\) fields, the reader sets"):
        _route_wire.bind_views(
            (RouteConfigurationView,) * 5,
            ((None,) * 7, (None,) * 12, (None,) * 8),
            (None, None, None, None),
        )


def _with(change: Any, seed: Any = None) -> bytes:
    message = configuration(2) if seed is None else seed
    change(message)
    data: bytes = message.SerializeToString()
    return data


def _route0(message: Any) -> Any:
    return message.virtual_hosts[0].routes[0]


COMMON = configuration(2).SerializeToString()
LEFT_TO_UPB = {
    "no domains": _with(lambda m: m.virtual_hosts[0].ClearField("domains")),
    "an invalid domain": _with(lambda m: m.virtual_hosts[0].domains.append("a*b")),
    "an empty domain": _with(lambda m: m.virtual_hosts[0].domains.append("")),
    "an empty cluster": _with(lambda m: setattr(_route0(m).route, "cluster", "")),
    "no match": _with(lambda m: _route0(m).ClearField("match")),
    "no action": _with(lambda m: _route0(m).ClearField("route")),
    "a regex match": _with(lambda m: setattr(_route0(m).match.safe_regex, "regex", "/a.*")),
    "a header matcher": _with(lambda m: _route0(m).match.headers.add(name="x", exact_match="y")),
    "case_sensitive": _with(lambda m: setattr(_route0(m).match.case_sensitive, "value", False)),
    "a query parameter matcher": _with(lambda m: _route0(m).match.query_parameters.add(name="q")),
    "weighted clusters": _with(lambda m: _route0(m).route.weighted_clusters.clusters.add(name="w")),
    "a timeout": _with(lambda m: setattr(_route0(m).route.timeout, "seconds", 5)),
    "a cluster header": _with(lambda m: setattr(_route0(m).route, "cluster_header", "h")),
    "a redirect": _with(lambda m: setattr(_route0(m).redirect, "host_redirect", "h")),
    "a non-forwarding action": _with(lambda m: _route0(m).non_forwarding_action.SetInParent()),
    "a decorator that propagates": _with(
        lambda m: setattr(_route0(m).decorator.propagate, "value", True)
    ),
    "a per-filter config": _with(lambda m: _route0(m).typed_per_filter_config["f"].SetInParent()),
    "a host retry policy": _with(lambda m: m.virtual_hosts[0].retry_policy.SetInParent()),
    "headers to add": _with(lambda m: setattr(m.request_headers_to_add.add().header, "key", "k")),
    "headers to remove": _with(lambda m: m.request_headers_to_remove.append("x-a")),
    "vhds": _with(lambda m: m.vhds.config_source.ads.SetInParent()),
    "a cluster specifier plugin": _with(lambda m: m.cluster_specifier_plugins.add()),
    "the name given twice": COMMON + b"\x0a\x01x",
    "a virtual host's name given twice": b"\x12\x09\x0a\x01a\x0a\x01b\x12\x01*",
    "a route's match given twice": b"\x12\x15\x12\x01*\x1a\x10\x0a\x03\x0a\x01/\x0a\x03\x0a\x01/"
    b"\x12\x03\x0a\x01c",
    "a prefix and a path": b"\x12\x12\x12\x01*\x1a\x0d\x0a\x06\x0a\x01/\x12\x01/\x12\x03\x0a\x01c",
    "validate_clusters given twice": COMMON + b"\x3a\x00\x3a\x00",
    "ignore_port as 2": COMMON + b"\x70\x02",
    "truncated": COMMON[:-1],
    "invalid UTF-8 in the name": b"\x0a\x02\xc3\x28",
    "invalid UTF-8 in a domain": b"\x12\x04\x12\x02\xc3\x28",
    "invalid UTF-8 in a cluster": b"\x12\x10\x12\x01*\x1a\x0b\x0a\x03\x0a\x01/"
    b"\x12\x04\x0a\x02\xc3\x28",
    "a wrong wire type": b"\x08\x01" + COMMON,  # the name as a varint
    "a 64-bit overlong varint": b"\x70" + b"\xff" * 10 + b"\x01",
    "a field numbered 16 or more": COMMON + b"\x82\x01\x00",
}


@pytest.mark.parametrize("case", LEFT_TO_UPB)
def test_what_the_reader_does_not_take_is_left_to_upb(case: str) -> None:
    """Each unusual input goes to upb, which gives the verdict (and the NACK's text)."""
    data = LEFT_TO_UPB[case]
    assert _route_wire.read(data) is None
    assert_agrees(data)


@st.composite
def common_shapes(draw: st.DrawFn) -> bytes:
    """Configurations near the common shape, from few values so its rules collide: hosts and
    routes present or not, prefixes and paths empty or not, domains valid or not, clusters
    empty or not, a field past the common shape or not, the ignored fields given or not, text
    ASCII or not. Each departure is rare, so most configurations are taken whole."""
    texts = st.sampled_from(["", "a", "/", "é", "x" * 130])
    filled = st.sampled_from(["a", "/", "é", "x" * 130])

    def rare() -> bool:
        return draw(st.integers(0, 11)) == 0

    message = route_pb2.RouteConfiguration(name=draw(texts))
    for _ in range(draw(st.integers(0, 2))):
        vhost = message.virtual_hosts.add(name=draw(texts))
        domains = st.sampled_from(["*", "a", "*.a", "a.*", "a*b", ""])
        vhost.domains.extend(draw(st.lists(domains, max_size=2)) if rare() else ["*"])
        if draw(st.booleans()):
            vhost.include_request_attempt_count = draw(st.booleans())
        for _ in range(draw(st.integers(0, 3))):
            route = vhost.routes.add(name=draw(texts))
            kind = draw(st.sampled_from(["prefix", "path", "none", "regex"])) if rare() else ""
            if kind == "regex":
                route.match.safe_regex.regex = draw(st.sampled_from(["/a.*", "("]))
            elif kind != "none":
                setattr(route.match, kind or draw(st.sampled_from(["prefix", "path"])), draw(texts))
            if not rare():
                route.route.cluster = draw(texts if rare() else filled)
            if draw(st.integers(0, 3)) == 0:
                route.decorator.operation = draw(texts)
            extra = draw(st.sampled_from(["", "", "", "", "timeout", "case", "header", "weighted"]))
            if extra == "timeout":
                route.route.timeout.seconds = draw(st.sampled_from([0, 1, -1]))
            elif extra == "case":
                route.match.case_sensitive.value = draw(st.booleans())
            elif extra == "header":
                route.match.headers.add(name="x", exact_match="y")
            elif extra == "weighted":
                route.route.weighted_clusters.clusters.add(name="w").weight.value = 1
    if draw(st.booleans()):
        message.validate_clusters.value = draw(st.booleans())
        message.validate_clusters.SetInParent()
    message.ignore_port_in_host_matching = draw(st.booleans())
    data: bytes = message.SerializeToString()
    return data + draw(st.sampled_from([b"", b"\x70\x00", b"\x3a\x00", b"\x12\x03\x12\x01*"]))


@FUZZ_SETTINGS
@given(data=common_shapes())
def test_configurations_near_the_common_shape_get_upbs_verdict(data: bytes) -> None:
    assert_agrees(data)


SEEDS = [configuration(2), configuration(2, path=True, hosts=2), istio_shape()]


@FUZZ_SETTINGS
@given(seed=st.sampled_from(SEEDS), data=st.data())
def test_mutated_configurations_get_upbs_verdict(seed: Any, data: st.DataObject) -> None:
    assert_agrees(mutated(seed, data, 3).SerializeToString())


@FUZZ_SETTINGS
@given(part=st.sampled_from(["route", "virtual host"]), data=st.data())
def test_configurations_with_a_mutated_route_or_virtual_host_get_upbs_verdict(
    part: str, data: st.DataObject
) -> None:
    """A mutation that lands on a route or a virtual host of a common configuration (the parts
    the reader reads, which mutations of the whole configuration seldom reach)."""
    message = route_pb2.RouteConfiguration()
    message.CopyFrom(data.draw(st.sampled_from(SEEDS)))
    vhost = message.virtual_hosts[0]
    target = vhost.routes[data.draw(st.integers(0, 1))] if part == "route" else vhost
    mutate(target, data, 2)
    assert_agrees(message.SerializeToString())


@FUZZ_SETTINGS
@given(
    seed=st.sampled_from(SEEDS),
    changes=edits(127),
)
def test_configurations_with_edited_bytes_get_upbs_verdict(seed: Any, changes: list[Edit]) -> None:
    """Bytes replaced, inserted or cut (keys, lengths and values alike) give upb's verdict."""
    assert_agrees(edited(seed.SerializeToString(), changes))
