"""CSDS: every status as C-core reports it, the JSON form, and the gRPC service."""

from __future__ import annotations

from typing import Any

import grpc
from envoy.admin.v3 import config_dump_shared_pb2
from envoy.service.status.v3 import csds_pb2
from google.protobuf import json_format

from tests.builders import CDS, cluster, sotw_response, wrapped
from tests.helpers import eventually, idle
from tests.shell.conftest import OPTIONS
from xdsclient import (
    CallbackWatcher,
    DataError,
    ResourceStatus,
    TransportError,
    XdsClient,
    add_csds_service,
    load_bootstrap,
)
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane, FakeClock, FakeTransport, bootstrap

Status = config_dump_shared_pb2.ClientResourceStatus


def bad(name: str) -> Any:
    message = cluster(name)
    message.eds_cluster_config.eds_config.path_config_source.path = "/x"  # invalid for gRPC
    return message


async def test_every_client_status_is_reported_as_c_core_does(
    fake: FakeTransport, clock: FakeClock
) -> None:
    clock.set(100.0)
    async with XdsClient("fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS) as c:
        names = ["acked", "nacked_cached", "nacked", "gone", "timeout", "error", "ttl", "waiting"]
        for name in names:
            c.add_watcher(CLUSTER, name, CallbackWatcher(lambda event: None))
        stream = await fake.stream()
        await stream.request()
        everything = [cluster(n) for n in ("acked", "nacked_cached", "gone")]
        ttl = wrapped(cluster("ttl"), name="ttl", ttl=5)
        stream.respond(sotw_response(CDS, [*everything, ttl], version="1", nonce="a"))
        await idle()
        clock.advance(1.0)  # 101
        later = [cluster("acked"), bad("nacked_cached"), bad("nacked"), ttl]
        errors = [("error", 14, "backend unavailable")]
        stream.respond(sotw_response(CDS, later, version="2", nonce="b", errors=errors))
        await idle()
        clock.advance(14.5)  # 115.5: "timeout" and "waiting" time out; "ttl" expired at 106
        c.add_watcher(CLUSTER, "late", CallbackWatcher(lambda event: None))
        await idle()
        config = c.csds(scope="xds:///svc")
        wall_now = config.generic_xds_configs[0].last_updated.ToNanoseconds() / 1e9
    by_name = {x.name: x for x in config.generic_xds_configs}
    assert config.client_scope == "xds:///svc"
    assert config.node.id == "n"
    assert {n: Status.Name(x.client_status) for n, x in by_name.items()} == {
        "acked": "ACKED",
        "nacked_cached": "NACKED",
        "nacked": "NACKED",
        "gone": "DOES_NOT_EXIST",
        "timeout": "DOES_NOT_EXIST",  # gRFC A88: the timer is a does-not-exist verdict
        "error": "RECEIVED_ERROR",
        "ttl": "DOES_NOT_EXIST",
        "waiting": "DOES_NOT_EXIST",
        "late": "REQUESTED",
    }
    acked = by_name["acked"]
    assert acked.type_url == CDS
    assert acked.version_info == "2"
    assert acked.xds_config.type_url == CDS
    assert acked.xds_config.value == cluster("acked").SerializeToString()
    assert not acked.HasField("error_state")
    cached = by_name["nacked_cached"]
    assert cached.xds_config.value == cluster("nacked_cached").SerializeToString()  # last good
    assert "eds_config" in cached.error_state.details
    assert cached.error_state.HasField("last_update_attempt")
    assert not by_name["nacked"].HasField("xds_config")
    assert cached.error_state.details.startswith("invalid resource: ")  # C-core's words
    assert cached.error_state.version_info == "2"  # the rejected version
    assert by_name["error"].error_state.details == "backend unavailable"  # the server's words
    assert by_name["error"].error_state.version_info == "2"  # the response's, as C-core keeps it
    assert by_name["error"].error_state.HasField("last_update_attempt")
    gone = by_name["gone"]
    assert not gone.HasField("xds_config")
    assert gone.error_state.details == "does not exist: deleted by the server in version 2"
    assert gone.error_state.version_info == "2"  # the deleting version
    assert gone.error_state.HasField("last_update_attempt")
    timeout = by_name["timeout"].error_state
    assert timeout.details == "does not exist: not received within 15 s of being requested"
    assert timeout.version_info == ""  # no update caused it, as C-core leaves it
    assert not timeout.HasField("last_update_attempt")
    assert not by_name["late"].HasField("error_state")
    assert wall_now > 1e9  # a wall-clock timestamp, not the client's monotonic clock


async def test_with_resource_timer_is_transient_failure_the_timer_is_30_s_and_reports_timeout(
    fake: FakeTransport, clock: FakeClock
) -> None:
    """gRFC A88's server feature in the bootstrap: the timer waits 30 s, the status is TIMEOUT
    and the error is transient (UNAVAILABLE), said in the entry's error state."""
    config = load_bootstrap(
        bootstrap(["fake:1"], server_features=["resource_timer_is_transient_failure"])
    )
    seen: list[Any] = []
    async with XdsClient(bootstrap=config, transport=fake, clock=clock, options=OPTIONS) as c:
        c.add_watcher(CLUSTER, "slow", CallbackWatcher(seen.append))
        await (await fake.stream()).request()
        clock.advance(29.0)
        await idle()
        assert c.resource_state(CLUSTER, "slow").status is ResourceStatus.REQUESTED  # type: ignore[union-attr]
        clock.advance(1.0)
        await idle()
        entry = c.csds().generic_xds_configs[0]
    assert Status.Name(entry.client_status) == "TIMEOUT"
    assert entry.error_state.details.startswith("timeout obtaining resource from the xDS server")
    assert entry.error_state.version_info == ""
    assert not entry.HasField("xds_config")
    assert [type(e) for e in seen] == [DataError]  # nothing cached: the resource has failed
    assert isinstance(seen[0].error, TransportError)
    assert seen[0].error.code == "UNAVAILABLE"


async def test_a_deletion_ignored_keeps_the_resource_and_says_how_it_was_deleted(
    fake: FakeTransport, clock: FakeClock
) -> None:
    """ignore_resource_deletion (gRFC A53/A88): DOES_NOT_EXIST with the resource still there,
    and an error state naming the deletion and the version that made it."""
    config = load_bootstrap(bootstrap(["fake:1"], server_features=["ignore_resource_deletion"]))
    async with XdsClient(bootstrap=config, transport=fake, clock=clock, options=OPTIONS) as c:
        for name in ("kept", "other"):
            c.add_watcher(CLUSTER, name, CallbackWatcher(lambda event: None))
        stream = await fake.stream()
        await stream.request()
        stream.respond(
            sotw_response(CDS, [cluster("kept"), cluster("other")], version="1", nonce="a")
        )
        await idle()
        clock.advance(1.0)
        stream.respond(sotw_response(CDS, [cluster("other")], version="2", nonce="b"))
        await idle()
        stream.respond(sotw_response(CDS, [cluster("other")], version="3", nonce="c"))
        await idle()
        entry = next(x for x in c.csds().generic_xds_configs if x.name == "kept")
    assert Status.Name(entry.client_status) == "DOES_NOT_EXIST"
    assert entry.xds_config.value == cluster("kept").SerializeToString()  # still in use
    assert entry.version_info == "1"
    assert entry.HasField("last_updated")
    assert entry.error_state.details == (
        "does not exist: deleted by the server in version 2; "
        "the cached value is kept (ignore_resource_deletion)"
    )
    assert entry.error_state.version_info == "2"  # the deleting version, not a later one
    assert entry.error_state.HasField("last_update_attempt")


async def test_the_dump_round_trips_through_json_and_can_leave_resources_out(
    fake: FakeTransport, clock: FakeClock
) -> None:
    async with XdsClient("fake:1", node_id="n", transport=fake, clock=clock, options=OPTIONS) as c:
        c.add_watcher(CLUSTER, "a", CallbackWatcher(lambda event: None))
        stream = await fake.stream()
        await stream.request()
        stream.send([cluster("a")])
        await idle()
        parsed = json_format.Parse(c.csds_json(), csds_pb2.ClientConfig())
        assert parsed == c.csds()
        slim = c.csds(include_resources=False)
    assert not slim.generic_xds_configs[0].HasField("xds_config")
    assert slim.generic_xds_configs[0].client_status == Status.Value("ACKED")


async def test_the_csds_service_answers_fetch_and_stream_for_several_clients() -> None:
    async with ControlPlane() as cp:
        cp.set(cluster("a"))
        async with (
            XdsClient(cp.address, node_id="one") as first,
            XdsClient(cp.address, node_id="two") as second,
        ):
            for client in (first, second):
                client.add_watcher(CLUSTER, "a", CallbackWatcher(lambda event: None))
            server = grpc.aio.server()
            add_csds_service(server, {"xds:///one": first, "xds:///two": second})
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                    fetch = channel.unary_unary(
                        "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus",
                        request_serializer=csds_pb2.ClientStatusRequest.SerializeToString,
                        response_deserializer=csds_pb2.ClientStatusResponse.FromString,
                    )
                    stream = channel.stream_stream(
                        "/envoy.service.status.v3.ClientStatusDiscoveryService/StreamClientStatus",
                        request_serializer=csds_pb2.ClientStatusRequest.SerializeToString,
                        response_deserializer=csds_pb2.ClientStatusResponse.FromString,
                    )

                    async def both_acked() -> Any:
                        fetched = await fetch(csds_pb2.ClientStatusRequest(), timeout=5)
                        statuses = [
                            x.client_status
                            for cfg in fetched.config
                            for x in cfg.generic_xds_configs
                        ]
                        return fetched if statuses == [Status.Value("ACKED")] * 2 else None

                    fetched = await eventually(both_acked, what="both clients' cluster ACKED")
                    call = stream()
                    await call.write(csds_pb2.ClientStatusRequest())
                    streamed = await call.read()
                    await call.done_writing()
            finally:
                await server.stop(None)
    assert [cfg.node.id for cfg in fetched.config] == ["one", "two"]
    assert [cfg.client_scope for cfg in fetched.config] == ["xds:///one", "xds:///two"]
    assert streamed == fetched
