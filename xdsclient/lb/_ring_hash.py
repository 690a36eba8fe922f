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
"""

from __future__ import annotations

import bisect
import ipaddress
import math
import random
from collections.abc import Sequence

from ..resources import Endpoint, LocalityEndpoints, RingHash
from ._base import ConnectivityState, EndpointKey, PickOutcome, PickRequest, PickResult, key_of
from ._endpoint_list import EndpointList
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
    try:
        host = str(ipaddress.ip_address(endpoint.address))
    except ValueError:
        host = endpoint.address
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{endpoint.port}"


def build_ring(
    entries: Sequence[tuple[str, int]], min_size: int, max_size: int, cap: int = RING_SIZE_CAP
) -> tuple[list[int], list[int]]:
    """The sorted ring for (hash key, weight > 0) ``entries``: its hashes and, for each, the
    index of its entry."""
    if not entries:
        return [], []
    digest = require_xxh64()
    total = sum(weight for _, weight in entries)
    normalised = [weight / total for _, weight in entries]
    smallest = min(1.0, *normalised)
    min_size = min(min_size, cap)
    max_size = min(max_size, cap)
    scale = min(math.ceil(smallest * min_size) / smallest, float(max_size))
    ring: list[tuple[int, int]] = []
    current = 0.0
    target = 0.0
    for index, (key, _) in enumerate(entries):
        target += scale * normalised[index]
        count = 0
        while current < target:
            ring.append((digest(f"{key}_{count}".encode()), index))
            count += 1
            current += 1
    ring.sort(key=lambda entry: entry[0])
    return [h for h, _ in ring], [i for _, i in ring]


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
        #: each endpoint's COMPLETE result (by index), built once per update
        self._complete: list[PickResult] = []

    def update(self, localities: Sequence[LocalityEndpoints], now: float) -> None:
        """The priority's localities: a new ring; endpoint states kept by key."""
        ordered = sorted(
            (loc for loc in localities if loc.weight > 0),
            key=lambda loc: (loc.locality.region, loc.locality.zone, loc.locality.sub_zone),
        )
        self._endpoints = []
        self._localities = []
        entries: list[tuple[str, int]] = []
        for locality in ordered:
            for endpoint in locality.endpoints:
                if endpoint.healthy:
                    self._endpoints.append(endpoint)
                    self._localities.append(locality)
                    entries.append(
                        (
                            hash_key_of(endpoint, use_hash_key=self._use_hash_key),
                            ring_weight(locality.weight, endpoint.weight),
                        )
                    )
        self._list.update(self._endpoints)
        self._complete = [
            PickResult(
                outcome=PickOutcome.COMPLETE,
                endpoint=endpoint,
                cluster=self._cluster,
                locality=locality,
            )
            for endpoint, locality in zip(self._endpoints, self._localities, strict=True)
        ]
        self._hashes, self._owners = build_ring(
            entries, self._config.min_ring_size, self._config.max_ring_size, self._cap
        )

    @property
    def ring(self) -> list[tuple[int, Endpoint]]:
        """The ring: (hash, endpoint) sorted by hash."""
        return [(h, self._endpoints[i]) for h, i in zip(self._hashes, self._owners, strict=True)]

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The user's transport reports an endpoint's connectivity."""
        self._list.set_state(key, state)

    def state(self) -> ConnectivityState:
        """C-core's ring hash aggregation (see the module docstring)."""
        counts = dict.fromkeys(ConnectivityState, 0)
        for state in self._list.states.values():
            counts[state] += 1
        if counts[_READY]:
            return _READY
        if counts[_FAILED] >= 2:
            return _FAILED
        if counts[_CONNECTING] or (counts[_FAILED] == 1 and len(self._endpoints) > 1):
            return _CONNECTING
        return _IDLE if counts[_IDLE] else _FAILED

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
                return self._complete[index]
            if state is _IDLE:
                return self._result(PickOutcome.QUEUE, connect=(endpoint,))
            if state is _CONNECTING:
                return self._result(PickOutcome.QUEUE)
        return self._result(PickOutcome.FAIL, error="ring_hash: no reachable endpoint")

    def _pick_random(self, hash_: int) -> PickResult:
        """A76 with the header missing: the first READY from a random point, connecting at most
        one IDLE endpoint (none while one is connecting)."""
        states = self._list.states
        requested = any(state is _CONNECTING for state in states.values())
        connect: tuple[Endpoint, ...] = ()
        start = self._start(hash_)
        size = len(self._hashes)
        for i in range(size):
            index = self._owners[(start + i) % size]
            endpoint = self._endpoints[index]
            state = states[key_of(endpoint)]
            if state is _READY:
                return self._complete[index]
            if not requested and state is _IDLE:
                connect = (endpoint,)
                requested = True
        if requested:
            return self._result(PickOutcome.QUEUE, connect=connect)
        return self._result(PickOutcome.FAIL, error="ring_hash: no reachable endpoint")

    def _start(self, hash_: int) -> int:
        """The first ring entry whose hash is >= ``hash_``, wrapping (C-core's ketama search)."""
        index = bisect.bisect_left(self._hashes, hash_)
        return 0 if index == len(self._hashes) else index

    def _result(
        self, outcome: PickOutcome, *, connect: tuple[Endpoint, ...] = (), error: str = ""
    ) -> PickResult:
        return PickResult(outcome=outcome, connect=connect, cluster=self._cluster, error=error)
