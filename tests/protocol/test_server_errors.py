"""Server-reported ``resource_errors`` (gRFC A88 / TP3) and connectivity errors (gRFC A57)."""

from __future__ import annotations

import pytest

from tests.builders import CDS, EDS, cluster, connected, delta_response, endpoints, sotw_response
from xdsclient import (
    AmbientError,
    DataError,
    ResourceChanged,
    ResourceStatus,
    ServerResourceError,
    TransportError,
)

NOT_FOUND, PERMISSION_DENIED, UNAVAILABLE = 5, 7, 14


@pytest.mark.parametrize("code", [NOT_FOUND, PERMISSION_DENIED])
def test_not_found_and_permission_denied_are_data_errors_that_drop_the_cached_value(
    code: int,
) -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(sotw_response(EDS, [endpoints("a")], version="1", nonce="n1"), 1.0)
    events = s.receive(
        sotw_response(EDS, [], version="2", nonce="n2", errors=[("a", code, "nope")]), 2.0
    )
    assert [(type(e), e.name) for e in events] == [(DataError, "a")]
    assert isinstance(events[0], DataError)
    error = events[0].error
    assert isinstance(error, ServerResourceError)
    assert (error.code, error.message, error.is_data_error) == (code, "nope", True)
    state = s.resource_state(EDS, "a")
    assert state is not None
    assert (state.status, state.value) == (ResourceStatus.RECEIVED_ERROR, None)


def test_other_codes_are_transient_and_keep_the_cached_value() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(sotw_response(EDS, [endpoints("a")], version="1", nonce="n1"), 1.0)
    events = s.receive(
        sotw_response(EDS, [], version="2", nonce="n2", errors=[("a", UNAVAILABLE, "later")]), 2.0
    )
    assert [(type(e), e.name) for e in events] == [(AmbientError, "a")]
    state = s.resource_state(EDS, "a")
    assert state is not None
    assert state.status is ResourceStatus.RECEIVED_ERROR_BUT_CACHED
    assert state.value.proto == endpoints("a")


def test_a_transient_error_with_nothing_cached_is_a_data_error() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    events = s.receive(
        sotw_response(EDS, [], version="1", nonce="n", errors=[("a", UNAVAILABLE, "later")]), 1.0
    )
    assert [type(e) for e in events] == [DataError]
    state = s.resource_state(EDS, "a")
    assert state is not None
    assert state.status is ResourceStatus.RECEIVED_ERROR


def test_the_error_is_remembered_until_the_resource_arrives() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(
        sotw_response(EDS, [], version="1", nonce="n1", errors=[("a", NOT_FOUND, "gone")]), 1.0
    )
    assert s.receive(sotw_response(EDS, [], version="2", nonce="n2"), 2.0) == []
    state = s.resource_state(EDS, "a")
    assert state is not None
    assert state.status is ResourceStatus.RECEIVED_ERROR
    assert state.error is not None
    events = s.receive(sotw_response(EDS, [endpoints("a")], version="3", nonce="n3"), 3.0)
    assert [type(e) for e in events] == [ResourceChanged]
    state = s.resource_state(EDS, "a")
    assert state is not None
    assert (state.status, state.error) == (ResourceStatus.ACKED, None)


def test_the_same_error_again_does_not_notify_twice() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(
        sotw_response(EDS, [], version="1", nonce="n1", errors=[("a", NOT_FOUND, "gone")]), 1.0
    )
    assert (
        s.receive(
            sotw_response(EDS, [], version="2", nonce="n2", errors=[("a", NOT_FOUND, "gone")]), 2.0
        )
        == []
    )


def test_errors_for_names_nobody_wants_are_ignored_and_the_response_is_acked() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    assert (
        s.receive(
            sotw_response(EDS, [], version="1", nonce="n", errors=[("zzz", NOT_FOUND, "x")]), 1.0
        )
        == []
    )
    (ack,) = s.requests_to_send(1.0)
    assert (ack.version_info, ack.HasField("error_detail")) == ("1", False)
    assert s.resource_state(EDS, "zzz") is None


def test_a_cds_error_keeps_the_cluster_from_being_deleted_by_its_absence() -> None:
    s, _ = connected(subscribe={CDS: ["a"]})
    s.receive(sotw_response(CDS, [cluster("a")], version="1", nonce="n1"), 1.0)
    events = s.receive(
        sotw_response(CDS, [], version="2", nonce="n2", errors=[("a", UNAVAILABLE, "x")]), 2.0
    )
    assert [type(e) for e in events] == [AmbientError]


def test_delta_resource_errors() -> None:
    s, _ = connected(delta=True, subscribe={EDS: ["a"]})
    events = s.receive(
        delta_response(EDS, nonce="n", errors=[("a", PERMISSION_DENIED, "denied")]), 1.0
    )
    assert [type(e) for e in events] == [DataError]


# --------------------------------------------------------------------------- connectivity


def test_a_stream_that_fails_before_any_response_reports_to_every_watcher() -> None:
    s, _ = connected(subscribe={EDS: ["cached", "missing"]})
    s.receive(sotw_response(EDS, [endpoints("cached")], version="1", nonce="n"), 1.0)
    s.disconnect(2.0, TransportError("first stream ended after a response"))
    s.connect(3.0)
    s.requests_to_send(3.0)
    error = TransportError("connection refused")
    events = s.disconnect(4.0, error)
    assert [(type(e), e.name) for e in events] == [(AmbientError, "cached"), (DataError, "missing")]
    assert all(not isinstance(e, ResourceChanged) and e.error is error for e in events)
    # Statuses do not change: the cached value is still the one to use.
    assert {st.name: st.status for st in s.resource_states()} == {
        "cached": ResourceStatus.ACKED,
        "missing": ResourceStatus.REQUESTED,
    }


def test_a_stream_that_closes_after_a_response_is_not_an_error_to_watchers() -> None:
    s, _ = connected(subscribe={EDS: ["a"]})
    s.receive(sotw_response(EDS, [], version="1", nonce="n"), 1.0)
    assert s.response_received
    assert s.disconnect(2.0, TransportError("closed")) == []


def test_a_wildcard_subscription_hears_of_connectivity_errors_under_its_own_name() -> None:
    from tests.builders import LDS

    s, _ = connected(subscribe={LDS: ["*"]})
    events = s.disconnect(1.0, TransportError("refused"))
    assert [(type(e), e.name) for e in events] == [(DataError, "*")]
