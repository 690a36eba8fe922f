"""Does-not-exist deadlines (gRFC A57) and TTLs with heartbeats, on a fake clock."""

from __future__ import annotations

from tests.builders import (
    CDS,
    EDS,
    cluster,
    connected,
    delta_resource,
    delta_response,
    endpoints,
    session,
    sotw_response,
    status_of,
    wrapped,
)
from xdsclient import (
    DataError,
    ResourceChanged,
    ResourceDoesNotExistError,
    ResourceExpiredError,
    ResourceStatus,
    ResourceTimeoutError,
    TransportError,
)

# --------------------------------------------------------------------------- does-not-exist


def test_the_timer_starts_when_the_request_is_handed_out_not_when_subscribing() -> None:
    s = session()
    s.subscribe(EDS, "a")
    assert s.next_deadline() is None
    s.connect(5.0)
    assert s.next_deadline() is None
    s.requests_to_send(7.0)
    assert s.next_deadline() == 22.0


def test_no_timer_starts_while_disconnected() -> None:
    s = session()
    s.subscribe(EDS, "a")
    assert s.requests_to_send(1.0) == []
    assert s.next_deadline() is None


def test_firing_declares_the_resource_missing_with_a_timeout_error() -> None:
    """gRFC A88: without the server feature, the timer is a does-not-exist verdict."""
    s, _ = connected(subscribe={EDS: ["a"]}, does_not_exist_timeout=3.0)
    assert s.expire(2.9) == []
    events = s.expire(3.0)
    assert [(type(e), e.name) for e in events] == [(DataError, "a")]
    assert isinstance(events[0], DataError)
    error = events[0].error
    assert isinstance(error, ResourceTimeoutError)
    assert isinstance(error, ResourceDoesNotExistError)
    assert str(error) == (
        'ClusterLoadAssignment "a": does not exist: not received within 3 s of being requested'
    )
    assert status_of(s, EDS, "a") is ResourceStatus.DOES_NOT_EXIST
    assert s.next_deadline() is None


def test_with_resource_timer_is_transient_failure_firing_is_a_transient_timeout() -> None:
    """gRFC A88's server feature: status TIMEOUT, and an UNAVAILABLE error, not does-not-exist."""
    s, _ = connected(
        subscribe={EDS: ["a"]},
        does_not_exist_timeout=30.0,
        resource_timer_is_transient_failure=True,
    )
    assert s.expire(29.9) == []
    events = s.expire(30.0)
    assert [(type(e), e.name) for e in events] == [(DataError, "a")]  # nothing cached to keep
    assert isinstance(events[0], DataError)
    error = events[0].error
    assert isinstance(error, TransportError)
    assert not isinstance(error, ResourceDoesNotExistError)
    assert error.code == "UNAVAILABLE"
    assert str(error) == (
        'ClusterLoadAssignment "a": timeout obtaining resource from the xDS server: '
        "not received within 30 s of being requested"
    )
    assert status_of(s, EDS, "a") is ResourceStatus.TIMEOUT
    later = s.receive(sotw_response(EDS, [endpoints("a")], version="1", nonce="n"), 40.0)
    assert [type(e) for e in later] == [ResourceChanged]
    assert status_of(s, EDS, "a") is ResourceStatus.ACKED


def test_a_resource_that_arrives_after_the_timeout_is_accepted() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.expire(15.0)
    events = s.receive(sotw_response(EDS, [endpoints("a")], version="1", nonce="n"), 20.0)
    assert [type(e) for e in events] == [ResourceChanged]
    assert status_of(s, EDS, "a") is ResourceStatus.ACKED


def test_arrival_cancels_the_timer_even_when_the_resource_is_invalid() -> None:
    s, _ = connected(subscribe={EDS: ["a", "b"]})
    response = sotw_response(EDS, [endpoints("a"), endpoints("b")], version="1", nonce="n")
    response.resources[1].value = b"\xff"  # unnamed garbage: "b" has not arrived
    s.receive(response, 1.0)
    assert s.expire(100.0)[0].name == "b"
    assert status_of(s, EDS, "a") is ResourceStatus.ACKED


def test_a_server_reported_error_cancels_the_timer() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(
        sotw_response(EDS, [], version="1", nonce="n", errors=[("a", 14, "backend down")]), 1.0
    )
    assert s.next_deadline() is None


def test_unsubscribing_cancels_the_timer() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.unsubscribe(EDS, "a")
    s.requests_to_send(1.0)  # the unsubscription is settled when it goes out
    assert s.next_deadline() is None
    assert s.expire(100.0) == []


def test_losing_the_stream_cancels_timers_and_the_next_stream_rearms_only_missing_names() -> None:
    s, _ = connected(subscribe={EDS: ["cached", "missing"]})
    s.receive(sotw_response(EDS, [endpoints("cached")], version="1", nonce="n"), 1.0)
    s.disconnect(2.0)
    assert s.next_deadline() is None
    s.connect(10.0)
    assert s.next_deadline() is None  # nothing sent yet on the new stream
    s.requests_to_send(11.0)
    assert s.next_deadline() == 26.0
    assert [e.name for e in s.expire(26.0)] == ["missing"]


def test_a_name_added_later_gets_its_own_timer_from_its_own_request() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.subscribe(EDS, "b")
    s.requests_to_send(4.0)
    assert [e.name for e in s.expire(15.0)] == ["a"]
    assert [e.name for e in s.expire(19.0)] == ["b"]


