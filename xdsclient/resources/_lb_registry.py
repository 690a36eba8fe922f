"""The process-wide set of load-balancing policy types registered beside the built-in ones
(gRFC A52's LB policy registry, the half the cluster decoder consults).

Why here and not beside the policies: gRPC validates a cluster's ``load_balancing_policy``
against its registry when the resource arrives (the first supported policy wins; a list with
none is NACKed), so the decoder must see the registered names; the factories that build the
policies live in `xdsclient.lb`, which registers their names here. A name is a protobuf type
name (``test.MyPolicy``); a type URL (``type.googleapis.com/test.MyPolicy``) is taken by its
last segment, as gRPC does.
"""

from __future__ import annotations

import threading

from envoy.extensions.load_balancing_policies.client_side_weighted_round_robin.v3 import (
    client_side_weighted_round_robin_pb2 as wrr_pb2,
)
from envoy.extensions.load_balancing_policies.least_request.v3 import least_request_pb2
from envoy.extensions.load_balancing_policies.pick_first.v3 import pick_first_pb2
from envoy.extensions.load_balancing_policies.ring_hash.v3 import ring_hash_pb2
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.extensions.load_balancing_policies.wrr_locality.v3 import wrr_locality_pb2
from udpa.type.v1 import typed_struct_pb2 as udpa_typed_struct_pb2
from xds.type.v3 import typed_struct_pb2

__all__ = [
    "lb_policy_type_name",
    "lb_policy_type_registered",
    "register_lb_policy_type",
    "unregister_lb_policy_type",
]

#: The policy types the cluster decoder knows (and the TypedStruct wrappers): never registered.
BUILTIN_LB_TYPES = frozenset(
    message.DESCRIPTOR.full_name
    for message in (
        typed_struct_pb2.TypedStruct,
        udpa_typed_struct_pb2.TypedStruct,
        round_robin_pb2.RoundRobin,
        ring_hash_pb2.RingHash,
        least_request_pb2.LeastRequest,
        pick_first_pb2.PickFirst,
        wrr_pb2.ClientSideWeightedRoundRobin,
        wrr_locality_pb2.WrrLocality,
    )
)
_REGISTERED: set[str] = set()
_LOCK = threading.Lock()


def lb_policy_type_name(type_url: str) -> str:
    """The policy's type name: the last ``/`` segment of a type URL (the name as it is)."""
    name = type_url.rsplit("/", 1)[-1]
    if not name:
        raise ValueError(f"not a policy type URL or name: {type_url!r}")
    return name


def register_lb_policy_type(type_url: str) -> None:
    """Clusters naming ``type_url`` in their ``load_balancing_policy`` are valid from now on
    (`xdsclient.lb.register_lb_policy` calls this with the policy's factory); a built-in
    policy's type, or a ``TypedStruct``'s, is a `ValueError`."""
    name = lb_policy_type_name(type_url)
    if name in BUILTIN_LB_TYPES:
        raise ValueError(f"{name} is a built-in load-balancing policy type")
    with _LOCK:
        _REGISTERED.add(name)


def unregister_lb_policy_type(type_url: str) -> None:
    """Forget a registered type (clusters decoded from now on skip it)."""
    with _LOCK:
        _REGISTERED.discard(lb_policy_type_name(type_url))


def lb_policy_type_registered(type_name: str) -> bool:
    """Whether ``type_name`` (a type name, not a URL) is registered."""
    return type_name in _REGISTERED
