"""``--node-id``, ``--node-cluster``, ``--node-metadata KEY=VALUE`` and ``--locality``: the node
a CLI client presents, over ``--server`` and over a bootstrap's node, and their usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format

from tests.cli.helpers import cli, one_error_line
from xdsclient.testing import ControlPlane


def first_node(cp: ControlPlane) -> dict[str, object]:
    return json_format.MessageToDict(cp.requests[0].message.node)


async def test_the_node_options_reach_the_server_in_the_first_request(cp: ControlPlane) -> None:
    """Each node option given on the command line is in the node the server receives."""
    status, _, _ = await cli(
        "watch", "cluster", "c", "--server", cp.address, "--count", "1",
        "--node-id", "me", "--node-cluster", "shop", "--node-metadata", "team=payments",
        "--node-metadata", "canary=", "--locality", "eu-west/eu-west-1a/rack7",
    )  # fmt: skip
    assert status == 0
    node = first_node(cp)
    assert node["id"] == "me"
    assert node["cluster"] == "shop"
    assert node["metadata"] == {"team": "payments", "canary": ""}
    assert node["locality"] == {"region": "eu-west", "zone": "eu-west-1a", "subZone": "rack7"}


async def test_a_locality_may_name_only_a_region(cp: ControlPlane) -> None:
    """``--locality REGION`` sets the region and leaves zone and sub-zone empty."""
    status, _, _ = await cli("watch", "cluster", "c", "--server", cp.address, "--count", "1",
                             "--locality", "us")  # fmt: skip
    assert status == 0
    assert first_node(cp)["locality"] == {"region": "us"}
    assert first_node(cp)["id"] == "xdsclient-cli"


async def test_node_options_replace_the_bootstraps_fields_and_merge_its_metadata(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """With a bootstrap, a node option replaces that field; metadata is merged key by key."""
    bootstrap = tmp_path / "bootstrap.json"
    bootstrap.write_text(json.dumps({
        "xds_servers": [{"server_uri": cp.address, "channel_creds": [{"type": "insecure"}]}],
        "node": {"id": "from-file", "cluster": "file-cluster",
                 "metadata": {"team": "file", "keep": "yes"}},
    }))  # fmt: skip
    status, _, _ = await cli("watch", "cluster", "c", "--bootstrap", str(bootstrap),
                             "--count", "1", "--node-metadata", "team=cli")  # fmt: skip
    assert status == 0
    node = first_node(cp)
    assert node["id"] == "from-file"
    assert node["cluster"] == "file-cluster"
    assert node["metadata"] == {"team": "cli", "keep": "yes"}


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--node-metadata", "novalue"], "argument --node-metadata: 'novalue': expected KEY=VALUE"),
        (["--node-metadata", "=v"], "argument --node-metadata: '=v': expected KEY=VALUE"),
        (["--node-metadata", "a=1", "--node-metadata", "a=2"], "--node-metadata: 'a' given twice"),
        (["--locality", "a/b/c/d"], "'a/b/c/d': expected REGION[/ZONE[/SUBZONE]]"),
        (["--locality", "a//c"], "'a//c': expected REGION[/ZONE[/SUBZONE]]"),
    ],
)
async def test_a_malformed_node_option_is_a_one_line_usage_error(
    option: list[str], message: str
) -> None:
    """A node option that cannot be read exits 2 with one line naming it, before connecting."""
    status, _, err = await cli("watch", "cluster", "c", "--server", "127.0.0.1:1", *option)
    assert status == 2
    assert message in one_error_line(err)
