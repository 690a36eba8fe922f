"""Ring hash over all the endpoints of one priority (gRFCs A42 and A76, C-core ``ring_hash.cc``).

Why every detail is C-core's: consistent hashing is only useful if every client of a service
maps a request hash to the same backend, so the ring must be built bit for bit as gRPC builds it:
- endpoints in C-core's order: the priority's localities sorted by (region, zone, sub_zone)
  (C-core keeps them in a map), each locality's healthy endpoints in the assignment's order;
- an endpoint's weight is ``locality weight x endpoint weight`` in *unsigned 32-bit*
  arithmetic (wrapping), then read back as a signed 32-bit int: 0 or negative counts as 1;
- each endpoint's hash key is its ``envoy.lb`` ``hash_key`` metadata (A76) when that is used,
  else its address as ``host:port`` (IPv6 in brackets), and its ring entries are
  ``XXH64(key + "_" + i)`` for i = 0, 1, ... (seed 0);
- ring size: ``scale = min(ceil(min_w * min_size) / min_w, max_size)`` with ``min_w`` the
  smallest normalised weight and both sizes capped at 4096 (``GRPC_RING_HASH_CAP``'s default);
  endpoint i gets entries while a running count stays below the running sum of
  ``scale * normalised weight``; the ring is sorted by hash;
- a pick takes the first entry whose hash is >= the request hash (wrapping to the start), then
  walks on: READY -> that endpoint; IDLE -> ask it to connect and queue; CONNECTING -> queue;
  TRANSIENT_FAILURE -> the next entry; nothing usable -> fail.

State (C-core's aggregation): READY if any endpoint is; else TRANSIENT_FAILURE if two or more
failed; else CONNECTING if any is connecting, or if one failed among several; else IDLE if any
is; else TRANSIENT_FAILURE. In CONNECTING or TRANSIENT_FAILURE with nothing connecting, ring hash
itself connects the first IDLE endpoint (by address), so a priority above it can recover.

Cost at scale: the state is read from counts kept as states change; an update whose localities
are the very objects of the last one keeps the ring; otherwise each unchanged locality's part
(endpoints, hash keys, weights) is reused, the keys are counted by difference, the entry counts
are computed at C speed and entry hashes are reused from the last ring (``build_ring`` is the
same arithmetic, so the ring is bit for bit what it was). Pick results are built on first use.
"""

from __future__ import annotations

import bisect
import functools
import ipaddress
import itertools
import math
import operator
import random
from collections.abc import Callable, Sequence

from ..resources import Endpoint, LocalityEndpoints, RingHash
from ._base import (
    ConnectivityState,
    EndpointKey,
    PickOutcome,
    PickRequest,
    PickResult,
    key_of,
    keys_of,
)
from ._endpoint_list import EndpointList, KeyCounts, usable
from ._xxh64 import require_xxh64

__all__ = ["RING_SIZE_CAP", "RingHashPolicy", "build_ring", "hash_key_of", "ring_weight"]

#: C-core's default cap on both ring sizes (its ``GRPC_RING_HASH_CAP``)
RING_SIZE_CAP = 4096

_READY = ConnectivityState.READY
_IDLE = ConnectivityState.IDLE
_CONNECTING = ConnectivityState.CONNECTING
_FAILED = ConnectivityState.TRANSIENT_FAILURE
_UINT32 = (1 << 32) - 1


def ring_weight(locality_weight: int, endpoint_weight: int) -> int:
    """The weight C-core gives an endpoint on the ring: the product wrapped to 32 bits, and 1
    where that is 0 or does not fit a signed 32-bit int."""
    product = (locality_weight * endpoint_weight) & _UINT32
    return product if 0 < product < (1 << 31) else 1


def hash_key_of(endpoint: Endpoint, *, use_hash_key: bool = False) -> str:
    """The endpoint's key on the ring: A76's ``envoy.lb`` ``hash_key`` metadata when present
    (and ``use_hash_key``), else ``host:port`` as C-core prints an address."""
    if use_hash_key:
        key = endpoint.metadata.get("envoy.lb", {}).get("hash_key")
        if isinstance(key, str) and key:
            return key
    return f"{_host(endpoint.address)}:{endpoint.port}"


@functools.lru_cache(maxsize=4096)
def _host(address: str) -> str:
    """An address as C-core prints it (IPv6 in brackets); remembered, as parsing costs."""
    try:
        host = str(ipaddress.ip_address(address))
    except ValueError:
        host = address
    return f"[{host}]" if ":" in host else host


