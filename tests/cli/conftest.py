"""The control plane the CLI tests point the command line at: a listener ``l`` whose routes
send everything to cluster ``c`` (with endpoints), a second cluster ``d``, and a cluster ``bad``
that gRPC's rules reject (NACKed)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import cluster, endpoints, listener, routes


@pytest.fixture
def cp_resources() -> list[Any]:
    """What ``cp`` serves: the resources above."""
    bad = cluster("bad")
    bad.eds_cluster_config.eds_config.path_config_source.path = "/x"  # gRPC rejects it
    return [listener("l"), routes("c"), cluster("c"), endpoints("c"), cluster("d"), bad]