def test_the_wildcard_itself_has_no_timer() -> None:
    from tests.builders import LDS

    s, _ = connected(subscribe={LDS: ["*"]})
    assert s.next_deadline() is None


# --------------------------------------------------------------------------- TTL


def test_a_sotw_resource_with_a_ttl_expires_and_is_removed() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(
        sotw_response(
            CDS, [wrapped(cluster("a"), name="a", version="1", ttl=30)], version="1", nonce="n"
        ),
        1.0,
    )
    state = s.resource_state(CDS, "a")
    assert state is not None
    assert state.expires_at == 31.0
    assert s.next_deadline() == 31.0
    events = s.expire(31.0)
    assert [(type(e), e.name) for e in events] == [(DataError, "a")]
    assert isinstance(events[0], DataError)
    assert isinstance(events[0].error, ResourceExpiredError)
    state = s.resource_state(CDS, "a")
    assert state is not None
    assert (state.status, state.value, state.version) == (ResourceStatus.EXPIRED, None, None)


def test_a_heartbeat_refreshes_the_ttl_without_notifying() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(
        sotw_response(
            CDS, [wrapped(cluster("a"), name="a", version="1", ttl=30)], version="1", nonce="n1"
        ),
        1.0,
    )
    beat = sotw_response(
        CDS, [wrapped(None, name="a", version="1", ttl=30)], version="1", nonce="n2"
    )
    assert s.receive(beat, 20.0) == []
    assert s.expire(31.0) == []
    assert s.next_deadline() == 50.0
    assert status_of(s, CDS, "a") is ResourceStatus.ACKED


def test_a_wrapped_resource_carries_its_own_version_which_heartbeats_repeat() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(
        sotw_response(
            CDS, [wrapped(cluster("a"), name="a", version="r7", ttl=30)], version="v1", nonce="n1"
        ),
        1.0,
    )
    state = s.resource_state(CDS, "a")
    assert state is not None
    assert state.version == "r7"
    assert (
        s.receive(
            sotw_response(
                CDS, [wrapped(None, name="a", version="r7", ttl=30)], version="v2", nonce="n2"
            ),
            2.0,
        )
        == []
    )
    assert s.next_deadline() == 32.0


def test_a_cds_response_of_heartbeats_alone_deletes_nothing() -> None:
    s, _ = connected(subscribe={CDS: ["a", "b"]})
    s.receive(
        sotw_response(
            CDS,
            [
                wrapped(cluster("a"), name="a", version="1", ttl=30),
                wrapped(cluster("b"), name="b", version="1", ttl=30),
            ],
            version="1",
            nonce="n1",
        ),
        1.0,
    )
    assert (
        s.receive(
            sotw_response(
                CDS, [wrapped(None, name="a", version="1", ttl=30)], version="1", nonce="n2"
            ),
            2.0,
        )
        == []
    )
    assert status_of(s, CDS, "b") is ResourceStatus.ACKED


def test_a_body_less_resource_with_another_version_is_not_a_heartbeat_but_a_deletion() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(
        sotw_response(
            EDS, [wrapped(endpoints("a"), name="a", version="1", ttl=30)], version="1", nonce="n1"
        ),
        1.0,
    )
    events = s.receive(
        sotw_response(EDS, [wrapped(None, name="a", version="2")], version="2", nonce="n2"), 2.0
    )
    assert [type(e) for e in events] == [DataError]
    assert status_of(s, EDS, "a") is ResourceStatus.DOES_NOT_EXIST
    assert s.next_deadline() is None


def test_receiving_the_resource_without_a_ttl_clears_the_timer() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(
        sotw_response(
            CDS, [wrapped(cluster("a"), name="a", version="1", ttl=30)], version="1", nonce="n1"
        ),
        1.0,
    )
    s.receive(sotw_response(CDS, [cluster("a")], version="2", nonce="n2"), 2.0)
    assert s.next_deadline() is None
    state = s.resource_state(CDS, "a")
    assert state is not None
    assert state.expires_at is None


def test_ttls_keep_running_across_a_lost_stream() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(
        sotw_response(
            CDS, [wrapped(cluster("a"), name="a", version="1", ttl=5)], version="1", nonce="n"
        ),
        1.0,
    )
    s.disconnect(2.0)
    assert [type(e) for e in s.expire(6.0)] == [DataError]


def test_delta_ttl_and_heartbeat() -> None:
    s, _ = connected(delta=True, subscribe={CDS: ["a"]})
    s.receive(
        delta_response(CDS, [delta_resource("a", cluster("a"), version="v", ttl=10)], nonce="n1"),
        0.0,
    )
    assert (
        s.receive(
            delta_response(CDS, [delta_resource("a", None, version="v", ttl=10)], nonce="n2"), 8.0
        )
        == []
    )
    assert s.expire(17.9) == []
    events = s.expire(18.0)
    assert isinstance(events[0], DataError)
    assert isinstance(events[0].error, ResourceExpiredError)
    assert status_of(s, CDS, "a") is ResourceStatus.EXPIRED


def test_a_heartbeat_without_a_ttl_removes_the_timer() -> None:
    s, _ = connected(delta=True, subscribe={CDS: ["a"]})
    s.receive(
        delta_response(CDS, [delta_resource("a", cluster("a"), version="v", ttl=10)], nonce="n1"),
        0.0,
    )
    s.receive(delta_response(CDS, [delta_resource("a", None, version="v")], nonce="n2"), 1.0)
    assert s.next_deadline() is None
    assert status_of(s, CDS, "a") is ResourceStatus.ACKED
