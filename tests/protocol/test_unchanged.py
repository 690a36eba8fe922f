"""A resource whose bytes equal the cached ones is not decoded again, yet keeps every status
rule: it is ACKed, refreshes its TTL and clears a previous error, in SotW and Delta alike."""

from __future__ import annotations

from typing import Any

from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2

from tests.builders import (
    CDS,
    EDS,
    cluster,
    connected,
    delta_resource,
    delta_response,
    endpoints,
    sotw_response,
    wrapped,
)
from xdsclient import AmbientError, DataError, ResourceChanged, ResourceStatus, ResourceType
from xdsclient._protocol import _classify as classify
from xdsclient.resources import CLUSTER, ENDPOINT


def counting(
    base: ResourceType[Any] = ENDPOINT, *, pure: bool = True
) -> tuple[ResourceType[Any], list[str]]:
    """``base`` with a decoder that records the name of every resource it decodes."""
    calls: list[str] = []

    def decode(data: bytes) -> tuple[str, Any]:
        name, value = base.decode(data)
        calls.append(name)
        return name, value

    rtype = ResourceType(
        type_url=base.type_url,
        decode=decode,
        all_resources_required_in_sotw=base.all_resources_required_in_sotw,
        decode_is_pure=pure,
    )
    return rtype, calls


NAMES = [f"e{i}" for i in range(5)]


def test_a_sotw_resend_of_unchanged_resources_decodes_nothing_and_is_acked() -> None:
    rtype, calls = counting()
    s, _ = connected(rtype, subscribe={EDS: NAMES})
    s.receive(sotw_response(EDS, [endpoints(n) for n in NAMES], version="1", nonce="n1"), 1.0)
    s.requests_to_send(1.0)
    calls.clear()
    events = s.receive(
        sotw_response(EDS, [endpoints(n) for n in NAMES], version="2", nonce="n2"), 2.0
    )
    assert calls == []
    assert events == []
    (ack,) = s.requests_to_send(2.0)
    assert (ack.version_info, ack.response_nonce) == ("2", "n2")
    assert not ack.HasField("error_detail")
    state = s.resource_state(EDS, "e3")
    assert state is not None
    assert (state.status, state.version, state.last_updated) == (ResourceStatus.ACKED, "2", 1.0)


def test_a_sotw_update_of_one_of_n_decodes_and_announces_only_that_one() -> None:
    rtype, calls = counting()
    s, _ = connected(rtype, subscribe={EDS: NAMES})
    s.receive(sotw_response(EDS, [endpoints(n) for n in NAMES], version="1", nonce="n1"), 1.0)
    calls.clear()
    update = [endpoints(n, port=9090 if n == "e2" else 8080) for n in NAMES]
    events = s.receive(sotw_response(EDS, update, version="2", nonce="n2"), 2.0)
    assert calls == ["e2"]
    assert [(type(e), e.name) for e in events] == [(ResourceChanged, "e2")]
    state = s.resource_state(EDS, "e2")
    assert state is not None
    assert state.last_updated == 2.0


def test_a_type_whose_decoder_is_not_pure_is_decoded_every_time() -> None:
    rtype, calls = counting(pure=False)
    s, _ = connected(rtype, subscribe={EDS: ["e0"]})
    s.receive(sotw_response(EDS, [endpoints("e0")], version="1", nonce="n1"), 1.0)
    s.receive(sotw_response(EDS, [endpoints("e0")], version="2", nonce="n2"), 2.0)
    assert calls == ["e0", "e0"]
    delta_type, delta_calls = counting(pure=False)
    d, _ = connected(delta_type, delta=True, subscribe={EDS: ["e0"]})
    for nonce in ("n1", "n2"):
        d.receive(
            delta_response(EDS, [delta_resource("e0", endpoints("e0"), version="1")], nonce=nonce),
            1.0,
        )
    assert delta_calls == ["e0", "e0"]


def test_an_unchanged_duplicate_in_one_response_is_still_rejected() -> None:
    rtype, _ = counting()
    s, _ = connected(rtype, subscribe={EDS: ["e0"]})
    s.receive(sotw_response(EDS, [endpoints("e0")], version="1", nonce="n1"), 1.0)
    s.requests_to_send(1.0)
    events = s.receive(
        sotw_response(EDS, [endpoints("e0"), endpoints("e0")], version="2", nonce="n2"), 2.0
    )
    assert [(type(e), e.name) for e in events] == [(AmbientError, "e0")]
    (nack,) = s.requests_to_send(2.0)
    assert "duplicate resource name" in nack.error_detail.message
    state = s.resource_state(EDS, "e0")
    assert state is not None
    assert state.status is ResourceStatus.NACKED_BUT_CACHED


def test_an_unchanged_resend_after_a_nack_clears_the_error_without_announcing_a_change() -> None:
    rtype, calls = counting(CLUSTER)
    s, _ = connected(rtype, subscribe={CDS: ["a"]})
    s.receive(sotw_response(CDS, [cluster("a")], version="1", nonce="n1"), 1.0)
    bad = cluster("a")
    bad.type = 99  # not a discovery type: invalid
    s.receive(sotw_response(CDS, [bad], version="2", nonce="n2"), 2.0)
    nacked = s.resource_state(CDS, "a")
    assert nacked is not None
    assert nacked.status is ResourceStatus.NACKED_BUT_CACHED
    calls.clear()
    events = s.receive(sotw_response(CDS, [cluster("a")], version="3", nonce="n3"), 3.0)
    assert calls == []
    assert events == []
    state = s.resource_state(CDS, "a")
    assert state is not None
    assert (state.status, state.error, state.version) == (ResourceStatus.ACKED, None, "3")
    assert state.value is nacked.value


