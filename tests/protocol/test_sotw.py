"""SotW per-type state: requests, ACK/NACK, versions and nonces, wildcard, interest changes."""

from __future__ import annotations

import pytest

from tests.builders import (
    CDS,
    EDS,
    LDS,
    NODE,
    cluster,
    connected,
    endpoints,
    listener,
    session,
    sotw_response,
)
from xdsclient import ResourceChanged, ResourceStatus


def test_first_request_of_a_stream_carries_node_names_and_no_version_or_nonce() -> None:
    _, requests = connected(subscribe={CDS: ["a", "b"]})
    assert len(requests) == 1
    (request,) = requests
    assert request.node == NODE
    assert request.type_url == CDS
    assert list(request.resource_names) == ["a", "b"]
    assert request.version_info == ""
    assert request.response_nonce == ""
    assert not request.HasField("error_detail")


def test_node_is_sent_only_on_the_first_request_of_each_stream() -> None:
    s, first = connected(subscribe={CDS: ["a"], EDS: ["a"]})
    assert [r.HasField("node") for r in first] == [True, False]
    s.subscribe(CDS, "b")
    (later,) = s.requests_to_send(1.0)
    assert not later.HasField("node")
    s.disconnect(2.0)
    s.connect(3.0)
    again = s.requests_to_send(3.0)
    assert [r.HasField("node") for r in again] == [True, False]


def test_ack_carries_the_response_version_and_nonce() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(sotw_response(CDS, [cluster("a")], version="v1", nonce="n1"), 1.0)
    (ack,) = s.requests_to_send(1.0)
    assert (ack.version_info, ack.response_nonce) == ("v1", "n1")
    assert list(ack.resource_names) == ["a"]
    assert not ack.HasField("error_detail")
    assert s.version_info(CDS) == "v1"


def test_nack_carries_the_previous_accepted_version_the_nonce_and_the_reason() -> None:
    s, _ = connected(subscribe={EDS: ["a", "b"]})
    s.receive(sotw_response(EDS, [endpoints("a")], version="v1", nonce="n1"), 1.0)
    s.requests_to_send(1.0)
    bad = sotw_response(EDS, [endpoints("b")], version="v2", nonce="n2")
    bad.resources[0].value = b"\xff\xff\xff"
    s.receive(bad, 2.0)
    (nack,) = s.requests_to_send(2.0)
    assert (nack.version_info, nack.response_nonce) == ("v1", "n2")
    assert nack.error_detail.code == 3  # INVALID_ARGUMENT
    assert nack.error_detail.message.startswith("resource 0: cannot parse")
    assert s.version_info(EDS) == "v1"


def test_version_survives_a_new_stream_but_the_nonce_does_not() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(sotw_response(CDS, [cluster("a")], version="v7", nonce="n7"), 1.0)
    s.requests_to_send(1.0)
    s.disconnect(2.0)
    s.connect(3.0)
    (first,) = s.requests_to_send(3.0)
    assert (first.version_info, first.response_nonce) == ("v7", "")


def test_interest_change_after_a_response_carries_the_accepted_version_and_last_nonce() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(sotw_response(CDS, [cluster("a")], version="v1", nonce="n1"), 1.0)
    s.requests_to_send(1.0)
    s.subscribe(CDS, "b")
    (request,) = s.requests_to_send(2.0)
    assert (request.version_info, request.response_nonce) == ("v1", "n1")
    assert list(request.resource_names) == ["a", "b"]


@pytest.mark.parametrize(
    ("subscriptions", "expected_first"),
    [
        (["*"], []),  # legacy wildcard: the empty list
        (["*", "a"], ["*", "a"]),  # wildcard beside names: "*" explicitly
        (["a"], ["a"]),
    ],
)
def test_wildcard_is_legacy_empty_alone_and_explicit_beside_names(
    subscriptions: list[str], expected_first: list[str]
) -> None:
    _, (request,) = connected(subscribe={LDS: subscriptions})
    assert list(request.resource_names) == expected_first


def test_wildcard_stays_explicit_once_a_name_went_out_on_the_stream() -> None:
    s, _ = connected(subscribe={LDS: ["*", "a"]})
    s.unsubscribe(LDS, "a")
    (request,) = s.requests_to_send(1.0)
    assert list(request.resource_names) == ["*"]


def test_no_request_goes_out_for_a_type_nobody_wants() -> None:
    s, requests = connected(subscribe={CDS: ["a"]})
    assert [r.type_url for r in requests] == [CDS]
    s.subscribe(EDS, "x")
    s.unsubscribe(EDS, "x")
    assert s.requests_to_send(1.0) == []


