"""`ComposedPicker.pick_in`: a pick within a cluster the caller has routed to (the call path
routes each call itself, and picks again in the same cluster for each attempt)."""

from __future__ import annotations

import random

from xdsclient import ClusterConfig, ResourceDoesNotExistError
from xdsclient.lb import ComposedPicker, PickOutcome
from xdsclient.resources import CLUSTER, ClusterView
from xdsclient.testing import builders

from .test_composed import FAILED, eds, one, ready, snapshot


def test_a_pick_in_a_named_cluster_ignores_the_routes() -> None:
    """The route table sends every path to ``web``; a pick in ``api`` still goes to api's
    endpoint and says so."""
    picker = ComposedPicker()
    picker.update(snapshot("web", eds("api", [one(1)]), eds("web", [one(2)])), 0.0)
    ready(picker, 1, 2)
    result = picker.pick_in("api", {}, random.Random(1), 0.0)
    assert result.outcome is PickOutcome.COMPLETE
    assert (result.cluster, result.endpoint and result.endpoint.port) == ("api", 1)


def test_a_pick_in_an_aggregate_cluster_uses_its_first_usable_leaf() -> None:
    """An aggregate picks in its first leaf until that leaf's tree fails, then the next."""
    picker = ComposedPicker()
    aggregate = ClusterConfig(
        name="agg",
        cluster=ClusterView.from_proto(builders.aggregate_cluster("agg", ["p", "s"])),
        leaves=("p", "s"),
    )
    picker.update(snapshot("agg", aggregate, eds("p", [one(1)]), eds("s", [one(2)])), 0.0)
    ready(picker, 1, 2)
    rand = random.Random(2)
    assert picker.pick_in("agg", {}, rand, 0.0).cluster == "p"
    ready(picker, 1, state=FAILED)
    assert picker.pick_in("agg", {}, rand, 0.0).cluster == "s"


def test_a_pick_in_a_cluster_missing_or_in_error_fails_and_queues_before_a_snapshot() -> None:
    """A cluster the snapshot lacks, or holds in error, fails with its name; before any
    snapshot the pick queues."""
    rand = random.Random(3)
    picker = ComposedPicker()
    assert picker.pick_in("c", {}, rand, 0.0).outcome is PickOutcome.QUEUE
    broken = ClusterConfig(
        name="gone", error=ResourceDoesNotExistError(CLUSTER.type_url, "gone", "does not exist")
    )
    picker.update(snapshot("web", eds("web", [one(2)]), broken), 0.0)
    for name in ("gone", "absent"):
        result = picker.pick_in(name, {}, rand, 0.0)
        assert result.outcome is PickOutcome.FAIL
        assert name in result.error
