"""Our CSDS dump against C-core's, field by field, for the same control-plane state.

grpcio's built-in xDS client (C-core, in a subprocess) and ours watch the same listener on the
same control plane at the same time. First: a valid chain, a cluster both NACK, a cluster never
served. Then: a NACKed update of a cached cluster and a cluster deleted from the CDS state.
After each, once both clients answered, their CSDS entries must agree on every field but the
node's user agent, the timestamps and the wording of error details. Then gRFC A88's statuses:
a fired resource timer (DOES_NOT_EXIST; TIMEOUT on a server with the transient-timer feature,
C-core's data error handling on) and a deletion ignored under ``ignore_resource_deletion`` (the
resource kept, an error state with the deleting version).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from envoy.admin.v3 import config_dump_shared_pb2 as shared

from tests.builders import cluster, endpoints, listener, routes
from tests.csds.grpc_side import grpc_client
from tests.helpers import eventually
from xdsclient import ClientOptions, XdsClient, load_bootstrap
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing import ControlPlane, bootstrap

NODE = "csds-parity"


def _entries(config: Any) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Per (type, name): every field both clients should agree on."""
    return {
        (item.type_url.rsplit(".", 1)[-1], item.name): (
            shared.ClientResourceStatus.Name(item.client_status),
            item.version_info,
            item.xds_config.SerializeToString(deterministic=True),
            item.HasField("last_updated"),
            item.HasField("error_state"),
            item.error_state.version_info,
            bool(item.error_state.details),
            item.error_state.HasField("last_update_attempt"),
        )
        for item in config.generic_xds_configs
    }


def _invalid(name: str) -> Any:
    message = cluster(name)
    message.eds_cluster_config.eds_config.path_config_source.path = "/x"  # both NACK it
    return message


def _assignment(name: str) -> Any:
    message = endpoints(name)
    message.endpoints[0].locality.region = "r"  # C-core NACKs an assignment without one
    return message


async def _nacked(cp: ControlPlane, stream: int, count: int) -> None:
    """Until ``stream`` sent ``count`` NACKs in all."""

    def nacks() -> int:
        return sum(r.stream == stream and r.message.HasField("error_detail") for r in cp.requests)

    await cp.wait_for_request(lambda r: nacks() >= count, timeout=20)


async def _acked(cp: ControlPlane, stream: int, type_url: str, version: str) -> None:
    """Until ``stream`` ACKed ``version`` of ``type_url``."""
    await cp.wait_for_request(
        lambda r: (
            r.stream == stream
            and r.type_url == type_url
            and r.message.version_info == version
            and not r.message.HasField("error_detail")
        ),
        timeout=20,
    )


async def test_our_csds_entries_match_c_cores_field_by_field() -> None:
    async with ControlPlane() as cp:
        cp.set_all([listener("l"), routes("c", "cbad", "cmissing", "cgone"), cluster("c")])
        cp.set_all([_assignment("c"), _invalid("cbad"), cluster("cgone"), _assignment("cgone")])
        async with grpc_client(cp.address, NODE, ["xds:///l"]) as fetch:
            theirs_stream = (await cp.wait_for_request(lambda r: True, timeout=20)).stream
            async with XdsClient(cp.address, node_id=NODE) as client, client.watch_config("l"):
                ours_stream = (
                    await cp.wait_for_request(lambda r: r.stream != theirs_stream, timeout=20)
                ).stream
                streams = (theirs_stream, ours_stream)
                eds_version = cp.version(ENDPOINT.type_url, "cgone") or ""
                for stream in streams:
                    await _nacked(cp, stream, 1)
                    await _acked(cp, stream, ENDPOINT.type_url, eds_version)
                theirs = (await fetch()).config
                assert len(theirs) == 1
                assert theirs[0].client_scope == "xds:/l"
                assert client.csds().node.id == theirs[0].node.id == NODE
                assert _entries(client.csds()) == _entries(theirs[0])
                # A deletion from the CDS state, then a NACK with a cached value.
                cp.remove(CLUSTER.type_url, "cgone")
                for stream in streams:
                    await _nacked(cp, stream, 2)  # the CDS state still holds cbad
                cp.set(_invalid("c"))
                for stream in streams:
                    await _nacked(cp, stream, 3)
                theirs = (await fetch()).config
                ours = _entries(client.csds())
    assert ours == _entries(theirs[0])
    assert ours["Cluster", "c"][0] == "NACKED"
    assert ours["Cluster", "cgone"][0] == "DOES_NOT_EXIST"


