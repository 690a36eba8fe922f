"""Load-balancing building blocks for custom balancers over xDS endpoint data.

Transport-free and sans-I/O: each block takes the validated views, the connectivity the user's
transport reports, a random source and ``now``, and returns picks. They agree with gRPC's xDS
load-balancing tree where gRPC is deterministic. This package imports only the client's public
API and is never imported by it.
"""

from __future__ import annotations

from ._base import (
    CallEnd,
    ChildPolicy,
    ConnectivityState,
    EndpointKey,
    EndpointPicker,
    Headers,
    LocalFailure,
    OutlierMode,
    PickOutcome,
    PickRequest,
    PickResult,
    aggregate_state,
    header_map,
    key_of,
)

__all__ = [
    "CallEnd",
    "ChildPolicy",
    "ConnectivityState",
    "EndpointKey",
    "EndpointPicker",
    "Headers",
    "LocalFailure",
    "OutlierMode",
    "PickOutcome",
    "PickRequest",
    "PickResult",
    "aggregate_state",
    "header_map",
    "key_of",
]

# --- endpoint pickers and the per-priority child (lb-pickers) ---
from ._custom import GuardedPolicy, LbPolicyFactory, orca_interval_of, register_lb_policy
from ._least_request import LeastRequestPicker
from ._pick_first import PickFirstPicker
from ._policies import child_policy_for, endpoint_picker_factory
from ._request_hash import request_hash
from ._ring_hash import RING_SIZE_CAP, RingHashPolicy, build_ring, hash_key_of, ring_weight
from ._round_robin import RoundRobinPicker
from ._weighted_target import WeightedTarget
from ._wrr import WeightedRoundRobinPicker, scheduler_weights

__all__ += [
    "RING_SIZE_CAP",
    "GuardedPolicy",
    "LbPolicyFactory",
    "LeastRequestPicker",
    "PickFirstPicker",
    "RingHashPolicy",
    "RoundRobinPicker",
    "WeightedRoundRobinPicker",
    "WeightedTarget",
    "build_ring",
    "child_policy_for",
    "endpoint_picker_factory",
    "hash_key_of",
    "orca_interval_of",
    "register_lb_policy",
    "request_hash",
    "ring_weight",
    "scheduler_weights",
]
# --- end of endpoint pickers ---

# --- the tree above a priority's child (lb-tree) ---
from ._circuit_breaker import DEFAULT_MAX_REQUESTS, CallCounter, CallCounters  # noqa: E402
from ._composed import ComposedPicker  # noqa: E402
from ._drops import DropPolicy  # noqa: E402
from ._outlier import OutlierDetector  # noqa: E402
from ._outlier_envoy import EnvoyOutlierDetector  # noqa: E402
from ._priority import CHILD_RETENTION, FAILOVER_TIMEOUT, PriorityPolicy  # noqa: E402

__all__ += [
    "CHILD_RETENTION",
    "DEFAULT_MAX_REQUESTS",
    "FAILOVER_TIMEOUT",
    "CallCounter",
    "CallCounters",
    "ComposedPicker",
    "DropPolicy",
    "EnvoyOutlierDetector",
    "OutlierDetector",
    "PriorityPolicy",
]
# --- end of the tree ---

for _name in __all__:
    _value = globals()[_name]
    if getattr(_value, "__module__", "").startswith(__name__ + "."):
        _value.__module__ = __name__
