"""`XdsTransport` secures each cluster as its ``UpstreamTlsContext`` says, with the bootstrap's
certificate providers: a backend whose certificate the CA signed and whose SAN matches is
reached over TLS (SNI as configured); a wrong SAN fails the request 503 and never reaches it.
And HTTP/2 (prior knowledge in plaintext) when asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.type.matcher.v3 import string_pb2

from xdsclient import XdsClient
from xdsclient.httpx import ERROR_HEADER, XdsTransport
from xdsclient.testing import ControlPlane, bootstrap, http_backends

from .resources import LISTENER, cluster_of, resources, route_config, to, vhost
from .tls_certs import authority, dns

pytestmark = pytest.mark.timeout(30)


def _secured(cluster: Any, *, san: str) -> Any:
    """``cluster`` over TLS: the ``roots`` provider's CA, SNI ``backend.test``, one exact SAN."""
    context = tls_pb2.UpstreamTlsContext(sni="backend.test")
    validation = context.common_tls_context.validation_context
    validation.ca_certificate_provider_instance.instance_name = "roots"
    validation.match_typed_subject_alt_names.add(
        san_type=common_pb2.SubjectAltNameMatcher.DNS, matcher=string_pb2.StringMatcher(exact=san)
    )
    cluster.transport_socket.name = "envoy.transport_sockets.tls"
    cluster.transport_socket.typed_config.Pack(context)
    return cluster


@pytest.mark.parametrize(("san", "reached"), [("backend.test", True), ("other.test", False)])
async def test_a_tls_cluster_is_reached_only_when_its_san_matches(
    cp: ControlPlane, tmp_path: Path, san: str, reached: bool
) -> None:
    """The backend's certificate names ``backend.test``: a cluster asking for that SAN gets
    its answer over TLS with SNI ``backend.test``; one asking for another SAN answers 503
    naming the mismatch, and the backend serves nothing."""
    ca = authority(tmp_path)
    server = ca.issue(tmp_path, "server", [dns("backend.test")])
    config = bootstrap([cp], node_id="tls")
    config["certificate_providers"] = {
        "roots": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": str(ca.cert)}}
    }
    async with (
        http_backends(names=("a",), certfile=server.cert, keyfile=server.key) as (a,),
        XdsClient(bootstrap=config) as client,
    ):
        cluster, assignment = cluster_of("c", [a])
        routes = route_config(vhost("v", ["*"], to("c")))
        cp.set_all(resources(routes, [_secured(cluster, san=san), assignment]))
        async with (
            XdsTransport(LISTENER, client=client) as transport,
            httpx.AsyncClient(transport=transport, timeout=10) as http,
        ):
            r = await http.get("http://svc/secure")
    if reached:
        assert (r.status_code, r.json()["backend"]) == (200, "a")
        assert a.server_names[-1] == "backend.test"
    else:
        assert r.status_code == 503
        assert "other.test" in r.headers[ERROR_HEADER]
        assert a.total == 0


async def test_http2_is_spoken_to_the_endpoints_when_asked(cp: ControlPlane) -> None:
    """``http1=False, http2=True``: requests reach the backend over HTTP/2 (prior knowledge)."""
    async with (
        http_backends(names=("a",)) as (a,),
        XdsClient(cp.address, node_id="h2") as client,
    ):
        cp.set_all(resources(route_config(vhost("v", ["*"], to("c"))), cluster_of("c", [a])))
        async with (
            XdsTransport(LISTENER, client=client, http1=False, http2=True) as transport,
            httpx.AsyncClient(transport=transport, timeout=10) as http,
        ):
            r = await http.get("http://svc/h2")
    assert r.json()["http_version"] == "2"
    assert a.requests[0].http_version == "2"