def test_an_unchanged_resend_refreshes_the_ttl_of_a_wrapped_resource() -> None:
    rtype, calls = counting(CLUSTER)
    s, _ = connected(rtype, subscribe={CDS: ["a"]})
    message = wrapped(cluster("a"), name="a", version="1", ttl=30)
    s.receive(sotw_response(CDS, [message], version="1", nonce="n1"), 1.0)
    calls.clear()
    events = s.receive(sotw_response(CDS, [message], version="1", nonce="n2"), 20.0)
    assert (calls, events) == ([], [])
    state = s.resource_state(CDS, "a")
    assert state is not None
    assert state.expires_at == 50.0
    # A bare resend carries no TTL: the TTL stops, the value stays.
    s.receive(sotw_response(CDS, [cluster("a")], version="2", nonce="n3"), 40.0)
    state = s.resource_state(CDS, "a")
    assert state is not None
    assert (state.status, state.expires_at) == (ResourceStatus.ACKED, None)
    assert s.receive(sotw_response(CDS, [], version="3", nonce="n4"), 60.0) != []


def test_the_same_bytes_after_a_deletion_are_decoded_and_announced_again() -> None:
    rtype, calls = counting(CLUSTER)
    s, _ = connected(rtype, subscribe={CDS: ["a"]})
    s.receive(sotw_response(CDS, [cluster("a")], version="1", nonce="n1"), 1.0)
    deleted = s.receive(sotw_response(CDS, [], version="2", nonce="n2"), 2.0)
    assert [type(e) for e in deleted] == [DataError]
    calls.clear()
    events = s.receive(sotw_response(CDS, [cluster("a")], version="3", nonce="n3"), 3.0)
    assert calls == ["a"]
    assert [(type(e), e.name) for e in events] == [(ResourceChanged, "a")]


def test_a_small_response_on_a_big_cache_decodes_its_few_resources_and_stays_quiet() -> None:
    """Indexing 20 cached resources to skip decoding 1 would cost more than decoding it."""
    many = [f"e{i}" for i in range(20)]
    rtype, calls = counting()
    s, _ = connected(rtype, subscribe={EDS: many})
    s.receive(sotw_response(EDS, [endpoints(n) for n in many], version="1", nonce="n1"), 1.0)
    calls.clear()
    events = s.receive(sotw_response(EDS, [endpoints("e7")], version="2", nonce="n2"), 2.0)
    # Compiled, the cache is looked up by the name the bytes begin with: not even e7 is decoded.
    assert calls == ([] if classify.COMPILED else ["e7"])
    assert events == []
    state = s.resource_state(EDS, "e7")
    assert state is not None
    assert (state.version, state.last_updated) == ("2", 1.0)


def _name_last(name: str, port: int = 8080) -> bytes:
    """An assignment's bytes with its name written after its localities (valid protobuf: a
    serializer writes field 1 first, but a reader must take any order)."""
    body = endpoints(name, port=port)
    body.ClearField("cluster_name")
    encoded = name.encode()
    serialized: bytes = body.SerializeToString()
    return serialized + bytes([10, len(encoded)]) + encoded


def _raw_response(raws: list[bytes], version: str) -> Any:
    response = discovery_pb2.DiscoveryResponse(type_url=EDS, version_info=version, nonce=version)
    response.resources.extend(any_pb2.Any(type_url=EDS, value=raw) for raw in raws)
    return response


def test_unchanged_bytes_that_do_not_begin_with_their_name_are_still_not_decoded() -> None:
    rtype, calls = counting()
    s, _ = connected(rtype, subscribe={EDS: NAMES})
    s.receive(_raw_response([_name_last(n) for n in NAMES], "1"), 1.0)
    s.requests_to_send(1.0)
    calls.clear()
    update = [_name_last(n, port=9090 if n == "e1" else 8080) for n in NAMES]
    events = s.receive(_raw_response(update, "2"), 2.0)
    assert calls == ["e1"]
    assert [(type(e), e.name) for e in events] == [(ResourceChanged, "e1")]
    (ack,) = s.requests_to_send(2.0)
    assert (ack.version_info, ack.HasField("error_detail")) == ("2", False)


def test_bytes_that_begin_with_another_resources_name_are_decoded_not_taken_for_it() -> None:
    """The leading name only says where to look: e0's bytes under the name e1 at their front
    are not e1's cached bytes, so they are decoded (and turn out to be e0, a duplicate)."""
    rtype, calls = counting()
    s, _ = connected(rtype, subscribe={EDS: ["e0", "e1"]})
    s.receive(sotw_response(EDS, [endpoints("e0"), endpoints("e1")], version="1", nonce="1"), 1.0)
    s.requests_to_send(1.0)
    calls.clear()
    e0 = endpoints("e0").SerializeToString()
    disguised = bytes([10, 2]) + b"e1" + e0  # field 1 twice: the last one (e0) is the name
    s.receive(_raw_response([e0, disguised], "2"), 2.0)
    assert calls == ["e0"]
    (nack,) = s.requests_to_send(2.0)
    assert "duplicate resource name" in nack.error_detail.message


def test_the_leading_name_is_read_only_from_a_well_formed_first_field() -> None:
    long = "x" * 200
    assert classify.leading_name(bytes([10, 3]) + b"abc" + b"rest") == "abc"
    assert classify.leading_name(bytes([10, 200 & 127 | 128, 1]) + long.encode()) == long
    assert classify.leading_name(bytes([18, 3]) + b"abc") is None  # field 2 first
    assert classify.leading_name(bytes([10, 5]) + b"abc") is None  # cut short
    assert classify.leading_name(bytes([10, 2, 0xFF, 0xFE])) is None  # not UTF-8
    assert classify.leading_name(bytes([10, 128, 128, 1])) is None  # a 3-byte length
    assert classify.leading_name(b"") is None
