"""Ring hash and the request hash alone: ring sizes at the bounds, weights, states, hashes."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
import xxhash

from xdsclient.lb import (
    PickOutcome,
    PickRequest,
    RingHashPolicy,
    build_ring,
    child_policy_for,
    hash_key_of,
    key_of,
    request_hash,
    ring_weight,
)
from xdsclient.resources import Endpoint, HashPolicy, HashPolicyKind, RingHash
from xdsclient.resources._regex import compile_regex

from .test_pickers import CONNECTING, FAILED, IDLE, READY, ep, loc

MASK = (1 << 64) - 1


def ketama(hashes: list[int], request: int) -> int:
    """C-core's ring search (ported from ketama) as a reference for our bisect."""
    low, high = 0, len(hashes)
    while True:
        index = (low + high) // 2
        if index == len(hashes):
            return 0
        mid = hashes[index]
        before = 0 if index == 0 else hashes[index - 1]
        if before < request <= mid:
            return index
        if mid < request:
            low = index + 1
        else:
            high = index - 1
        if low > high:
            return 0


def ring_of(*localities, min_size=1024, max_size=4096) -> RingHashPolicy:
    ring = RingHashPolicy(RingHash(min_ring_size=min_size, max_ring_size=max_size), cluster="c")
    ring.update(localities, 0.0)
    return ring


def at(hash_: int) -> PickRequest:
    return PickRequest(request_hash=hash_)


def test_ring_size_is_the_minimum_for_equal_weights_and_capped_at_4096():
    """Equal weights: min_ring_size entries; sizes above gRPC's cap of 4096 are capped."""
    entries = [(f"k{i}", 1) for i in range(4)]
    assert len(build_ring(entries, 1024, 8_000_000)[0]) == 1024
    assert len(build_ring(entries, 10_000, 20_000)[0]) == 4096
    assert len(build_ring(entries, 10_000, 20_000, cap=16_384)[0]) == 10_000


def test_ring_size_stays_within_max_when_weights_are_skewed():
    """A tiny weight would need a huge ring; the ring stops at max_ring_size."""
    entries = [("a", 1), ("b", 100_000)]
    assert len(build_ring(entries, 10, 50)[0]) == 50
    assert len(build_ring(entries, 1, 1)[0]) == 1


def test_ring_entries_are_xxh64_of_key_underscore_index_sorted():
    """Each endpoint's entries are XXH64(seed 0) of ``key_i``; the ring is sorted by hash."""
    hashes, owners = build_ring([("10.0.0.1:80", 1), ("10.0.0.2:80", 1)], 4, 4)
    expected = sorted(
        [
            (xxhash.xxh64_intdigest(f"10.0.0.{n}:80_{i}".encode()), n - 1)
            for n in (1, 2)
            for i in (0, 1)
        ]
    )
    assert list(zip(hashes, owners, strict=True)) == expected


def test_weights_share_the_ring_in_proportion():
    """An endpoint of weight 3 gets three times the entries of one of weight 1."""
    _, owners = build_ring([("a", 1), ("b", 3)], 1000, 4000)
    assert owners.count(1) == 3 * owners.count(0)


def test_ring_weight_is_the_uint32_product_read_as_a_signed_int():
    """Locality x endpoint weight wraps at 32 bits; 0 and values past 2**31 - 1 count as 1."""
    assert ring_weight(3, 5) == 15
    assert ring_weight(65536, 65537) == 65536
    assert ring_weight(40000, 60000) == 1
    assert ring_weight(65536, 65536) == 1


def test_hash_key_is_the_address_as_grpc_prints_it_or_the_a76_key():
    """``host:port`` (IPv6 bracketed, normalised), or the ``envoy.lb`` hash_key when used."""
    assert hash_key_of(Endpoint("10.0.0.1", 80)) == "10.0.0.1:80"
    assert hash_key_of(Endpoint("2001:db8:0::1", 443)) == "[2001:db8::1]:443"
    keyed = Endpoint("10.0.0.1", 80, metadata={"envoy.lb": {"hash_key": "pod-0"}})
    assert hash_key_of(keyed) == "10.0.0.1:80"
    assert hash_key_of(keyed, use_hash_key=True) == "pod-0"


