"""The gRPC bootstrap format: sources, fields, and errors that name the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from xdsclient import BootstrapError, ChannelCredentials, Locality, load_bootstrap

FULL = {
    "xds_servers": [
        {
            "server_uri": "xds.example.com:443",
            "channel_creds": [
                {"type": "google_default"},
                {"type": "tls", "config": {"ca_certificate_file": "/ca.pem"}},
            ],
            "server_features": ["xds_v3", "ignore_resource_deletion"],
        }
    ],
    "node": {
        "id": "projects/1/nodes/abc",
        "cluster": "cluster-x",
        "metadata": {"INSTANCE_IP": "10.0.0.1"},
        "locality": {"zone": "us-central1-a"},
    },
    "certificate_providers": {
        "p": {"plugin_name": "file_watcher", "config": {"ca_certificate_file": "/ca.pem"}}
    },
    "unknown_field": 1,
}


def test_a_full_bootstrap_is_read_and_unknown_fields_are_ignored() -> None:
    config = load_bootstrap(FULL)
    (server,) = config.servers
    assert server.uri == "xds.example.com:443"
    assert server.channel_credentials == ChannelCredentials(
        type="tls", ca_certificate_file="/ca.pem"
    )
    assert server.ignore_resource_deletion
    assert config.node.id == "projects/1/nodes/abc"
    assert config.node.locality == Locality(zone="us-central1-a")
    node = config.node.to_proto()
    assert node.metadata["INSTANCE_IP"] == "10.0.0.1"
    assert list(node.client_features) == [
        "xds.config.resource-in-sotw",
        "xds.config.supports-resource-ttl",
        "envoy.lb.does_not_support_overprovisioning",
    ]


def test_the_environment_is_read_file_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inline = {"xds_servers": [{"server_uri": "inline:1", "channel_creds": [{"type": "insecure"}]}]}
    monkeypatch.setenv("GRPC_XDS_BOOTSTRAP_CONFIG", json.dumps(inline))
    assert load_bootstrap().servers[0].uri == "inline:1"
    path = tmp_path / "bootstrap.json"
    path.write_text(json.dumps(FULL))
    monkeypatch.setenv("GRPC_XDS_BOOTSTRAP", str(path))
    assert load_bootstrap().servers[0].uri == "xds.example.com:443"
    assert load_bootstrap(path).servers[0].uri == "xds.example.com:443"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "xds_servers: required"),
        ({"xds_servers": {}}, "xds_servers: must be an array, got dict"),
        ({"xds_servers": []}, "xds_servers: must list at least one server"),
        ({"xds_servers": [{"channel_creds": []}]}, r"xds_servers\[0\].server_uri: required"),
        (
            {"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "google_default"}]}]},
            "no supported type",
        ),
        (
            {"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": 3}]}]},
            r"channel_creds\[0\].type: must be a string",
        ),
        (
            {
                "xds_servers": [
                    {
                        "server_uri": "a:1",
                        "channel_creds": [{"type": "insecure"}],
                        "server_features": [1],
                    }
                ]
            },
            r"server_features\[0\]: must be a string",
        ),
        (
            {
                "xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "insecure"}]}],
                "node": {"id": 5},
            },
            "node.id: must be a string, got int",
        ),
    ],
)
def test_invalid_bootstraps_name_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(BootstrapError, match=message):
        load_bootstrap(data)


def test_missing_or_broken_sources_are_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRPC_XDS_BOOTSTRAP", raising=False)
    monkeypatch.delenv("GRPC_XDS_BOOTSTRAP_CONFIG", raising=False)
    with pytest.raises(BootstrapError, match="no bootstrap: set GRPC_XDS_BOOTSTRAP"):
        load_bootstrap()
    with pytest.raises(BootstrapError, match="cannot read bootstrap file"):
        load_bootstrap(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(BootstrapError, match="not valid JSON"):
        load_bootstrap(broken)
