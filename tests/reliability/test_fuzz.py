"""Fuzzing the core with arbitrary responses: only our errors escape, every response is answered.

Hypothesis builds DiscoveryResponse and DeltaDiscoveryResponse messages with random type URLs,
versions, nonces, resources (valid, garbage, wrong type, Resource-wrapped with random names,
versions and TTLs, body-less), removals and resource errors, and feeds them through a connected
session using the real validated-view decoders. Several thousand examples run in CI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import cluster, endpoints, listener, session
from tests.fuzz import examples
from xdsclient import XdsError
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER

TYPES = [LISTENER.type_url, CLUSTER.type_url, ENDPOINT.type_url]
WRAPPER = "type.googleapis.com/envoy.service.discovery.v3.Resource"
NAMES = st.sampled_from(["a", "b", "c", "", "*", "x" * 50])


def _valid(type_url: str, name: str) -> Any:
    if type_url not in TYPES:
        return any_pb2.Any(type_url=type_url, value=b"")
    builders: dict[str, Callable[[str], Any]] = {
        LISTENER.type_url: listener,
        CLUSTER.type_url: cluster,
        ENDPOINT.type_url: endpoints,
    }
    message = builders[type_url](name)
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


@st.composite
def packed_resource(draw: st.DrawFn, type_url: str) -> Any:
    kind = draw(
        st.sampled_from(
            ["valid", "valid", "garbage", "wrong", "wrapped", "bodiless", "bad-wrapper"]
        )
    )
    name = draw(NAMES)
    if kind == "valid":
        return _valid(type_url, name)
    if kind == "garbage":
        return any_pb2.Any(type_url=type_url, value=draw(st.binary(max_size=24)))
    if kind == "bad-wrapper":
        return any_pb2.Any(type_url=WRAPPER, value=draw(st.binary(min_size=1, max_size=12)))
    if kind == "wrong":
        return any_pb2.Any(
            type_url=draw(st.sampled_from([*TYPES, "", "type.googleapis.com/x"])), value=b""
        )
    wrapper = discovery_pb2.Resource(name=draw(NAMES), version=draw(st.text(max_size=3)))
    if kind == "wrapped":
        wrapper.resource.CopyFrom(
            _valid(type_url, name)
            if draw(st.booleans())
            else any_pb2.Any(type_url=type_url, value=b"\xff")
        )
    if draw(st.booleans()):
        wrapper.ttl.seconds = draw(st.integers(-10, 10**10))
        wrapper.ttl.nanos = draw(st.integers(-999_999_999, 999_999_999))
    return any_pb2.Any(type_url=WRAPPER, value=wrapper.SerializeToString())


@st.composite
def sotw_responses(draw: st.DrawFn) -> Any:
    type_url = draw(st.sampled_from([*TYPES, "type.googleapis.com/unknown"]))
    response = discovery_pb2.DiscoveryResponse(
        type_url=type_url,
        version_info=draw(st.text(max_size=4)),
        nonce=draw(st.text(min_size=1, max_size=6)),
    )
    response.resources.extend(draw(st.lists(packed_resource(type_url), max_size=6)))
    for name, code in draw(st.lists(st.tuples(NAMES, st.integers(0, 20)), max_size=2)):
        error = response.resource_errors.add()
        error.resource_name.name = name
        error.error_detail.code = code
        error.error_detail.message = draw(st.text(max_size=10))
    return response


@st.composite
def delta_responses(draw: st.DrawFn) -> Any:
    type_url = draw(st.sampled_from([*TYPES, "type.googleapis.com/unknown"]))
    response = discovery_pb2.DeltaDiscoveryResponse(
        type_url=type_url,
        nonce=draw(st.text(min_size=1, max_size=6)),
        system_version_info=draw(st.text(max_size=4)),
        removed_resources=draw(st.lists(NAMES, max_size=3)),
    )
    for _ in range(draw(st.integers(0, 5))):
        resource = response.resources.add(name=draw(NAMES), version=draw(st.text(max_size=3)))
        resource.aliases.extend(draw(st.lists(NAMES, max_size=2)))
        body = draw(st.sampled_from(["valid", "garbage", "wrong", "none"]))
        if body == "valid":
            resource.resource.CopyFrom(_valid(type_url, resource.name))
        elif body == "garbage":
            resource.resource.CopyFrom(
                any_pb2.Any(type_url=type_url, value=draw(st.binary(max_size=16)))
            )
        elif body == "wrong":
            resource.resource.type_url = "type.googleapis.com/other"
        if draw(st.booleans()):
            resource.ttl.seconds = draw(st.integers(-10, 10**10))
    return response


def _drive(
    delta: bool, subscriptions: list[tuple[str, str]], responses: list[Any], data: st.DataObject
) -> None:
    s = session(delta=delta)
    for type_url, name in subscriptions:
        s.subscribe(type_url, name)
    s.connect(0.0)
    requested = {r.type_url for r in s.requests_to_send(0.0)}
    now = 0.0
    for response in responses:
        now += data.draw(st.sampled_from([0.0, 1.0, 20.0]))
        try:
            s.receive(response, now)
            s.expire(now)
        except XdsError:
            raise AssertionError("the core raised instead of answering") from None
        answers = [r for r in s.requests_to_send(now) if r.response_nonce == response.nonce]
        if response.type_url in requested:
            assert len(answers) == 1, "every response of a requested type is answered exactly once"
        else:
            assert answers == [], "responses of types never requested are ignored"
        requested |= {r.type_url for r in answers}


_subscriptions = st.lists(
    st.tuples(st.sampled_from(TYPES), st.sampled_from(["a", "b", "*"])), min_size=1, max_size=5
)
_settings = settings(
    max_examples=examples(1500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@_settings
@given(
    subscriptions=_subscriptions,
    responses=st.lists(sotw_responses(), min_size=1, max_size=4),
    data=st.data(),
)
def test_arbitrary_sotw_responses_are_answered_and_never_crash_the_core(
    subscriptions: list[tuple[str, str]], responses: list[Any], data: st.DataObject
) -> None:
    _drive(False, subscriptions, responses, data)


@_settings
@given(
    subscriptions=_subscriptions,
    responses=st.lists(delta_responses(), min_size=1, max_size=4),
    data=st.data(),
)
def test_arbitrary_delta_responses_are_answered_and_never_crash_the_core(
    subscriptions: list[tuple[str, str]], responses: list[Any], data: st.DataObject
) -> None:
    _drive(True, subscriptions, responses, data)