def test_ring_search_agrees_with_c_cores_ketama_search():
    """The first entry >= the hash, wrapping: the same index as C-core's search, including
    hashes of 0, equal entries and hashes past the last entry."""
    rand = random.Random(3)
    for _ in range(300):
        hashes = sorted(
            rand.choice([0, 5, 5, rand.getrandbits(64)]) for _ in range(rand.randint(1, 9))
        )
        ring = RingHashPolicy()
        ring._hashes = hashes
        for request in [0, 5, 6, MASK, *(rand.getrandbits(64) for _ in range(5)), *hashes]:
            assert ring._start(request) == ketama(hashes, request), (hashes, request)


def test_pick_takes_the_endpoint_the_hash_falls_on():
    """All READY: the endpoint of the first entry at or after the hash."""
    ring = ring_of(loc("a", 1, ep(1), ep(2), ep(3)), min_size=30, max_size=30)
    for e in (ep(1), ep(2), ep(3)):
        ring.set_endpoint_state(key_of(e), READY, 0.0)
    for hash_, endpoint in ring.ring:
        result = ring.pick(at(hash_), random.Random(0), 0.0)
        assert result.endpoint == endpoint
        assert result.cluster == "c"
        assert result.locality is not None


def test_pick_on_idle_connects_it_and_queues_and_on_connecting_queues():
    """IDLE: queue and connect that endpoint; CONNECTING: queue; it is not skipped."""
    ring = ring_of(loc("a", 1, ep(1), ep(2)))
    hash_, first = ring.ring[0]
    result = ring.pick(at(hash_), random.Random(0), 0.0)
    assert (result.outcome, result.connect) == (PickOutcome.QUEUE, (first,))
    ring.set_endpoint_state(key_of(first), CONNECTING, 0.0)
    result = ring.pick(at(hash_), random.Random(0), 0.0)
    assert (result.outcome, result.connect) == (PickOutcome.QUEUE, ())


def test_pick_walks_past_failed_endpoints():
    """A failed endpoint is passed over for the next one on the ring; all failed: FAIL."""
    ring = ring_of(loc("a", 1, ep(1), ep(2)))
    hash_, first = ring.ring[0]
    other = ep(2) if first == ep(1) else ep(1)
    ring.set_endpoint_state(key_of(first), FAILED, 0.0)
    ring.set_endpoint_state(key_of(other), READY, 0.0)
    assert ring.pick(at(hash_), random.Random(0), 0.0).endpoint == other
    ring.set_endpoint_state(key_of(other), FAILED, 0.0)
    assert ring.pick(at(hash_), random.Random(0), 0.0).outcome is PickOutcome.FAIL


def test_state_follows_c_cores_ring_hash_rules():
    """READY if any; TF with two failed; CONNECTING with one failed of several; IDLE; TF."""
    ring = ring_of(loc("a", 1, ep(1), ep(2), ep(3)))
    assert ring.state() is IDLE
    ring.set_endpoint_state(("127.0.0.1", 1), FAILED, 0.0)
    assert ring.state() is CONNECTING
    ring.set_endpoint_state(("127.0.0.1", 2), FAILED, 0.0)
    assert ring.state() is FAILED
    ring.set_endpoint_state(("127.0.0.1", 3), READY, 0.0)
    assert ring.state() is READY
    single = ring_of(loc("a", 1, ep(1)))
    single.set_endpoint_state(("127.0.0.1", 1), FAILED, 0.0)
    assert single.state() is FAILED


def test_failing_ring_connects_one_idle_endpoint_by_itself():
    """CONNECTING or TF with nothing connecting: the first IDLE endpoint (by address) is
    wanted, so a priority above can recover without picks."""
    ring = ring_of(loc("a", 1, ep(3), ep(1), ep(2)))
    assert ring.wanted_connections() == ()
    ring.set_endpoint_state(("127.0.0.1", 3), FAILED, 0.0)
    assert ring.wanted_connections() == (ep(3), ep(1))
    ring.set_endpoint_state(("127.0.0.1", 1), CONNECTING, 0.0)
    assert ring.wanted_connections() == (ep(3), ep(1))


def test_ring_with_no_endpoints_fails_and_one_endpoint_takes_everything():
    """No endpoints: TRANSIENT_FAILURE and picks fail; one endpoint: every hash picks it."""
    empty = ring_of()
    assert empty.state() is FAILED
    assert empty.pick(at(1), random.Random(0), 0.0).outcome is PickOutcome.FAIL
    one = ring_of(loc("a", 1, ep(9)))
    one.set_endpoint_state(("127.0.0.1", 9), READY, 0.0)
    assert {one.pick(at(h), random.Random(0), 0.0).endpoint for h in (0, 1 << 63, MASK)} == {ep(9)}


