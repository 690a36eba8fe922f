"""The request hash ring hash picks with, for one HTTP request, by Envoy's hash policies.

Why apart from gRPC's (`_hash`, `xdsclient.lb.request_hash`): Envoy's router hashes what a
gRPC client does not (a cookie, a query parameter, the source address) and hashes a header
its own way. What it follows, from Envoy's ``source/common/http/hash_policy.cc`` over the
action's `RouteAction.http_hash_policies`:

- header: every value of the header (``host`` is the authority, ``:path`` and ``:method``
  the request's), each rewritten by the policy's ``regex_rewrite``, sorted, and hashed as one
  XXH64 (seed 0) over their concatenation; an absent header gives no hash;
- cookie: the first cookie of that name in the ``cookie`` headers (its value unquoted) hashed
  with XXH64; an absent or empty cookie gives no hash. Envoy generates the cookie when the
  policy has a ``ttl`` and answers with ``set-cookie``; this client does not (it is not the
  server of the response): such a request gets no hash from the policy;
- query parameter: the first value of the parameter in the path's query, as written (not
  percent-decoded, as Envoy's ``parseQueryString``), hashed with XXH64;
- source IP: XXH64 of the caller's address (`CallRequest.source_ip`), none when unknown;
- filter state (``io.grpc.channel_id`` and others) is gRPC's and not read here;
- each new hash is folded in as ``rotl(hash, 1) XOR new``, and a ``terminal`` policy that has
  produced a hash (so far) ends the walk;
- no hash at all: a random 64-bit hash (Envoy's ring hash then picks at random).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ..lb._xxh64 import require_xxh64
from ..resources import HashPolicy, HashPolicyKind
from ._request import CallRequest

__all__ = ["http_request_hash"]

_MASK = (1 << 64) - 1


def http_request_hash(
    policies: tuple[HashPolicy, ...], call: CallRequest, rng: random.Random
) -> int:
    """The 64-bit request hash of ``call`` by ``policies`` (Envoy's rules, above)."""
    if not policies:
        return rng.getrandbits(64)
    digest = require_xxh64()
    combined: int | None = None
    for policy in policies:
        value = _hashed_bytes(policy, call)
        if value is not None:
            new = digest(value)
            previous = 0 if combined is None else ((combined << 1) | (combined >> 63)) & _MASK
            combined = previous ^ new
        if policy.terminal and combined is not None:
            break
    return rng.getrandbits(64) if combined is None else combined


def _hashed_bytes(policy: HashPolicy, call: CallRequest) -> bytes | None:
    kind = policy.kind
    if kind is HashPolicyKind.HEADER:
        values = list(_header_values(call, policy.header_name))
        if not values:
            return None
        if policy.regex is not None:
            values = [policy.regex.sub(policy.substitution, value) for value in values]
        return "".join(sorted(values)).encode()
    if kind is HashPolicyKind.COOKIE:
        cookie = _cookie(call, policy.name)
        return cookie.encode() if cookie else None
    if kind is HashPolicyKind.QUERY_PARAMETER:
        found = _query_parameter(call.path, policy.name)
        return None if found is None else found.encode()
    if kind is HashPolicyKind.SOURCE_IP:
        return call.source_ip.encode() if call.source_ip else None
    return None


def _header_values(call: CallRequest, name: str) -> Iterator[str]:
    if name in ("host", ":authority"):
        yield call.authority
        return
    if name == ":path":
        yield call.path
        return
    if name == ":method":
        yield call.method
        return
    for key, value in call.metadata:
        if isinstance(value, str) and key.lower() == name:
            yield value


def _cookie(call: CallRequest, name: str) -> str | None:
    """The first cookie ``name`` in the request's ``cookie`` headers, unquoted."""
    for value in _header_values(call, "cookie"):
        for part in value.split(";"):
            key, equals, found = part.strip().partition("=")
            if equals and key == name:
                if len(found) >= 2 and found[0] == found[-1] == '"':
                    found = found[1:-1]
                return found
    return None


def _query_parameter(path: str, name: str) -> str | None:
    """The first value of ``name`` in ``path``'s query, as written; a parameter without ``=``
    has the empty value."""
    _, question, query = path.partition("?")
    if not question:
        return None
    for part in query.partition("#")[0].split("&"):
        key, _equals, value = part.partition("=")
        if key == name:
            return value
    return None
