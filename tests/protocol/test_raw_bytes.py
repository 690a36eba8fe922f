"""A session given a response's own bytes beside the message (what the gRPC transport hands
on) reaches the same verdicts, events, requests and cache as one given the message alone
(which serializes it again where it reads bytes): over random SotW and Delta responses of
every kind of resource, sent in upb's encoding or in another (fields in another order, an
unknown field), which only the bytes carry."""

from __future__ import annotations

from typing import Any

from envoy.service.discovery.v3 import discovery_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import (
    EDS,
    LDS,
    connected,
    delta_resource,
    delta_response,
    endpoints,
    invalid_endpoints,
    listener,
    raw_any,
    sotw_response,
    wrapped,
)
from tests.fuzz import examples
from xdsclient import Session

NAMES = ["a", "b", "c", "xdstp://auth/envoy.config.endpoint.v3.ClusterLoadAssignment/d"]
OTHER = "type.googleapis.com/other.Type"
UNKNOWN_FIELD = b"\x98\x06\x01"  # field 99, a varint: no DiscoveryResponse field


def _body(type_url: str, name: str, port: int) -> Any:
    return listener(name, route=f"r{port}") if type_url == LDS else endpoints(name, port=port)


@st.composite
def _sotw_item(draw: st.DrawFn, type_url: str) -> Any:
    name = draw(st.sampled_from(NAMES))
    port = draw(st.integers(1000, 1002))
    kind = draw(st.sampled_from(["bare", "wrapped", "heartbeat", "invalid", "other", "empty"]))
    if kind == "bare":
        return _body(type_url, name, port)
    if kind == "wrapped":
        return wrapped(_body(type_url, name, port), name=name, version=f"w{port}")
    if kind == "heartbeat":
        return wrapped(None, name=name, version="h", ttl=5.0)
    if kind == "invalid" and type_url == EDS:
        return invalid_endpoints(name)
    if kind == "other":
        return raw_any(OTHER, b"\x0a\x01x")
    return raw_any(type_url, b"")


@st.composite
def _delta_item(draw: st.DrawFn, type_url: str) -> Any:
    name = draw(st.sampled_from(NAMES))
    port = draw(st.integers(1000, 1002))
    body = None if draw(st.booleans()) and port == 1000 else _body(type_url, name, port)
    return delta_resource(name, body, version=f"v{port}")


def _wire(response: Any, odd: bool) -> bytes:
    """The bytes a server sent: upb's encoding, or the resources after every other field and
    an unknown field last (upb's own would put the resources second and keep the unknown)."""
    if not odd:
        data: bytes = response.SerializeToString()
        return data
    rest = type(response)()
    rest.CopyFrom(response)
    del rest.resources[:]
    only = type(response)(resources=response.resources)
    return bytes(rest.SerializeToString() + only.SerializeToString() + UNKNOWN_FIELD)


def _snapshot(s: Session, type_url: str) -> list[Any]:
    states = sorted(s.resource_states(type_url), key=lambda state: state.name)
    return [s.verdicts(), states, s.version_info(type_url)]


@settings(max_examples=examples(250), deadline=None)
@given(data=st.data(), delta=st.booleans(), type_url=st.sampled_from([EDS, LDS]))
def test_a_session_given_the_bytes_decides_as_one_given_the_message(
    data: st.DataObject, delta: bool, type_url: str
) -> None:
    """Each response of a random sequence, fed to one session as the message alone and to
    another with its bytes, makes the same events, ACK or NACK, verdicts and cache."""
    names = data.draw(st.sampled_from([["*"], NAMES[:2], NAMES]))
    alone, _ = connected(delta=delta, subscribe={type_url: names})
    given_bytes, _ = connected(delta=delta, subscribe={type_url: names})
    item = _delta_item(type_url) if delta else _sotw_item(type_url)
    for step in range(data.draw(st.integers(1, 4))):
        items = data.draw(st.lists(item, max_size=5))
        nonce, now = f"n{step}", float(step)
        if delta:
            removed = tuple(data.draw(st.lists(st.sampled_from(NAMES), max_size=2)))
            response = delta_response(type_url, items, nonce=nonce, removed=removed)
        else:
            response = sotw_response(type_url, items, version=f"v{step}", nonce=nonce)
        wire = _wire(response, data.draw(st.booleans()))
        message = type(response).FromString(wire)
        events = alone.receive(message, now)
        assert given_bytes.receive(message, now, wire) == events
        assert given_bytes.requests_to_send(now) == alone.requests_to_send(now)
        assert _snapshot(given_bytes, type_url) == _snapshot(alone, type_url)


def test_bytes_in_another_encoding_give_the_resources_upb_reads() -> None:
    """A response whose bytes are not upb's encoding of it (resources last, an unknown field)
    is classified from those bytes as from the message: every resource valid and ACKed."""
    response = sotw_response(
        EDS, [endpoints("a"), wrapped(endpoints("b"), name="b")], version="1", nonce="n"
    )
    wire = _wire(response, odd=True)
    message = discovery_pb2.DiscoveryResponse.FromString(wire)
    assert message.SerializeToString() != wire
    s, _ = connected(subscribe={EDS: ["a", "b"]})
    events = s.receive(message, 1.0, wire)
    assert sorted(e.name for e in events) == ["a", "b"]
    assert s.verdicts() == [("a", None), ("b", None)]
    (ack,) = s.requests_to_send(1.0)
    assert ack.version_info == "1"
    assert not ack.HasField("error_detail")