async def _until_settled(
    fetch: Callable[[], Awaitable[Any]], ours: XdsClient, expected: dict[str, str]
) -> tuple[Any, Any]:
    """Both dumps once every cluster named in ``expected`` has that status in each."""

    def done(config: Any) -> bool:
        statuses = {
            x.name: shared.ClientResourceStatus.Name(x.client_status)
            for x in config.generic_xds_configs
            if x.type_url == CLUSTER.type_url
        }
        return all(statuses.get(name) == status for name, status in expected.items())

    async def both() -> tuple[Any, Any] | None:
        theirs = (await fetch()).config[0]
        mine = ours.csds()
        return (theirs, mine) if done(theirs) and done(mine) else None

    return await eventually(both, 20, what=f"both dumps to show {expected}", interval=0.05)


async def test_an_ignored_deletion_matches_c_cores() -> None:
    """ignore_resource_deletion: both keep the deleted cluster, in DOES_NOT_EXIST, with an error
    state carrying the deleting version (gRFC A88)."""
    features = ["ignore_resource_deletion"]
    async with ControlPlane() as cp:
        cp.set_all([listener("l"), routes("c", "cgone"), cluster("c"), cluster("cgone")])
        cp.set_all([_assignment("c"), _assignment("cgone")])
        async with grpc_client(cp.address, NODE, ["xds:///l"], server_features=features) as fetch:
            config = load_bootstrap(bootstrap([cp.address], node_id=NODE, server_features=features))
            async with XdsClient(bootstrap=config) as client, client.watch_config("l"):
                await _until_settled(fetch, client, {"cgone": "ACKED"})
                cp.remove(CLUSTER.type_url, "cgone")
                theirs, ours = await _until_settled(fetch, client, {"cgone": "DOES_NOT_EXIST"})
    assert _entries(ours) == _entries(theirs)
    gone = next(x for x in ours.generic_xds_configs if x.name == "cgone")
    assert gone.HasField("xds_config")  # kept
    assert gone.error_state.version_info  # the version that deleted it


async def test_the_resource_timer_statuses_match_c_cores() -> None:
    """The timer fired: DOES_NOT_EXIST by default, TIMEOUT on a server with the transient-timer
    feature (C-core with its gRFC A88 data error handling on). C-core's timer is 15 s and cannot
    be shortened from Python, so this test takes that long; both variants share the wait."""
    transient = ["resource_timer_is_transient_error"]  # the spelling C-core's bootstrap reads
    options = ClientOptions(does_not_exist_timeout=0.5, transient_resource_timeout=0.5)
    async with ControlPlane() as cp:
        cp.set_all([listener("l"), routes("c", "cmissing"), cluster("c"), _assignment("c")])
        async with (
            grpc_client(cp.address, NODE, ["xds:///l"]) as fetch_default,
            grpc_client(
                cp.address, NODE, ["xds:///l"], server_features=transient, data_error_handling=True
            ) as fetch_transient,
            XdsClient(cp.address, node_id=NODE, options=options) as ours_default,
            XdsClient(
                bootstrap=load_bootstrap(
                    bootstrap([cp.address], node_id=NODE, server_features=transient)
                ),
                options=options,
            ) as ours_transient,
            ours_default.watch_config("l"),
            ours_transient.watch_config("l"),
        ):
            default, transient_ = await asyncio.gather(
                _until_settled(fetch_default, ours_default, {"cmissing": "DOES_NOT_EXIST"}),
                _until_settled(fetch_transient, ours_transient, {"cmissing": "TIMEOUT"}),
            )
    for theirs, ours in (default, transient_):
        assert _entries(ours) == _entries(theirs)
