"""Response validation: per-resource NACK (gRFC A46), duplicates, type mismatches, decoders."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import (
    CDS,
    EDS,
    NODE,
    WRAPPER,
    cluster,
    connected,
    delta_resource,
    delta_response,
    endpoints,
    pack,
    raw_any,
    sotw_response,
    status_of,
    strict_clusters,
    wrapped,
)
from xdsclient import (
    AmbientError,
    DataError,
    ResourceChanged,
    ResourceStatus,
    ResourceType,
    ResourceValidationError,
    Session,
)
from xdsclient.resources import CLUSTER


def test_an_unparsable_resource_is_nacked_while_the_valid_ones_are_applied() -> None:
    s, _ = connected(subscribe={EDS: ["a", "b"]})
    response = sotw_response(EDS, [endpoints("a"), endpoints("b")], version="1", nonce="n")
    response.resources[1].value = b"\x0a\xff"
    events = s.receive(response, 1.0)
    (nack,) = s.requests_to_send(1.0)
    assert [(type(e), e.name) for e in events] == [(ResourceChanged, "a")]
    assert nack.error_detail.message.startswith("resource 1: cannot parse")
    assert status_of(s, EDS, "a") is ResourceStatus.ACKED


def test_a_named_invalid_resource_is_nacked_by_name_and_keeps_its_last_good_value() -> None:
    s, _ = connected(strict_clusters(), subscribe={CDS: ["a", "b"]})
    s.receive(sotw_response(CDS, [cluster("a"), cluster("b")], version="1", nonce="n1"), 1.0)
    s.requests_to_send(1.0)
    events = s.receive(
        sotw_response(
            CDS, [cluster("a", timeout_s=99), cluster("b", timeout_s=7)], version="2", nonce="n2"
        ),
        2.0,
    )
    (nack,) = s.requests_to_send(2.0)
    assert nack.error_detail.message == 'Cluster "a": connect_timeout: must be at most 60s'
    assert nack.version_info == "1"
    assert [(type(e), e.name) for e in events] == [(ResourceChanged, "b"), (AmbientError, "a")]
    assert isinstance(events[1], AmbientError)
    assert isinstance(events[1].error, ResourceValidationError)
    state = s.resource_state(CDS, "a")
    assert state is not None
    assert state.status is ResourceStatus.NACKED_BUT_CACHED
    assert state.value.proto == cluster("a")
    assert state.version == "1"
    assert state.error is not None
    assert state.error_time == 2.0


def test_an_invalid_resource_with_nothing_cached_is_a_data_error() -> None:
    s, _ = connected(strict_clusters(), subscribe={CDS: ["a"]})
    events = s.receive(
        sotw_response(CDS, [cluster("a", timeout_s=99)], version="1", nonce="n"), 1.0
    )
    assert [(type(e), e.name) for e in events] == [(DataError, "a")]
    assert status_of(s, CDS, "a") is ResourceStatus.NACKED


def test_a_decoder_that_crashes_nacks_the_resource_instead_of_breaking_the_session() -> None:
    def decode(data: bytes) -> tuple[str, Any]:
        raise ZeroDivisionError("bug in a custom decoder")

    custom = ResourceType(type_url="type.googleapis.com/my.Custom", decode=decode)
    s, _ = connected(custom, subscribe={custom.type_url: ["x"]})
    response = sotw_response(
        custom.type_url, [raw_any(custom.type_url, b"abc")], version="1", nonce="n"
    )
    assert s.receive(response, 1.0) == []
    (nack,) = s.requests_to_send(1.0)
    assert (
        "decoder failed: ZeroDivisionError('bug in a custom decoder')" in nack.error_detail.message
    )


def test_duplicate_names_are_nacked_and_the_duplicated_resource_is_not_applied() -> None:
    s, _ = connected(subscribe={EDS: ["a", "b"]})
    events = s.receive(
        sotw_response(
            EDS,
            [endpoints("a"), endpoints("b", port=1), endpoints("b", port=2)],
            version="1",
            nonce="n",
        ),
        1.0,
    )
    (nack,) = s.requests_to_send(1.0)
    assert (
        nack.error_detail.message
        == 'ClusterLoadAssignment "b": duplicate resource name in one response'
    )
    assert [(type(e), e.name) for e in events] == [(ResourceChanged, "a"), (DataError, "b")]


def test_a_resource_of_another_type_is_nacked() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    events = s.receive(
        sotw_response(CDS, [cluster("a"), endpoints("a")], version="1", nonce="n"), 1.0
    )
    (nack,) = s.requests_to_send(1.0)
    assert nack.error_detail.message == (
        "resource 1: type type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
        " is not type.googleapis.com/envoy.config.cluster.v3.Cluster"
    )
    assert [type(e) for e in events] == [ResourceChanged]


def test_a_resource_wrapped_in_resource_is_accepted_in_sotw() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    events = s.receive(
        sotw_response(CDS, [wrapped(cluster("a"), name="a", version="1")], version="1", nonce="n"),
        1.0,
    )
    (ack,) = s.requests_to_send(1.0)
    assert not ack.HasField("error_detail")
    assert [(type(e), e.name) for e in events] == [(ResourceChanged, "a")]


@pytest.mark.parametrize(
    ("resource", "reason"),
    [
        (
            wrapped(endpoints("a"), name="a"),
            'Cluster "a": type type.googleapis.com/envoy.config.endpoint',
        ),
        (wrapped(cluster("b"), name="a"), "the Resource wrapper names it 'a' but it is 'b'"),
        (wrapped(None), "resource 0: a Resource with neither name nor body"),
        (raw_any(WRAPPER, b"\xff"), "resource 0: cannot parse the Resource wrapper"),
    ],
)
def test_bad_resource_wrappers_are_nacked(resource: Any, reason: str) -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(sotw_response(CDS, [resource], version="1", nonce="n"), 1.0)
    (nack,) = s.requests_to_send(1.0)
    assert reason in nack.error_detail.message


def test_unrequested_resources_are_ignored() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    events = s.receive(
        sotw_response(EDS, [endpoints("a"), endpoints("other")], version="1", nonce="n"), 1.0
    )
    (ack,) = s.requests_to_send(1.0)
    assert not ack.HasField("error_detail")
    assert [e.name for e in events] == ["a"]
    assert s.resource_state(EDS, "other") is None


def test_a_response_for_a_type_never_requested_is_ignored_and_not_answered() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    assert s.receive(sotw_response(EDS, [endpoints("a")], version="1", nonce="n"), 1.0) == []
    unknown = sotw_response("type.googleapis.com/some.Unknown", [], version="1", nonce="n")
    assert s.receive(unknown, 1.0) == []
    assert s.requests_to_send(1.0) == []


def test_delta_nacks_wrong_types_duplicates_and_missing_names_but_applies_the_rest() -> None:
    s, _ = connected(delta=True, subscribe={CDS: ["a", "b", "c"]})
    response = delta_response(
        CDS,
        [
            delta_resource("a", cluster("a"), version="1"),
            delta_resource("b", endpoints("b"), version="1"),
            delta_resource("c", cluster("c"), version="1"),
            delta_resource("c", cluster("c"), version="2"),
            delta_resource("", cluster("d"), version="1"),
            delta_resource("*", cluster("d"), version="1"),
        ],
        nonce="n",
    )
    events = s.receive(response, 1.0)
    (nack,) = s.requests_to_send(1.0)
    assert nack.error_detail.message == (
        "resource 4: no name; resource 5: '*' is not a resource name; "
        'Cluster "b": type type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment '
        "is not type.googleapis.com/envoy.config.cluster.v3.Cluster; "
        'Cluster "c": duplicate resource name in one response'
    )
    assert [(type(e), e.name) for e in events] == [
        (ResourceChanged, "a"),
        (DataError, "b"),
        (DataError, "c"),
    ]


def test_delta_does_not_decode_resources_nobody_asked_for() -> None:
    calls: list[bytes] = []

    def decode(data: bytes) -> tuple[str, Any]:
        calls.append(data)
        return CLUSTER.decode(data)

    counting = ResourceType(type_url=CDS, decode=decode)
    s, _ = connected(counting, delta=True, subscribe={CDS: ["a"]})
    s.receive(
        delta_response(
            CDS,
            [
                delta_resource("a", cluster("a"), version="1"),
                delta_resource("z", cluster("z"), version="1"),
            ],
            nonce="n",
        ),
        1.0,
    )
    assert len(calls) == 1


def test_the_nack_message_is_bounded() -> None:
    s, _ = connected(subscribe={EDS: ["x"]}, max_nack_message_length=200)
    response = sotw_response(EDS, [endpoints(f"r{i}") for i in range(50)], version="1", nonce="n")
    for item in response.resources:
        item.type_url = "type.googleapis.com/wrong.Type"
    s.receive(response, 1.0)
    (nack,) = s.requests_to_send(1.0)
    message = nack.error_detail.message
    assert len(message) == 200
    assert message.endswith(" ... (50 errors in all)")


def test_a_session_refuses_the_wrong_response_kind_and_unknown_types() -> None:
    from xdsclient import ProtocolError

    s, _ = connected(subscribe={CDS: ["a"]})
    with pytest.raises(ProtocolError, match="SotW session cannot take a DeltaDiscoveryResponse"):
        s.receive(delta_response(CDS, nonce="n"), 1.0)
    with pytest.raises(ProtocolError, match="not part of this session"):
        s.subscribe("type.googleapis.com/not.Registered", "x")
    with pytest.raises(ValueError, match="given twice"):
        Session(node=NODE, resource_types=[CLUSTER, CLUSTER])
    s.disconnect(2.0)
    with pytest.raises(ProtocolError, match="not connected"):
        s.receive(sotw_response(CDS, [pack(cluster("a"))], version="1", nonce="n"), 3.0)
    with pytest.raises(ProtocolError, match="not connected"):
        s.disconnect(3.0)
    s.connect(4.0)
    with pytest.raises(ProtocolError, match="already connected"):
        s.connect(4.0)


def test_for_message_refuses_a_name_field_the_message_lacks() -> None:
    from envoy.config.cluster.v3 import cluster_pb2

    with pytest.raises(ValueError, match="has no field 'nope'"):
        ResourceType.for_message(cluster_pb2.Cluster, name_field="nope")
