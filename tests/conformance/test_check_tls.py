"""The checker validates a server's clusters as a client without a bootstrap: certificate
provider instance names are not checked (whether a client defines them is up to its bootstrap,
not the server), while the rest of a TLS context still is."""

from __future__ import annotations

from typing import Any

from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from tests.builders import cluster
from xdsclient.conformance import check
from xdsclient.testing import ControlPlane, demo_resources

FAST: dict[str, Any] = {"quiet": 0.3, "timeout": 1.5}


def _secured(context: Any) -> Any:
    message = cluster("web")
    message.transport_socket.name = "envoy.transport_sockets.tls"
    message.transport_socket.typed_config.Pack(context)
    return message


async def test_a_cluster_naming_a_provider_instance_is_valid_and_one_without_a_ca_is_not() -> None:
    """A cluster taking its CA from an instance passes ``resources-valid``; a TLS context with
    no validation context is a finding naming the field."""
    named = tls_pb2.UpstreamTlsContext()
    named.common_tls_context.validation_context.ca_certificate_provider_instance.instance_name = (
        "any-instance"
    )
    async with ControlPlane() as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        control_plane.set(_secured(named))
        report = await check(control_plane.address, variants=["ads-sotw"], **FAST)
        control_plane.set(_secured(tls_pb2.UpstreamTlsContext()))
        broken = await check(control_plane.address, variants=["ads-sotw"], **FAST)
    assert [f for f in report.failures if f.rule.id == "resources-valid"] == []
    (failure,) = [f for f in broken.failures if f.rule.id == "resources-valid"]
    assert "transport_socket.typed_config.common_tls_context" in failure.detail
