"""SotW deletion (absence in LDS/CDS), Delta removal, and ignore_resource_deletion (gRFC A53)."""

from __future__ import annotations

from tests.builders import (
    CDS,
    EDS,
    cluster,
    connected,
    delta_response,
    endpoints,
    raw_any,
    sotw_response,
    status_of,
)
from xdsclient import AmbientError, DataError, ResourceDoesNotExistError, ResourceStatus


def test_a_cluster_missing_from_a_cds_response_is_deleted() -> None:
    s, _ = connected(subscribe={CDS: ["a", "b"]})
    s.receive(sotw_response(CDS, [cluster("a"), cluster("b")], version="1", nonce="n1"), 1.0)
    events = s.receive(sotw_response(CDS, [cluster("a")], version="2", nonce="n2"), 2.0)
    assert [(type(e), e.name) for e in events] == [(DataError, "b")]
    assert isinstance(events[0], DataError)
    assert isinstance(events[0].error, ResourceDoesNotExistError)
    assert status_of(s, CDS, "b") is ResourceStatus.DOES_NOT_EXIST


def test_an_empty_cds_response_deletes_everything() -> None:
    s, _ = connected(subscribe={CDS: ["a", "b"]})
    s.receive(sotw_response(CDS, [cluster("a"), cluster("b")], version="1", nonce="n1"), 1.0)
    events = s.receive(sotw_response(CDS, [], version="2", nonce="n2"), 2.0)
    assert sorted(e.name for e in events) == ["a", "b"]
    assert {status_of(s, CDS, n) for n in "ab"} == {ResourceStatus.DOES_NOT_EXIST}


def test_absence_from_an_eds_response_means_nothing() -> None:
    s, _ = connected(subscribe={EDS: ["a", "b"]})
    s.receive(sotw_response(EDS, [endpoints("a"), endpoints("b")], version="1", nonce="n1"), 1.0)
    assert s.receive(sotw_response(EDS, [], version="2", nonce="n2"), 2.0) == []
    assert status_of(s, EDS, "b") is ResourceStatus.ACKED


def test_a_cluster_never_received_is_not_deleted_by_its_absence() -> None:
    # The request naming it may still be in flight (spec: "Knowing When a Requested Resource
    # Does Not Exist"); its does-not-exist timer decides.
    s, _ = connected(subscribe={CDS: ["a", "new"]})
    assert [
        e.name for e in s.receive(sotw_response(CDS, [cluster("a")], version="1", nonce="n"), 1.0)
    ] == ["a"]
    assert status_of(s, CDS, "new") is ResourceStatus.REQUESTED


def test_no_deletion_when_a_resource_in_the_response_could_not_be_named() -> None:
    s, _ = connected(subscribe={CDS: ["a", "b"]})
    s.receive(sotw_response(CDS, [cluster("a"), cluster("b")], version="1", nonce="n1"), 1.0)
    garbled = sotw_response(CDS, [cluster("a"), raw_any(CDS, b"\xff")], version="2", nonce="n2")
    assert s.receive(garbled, 2.0) == []
    assert status_of(s, CDS, "b") is ResourceStatus.ACKED


def test_ignore_resource_deletion_keeps_the_resource_and_reports_it_once() -> None:
    s, _ = connected(subscribe={CDS: ["a", "b"]}, ignore_resource_deletion=True)
    s.receive(sotw_response(CDS, [cluster("a"), cluster("b")], version="1", nonce="n1"), 1.0)
    events = s.receive(sotw_response(CDS, [cluster("a")], version="2", nonce="n2"), 2.0)
    assert [(type(e), e.name) for e in events] == [(AmbientError, "b")]
    state = s.resource_state(CDS, "b")
    assert state is not None
    assert state.status is ResourceStatus.DOES_NOT_EXIST_BUT_CACHED
    assert state.value.proto == cluster("b")
    assert s.receive(sotw_response(CDS, [cluster("a")], version="3", nonce="n3"), 3.0) == []
    # When it comes back it is a normal resource again.
    s.receive(sotw_response(CDS, [cluster("a"), cluster("b")], version="4", nonce="n4"), 4.0)
    assert status_of(s, CDS, "b") is ResourceStatus.ACKED


def test_ignore_resource_deletion_applies_to_delta_removals_too() -> None:
    from tests.builders import delta_resource

    s, _ = connected(delta=True, subscribe={CDS: ["a"]}, ignore_resource_deletion=True)
    s.receive(
        delta_response(CDS, [delta_resource("a", cluster("a"), version="1")], nonce="n1"), 1.0
    )
    events = s.receive(delta_response(CDS, [], nonce="n2", removed=("a",)), 2.0)
    assert [type(e) for e in events] == [AmbientError]
    assert status_of(s, CDS, "a") is ResourceStatus.DOES_NOT_EXIST_BUT_CACHED