def build_ring(
    entries: Sequence[tuple[str, int]], min_size: int, max_size: int, cap: int = RING_SIZE_CAP
) -> tuple[list[int], list[int]]:
    """The sorted ring for (hash key, weight > 0) ``entries``: its hashes and, for each, the
    index of its entry."""
    keys = [key for key, _ in entries]
    weights = [weight for _, weight in entries]
    counts = _entry_counts(weights, min_size, max_size, cap)
    return _ring(keys, counts, {})


def _entry_counts(weights: Sequence[int], min_size: int, max_size: int, cap: int) -> list[int]:
    """How many ring entries each endpoint gets, by its weight.

    C-core walks the endpoints keeping a running ``target`` (the sum of ``scale x normalised
    weight``) and a running count of entries, adding entries while the count is below the
    target: endpoint i thus gets ``ceil(target_i) - ceil(target_{i-1})`` entries, computed
    here for all endpoints at once from the same float sums."""
    if not weights:
        return []
    total = sum(weights)
    normalised = list(map(operator.truediv, weights, itertools.repeat(total)))
    smallest = min(1.0, min(normalised))
    min_size = min(min_size, cap)
    max_size = min(max_size, cap)
    scale = min(math.ceil(smallest * min_size) / smallest, float(max_size))
    targets = itertools.accumulate(map(operator.mul, itertools.repeat(scale), normalised))
    ceilings = list(map(math.ceil, targets))
    return list(map(operator.sub, ceilings, [0, *ceilings[:-1]]))


def _entry_hashes(key: str, count: int, hashes: dict[str, list[int]]) -> list[int]:
    """The hashes of ``key``'s first ``count`` entries (``XXH64(key + "_" + i)``), taken from
    ``hashes`` and added to it."""
    known = hashes.get(key)
    if known is None:
        known = hashes[key] = []
    if len(known) < count:
        digest = require_xxh64()
        known.extend(digest(f"{key}_{i}".encode()) for i in range(len(known), count))
    return known[:count]


def _ring(
    keys: Sequence[str], counts: Sequence[int], hashes: dict[str, list[int]]
) -> tuple[list[int], list[int]]:
    """The sorted ring of endpoints with hash ``keys`` and entry ``counts``: its hashes and
    each one's endpoint index (equal hashes in endpoint order, as C-core's stable sort)."""
    ring: list[tuple[int, int]] = []
    for index in itertools.compress(range(len(counts)), counts):
        found = _entry_hashes(keys[index], counts[index], hashes)
        ring.extend(zip(found, itertools.repeat(index)))
    ring.sort(key=_FIRST)
    return [h for h, _ in ring], [i for _, i in ring]


def _patch(
    ring: tuple[list[int], list[int]],
    index: int,
    old: list[int],
    new: list[int],
) -> None:
    """Move the endpoint at ``index`` in the sorted ``ring`` from its ``old`` entry hashes to
    ``new`` ones, keeping the order `_ring` gives (by hash, then endpoint index)."""
    hashes, owners = ring
    for hash_ in old:
        at = bisect.bisect_left(hashes, hash_)
        while owners[at] != index:
            at += 1
        del hashes[at], owners[at]
    for hash_ in new:
        at = bisect.bisect_left(hashes, hash_)
        while at < len(hashes) and hashes[at] == hash_ and owners[at] < index:
            at += 1
        hashes.insert(at, hash_)
        owners.insert(at, index)


#: above this many endpoints with new hash keys, an update builds the ring again
_PATCH_LIMIT = 64


_FIRST: Callable[[tuple[int, int]], int] = operator.itemgetter(0)


class _Part:
    """One locality's share of the ring, reused while the locality is the same object."""

    __slots__ = ("endpoints", "keys", "locality", "weights")

    def __init__(
        self, locality: LocalityEndpoints, use_hash_key: bool, before: _Part | None
    ) -> None:
        self.locality = locality
        self.endpoints = list(usable(locality.endpoints))
        self.keys = self._hash_keys(use_hash_key, before)
        weights = list(map(_WEIGHT, self.endpoints))
        if weights and weights.count(weights[0]) == len(weights):  # one weight: one product
            self.weights = [ring_weight(locality.weight, weights[0])] * len(weights)
        else:
            self.weights = [ring_weight(locality.weight, w) for w in weights]

    def _hash_keys(self, use_hash_key: bool, before: _Part | None) -> list[str]:
        """Each endpoint's hash key; an address's from ``before`` (the same locality's last
        part) where it has one, as printing an address costs."""
        if use_hash_key or before is None:
            return [hash_key_of(e, use_hash_key=use_hash_key) for e in self.endpoints]
        known = dict(zip(map(keys_of, before.endpoints), before.keys, strict=True))
        keys = list(map(known.get, map(keys_of, self.endpoints)))
        for index in itertools.compress(range(len(keys)), map(operator.not_, keys)):
            keys[index] = hash_key_of(self.endpoints[index])
        return keys  # type: ignore[return-value]  # no None is left


