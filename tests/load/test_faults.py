"""Every fault changes what the control plane sees, in the way it says."""

from __future__ import annotations

from collections import defaultdict

import grpc

from xdsclient.load import Faults, Scenario, run
from xdsclient.resources import CLUSTER, LISTENER


def _scenario(cp, *faults: Faults, clients: int = 6, duration: float = 1.2, **more) -> Scenario:
    return Scenario(server=cp.address, listener="l", clients=clients, duration=duration,
                    faults=faults, backoff_initial=0.05, **more)  # fmt: skip


def _streams_by_node(cp) -> dict[str, list[int]]:
    streams: dict[str, list[int]] = defaultdict(list)
    for request in cp.requests:
        if request.message.HasField("node"):
            streams[request.message.node.id].append(request.stream)
    return streams


async def test_nack_every_nth_response_nacks_exactly_those(cp):
    """``nack_every=2``: every second response a client reads is NACKed, the others ACKed."""
    result = await run(_scenario(cp, Faults(nack_every=2), clients=4))
    nacks = cp.nacks()
    assert result.nacks == len(nacks) > 0
    assert all("load fault: NACK this response" in r.message.error_detail.message for r in nacks)
    per_stream = defaultdict(list)
    for request in cp.requests:
        if request.message.response_nonce:
            per_stream[request.stream].append(request.message.HasField("error_detail"))
    for answers in per_stream.values():
        assert answers[1::2] == [True] * len(answers[1::2])
        assert not any(answers[0::2])


async def test_a_nacked_resource_is_named_and_the_others_accepted(cp):
    """``nack_names``: the NACK names that cluster only; it keeps the version it had (none)."""
    result = await run(_scenario(cp, Faults(nack_names=["c1"]), clients=3))
    nacks = cp.nacks(CLUSTER.type_url)
    assert len(nacks) == result.nacks == 3
    assert all("c1" in r.message.error_detail.message for r in nacks)
    assert all("c0" not in r.message.error_detail.message for r in nacks)
    assert all(r.message.version_info == "" for r in nacks)
    assert result.complete == 0  # c1 never accepted: no complete configuration


async def test_a_fault_fraction_affects_only_that_share_of_clients(cp):
    """``fraction=0.5`` of 6 clients: 3 NACK, 3 complete."""
    result = await run(_scenario(cp, Faults(fraction=0.5, nack_names=["c1"])))
    assert len(cp.nacks()) == 3
    assert result.complete == 3


async def test_slow_acks_reach_the_server_that_much_later(cp):
    """``slow_ack``: every ACK arrives at least that long after its response was sent."""
    result = await run(_scenario(cp, Faults(slow_ack=0.2), clients=2, duration=1.5))
    sent = {(r.stream, r.nonce): r.time for r in cp.responses}
    gaps = [r.time - sent[(r.stream, r.message.response_nonce)]
            for r in cp.requests if r.message.response_nonce]  # fmt: skip
    assert gaps
    assert min(gaps) >= 0.2
    assert result.ack_latency.min >= 0.2


async def test_random_resets_open_new_streams_that_keep_their_versions(cp):
    """``reset_every``: clients reopen streams; each new stream restates the versions it had."""
    result = await run(_scenario(cp, Faults(reset_every=0.2), clients=3, duration=1.5))
    streams = _streams_by_node(cp)
    seen = sum(len(s) - 1 for s in streams.values())
    assert seen > 0
    # As the run ends, a client's last reopened stream may be cut before the server reads its
    # request, or read by the server before the client counted it: one either way per client.
    assert abs(result.reconnects - seen) <= 3
    assert result.errors == {}
    later_firsts = [r for r in cp.requests
                    if r.message.HasField("node") and r.type_url == LISTENER.type_url
                    and r.stream not in {s[0] for s in streams.values()}]  # fmt: skip
    assert later_firsts
    assert all(r.message.version_info for r in later_firsts)


async def test_a_reconnect_storm_reconnects_every_client_at_once(cp):
    """``storms=[0.8]``: each client opens its second stream within a short window."""
    clients = 10
    result = await run(_scenario(cp, Faults(storms=[0.8]), clients=clients, duration=1.5))
    streams = _streams_by_node(cp)
    assert all(len(s) == 2 for s in streams.values())
    seconds = [next(r.time for r in cp.requests if r.stream == s[1]) for s in streams.values()]
    assert max(seconds) - min(seconds) < 0.5
    assert result.reconnects == clients
    assert result.connect.count == 2 * clients  # every client dialed a new connection


async def test_a_storm_on_a_shared_connection_reopens_every_stream_on_it(cp):
    """Shared: a storm resets each client's stream (no new connection); each opens a second
    stream, restating its versions."""
    clients = 10
    result = await run(_scenario(cp, Faults(storms=[0.8]), clients=clients, duration=1.5,
                                 share_connections=True))  # fmt: skip
    streams = _streams_by_node(cp)
    assert all(len(s) == 2 for s in streams.values())
    assert result.reconnects == clients
    assert result.connect.count == 1  # the run's one dial
    seconds = {s[1] for s in streams.values()}
    restated = [r for r in cp.requests if r.stream in seconds and r.message.HasField("node")]
    assert len(restated) == clients
    assert all(r.message.version_info for r in restated)


async def test_forgetful_delta_clients_offer_no_initial_versions(cp):
    """``forgetful``: a Delta reconnect carries no ``initial_resource_versions``; without it,
    the versions held are offered."""
    for forgetful, expect_versions in ((True, False), (False, True)):
        cp.requests.clear()
        await run(_scenario(cp, Faults(storms=[0.6], forgetful=forgetful), clients=2,
                            duration=1.2, delta=True))  # fmt: skip
        streams = _streams_by_node(cp)
        second = {s[1] for s in streams.values()}
        offered = [bool(r.message.initial_resource_versions) for r in cp.requests
                   if r.stream in second and r.type_url == LISTENER.type_url][:1]  # fmt: skip
        assert offered == [expect_versions] * len(offered)
        assert len(offered) == 1


async def test_churn_replaces_clients_that_leave_with_new_ones(cp):
    """``churn_every``: clients leave, new ones (new node ids) join; the run counts them all."""
    result = await run(_scenario(cp, Faults(churn_every=0.3), clients=4, duration=1.5))
    nodes = set(_streams_by_node(cp))
    assert result.clients > 4
    # one that joins as the run ends may be stopped before the server reads its request
    assert result.clients - 2 <= len(nodes) <= result.clients
    assert len(result.per_client) == result.clients


async def test_churn_on_a_shared_connection_ends_streams_not_the_connection(cp):
    """Shared: a client that leaves ends its stream; the ones joining use the same channel."""
    result = await run(_scenario(cp, Faults(churn_every=0.3), clients=4, duration=1.5,
                                 share_connections=True))  # fmt: skip
    assert result.clients > 4
    assert result.connect.count == 1
    assert result.errors == {}
    assert len(set(_streams_by_node(cp))) >= result.clients - 2


async def test_server_errors_are_counted_and_retried_with_backoff(cp):
    """A stream ended with RESOURCE_EXHAUSTED is counted by status and retried; the run goes
    on and every client is complete again."""
    snapshots = []

    def closer(progress) -> None:
        snapshots.append(progress)
        if len(snapshots) == 2:
            cp.close_streams(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many streams")

    result = await run(_scenario(cp, clients=5, duration=2.0), on_progress=closer)
    assert result.errors == {"RESOURCE_EXHAUSTED": 5}
    assert result.reconnects == 5
    assert len({r.stream for r in cp.requests}) == 10
    assert snapshots[-1].complete == 5