def test_missing_request_hash_is_drawn_from_the_random_source():
    """A request without a hash picks by a random hash (gRPC's fallback), replayable by seed."""
    ring = ring_of(loc("a", 1, ep(1), ep(2), ep(3)))
    for e in (ep(1), ep(2), ep(3)):
        ring.set_endpoint_state(key_of(e), READY, 0.0)
    first = [ring.pick(PickRequest(), random.Random(5), 0.0).endpoint for _ in range(3)]
    again = [ring.pick(PickRequest(), random.Random(5), 0.0).endpoint for _ in range(3)]
    assert first == again


def test_request_hash_header_hashes_the_header_or_picks_randomly_connecting_at_most_one():
    """A76 ``request_hash_header``: the header's XXH64 places the call; without the header a
    random point, the first READY from there, and at most one IDLE endpoint connected."""
    ring = RingHashPolicy(RingHash(), request_hash_header="X-Key")
    ring.update([loc("a", 1, ep(1), ep(2))], 0.0)
    for e in (ep(1), ep(2)):
        ring.set_endpoint_state(key_of(e), READY, 0.0)
    hash_ = xxhash.xxh64_intdigest(b"abc")
    expected = ring.pick(at(hash_), random.Random(0), 0.0).endpoint
    picked = ring.pick(PickRequest(headers={"x-key": "abc"}), random.Random(0), 0.0)
    assert picked.endpoint == expected
    idle = RingHashPolicy(RingHash(), request_hash_header="x-key")
    idle.update([loc("a", 1, ep(1), ep(2))], 0.0)
    result = idle.pick(PickRequest(), random.Random(0), 0.0)
    assert result.outcome is PickOutcome.QUEUE
    assert len(result.connect) == 1


def test_child_policy_for_ring_hash_is_one_ring_over_all_localities():
    """RingHash gives a ring over every locality of the priority."""
    child = child_policy_for(RingHash(min_ring_size=8, max_ring_size=8), cluster="c")
    child.update([loc("a", 1, ep(1)), loc("b", 1, ep(2))], 0.0)
    assert isinstance(child, RingHashPolicy)
    assert {e for _, e in child.ring} == {ep(1), ep(2)}


def test_ring_hash_without_xxhash_names_the_extra():
    """Without the xxhash package, ring hash raises MissingExtraError naming the lb extra."""
    code = (
        "import sys; sys.modules['xxhash'] = None\n"
        "from xdsclient.lb import RingHashPolicy\n"
        "try:\n    RingHashPolicy()\nexcept ImportError as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == (
        "MissingExtraError ring hash needs the xxhash package: pip install 'xdsclient[lb]'"
    )


# --- the request hash ---


def header(name: str, *, terminal: bool = False, regex: str = "", sub: str = "") -> HashPolicy:
    return HashPolicy(
        kind=HashPolicyKind.HEADER,
        header_name=name,
        regex=compile_regex(regex) if regex else None,
        substitution=sub,
        terminal=terminal,
    )


def h(text: str) -> int:
    return xxhash.xxh64_intdigest(text.encode())


def rotl(value: int) -> int:
    return ((value << 1) | (value >> 63)) & MASK


RAND = random.Random(0)


def test_request_hash_of_one_header_is_its_xxh64():
    """One header policy: XXH64 (seed 0) of the header's value."""
    assert request_hash([header("x-a")], {"x-a": "v"}, 0, RAND) == h("v")


def test_request_hash_combines_policies_by_rotate_left_xor():
    """Several policies: rotate the hash so far left by one and XOR the next one in."""
    got = request_hash([header("x-a"), header("x-b")], {"x-a": "1", "x-b": "2"}, 0, RAND)
    assert got == rotl(h("1")) ^ h("2")
    same = request_hash([header("x-a"), header("x-a")], {"x-a": "1"}, 0, RAND)
    assert same == rotl(h("1")) ^ h("1") != 0


def test_request_hash_stops_at_a_terminal_policy_that_produced_a_hash():
    """A terminal policy with a hash ends the walk; one without a hash does not."""
    policies = [header("x-missing", terminal=True), header("x-a", terminal=True), header("x-b")]
    assert request_hash(policies, {"x-a": "1", "x-b": "2"}, 0, RAND) == h("1")