_WEIGHT: Callable[[Endpoint], int] = operator.attrgetter("weight")


class RingHashPolicy:
    """A `ChildPolicy`: gRPC's ring_hash over every locality of one priority.

    ``request_hash_header`` (A76): hash this header's value instead of the route's request hash
    (a missing header: a random hash, connecting at most one endpoint); ``use_hash_key``: take
    A76's endpoint hash keys from metadata.
    """

    def __init__(
        self,
        config: RingHash | None = None,
        *,
        cluster: str = "",
        ring_size_cap: int = RING_SIZE_CAP,
        request_hash_header: str = "",
        use_hash_key: bool = False,
    ) -> None:
        require_xxh64()
        self._config = config or RingHash()
        self._cluster = cluster
        self._cap = ring_size_cap
        self._header = request_hash_header.lower()
        self._use_hash_key = use_hash_key
        self._list = EndpointList()
        self._endpoints: list[Endpoint] = []
        self._localities: list[LocalityEndpoints] = []
        self._hashes: list[int] = []
        self._owners: list[int] = []
        #: each endpoint's COMPLETE result (by index), built at its first pick after an update
        self._complete: list[PickResult | None] = []
        #: the localities the ring was built from, in ring order, and each one's part
        self._ordered: list[LocalityEndpoints] = []
        self._parts: dict[int, _Part] = {}
        self._keys = KeyCounts(healthy_only=True)
        #: the hashes of each endpoint hash key's ring entries, from the last rings
        self._entry_hashes: dict[str, list[int]] = {}
        #: the hash keys, ring weights and entry counts the ring was built from
        self._ring_keys: list[str] = []
        self._ring_weights: list[int] = []
        self._counts: list[int] = []

    def update(self, localities: Sequence[LocalityEndpoints], now: float) -> None:
        """The priority's localities: a new ring; endpoint states kept by key."""
        ordered = sorted(
            (loc for loc in localities if loc.weight > 0),
            key=lambda loc: (loc.locality.region, loc.locality.zone, loc.locality.sub_zone),
        )
        if len(ordered) == len(self._ordered) and all(map(operator.is_, ordered, self._ordered)):
            return  # the same localities: the same ring
        self._ordered = ordered
        old_parts = self._parts
        self._parts = {}
        by_name = {part.locality.locality: part for part in old_parts.values()}
        endpoints: list[Endpoint] = []
        owners: list[LocalityEndpoints] = []
        keys: list[str] = []
        weights: list[int] = []
        for locality in ordered:
            part = old_parts.get(id(locality))
            if part is None or part.locality is not locality:
                part = _Part(locality, self._use_hash_key, by_name.get(locality.locality))
            self._parts[id(locality)] = part
            endpoints.extend(part.endpoints)
            owners.extend(itertools.repeat(locality, len(part.endpoints)))
            keys.extend(part.keys)
            weights.extend(part.weights)
        self._endpoints, self._localities = endpoints, owners
        added, removed = self._keys.update(ordered)
        self._list.rekey(tuple(endpoints), added, removed)
        self._complete = [None] * len(endpoints)
        self._ring(keys, weights)

    def _ring(self, keys: list[str], weights: list[int]) -> None:
        """The ring for the endpoints' hash ``keys`` and ring ``weights``: patched where only
        a few keys changed and no weight did (the entry counts are then the same), else
        built again; entry hashes are reused from the last ring either way."""
        hashes = self._entry_hashes
        old_keys, self._ring_keys = self._ring_keys, keys
        if weights != self._ring_weights:
            self._ring_weights = weights
            config = self._config
            self._counts = _entry_counts(
                weights, config.min_ring_size, config.max_ring_size, self._cap
            )
        else:
            moved = list(itertools.compress(range(len(keys)), map(operator.ne, keys, old_keys)))
            if len(moved) <= _PATCH_LIMIT:
                ring = (self._hashes, self._owners)
                for index in moved:
                    count = self._counts[index]
                    if count:
                        old = _entry_hashes(old_keys[index], count, hashes)
                        _patch(ring, index, old, _entry_hashes(keys[index], count, hashes))
                self._prune(keys)
                return
        self._hashes, self._owners = _ring(keys, self._counts, hashes)
        self._prune(keys)

    def _prune(self, keys: list[str]) -> None:
        """Forget the entry hashes of keys gone, once they are as many as the current ones."""
        hashes = self._entry_hashes
        if len(hashes) > 2 * len(keys):
            self._entry_hashes = {key: hashes[key] for key in keys if key in hashes}

    @property
    def ring(self) -> list[tuple[int, Endpoint]]:
        """The ring: (hash, endpoint) sorted by hash."""
        return [(h, self._endpoints[i]) for h, i in zip(self._hashes, self._owners, strict=True)]

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The user's transport reports an endpoint's connectivity."""
        self._list.set_state(key, state)

    def state(self) -> ConnectivityState:
        """C-core's ring hash aggregation (see the module docstring)."""
        count = self._list.count
        if count(_READY):
            return _READY
        failed = count(_FAILED)
        if failed >= 2:
            return _FAILED
        if count(_CONNECTING) or (failed == 1 and len(self._endpoints) > 1):
            return _CONNECTING
        return _IDLE if count(_IDLE) else _FAILED

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """Every endpoint a pick already set connecting (not IDLE), and, in CONNECTING or
        TRANSIENT_FAILURE with none connecting, the first IDLE endpoint by address."""
        states = self._list.states
        wanted = [e for e in self._endpoints if states[key_of(e)] is not _IDLE]
        if self.state() in (_CONNECTING, _FAILED) and not any(
            states[key_of(e)] is _CONNECTING for e in wanted
        ):
            idle = sorted((key_of(e), e) for e in self._endpoints if states[key_of(e)] is _IDLE)
            wanted.extend(e for _, e in idle[:1])
        return tuple(wanted)

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """The endpoint the request hash falls on, walking past failed ones."""
        if not self._hashes:
            return self._result(PickOutcome.FAIL, error="ring_hash: no endpoints")
        if self._header:
            value = request.headers.get(self._header)
            if value is None:
                return self._pick_random(rand.getrandbits(64))
            start = self._start(require_xxh64()(value.encode()))
        else:
            hash_ = request.request_hash
            start = self._start(rand.getrandbits(64) if hash_ is None else hash_)
        states = self._list.states
        size = len(self._hashes)
        for i in range(size):
            index = self._owners[(start + i) % size]
            endpoint = self._endpoints[index]
            state = states[key_of(endpoint)]
            if state is _READY:
                return self._complete[index] or self._completed(index)
            if state is _IDLE:
                return self._result(PickOutcome.QUEUE, connect=(endpoint,))
            if state is _CONNECTING:
                return self._result(PickOutcome.QUEUE)
        return self._result(PickOutcome.FAIL, error="ring_hash: no reachable endpoint")

    def _pick_random(self, hash_: int) -> PickResult:
        """A76 with the header missing: the first READY from a random point, connecting at most
        one IDLE endpoint (none while one is connecting)."""
        states = self._list.states
        requested = self._list.count(_CONNECTING) > 0
        connect: tuple[Endpoint, ...] = ()
        start = self._start(hash_)
        size = len(self._hashes)
        for i in range(size):
            index = self._owners[(start + i) % size]
            endpoint = self._endpoints[index]
            state = states[key_of(endpoint)]
            if state is _READY:
                return self._complete[index] or self._completed(index)
            if not requested and state is _IDLE:
                connect = (endpoint,)
                requested = True
        if requested:
            return self._result(PickOutcome.QUEUE, connect=connect)
        return self._result(PickOutcome.FAIL, error="ring_hash: no reachable endpoint")

    def _completed(self, index: int) -> PickResult:
        """The COMPLETE result of the endpoint at ``index``, built on first use."""
        result = self._complete[index]
        if result is None:
            result = self._complete[index] = PickResult(
                outcome=PickOutcome.COMPLETE,
                endpoint=self._endpoints[index],
                cluster=self._cluster,
                locality=self._localities[index],
            )
        return result

    def _start(self, hash_: int) -> int:
        """The first ring entry whose hash is >= ``hash_``, wrapping (C-core's ketama search)."""
        index = bisect.bisect_left(self._hashes, hash_)
        return 0 if index == len(self._hashes) else index

    def _result(
        self, outcome: PickOutcome, *, connect: tuple[Endpoint, ...] = (), error: str = ""
    ) -> PickResult:
        return PickResult(outcome=outcome, connect=connect, cluster=self._cluster, error=error)
