"""A control plane serving a listener ``l`` whose routes reach ``CLUSTERS`` EDS clusters, each
with an assignment: the shape the load tests' simulated clients walk."""

from __future__ import annotations

from typing import Any

import pytest

from xdsclient.testing.builders import (
    api_listener,
    cluster,
    cluster_load_assignment,
    route_configuration,
)

CLUSTERS = 3
NAMES = [f"c{k}" for k in range(CLUSTERS)]


def config(port: int = 8080) -> list[Any]:
    """The listener, its routes, the clusters and their assignments (``port`` varies them)."""
    routes = route_configuration("routes", {f"/{name}/": name for name in NAMES})
    resources: list[Any] = [api_listener("l", route_config_name="routes"), routes]
    for index, name in enumerate(NAMES):
        resources.append(cluster(name))
        resources.append(cluster_load_assignment(name, [(f"10.0.0.{index + 1}", port)]))
    return resources


def assignments(port: int) -> list[Any]:
    """Every assignment again, with a new port (an update of each)."""
    return [cluster_load_assignment(name, [(f"10.0.0.{i + 1}", port)])
            for i, name in enumerate(NAMES)]  # fmt: skip


@pytest.fixture
def cp_resources() -> list[Any]:
    """What ``cp`` serves: `config`."""
    return config()
