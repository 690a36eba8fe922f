"""What the command line shows an operator names things as the operator knows them: never the
internal ``#old`` authority key of plain (non-xdstp) resource names."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.helpers import cli, closed_port
from xdsclient.testing import ControlPlane


async def test_a_fallback_of_plain_names_is_logged_without_the_internal_authority_key(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """Falling back to the next server for plain names says so in words, not "authority #old"."""
    down = f"127.0.0.1:{closed_port()}"
    bootstrap = tmp_path / "bootstrap.json"
    bootstrap.write_text(json.dumps({
        "xds_servers": [{"server_uri": uri, "channel_creds": [{"type": "insecure"}]}
                        for uri in (down, cp.address)],
        "node": {"id": "n"},
    }))  # fmt: skip
    status, out, err = await cli("watch", "cluster", "c", "--bootstrap", str(bootstrap),
                                 "--count", "1")  # fmt: skip
    assert status == 0, err
    assert out.startswith("changed  Cluster c")
    assert "#old" not in err
    line = f"xDS server {down} unreachable with resources missing: falling back to {cp.address}"
    assert f"{line} for plain (non-xdstp) names" in err.splitlines()
