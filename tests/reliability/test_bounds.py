"""Bounds against a hostile server: every limit is a clear error, never unbounded memory."""

from __future__ import annotations

from tests.builders import (
    CDS,
    EDS,
    cluster,
    connected,
    delta_resource,
    delta_response,
    endpoints,
    sotw_response,
)
from xdsclient import ChannelCredentials, ClientOptions, ResourceStatus, ServerResourceError


def test_a_response_with_too_many_resources_is_nacked_whole_and_nothing_applies() -> None:
    s, _ = connected(subscribe={EDS: ["a", "b", "c"]}, max_resources_per_response=2)
    s.receive(sotw_response(EDS, [endpoints("a")], version="1", nonce="n1"), 1.0)
    s.requests_to_send(1.0)
    events = s.receive(
        sotw_response(EDS, [endpoints(n, port=2) for n in "abc"], version="2", nonce="n2"), 2.0
    )
    (nack,) = s.requests_to_send(2.0)
    assert events == []
    assert nack.error_detail.message == "3 resources exceed max_resources_per_response (2)"
    assert (nack.version_info, nack.response_nonce) == ("1", "n2")
    state = s.resource_state(EDS, "a")
    assert state is not None
    assert state.value.proto == endpoints("a")


def test_the_bound_applies_to_delta_too() -> None:
    s, _ = connected(delta=True, subscribe={CDS: ["a", "b"]}, max_resources_per_response=1)
    resources = [delta_resource(n, cluster(n), version="1") for n in "ab"]
    assert s.receive(delta_response(CDS, resources, nonce="n"), 1.0) == []
    (nack,) = s.requests_to_send(1.0)
    assert nack.error_detail.message == "2 resources exceed max_resources_per_response (1)"


def test_overlong_names_are_rejected_without_being_stored() -> None:
    long_name = "x" * 300
    s, _ = connected(subscribe={CDS: ["*"]}, max_name_length=100)
    s.receive(sotw_response(CDS, [cluster("ok"), cluster(long_name)], version="1", nonce="n"), 1.0)
    (nack,) = s.requests_to_send(1.0)
    assert (
        nack.error_detail.message
        == "resource 1: name of 300 characters exceeds max_name_length (100)"
    )
    assert [st.name for st in s.resource_states()] == ["ok"]
    d, _ = connected(delta=True, subscribe={CDS: ["*"]}, max_name_length=100)
    d.receive(
        delta_response(
            CDS, [delta_resource(long_name, cluster(long_name), version="1")], nonce="n"
        ),
        1.0,
    )
    (nack,) = d.requests_to_send(1.0)
    assert (
        nack.error_detail.message
        == "resource 0: name of 300 characters exceeds max_name_length (100)"
    )
    assert d.resource_states() == []


def test_server_error_texts_are_clipped() -> None:
    s, _ = connected(subscribe={EDS: ["a"]}, max_nack_message_length=50)
    s.receive(sotw_response(EDS, [], version="1", nonce="n", errors=[("a", 14, "y" * 10_000)]), 1.0)
    state = s.resource_state(EDS, "a")
    assert state is not None
    assert state.status is ResourceStatus.RECEIVED_ERROR
    assert isinstance(state.error, ServerResourceError)
    assert len(state.error.message) == 50
    assert state.error.message.endswith(" ... (clipped)")


def test_a_nack_of_many_errors_stays_within_its_bound() -> None:
    s, _ = connected(subscribe={EDS: ["*"]})
    response = sotw_response(EDS, [endpoints(f"e{i}") for i in range(5000)], version="1", nonce="n")
    for packed in response.resources:
        packed.value = b"\xff" + packed.value
    s.receive(response, 1.0)
    (nack,) = s.requests_to_send(1.0)
    assert len(nack.error_detail.message) == 4096


def test_credentials_never_show_in_reprs() -> None:
    credentials = ChannelCredentials(
        type="tls",
        ca_certificate_file="/secret/ca.pem",
        certificate_file="/secret/c.pem",
        private_key_file="/k.pem",
    )
    assert "/secret" not in repr(credentials)
    assert "k.pem" not in repr(credentials)


async def test_the_client_passes_its_bounds_to_the_core() -> None:
    from tests.builders import cluster as make_cluster
    from xdsclient import XdsClient
    from xdsclient.resources import CLUSTER
    from xdsclient.testing import ControlPlane

    async with ControlPlane() as cp:
        for name in ("a", "b", "c"):
            cp.set(make_cluster(name))
        async with XdsClient(
            cp.address, node_id="n", options=ClientOptions(max_resources_per_response=2)
        ) as client:
            watch = client.watch(CLUSTER, "*")
            nack = await cp.wait_for_request(lambda r: r.message.HasField("error_detail"))
            assert (
                nack.message.error_detail.message
                == "3 resources exceed max_resources_per_response (2)"
            )
            assert client.resource_states() == []
            watch.cancel()
