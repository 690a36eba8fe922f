"""The client decodes clusters with its bootstrap's certificate provider instances (gRFC A29,
as gRPC does), whichever way it is built."""

from __future__ import annotations

from typing import Any

from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from tests.builders import cluster
from tests.client.conftest import next_event
from xdsclient import DataError, ResourceChanged, XdsClient
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane, bootstrap


def _naming(name: str, instance: str) -> Any:
    message = cluster(name)
    context = tls_pb2.UpstreamTlsContext()
    context.common_tls_context.validation_context.ca_certificate_provider_instance.instance_name = (
        instance
    )
    message.transport_socket.name = "envoy.transport_sockets.tls"
    message.transport_socket.typed_config.Pack(context)
    return message


async def test_passing_the_built_in_cluster_type_keeps_the_bootstraps_check(
    control_plane: ControlPlane,
) -> None:
    """``resource_types=[CLUSTER]`` names the built-in type: clusters are still checked (here
    against no instances, a client given only a server address)."""
    control_plane.set(_naming("c", "nope"))
    async with (
        XdsClient(control_plane.address, node_id="n", resource_types=[CLUSTER]) as client,
        client.watch(CLUSTER, "c") as events,
    ):
        event = await next_event(events)
    assert isinstance(event, DataError)
    assert "unrecognized certificate provider instance name: nope" in str(event.error)


async def test_an_instance_the_bootstrap_defines_is_accepted(
    control_plane: ControlPlane,
) -> None:
    """A cluster naming an instance of the bootstrap's ``certificate_providers`` is ACKed."""
    config = bootstrap([control_plane], node_id="n")
    config["certificate_providers"] = {
        "roots": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "ca.pem"}}
    }
    control_plane.set(_naming("c", "roots"))
    async with XdsClient(bootstrap=config) as client, client.watch(CLUSTER, "c") as events:
        event = await next_event(events)
    assert isinstance(event, ResourceChanged)
    assert event.value.upstream_tls.ca_provider_instance == "roots"
