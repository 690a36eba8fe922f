"""The request hash ring hash picks with, from a route's ``hash_policy`` list (gRFC A42).

Why as gRPC computes it (C-core's xds resolver, grpc-go's config selector):
- a header policy hashes the header's value (repeated headers joined with ``,``) with XXH64
  seed 0, after its ``regex_rewrite`` replaced every match; a missing header gives no hash;
  names ending in ``-bin`` are never hashed, and ``content-type`` is always
  ``application/grpc`` (what C-core sees);
- a channel-id policy contributes the channel's id itself, not a hash of it;
- each policy's hash is folded in as ``rotate_left(previous, 1) XOR new`` (so two equal
  policies do not cancel out); a ``terminal`` policy that produced a hash (so far) ends the
  walk;
- no policy produced a hash: a random 64-bit hash, as gRPC draws one.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from ..resources import HashPolicy, HashPolicyKind
from ._xxh64 import require_xxh64

__all__ = ["request_hash"]

_MASK = (1 << 64) - 1


def request_hash(
    policies: Sequence[HashPolicy],
    headers: Mapping[str, str],
    channel_id: int,
    rand: random.Random,
) -> int:
    """The 64-bit request hash for a call with ``headers`` (lower-case names) on the channel
    ``channel_id``, by the route's hash ``policies``."""
    digest = require_xxh64()
    combined: int | None = None
    for policy in policies:
        new: int | None = None
        if policy.kind is HashPolicyKind.CHANNEL_ID:
            new = channel_id & _MASK
        elif policy.kind is HashPolicyKind.HEADER:
            value = _header_value(headers, policy.header_name)
            if value is not None:
                if policy.regex is not None:
                    value = policy.regex.sub(policy.substitution, value)
                new = digest(value.encode())
        if new is not None:
            previous = 0 if combined is None else ((combined << 1) | (combined >> 63)) & _MASK
            combined = previous ^ new
        if policy.terminal and combined is not None:
            break
    if combined is None:
        return rand.getrandbits(64)
    return combined


def _header_value(headers: Mapping[str, str], name: str) -> str | None:
    if name.endswith("-bin"):
        return None
    if name == "content-type":
        return "application/grpc"
    return headers.get(name)
