"""REST-JSON polling: long and short polls, 304, failures with backoff, wrong answers, TLS,
headers."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import Any

import pytest
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import json_format

from tests.builders import cluster
from tests.certs import make_pki
from tests.helpers import eventually
from tests.sources.conftest import OPTIONS, timeout_of
from xdsclient import (
    CallbackWatcher,
    ChannelCredentials,
    ClientOptions,
    DataError,
    Event,
    ResourceChanged,
    ResourceDoesNotExistError,
    ResourceTimeoutError,
    RestSource,
    TransportError,
    TypeStats,
    XdsClient,
    load_bootstrap,
)
from xdsclient.resources import CLUSTER, LISTENER
from xdsclient.testing import ControlPlane


def client_for(url: str, **kw: Any) -> XdsClient:
    options = kw.pop("options", OPTIONS)
    return XdsClient(node_id="n", sources={CLUSTER: RestSource(url=url, **kw)}, options=options)


def polls(cp: ControlPlane) -> int:
    return sum(1 for r in cp.requests if r.method.startswith("REST"))


@pytest.fixture
def cp_resources() -> list[Any]:
    """What ``cp`` serves: cluster ``c``."""
    return [cluster("c", timeout_s=1)]


async def test_a_long_poll_is_held_until_a_change_and_then_answered(cp: ControlPlane) -> None:
    endpoint = await cp.serve_rest(long_poll=True, hold=10.0)
    async with client_for(endpoint.url, refresh_delay=0.001, request_timeout=20.0) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: timeout_of(client) == 1)
        await eventually(lambda: polls(cp) == 2)  # the ACK poll, now held by the server
        cp.set(cluster("c", timeout_s=2))
        await eventually(lambda: timeout_of(client) == 2)
        assert polls(cp) <= 4  # held, not hammered


async def test_short_polls_ack_and_get_304_until_something_changes(cp: ControlPlane) -> None:
    endpoint = await cp.serve_rest()
    async with client_for(endpoint.url, refresh_delay=0.02) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: timeout_of(client) == 1)
        await eventually(lambda: polls(cp) >= 5)
        acks = [r.message for r in cp.requests if r.method.startswith("REST")][1:]
        assert {m.version_info for m in acks} == {cp.version(CLUSTER.type_url, "c")}
        assert [r for r in cp.responses if r.stream == 0][-1].names == ("c",)
        assert len([r for r in cp.responses if r.stream == 0]) == 1  # the rest were 304s
        cp.set(cluster("c", timeout_s=2))
        await eventually(lambda: timeout_of(client) == 2)


async def test_server_errors_back_off_reach_watchers_and_recover(cp: ControlPlane) -> None:
    endpoint = await cp.serve_rest()
    endpoint.fail_with = 503
    seen: list[Event] = []
    async with client_for(endpoint.url, refresh_delay=0.02) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(seen.append))
        await eventually(lambda: bool(seen))
        assert isinstance(seen[0], DataError)
        assert "HTTP 503" in str(seen[0].error)
        before = polls(cp)
        await eventually(lambda: polls(cp) >= before + 1)
        endpoint.fail_with = None
        await eventually(lambda: timeout_of(client) == 1)


async def test_a_poll_that_times_out_is_a_connectivity_error(cp: ControlPlane) -> None:
    endpoint = await cp.serve_rest(long_poll=True, hold=5.0)
    seen: list[Event] = []
    async with client_for(endpoint.url, refresh_delay=0.001, request_timeout=0.2) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(seen.append))
        await eventually(lambda: timeout_of(client) == 1)
        await eventually(lambda: any(not isinstance(e, ResourceChanged) for e in seen))
        error = next(e for e in seen if not isinstance(e, ResourceChanged))
        assert "timed out after 0.2 s" in str(error.error)
        assert timeout_of(client) == 1  # the last good value stays


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            json_format.MessageToJson(
                discovery_pb2.DiscoveryResponse(type_url=LISTENER.type_url, version_info="1")
            ).encode(),
            f"answered {LISTENER.type_url}, not {CLUSTER.type_url}",
        ),
        (b'{"foo": 1}', "not a DiscoveryResponse"),
        (b"<html>", "not a DiscoveryResponse"),
    ],
)
async def test_a_body_that_is_not_a_response_of_the_type_is_an_error(
    cp: ControlPlane, body: bytes, message: str
) -> None:
    endpoint = await cp.serve_rest()
    endpoint.raw_body = body
    seen: list[Event] = []
    async with client_for(endpoint.url, refresh_delay=0.02) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(seen.append))
        await eventually(lambda: bool(seen))
        assert isinstance(seen[0], DataError)
        assert isinstance(seen[0].error, TransportError)
        assert message in str(seen[0].error)


async def test_an_oversized_body_is_refused(cp: ControlPlane) -> None:
    endpoint = await cp.serve_rest()
    seen: list[Event] = []
    options = ClientOptions(max_receive_message_length=64)
    async with client_for(endpoint.url, refresh_delay=0.02, options=options) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(seen.append))
        await eventually(lambda: bool(seen))
        assert "exceeds max_receive_message_length" in str(seen[0].error)  # type: ignore[union-attr]


async def test_tls_and_headers_reach_the_server_and_headers_are_never_shown(
    cp: ControlPlane, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki["server"], pki["server_key"])
    endpoint = await cp.serve_rest(ssl_context=context)
    assert endpoint.url.startswith("https://")
    source = RestSource(
        url=endpoint.url,
        refresh_delay=0.02,
        headers={"authorization": "Bearer s3cret"},
        channel_credentials=ChannelCredentials(type="tls", ca_certificate_file=str(pki["ca"])),
    )
    assert "s3cret" not in repr(source)
    async with XdsClient(node_id="n", sources={CLUSTER: source}, options=OPTIONS) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: timeout_of(client) == 1)
    assert endpoint.last_headers["Authorization"] == "Bearer s3cret"


async def test_the_bootstrap_configures_a_rest_source(cp: ControlPlane) -> None:
    endpoint = await cp.serve_rest()
    config = load_bootstrap(
        {
            "node": {"id": "n"},
            "xdsclient_sources": {
                CLUSTER.type_url: {"rest": {"url": endpoint.url, "refresh_delay": 0.05}}
            },
        }
    )
    source = config.sources[CLUSTER.type_url]
    assert isinstance(source, RestSource)
    assert source.refresh_delay == 0.05
    async with XdsClient(bootstrap=config, options=OPTIONS) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: timeout_of(client) == 1)


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ({"nonsense": {"path": "x"}}, "not a type URL or one of"),
        ({"clusters": {}}, "needs exactly one of path, rest, xds_servers"),
        ({"clusters": {"rest": {"url": "http://x", "refresh_delay": 0}}}, "positive number"),
        ({"clusters": {"rest": {"url": "http://x", "headers": {"a": 1}}}}, r"headers\['a'\]"),
    ],
)
def test_bad_sources_in_the_bootstrap_name_the_field(sources: Any, message: str) -> None:
    from xdsclient import BootstrapError

    with pytest.raises(BootstrapError, match=message):
        load_bootstrap({"node": {"id": "n"}, "xdsclient_sources": sources})


async def test_a_body_larger_than_one_network_read_arrives_whole(cp: ControlPlane) -> None:
    cp.set_all(cluster(f"c{i:04}") for i in range(2000))  # about 300 kB of JSON
    endpoint = await cp.serve_rest()
    async with client_for(endpoint.url, refresh_delay=0.05) as client:
        client.add_watcher(CLUSTER, "*", CallbackWatcher(lambda event: None))
        await eventually(lambda: len(client.resource_states()) == 2001)  # and "c"


async def test_a_name_first_requested_at_the_current_version_is_still_answered(
    cp: ControlPlane,
) -> None:
    cp.set(cluster("late"))
    endpoint = await cp.serve_rest()  # answers 304 to the current version, as go-control-plane
    async with client_for(endpoint.url, refresh_delay=0.02) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: timeout_of(client) == 1)
        await eventually(lambda: polls(cp) >= 3)  # ACKed: the version is current
        client.add_watcher(CLUSTER, "late", CallbackWatcher(lambda event: None))
        await eventually(lambda: timeout_of(client, "late") == 5)


async def test_no_log_line_shows_the_headers_even_at_debug_through_failures(
    cp: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = await cp.serve_rest()
    endpoint.fail_with = 401
    seen: list[Event] = []
    with caplog.at_level(logging.DEBUG, logger="xdsclient"):
        async with client_for(
            endpoint.url, refresh_delay=0.02, headers={"authorization": "Bearer s3cret"}
        ) as client:
            client.add_watcher(CLUSTER, "c", CallbackWatcher(seen.append))
            await eventually(lambda: bool(seen))
            endpoint.fail_with = None
            await eventually(lambda: timeout_of(client) == 1)
    assert "HTTP 401" in caplog.text  # the failure was logged...
    assert "s3cret" not in caplog.text  # ...without the credential
    assert "authorization" not in caplog.text.lower()


def rest_requests(cp: ControlPlane) -> list[Any]:
    return [r.message for r in cp.requests if r.method.startswith("REST")]


async def test_every_poll_carries_the_full_node(cp: ControlPlane) -> None:
    """Every poll carries the node, not only the first one of a "stream" (REST has none)."""
    endpoint = await cp.serve_rest()
    endpoint.strict = True  # 422 without node, as sovereign
    async with client_for(endpoint.url, refresh_delay=0.01) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: polls(cp) >= 5)
    assert [m.node.id for m in rest_requests(cp)] == ["n"] * len(rest_requests(cp))
    assert client.stats().type_stats(CLUSTER.type_url).update_failure == 0


async def test_a_missing_name_is_reported_within_the_timer_by_a_server_that_needs_the_node(
    cp: ControlPlane,
) -> None:
    """A name the server lacks is reported missing once the does-not-exist timer runs out."""
    endpoint = await cp.serve_rest()
    endpoint.strict = True
    seen: list[Event] = []
    options = ClientOptions(does_not_exist_timeout=0.4, backoff=OPTIONS.backoff)
    async with client_for(endpoint.url, refresh_delay=0.01, options=options) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        client.add_watcher(CLUSTER, "missing", CallbackWatcher(seen.append))
        await eventually(lambda: bool(seen))
        assert isinstance(seen[0], DataError)
        assert isinstance(seen[0].error, ResourceTimeoutError | ResourceDoesNotExistError)


async def test_polls_use_proto_field_names_so_a_strict_server_answers_304(
    cp: ControlPlane,
) -> None:
    """A server reading only proto field names sees the version and answers 304."""
    endpoint = await cp.serve_rest()
    endpoint.strict = True
    async with client_for(endpoint.url, refresh_delay=0.01) as client:
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: polls(cp) >= 5)
    version = cp.version(CLUSTER.type_url, "c")
    assert [m.version_info for m in rest_requests(cp)][1:] == [version] * (polls(cp) - 1)
    assert len([r for r in cp.responses if r.stream == 0]) == 1  # the rest were 304s


async def test_a_nack_reaches_a_server_that_reads_only_proto_field_names(
    cp: ControlPlane,
) -> None:
    """A NACK's error_detail is read by a server that knows only the proto field names."""
    bad = cluster("bad")
    bad.eds_cluster_config.eds_config.path_config_source.path = "/nowhere"  # gRPC: invalid
    cp.set(bad)
    endpoint = await cp.serve_rest()
    endpoint.strict = True
    async with client_for(endpoint.url, refresh_delay=0.01) as client:
        client.add_watcher(CLUSTER, "bad", CallbackWatcher(lambda event: None))
        await eventually(lambda: any(m.HasField("error_detail") for m in rest_requests(cp)))
    nack = next(m for m in rest_requests(cp) if m.HasField("error_detail"))
    assert "bad" in nack.error_detail.message
    assert nack.node.id == "n"


