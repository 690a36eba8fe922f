"""Registered load-balancing policy types in the cluster decoder (gRFC A52): a registered
type is supported where it stands in the list, its config decoded as A52 says; registering
changes what is valid; built-in types cannot be registered over."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from envoy.extensions.load_balancing_policies.round_robin.v3 import round_robin_pb2
from envoy.extensions.load_balancing_policies.wrr_locality.v3 import wrr_locality_pb2
from google.protobuf import any_pb2, struct_pb2, wrappers_pb2
from xds.type.v3 import typed_struct_pb2

from xdsclient.resources import (
    CustomLbPolicy,
    WrrLocality,
    register_lb_policy_type,
    unregister_lb_policy_type,
)

from .test_cluster import _policies, reason, view


@pytest.fixture
def registered() -> Iterator[None]:
    """``test.Mine`` and ``test.NotCompiled`` registered for the test."""
    for name in ("type.googleapis.com/test.Mine", "test.NotCompiled"):
        register_lb_policy_type(name)
    try:
        yield
    finally:
        for name in ("test.Mine", "test.NotCompiled"):
            unregister_lb_policy_type(name)


def mine(**fields: Any) -> typed_struct_pb2.TypedStruct:
    value = struct_pb2.Struct()
    value.update(fields)
    return typed_struct_pb2.TypedStruct(type_url="type.googleapis.com/test.Mine", value=value)


def test_a_registered_typed_struct_is_taken_where_it_stands_with_its_fields(
    registered: None,
) -> None:
    """Before round robin in the list, the registered TypedStruct wins, its fields a dict
    (numbers as JSON numbers, lists as lists)."""
    v = view(_policies(mine(zone="z", weights=[1, 2]), round_robin_pb2.RoundRobin()))
    assert isinstance(v.lb_policy, CustomLbPolicy)
    assert v.lb_policy.type_name == "test.Mine"
    assert v.lb_policy.config == {"zone": "z", "weights": [1.0, 2.0]}


def test_an_unregistered_type_is_skipped_and_only_unregistered_ones_are_rejected() -> None:
    """Without registration the same list falls through to round robin, and a list of only
    that TypedStruct is ``no supported policy``."""
    v = view(_policies(mine(zone="z"), round_robin_pb2.RoundRobin()))
    assert not isinstance(v.lb_policy, CustomLbPolicy)
    assert reason(_policies(mine(zone="z"))) == "load_balancing_policy: no supported policy"


def test_a_typed_config_is_its_message_or_the_any_when_its_type_is_unknown(
    registered: None,
) -> None:
    """A registered type known to the descriptor pool decodes to its message; one that is not
    (``test.NotCompiled``) is handed over as the Any."""
    register_lb_policy_type("google.protobuf.StringValue")
    try:
        v = view(_policies(wrappers_pb2.StringValue(value="cfg")))
    finally:
        unregister_lb_policy_type("google.protobuf.StringValue")
    assert isinstance(v.lb_policy, CustomLbPolicy)
    assert v.lb_policy.config == wrappers_pb2.StringValue(value="cfg")
    message = _policies()
    entry = message.load_balancing_policy.policies.add()
    entry.typed_extension_config.typed_config.CopyFrom(
        any_pb2.Any(type_url="type.googleapis.com/test.NotCompiled", value=b"\x08\x01")
    )
    unknown = view(message).lb_policy
    assert isinstance(unknown, CustomLbPolicy)
    assert unknown.config.value == b"\x08\x01"


def test_wrr_locality_may_wrap_a_registered_policy_and_views_compare_by_config(
    registered: None,
) -> None:
    """A registered child of wrr_locality is kept as its child; two views of one config are
    equal, of another config not."""
    locality = wrr_locality_pb2.WrrLocality()
    locality.endpoint_picking_policy.policies.add().typed_extension_config.typed_config.Pack(
        mine(zone="a")
    )
    v = view(_policies(locality))
    assert isinstance(v.lb_policy, WrrLocality)
    assert v.lb_policy.child == view(_policies(mine(zone="a"))).lb_policy
    assert view(_policies(mine(zone="a"))).lb_policy != view(_policies(mine(zone="b"))).lb_policy


def test_built_in_types_cannot_be_registered() -> None:
    """Round robin's type and the TypedStruct wrappers are the decoder's own."""
    for name in (
        "type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin",
        "xds.type.v3.TypedStruct",
        "udpa.type.v1.TypedStruct",
    ):
        with pytest.raises(ValueError, match="built-in"):
            register_lb_policy_type(name)
