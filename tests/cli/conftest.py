"""The control plane the CLI tests point the command line at: a listener ``l`` whose routes
send everything to cluster ``c`` (with endpoints), a second cluster ``d``, and a cluster ``bad``
that gRPC's rules reject (NACKed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.builders import cluster, endpoints, listener, routes
from xdsclient.testing import ControlPlane


@pytest.fixture
async def cp() -> AsyncIterator[ControlPlane]:
    async with ControlPlane() as control_plane:
        bad = cluster("bad")
        bad.eds_cluster_config.eds_config.path_config_source.path = "/x"  # gRPC rejects it
        control_plane.set_all([listener("l"), routes("c"), cluster("c"), endpoints("c"),
                               cluster("d"), bad])  # fmt: skip
        yield control_plane
