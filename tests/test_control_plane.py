"""The test control plane's own accessors."""

from __future__ import annotations

from tests.builders import cluster
from xdsclient import XdsClient
from xdsclient.resources import CLUSTER
from xdsclient.testing import ControlPlane


async def test_resources_versions_and_the_request_log() -> None:
    async with ControlPlane() as cp:
        first = cp.set(cluster("a"))
        second = cp.set(cluster("a", timeout_s=9))
        assert int(second) > int(first)
        assert cp.version(CLUSTER.type_url, "a") == second
        assert cp.version(CLUSTER.type_url, "missing") is None
        packed = cp.resources(CLUSTER.type_url)["a"]
        assert packed.type_url == CLUSTER.type_url
        cp.remove(CLUSTER.type_url, "a")
        assert cp.resources(CLUSTER.type_url) == {}
        async with XdsClient(cp.address, node_id="n", delta=True) as client:
            watch = client.watch(CLUSTER, "a")  # kept: dropping a watch unsubscribes
            request = await cp.wait_for_request(lambda r: r.type_url == CLUSTER.type_url)
            assert request.is_delta
            assert request.stream >= 1
            watch.cancel()
