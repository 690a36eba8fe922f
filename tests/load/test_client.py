"""One simulated client's walk against the test control plane: what it subscribes follows the
resources it holds, updates included."""

from __future__ import annotations

from tests.load.conftest import NAMES, assignments
from xdsclient.load import Push, Scenario, run
from xdsclient.resources import CLUSTER, ENDPOINT
from xdsclient.testing.builders import cluster, cluster_load_assignment, route_configuration


def _last_names(cp, stream: int, type_url: str) -> set[str]:
    requests = [r for r in cp.requests if r.stream == stream and r.type_url == type_url]
    return set(requests[-1].message.resource_names)


async def test_an_update_that_names_other_clusters_moves_every_clients_subscriptions(cp):
    """A new route configuration naming c0 and c9 (no longer c1, c2) makes each client
    subscribe to c9's cluster and assignment and drop c1's and c2's."""

    def push() -> None:
        cp.set_all([cluster("c9"), cluster_load_assignment("c9", [("10.0.9.1", 8080)]),
                    route_configuration("routes", {"/c0/": "c0", "/c9/": "c9"})])  # fmt: skip

    scenario = Scenario(server=cp.address, listener="l", clients=5, duration=1.0,
                        push=Push(at=0.5))  # fmt: skip
    result = await run(scenario, push=push)
    assert result.complete == 5
    assert result.nacks == 0
    streams = {r.stream for r in cp.requests}
    assert len(streams) == 5
    for stream in streams:
        assert _last_names(cp, stream, CLUSTER.type_url) == {"c0", "c9"}
        assert _last_names(cp, stream, ENDPOINT.type_url) == {"c0", "c9"}


async def test_an_update_of_every_assignment_keeps_the_subscriptions_and_is_applied(cp):
    """New versions of the assignments change nothing the walk reads: each client applies
    them (push to applied counts them) and requests no other names."""
    scenario = Scenario(server=cp.address, listener="l", clients=5, duration=1.0,
                        push=Push(at=0.5))  # fmt: skip
    result = await run(scenario, push=lambda: cp.set_all(assignments(9090)))
    assert result.push_to_applied.count == 5 * len(NAMES)
    for stream in {r.stream for r in cp.requests}:
        assert _last_names(cp, stream, CLUSTER.type_url) == set(NAMES)
        assert _last_names(cp, stream, ENDPOINT.type_url) == set(NAMES)
