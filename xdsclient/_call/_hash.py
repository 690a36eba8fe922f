"""The request hash ring hash picks with, for one call (gRFC A42).

Why here: C-core's config selector hashes once per call, from the matched route's hash
policies and the call's metadata, and every attempt of the call picks with that hash. The
rules (header policies with gRPC's header view and ``regex_rewrite``, ``filter_state``
``io.grpc.channel_id``, ``terminal``, and the rotate-and-XOR combination) are
`xdsclient.lb.request_hash`'s; this hands it the call's header view and channel id. A route
without hash policies draws a random hash without needing XXH64 (so a call that never meets
ring hash does not need the ``lb`` extra's ``xxhash``).
"""

from __future__ import annotations

import random

from ..lb import request_hash
from ..resources import RouteAction
from ._request import CallRequest

__all__ = ["call_hash"]


def call_hash(action: RouteAction, call: CallRequest, rng: random.Random) -> int:
    """The 64-bit request hash of ``call`` on a route with ``action``."""
    if not action.hash_policies:
        return rng.getrandbits(64)
    return request_hash(action.hash_policies, call.headers, call.channel_id, rng)