def test_responses_are_read_with_either_form_of_field_names() -> None:
    """A response body with proto field names or lowerCamelCase ones parses the same."""
    from xdsclient._transports._formats import FileFormat, parse_response

    snake = b'{"version_info": "7", "type_url": "t", "nonce": "x", "resources": []}'
    camel = b'{"versionInfo": "7", "typeUrl": "t", "nonce": "x", "resources": []}'
    assert parse_response(snake, FileFormat.JSON) == parse_response(camel, FileFormat.JSON)
    assert parse_response(snake, FileFormat.JSON).version_info == "7"


async def test_stats_and_metrics_count_rest_polls_as_grpc_responses(cp: ControlPlane) -> None:
    """REST responses (which carry no nonce) count as attempts, successes and rejections with
    their version, and a failing endpoint as a failure, in stats and in the A78 metrics."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

    endpoint = await cp.serve_rest()
    reader = InMemoryMetricReader()
    async with client_for(endpoint.url, refresh_delay=0.01) as client:
        client.enable_metrics(MeterProvider(metric_readers=[reader]), target="t")
        client.add_watcher(CLUSTER, "c", CallbackWatcher(lambda event: None))
        await eventually(lambda: client.stats().type_stats(CLUSTER.type_url).update_success == 1)
        accepted = cp.version(CLUSTER.type_url, "c")
        bad = cluster("c")
        bad.eds_cluster_config.eds_config.path_config_source.path = "/nowhere"
        cp.set(bad)
        await eventually(lambda: client.stats().type_stats(CLUSTER.type_url).update_rejected == 1)
        endpoint.fail_with = 503
        await eventually(lambda: client.stats().type_stats(CLUSTER.type_url).update_failure == 1)
        stats = client.stats()
        data = reader.get_metrics_data()
    assert stats.type_stats(CLUSTER.type_url) == TypeStats(
        update_attempt=3,
        update_success=1,
        update_rejected=1,
        update_failure=1,
        version=accepted or "",
    )
    assert (stats.servers[endpoint.url].failures, stats.servers[endpoint.url].connected_state) == (
        1,
        0,
    )
    assert data is not None
    values: dict[str, float] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = [p for p in metric.data.data_points if isinstance(p, NumberDataPoint)]
                values[metric.name] = sum(point.value for point in points)
    assert values["grpc.xds_client.resource_updates_valid"] == 1
    assert values["grpc.xds_client.resource_updates_invalid"] == 1
    assert values["grpc.xds_client.server_failure"] == 1
    assert values["grpc.xds_client.connected"] == 0