def test_unsubscribing_the_last_name_sends_an_empty_list_and_empties_the_cache() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(sotw_response(EDS, [endpoints("a")], version="1", nonce="n"), 1.0)
    s.requests_to_send(1.0)
    s.unsubscribe(EDS, "a")
    (request,) = s.requests_to_send(2.0)
    assert list(request.resource_names) == []
    assert s.resource_state(EDS, "a") is None


def test_resources_received_through_the_wildcard_are_cached_and_announced() -> None:
    s, _ = connected(subscribe={LDS: ["*"]})
    events = s.receive(sotw_response(LDS, [listener("x")], version="1", nonce="n"), 1.0)
    assert [(type(e), e.name) for e in events] == [(ResourceChanged, "x")]
    state = s.resource_state(LDS, "x")
    assert state is not None
    assert state.status is ResourceStatus.ACKED


def test_unsubscribing_the_wildcard_drops_what_only_it_covered() -> None:
    s, _ = connected(subscribe={LDS: ["*", "keep"]})
    s.receive(
        sotw_response(LDS, [listener("keep"), listener("x")], version="1", nonce="n"),
        1.0,
    )
    s.unsubscribe(LDS, "*")
    assert [st.name for st in s.resource_states(LDS)] == ["keep", "x"]  # until settled
    s.requests_to_send(2.0)
    assert [st.name for st in s.resource_states(LDS)] == ["keep"]


def test_a_resource_dropped_and_readded_before_sending_stays_cached_and_sends_nothing() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(sotw_response(EDS, [endpoints("a")], version="1", nonce="n"), 1.0)
    s.requests_to_send(1.0)  # the ACK
    s.unsubscribe(EDS, "a")
    s.subscribe(EDS, "a")
    assert s.requests_to_send(2.0) == []  # the server would not answer an identical request
    assert s.next_deadline() is None  # and no does-not-exist timer waits for it
    state = s.resource_state(EDS, "a")
    assert state is not None
    assert state.status is ResourceStatus.ACKED


def test_a_wildcard_dropped_and_readded_before_sending_keeps_what_it_covered() -> None:
    s, _ = connected(subscribe={CDS: ["*"]})
    s.receive(sotw_response(CDS, [cluster("a"), cluster("b")], version="1", nonce="n"), 1.0)
    s.requests_to_send(1.0)
    s.unsubscribe(CDS, "*")
    s.subscribe(CDS, "*")
    assert s.requests_to_send(2.0) == []
    assert sorted(st.name for st in s.resource_states(CDS)) == ["a", "b"]


def test_unsubscribing_a_name_the_wildcard_still_covers_keeps_it_cached() -> None:
    s, _ = connected(subscribe={LDS: ["*", "a"]})
    s.receive(sotw_response(LDS, [listener("a")], version="1", nonce="n"), 1.0)
    s.unsubscribe(LDS, "a")
    state = s.resource_state(LDS, "a")
    assert state is not None
    assert state.status is ResourceStatus.ACKED


def test_an_unchanged_resource_does_not_notify_again() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    first = s.receive(sotw_response(CDS, [cluster("a")], version="1", nonce="n1"), 1.0)
    again = s.receive(sotw_response(CDS, [cluster("a")], version="2", nonce="n2"), 2.0)
    changed = s.receive(
        sotw_response(CDS, [cluster("a", timeout_s=9)], version="3", nonce="n3"), 3.0
    )
    assert len(first) == 1
    assert again == []
    assert [e.version for e in changed if isinstance(e, ResourceChanged)] == ["3"]
    state = s.resource_state(CDS, "a")
    assert state is not None
    assert (state.version, state.last_updated) == ("3", 3.0)


def test_resource_state_reports_version_update_time_and_value() -> None:
    s, _ = connected(subscribe={CDS: ["a", "b"]})
    s.receive(sotw_response(CDS, [cluster("a")], version="v1", nonce="n1"), 4.5)
    a = s.resource_state(CDS, "a")
    b = s.resource_state(CDS, "b")
    assert a is not None
    assert b is not None
    assert (a.status, a.version, a.last_updated, a.error) == (ResourceStatus.ACKED, "v1", 4.5, None)
    assert a.value.proto == cluster("a")
    assert (b.status, b.version, b.value) == (ResourceStatus.REQUESTED, None, None)


def test_subscribe_is_idempotent_and_marks_nothing_when_nothing_changed() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.subscribe(CDS, "a")
    s.unsubscribe(CDS, "never-subscribed")
    assert s.requests_to_send(1.0) == []
    assert session().subscribed(CDS) == ()