def test_request_hash_rewrites_every_regex_match():
    """The regex rewrite replaces every match before hashing."""
    policy = header("x-a", regex="[0-9]", sub="#")
    assert request_hash([policy], {"x-a": "a1b22"}, 0, RAND) == h("a#b##")


def test_request_hash_channel_id_is_used_as_is():
    """A channel-id policy contributes the id itself."""
    policy = HashPolicy(kind=HashPolicyKind.CHANNEL_ID)
    assert request_hash([policy], {}, 12345, RAND) == 12345


def test_request_hash_ignores_binary_headers_and_sees_grpc_content_type():
    """``-bin`` headers give no hash; ``content-type`` is always ``application/grpc``."""
    got = request_hash([header("x-b-bin"), header("content-type")], {"x-b-bin": "zz"}, 0, RAND)
    assert got == h("application/grpc")


@pytest.mark.parametrize("policies", [[], [header("x-missing")]])
def test_request_hash_without_any_hash_is_random(policies):
    """No policy produced a hash: a random 64-bit value from the given source."""
    assert request_hash(policies, {}, 0, random.Random(9)) == random.Random(9).getrandbits(64)


def reference_ring(entries: list[tuple[str, int]], min_size: int, max_size: int, cap: int):
    """C-core's ring construction walked one entry at a time (``RingHash::Ring::Ring``), as
    the reference for the vectorised `build_ring`."""
    total = sum(weight for _, weight in entries)
    normalised = [weight / total for _, weight in entries]
    smallest = min(1.0, *normalised)
    min_size, max_size = min(min_size, cap), min(max_size, cap)
    scale = min(-(-(smallest * min_size) // 1) / smallest, float(max_size))
    ring: list[tuple[int, int]] = []
    current = target = 0.0
    for index, (key, _) in enumerate(entries):
        target += scale * normalised[index]
        count = 0
        while current < target:
            ring.append((xxhash.xxh64_intdigest(f"{key}_{count}".encode()), index))
            count += 1
            current += 1
    ring.sort(key=lambda entry: entry[0])
    return [h for h, _ in ring], [i for _, i in ring]


@pytest.mark.parametrize("seed", range(6))
def test_the_ring_is_built_as_c_core_walks_it(seed: int) -> None:
    """`build_ring` (entry counts computed for all endpoints at once) gives exactly the ring
    C-core's one-at-a-time walk gives, for random weights, sizes and caps."""
    rand = random.Random(seed)
    entries = [(f"10.0.0.{i}:{rand.randrange(1, 9000)}", rand.randrange(1, 50)) for i in range(60)]
    min_size, max_size = rand.choice([1, 7, 64, 1024]), rand.choice([64, 1024, 8_000_000])
    cap = rand.choice([16, 100, 4096])
    assert build_ring(entries, min_size, max_size, cap) == reference_ring(
        entries, min_size, max_size, cap
    )


def test_a_ring_patched_across_updates_is_the_ring_built_afresh() -> None:
    """Through updates that replace endpoints (the ring is patched), change a weight, add and
    remove endpoints (rebuilt), the policy's ring always equals a new policy's ring."""
    rand = random.Random(4)
    zones = {zone: [ep(100 * z + i) for i in range(8)] for z, zone in enumerate("abc")}
    policy = RingHashPolicy(RingHash(min_ring_size=64, max_ring_size=64))
    for step in range(40):
        zone = rand.choice("abc")
        endpoints = zones[zone]
        change = rand.randrange(4)
        index = rand.randrange(len(endpoints))
        if change == 0:  # a weight
            endpoints[index] = endpoints[index]._replace(weight=rand.randrange(1, 5))
        elif change == 1 and len(endpoints) > 1:
            del endpoints[index]
        elif change == 2:
            endpoints.append(ep(5000 + step))
        else:  # a new address in place of one, same weight
            endpoints[index] = endpoints[index]._replace(port=9000 + step)
        localities = [loc(z, 1 + i, *zones[z]) for i, z in enumerate("abc")]
        policy.update(localities, float(step))
        fresh = RingHashPolicy(RingHash(min_ring_size=64, max_ring_size=64))
        fresh.update(localities, 0.0)
        assert policy.ring == fresh.ring, step
