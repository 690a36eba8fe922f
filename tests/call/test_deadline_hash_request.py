"""The call as data (gRPC's header view), the deadline cap (gRFC A31) and the request hash
(gRFC A42)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from xxhash import xxh64_intdigest as xxh64

from xdsclient._call import (
    CallConfig,
    CallRequest,
    RouteChoice,
    call_hash,
    capped_deadline,
    grpc_header_view,
    max_stream_duration,
    route_call,
)

from .builders import add_route, call, config, route_config

_names = st.sampled_from(["x-a", "X-A", "x-b", "y-bin", "content-type", "Grpc-Tags-Bin"])
_pairs = st.lists(st.tuples(_names, st.text(alphabet="abc,", max_size=3)), max_size=6)


@given(_pairs)
def test_header_view_follows_grpc_rules(pairs: list[tuple[str, str]]) -> None:
    """Names are lower-cased, repeats joined with ``,`` in order, ``-bin`` absent and
    content-type always application/grpc."""
    view = grpc_header_view(tuple(pairs))
    assert view["content-type"] == "application/grpc"
    assert not any(name.endswith("-bin") for name in view)
    for name in ("x-a", "x-b"):
        values = [value for key, value in pairs if key.lower() == name]
        assert view.get(name) == (",".join(values) if values else None)


def test_plain_http_view_keeps_every_header() -> None:
    """Without gRPC's rules, content-type and ``-bin`` headers are seen as sent."""
    request = CallRequest(
        authority="a",
        path="/",
        metadata=(("Content-Type", "text/html"), ("x-bin", "1")),
        grpc_rules=False,
    )
    assert dict(request.headers) == {"content-type": "text/html", "x-bin": "1"}


def _choice(
    routes: Any, request: CallRequest | None = None, **kwargs: Any
) -> tuple[CallConfig, RouteChoice]:
    cfg = config(routes, **kwargs)
    choice = route_call(cfg.hcm, request or call(), random.Random(0), listener_name="svc")
    assert isinstance(choice, RouteChoice)
    return cfg, choice


def test_route_max_stream_duration_caps_the_deadline() -> None:
    """A route's max_stream_duration shortens a later deadline, never a sooner one."""
    routes = route_config()
    route = add_route(routes.virtual_hosts[0])
    route.route.max_stream_duration.max_stream_duration.FromMilliseconds(1500)
    cfg, choice = _choice(routes)
    duration = max_stream_duration(choice.action, cfg.hcm)
    assert duration == 1.5
    assert capped_deadline(100.0, 10.0, duration) == 11.5
    assert capped_deadline(11.0, 10.0, duration) == 11.0
    assert capped_deadline(None, 10.0, duration) == 11.5


def test_grpc_timeout_header_max_wins_over_max_stream_duration() -> None:
    """``grpc_timeout_header_max`` is the cap when both are set (A31)."""
    routes = route_config()
    route = add_route(routes.virtual_hosts[0])
    route.route.max_stream_duration.max_stream_duration.FromMilliseconds(1500)
    route.route.max_stream_duration.grpc_timeout_header_max.FromMilliseconds(700)
    cfg, choice = _choice(routes)
    assert max_stream_duration(choice.action, cfg.hcm) == 0.7


def test_listener_max_stream_duration_is_the_default() -> None:
    """Without a route value, the HCM's max_stream_duration caps; 0 means no cap."""
    routes = route_config()
    add_route(routes.virtual_hosts[0])
    cfg, choice = _choice(routes, max_stream_duration_s=3.0)
    assert max_stream_duration(choice.action, cfg.hcm) == 3.0
    cfg, choice = _choice(routes, max_stream_duration_s=0.0)
    assert max_stream_duration(choice.action, cfg.hcm) is None
    assert capped_deadline(5.0, 0.0, None) == 5.0


def test_route_zero_duration_is_no_cap_even_with_listener_value() -> None:
    """A route's explicit 0 max_stream_duration means no limit, not the listener's."""
    routes = route_config()
    route = add_route(routes.virtual_hosts[0])
    route.route.max_stream_duration.max_stream_duration.SetInParent()
    cfg, choice = _choice(routes, max_stream_duration_s=3.0)
    assert max_stream_duration(choice.action, cfg.hcm) is None


def _hash_routes(*policies: Callable[[Any], None]) -> Any:
    routes = route_config()
    route = add_route(routes.virtual_hosts[0])
    for fill in policies:
        fill(route.route.hash_policy.add())
    return routes


def _header(
    name: str, pattern: str | None = None, substitution: str = "", terminal: bool = False
) -> Callable[[Any], None]:
    def fill(policy: Any) -> None:
        policy.header.header_name = name
        if pattern is not None:
            policy.header.regex_rewrite.pattern.regex = pattern
            policy.header.regex_rewrite.substitution = substitution
        policy.terminal = terminal

    return fill


def _channel_id(terminal: bool = False) -> Callable[[Any], None]:
    def fill(policy: Any) -> None:
        policy.filter_state.key = "io.grpc.channel_id"
        policy.terminal = terminal

    return fill


def test_header_hash_is_xxh64_of_the_joined_value() -> None:
    """A header policy hashes the call's joined value with XXH64 seed 0."""
    _, choice = _choice(_hash_routes(_header("x-user")))
    request = call(metadata=(("x-user", "a"), ("X-User", "b")))
    assert call_hash(choice.action, request, random.Random(0)) == xxh64(b"a,b")


def test_regex_rewrite_applies_before_hashing() -> None:
    """The header's value is rewritten by the policy's regex before hashing."""
    _, choice = _choice(_hash_routes(_header("x-user", pattern="[0-9]+", substitution="N")))
    request = call(metadata=(("x-user", "u12v3"),))
    assert call_hash(choice.action, request, random.Random(0)) == xxh64(b"uNvN")


def test_channel_id_policy_hashes_to_the_channel_id() -> None:
    """``io.grpc.channel_id`` contributes the channel's id itself."""
    _, choice = _choice(_hash_routes(_channel_id()))
    assert call_hash(choice.action, call(channel_id=12345), random.Random(0)) == 12345


def test_policies_combine_by_rotate_and_xor_until_terminal() -> None:
    """Hashes combine as rotl(previous, 1) ^ new; a terminal policy with a hash ends the walk."""
    mask = (1 << 64) - 1
    h = xxh64(b"v")
    _, choice = _choice(_hash_routes(_header("x-u"), _channel_id()))
    expected = (((h << 1) | (h >> 63)) & mask) ^ 9
    assert (
        call_hash(choice.action, call(metadata=(("x-u", "v"),), channel_id=9), random.Random(0))
        == expected
    )
    _, choice = _choice(_hash_routes(_header("x-u", terminal=True), _channel_id()))
    assert (
        call_hash(choice.action, call(metadata=(("x-u", "v"),), channel_id=9), random.Random(0))
        == h
    )


@pytest.mark.parametrize("name", ["x-key-bin", "x-missing"])
def test_no_hash_is_a_random_draw(name: str) -> None:
    """A binary or missing header gives no hash; with none at all the hash is random."""
    _, choice = _choice(_hash_routes(_header(name)))
    request = call(metadata=(("x-key-bin", "AAAA"),))
    first = call_hash(choice.action, request, random.Random(1))
    assert first == random.Random(1).getrandbits(64)
    assert first != call_hash(choice.action, request, random.Random(2))


def test_route_without_policies_draws_a_random_hash() -> None:
    """A route without hash policies gets a random 64-bit hash per call."""
    _, choice = _choice(_hash_routes())
    assert call_hash(choice.action, call(), random.Random(3)) == random.Random(3).getrandbits(64)
