"""Locality weights against grpcio's C-core: the same shares within statistical bounds.

One round-robin Cluster with two localities of weights 1 and 3, one real backend each; grpcio's
xDS client makes 600 RPCs, of which the 400 after both backends first answered count (before,
while a connection is still coming up, every call goes to the other locality); our
`child_policy_for` picks 400 times with a seeded source. Both must give the heavier locality
3/4 of the calls within four standard deviations (±0.087 for 400 calls).
"""

from __future__ import annotations

import random

from xdsclient.lb import ConnectivityState, PickRequest, child_policy_for, key_of
from xdsclient.resources import ClusterLoadAssignmentView, ClusterView
from xdsclient.testing import builders

from .differential_pickers import backends, grpc_picks

LISTENER = "weights"
CLUSTER = "weights-cluster"


async def test_locality_weights_share_calls_as_grpc_does():
    """Localities of weight 1 and 3: grpcio and our weighted target both send 3/4 to the
    heavier one, within statistical bounds."""
    async with backends(2) as ports:
        assignment = builders.cluster_load_assignment(
            CLUSTER,
            [
                builders.LocalitySpec(endpoints=[("127.0.0.1", ports[0])], zone="light", weight=1),
                builders.LocalitySpec(endpoints=[("127.0.0.1", ports[1])], zone="heavy", weight=3),
            ],
        )
        cluster = builders.cluster(CLUSTER)
        messages = [
            builders.api_listener(LISTENER),
            builders.route_configuration(f"{LISTENER}-routes", CLUSTER),
            cluster,
            assignment,
        ]
        picks = await grpc_picks(messages, LISTENER, [{}] * 600)
    assert set(ports) <= set(picks), picks
    up = 1 + max(picks.index(port) for port in ports)  # both READY from here on
    theirs = picks[up : up + 400]
    assert len(theirs) == 400, up
    child = child_policy_for(ClusterView.from_proto(cluster).lb_policy, cluster=CLUSTER)
    view = ClusterLoadAssignmentView.from_proto(assignment)
    child.update(view.priorities[0], 0.0)
    for endpoint in view.healthy_endpoints():
        child.set_endpoint_state(key_of(endpoint), ConnectivityState.READY, 0.0)
    rand = random.Random(25)
    ours = [child.pick(PickRequest(), rand, 0.0).endpoint.port for _ in range(400)]  # type: ignore[union-attr]
    for picks in (theirs, ours):
        share = picks.count(ports[1]) / len(picks)
        assert abs(share - 0.75) < 0.087, (share, picks is ours)
