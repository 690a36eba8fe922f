"""``validate`` checks clusters against the certificate provider instances of the simulated
clients' bootstrap, as `XdsClient` does (gRFC A29): a cluster naming an instance the bootstrap
lacks is NACKed, one naming an instance it defines is not; clients given only a server have no
instances, as ``XdsClient(server)`` has none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from tests.load.conftest import config
from xdsclient import ResourceDecodeError
from xdsclient.load import Scenario, run
from xdsclient.load._lean import LISTENER, SharedDecoder
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane
from xdsclient.testing.builders import cluster


def _naming(instance: str) -> Any:
    message = cluster("c0")
    context = tls_pb2.UpstreamTlsContext()
    context.common_tls_context.validation_context.ca_certificate_provider_instance.instance_name = (
        instance
    )
    message.transport_socket.name = "envoy.transport_sockets.tls"
    message.transport_socket.typed_config.Pack(context)
    return message


def test_the_shared_decoder_checks_clusters_against_the_bootstraps_instances() -> None:
    """Under ``validate``, a cluster naming an unknown instance is rejected in C-core's words;
    a known one passes; without ``validate`` nothing is checked."""
    data = _naming("nope").SerializeToString()
    with pytest.raises(ResourceDecodeError, match="unrecognized certificate provider instance"):
        SharedDecoder(validate=True, certificate_providers={"roots"}).decoder(CLUSTER.type_url)(
            data
        )
    known = _naming("roots").SerializeToString()
    checked = SharedDecoder(validate=True, certificate_providers={"roots"})
    assert checked.decoder(CLUSTER.type_url)(known)[0] == "c0"
    assert SharedDecoder().decoder(CLUSTER.type_url)(data)[0] == "c0"


def test_the_shared_decoder_checks_server_listeners_against_the_bootstraps_instances() -> None:
    """Under ``validate``, a server Listener whose chain's TLS names an unknown instance is
    rejected as a client of that bootstrap rejects it; a known one passes."""
    from tests.resources.test_listener_providers import _tls_server

    decoder = SharedDecoder(validate=True, certificate_providers={"identity"}).decoder(LISTENER)
    with pytest.raises(ResourceDecodeError, match="unrecognized certificate provider instance"):
        decoder(_tls_server("nope").SerializeToString())
    assert decoder(_tls_server("identity").SerializeToString())[0] == "l"


@pytest.fixture
def cp_resources() -> list[Any]:
    """The load tests' configuration, its cluster ``c0`` taking its CA from ``roots``."""
    return [_naming("roots") if getattr(r, "name", "") == "c0" else r for r in config()]


@pytest.mark.timeout(30)
async def test_a_run_validates_as_clients_of_its_bootstrap(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """From a bootstrap defining ``roots``, nothing is NACKed; from a bare server address (no
    instances), every client NACKs the cluster naming it."""
    path = tmp_path / "bootstrap.json"
    path.write_text(
        json.dumps(
            {
                "xds_servers": [
                    {"server_uri": cp.address, "channel_creds": [{"type": "insecure"}]}
                ],
                "node": {"id": "load"},
                "certificate_providers": {
                    "roots": {
                        "plugin_name": "file_watcher",
                        "config": {"ca_certificate_file": "ca.pem"},
                    }
                },
            }
        )
    )
    common: dict[str, Any] = {"listener": "l", "clients": 2, "duration": 1.0, "validate": True}
    with_roots = await run(Scenario(bootstrap=str(path), **common))
    assert (with_roots.complete, with_roots.nacks) == (2, 0)
    bare = await run(Scenario(server=cp.address, **common))
    assert bare.nacks >= 2
    details = {r.message.error_detail.message for r in cp.nacks(CLUSTER.type_url)}
    assert details == {
        'Cluster "c0": transport_socket.typed_config.common_tls_context.validation_context.'
        "ca_certificate_provider_instance.instance_name: unrecognized certificate provider "
        "instance name: roots"
    }
