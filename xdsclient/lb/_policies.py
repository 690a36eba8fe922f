"""From a cluster's LB policy to the child policy of one priority (what gRPC's CDS policy builds).

Why this shape: gRPC's xDS tree puts one child under each priority. For RING_HASH it is ring hash
over all of the priority's endpoints (each weighted by locality weight x endpoint weight, gRFC
A42); for everything else it is xds_wrr_locality: a weighted_target over the localities, each
locality balanced by the endpoint-picking policy. A policy given without the wrr_locality
wrapper is wrapped here too: the view does not say whether the cluster named the bare policy
(C-core would then balance the whole priority with it, ignoring localities). A registered
(custom) policy is the exception: it always balances the whole priority, and sees the
localities and their weights itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ..resources import (
    CustomLbPolicy,
    LbPolicy,
    LeastRequest,
    PickFirst,
    RingHash,
    RoundRobin,
    WeightedRoundRobin,
    WrrLocality,
)
from ._base import ChildPolicy, EndpointPicker
from ._custom import custom_child
from ._least_request import LeastRequestPicker
from ._pick_first import PickFirstPicker
from ._ring_hash import RING_SIZE_CAP
from ._round_robin import RoundRobinPicker
from ._weighted_target import WeightedTarget
from ._wrr import WeightedRoundRobinPicker

__all__ = ["child_policy_for", "endpoint_picker_factory"]


def child_policy_for(
    policy: LbPolicy,
    *,
    cluster: str = "",
    rand: random.Random | None = None,
    ring_size_cap: int = RING_SIZE_CAP,
    use_hash_key: bool = False,
) -> ChildPolicy:
    """A fresh child policy for one priority of ``cluster`` balanced by ``policy``.

    ``rand`` is used only where gRPC draws randomness outside a pick (pick first's
    ``shuffle_address_list`` on each update); by default a new unseeded source.
    ``ring_size_cap`` (gRPC's channel-level cap on both ring sizes, A42) and ``use_hash_key``
    (A76: endpoint hash keys from ``envoy.lb`` metadata) reach a ring hash child only.
    A registered policy (`CustomLbPolicy`, bare or in ``wrr_locality``) balances the whole
    priority (`register_lb_policy`).
    """
    custom = policy.child if isinstance(policy, WrrLocality) else policy
    if isinstance(custom, CustomLbPolicy):
        return custom_child(custom, cluster=cluster)
    if isinstance(policy, RingHash):
        from ._ring_hash import RingHashPolicy

        return RingHashPolicy(
            policy, cluster=cluster, ring_size_cap=ring_size_cap, use_hash_key=use_hash_key
        )
    picking = policy.child if isinstance(policy, WrrLocality) else policy
    return WeightedTarget(
        endpoint_picker_factory(policy, rand=rand),
        cluster=cluster,
        reads_reports=isinstance(picking, WeightedRoundRobin),
        counts_calls=isinstance(picking, LeastRequest),
    )


def endpoint_picker_factory(
    policy: LbPolicy, *, rand: random.Random | None = None
) -> Callable[[], EndpointPicker]:
    """A factory of pickers for one locality's endpoints balanced by ``policy`` (the child of
    a `WrrLocality`, or the policy itself)."""
    if isinstance(policy, WrrLocality):
        return endpoint_picker_factory(policy.child, rand=rand)
    if isinstance(policy, RoundRobin):
        return RoundRobinPicker
    if isinstance(policy, LeastRequest):
        return lambda: LeastRequestPicker(policy.choice_count)
    if isinstance(policy, WeightedRoundRobin):
        return lambda: WeightedRoundRobinPicker(policy)
    if isinstance(policy, PickFirst):
        source = rand or random.Random()
        return lambda: PickFirstPicker(shuffle=policy.shuffle_address_list, rand=source)
    raise ValueError(f"no endpoint picker for {policy!r}")  # RingHash is a whole-priority policy
