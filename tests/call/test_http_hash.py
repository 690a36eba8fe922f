"""Envoy's hash policies for ring hash under `HTTP_RULES`: header, cookie, query parameter and
source IP hashed with XXH64, ``terminal``, and Envoy's ``rotl(hash, 1) ^ new`` combination."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envoy.config.route.v3 import route_pb2
from xxhash import xxh64_intdigest

from xdsclient._call import Attempt, CallRequest

from .builders import add_route, http, http_plan

_MASK = (1 << 64) - 1
Policy = Callable[[Any], None]


def _hash(request: CallRequest, *policies: Policy, seed: int = 0) -> int:
    routes = route_pb2.RouteConfiguration(name="routes")
    route = add_route(routes.virtual_hosts.add(name="vh", domains=["*"]), "/", "ring")
    for fill in policies:
        fill(route.route.hash_policy.add())
    step = http_plan(routes, request, seed=seed).start(0.0)
    assert isinstance(step, Attempt)
    return step.request_hash


def _header(name: str, terminal: bool = False, rewrite: tuple[str, str] | None = None) -> Policy:
    def fill(policy: Any) -> None:
        policy.header.header_name = name
        policy.terminal = terminal
        if rewrite is not None:
            policy.header.regex_rewrite.pattern.regex = rewrite[0]
            policy.header.regex_rewrite.substitution = rewrite[1]

    return fill


def _cookie(name: str) -> Policy:
    def fill(policy: Any) -> None:
        policy.cookie.name = name

    return fill


def _query(name: str) -> Policy:
    def fill(policy: Any) -> None:
        policy.query_parameter.name = name

    return fill


def _source_ip(policy: Any) -> None:
    policy.connection_properties.source_ip = True


def _rotl(value: int) -> int:
    return ((value << 1) | (value >> 63)) & _MASK


def test_a_header_is_hashed_with_xxh64() -> None:
    """A header policy hashes the header's value with XXH64 (seed 0), whatever the draw."""
    request = http(headers=(("X-User", "42"),))
    assert _hash(request, _header("x-user")) == xxh64_intdigest(b"42")
    assert _hash(request, _header("x-user"), seed=9) == xxh64_intdigest(b"42")


def test_repeated_header_values_are_sorted_and_hashed_together() -> None:
    """Every value of a repeated header, sorted, hashed as one: order does not matter."""
    one = http(headers=(("x-tag", "b"), ("x-tag", "a")))
    other = http(headers=(("x-tag", "a"), ("x-tag", "b")))
    assert _hash(one, _header("x-tag")) == _hash(other, _header("x-tag")) == xxh64_intdigest(b"ab")


def test_a_headers_regex_rewrite_applies_before_hashing() -> None:
    """``regex_rewrite`` rewrites each value before hashing."""
    request = http(headers=(("x-session", "user-42-shard-7"),))
    policy = _header("x-session", rewrite=("^user-([0-9]+)-.*$", r"\1"))
    assert _hash(request, policy) == xxh64_intdigest(b"42")


def test_the_host_header_is_the_authority() -> None:
    """A policy on ``host`` hashes the request's authority (Envoy's ``:authority``)."""
    assert _hash(http(authority="reviews:8080"), _header("host")) == xxh64_intdigest(
        b"reviews:8080"
    )


def test_a_cookie_is_hashed_unquoted() -> None:
    """A cookie policy hashes the first cookie of that name, its quotes removed."""
    request = http(headers=(("cookie", 'theme=dark; session="s-1"'), ("cookie", "session=s-2")))
    assert _hash(request, _cookie("session")) == xxh64_intdigest(b"s-1")


def test_a_query_parameter_is_hashed_as_written() -> None:
    """A query parameter policy hashes the parameter's first value, not percent-decoded."""
    request = http("/api?user=a%20b&user=c")
    assert _hash(request, _query("user")) == xxh64_intdigest(b"a%20b")


def test_the_source_ip_is_hashed() -> None:
    """A ``connection_properties.source_ip`` policy hashes the caller's address."""
    assert _hash(http(source_ip="10.1.2.3"), _source_ip) == xxh64_intdigest(b"10.1.2.3")


def test_policies_combine_by_rotate_and_xor() -> None:
    """Each policy's hash is folded in as ``rotl(previous, 1) ^ new``."""
    request = http("/p?user=u1", headers=(("x-user", "42"),), source_ip="10.0.0.1")
    expected = _rotl(xxh64_intdigest(b"42")) ^ xxh64_intdigest(b"u1")
    expected = _rotl(expected) ^ xxh64_intdigest(b"10.0.0.1")
    assert _hash(request, _header("x-user"), _query("user"), _source_ip) == expected


def test_a_terminal_policy_with_a_hash_ends_the_walk() -> None:
    """A ``terminal`` policy that produced a hash stops the walk; one that did not, does
    not."""
    request = http("/p?user=u1", headers=(("x-user", "42"),))
    assert _hash(request, _header("x-user", terminal=True), _query("user")) == xxh64_intdigest(
        b"42"
    )
    expected = _rotl(xxh64_intdigest(b"42")) ^ xxh64_intdigest(b"u1")
    assert _hash(
        request, _header("x-absent", terminal=True), _header("x-user"), _query("user")
    ) == (expected)


def test_no_hash_is_a_random_hash() -> None:
    """Without a policy, or when none produces a hash, the hash is a random draw."""
    request = http()
    assert _hash(request, seed=1) != _hash(request, seed=2)
    assert _hash(request, _cookie("session"), seed=1) != _hash(request, _cookie("session"), seed=2)
