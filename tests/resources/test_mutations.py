"""Random mutations of valid resources either decode or raise ResourceDecodeError, nothing else.

Mutations are structural (set any field, at any depth, to a random value of its type; add
repeated elements; put random or valid messages in Anys) and byte-level (flip, cut, insert).
"""

from __future__ import annotations

import contextlib
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.load_balancing_policies.ring_hash.v3 import ring_hash_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import cluster, endpoints, listener
from tests.fuzz import examples
from xdsclient import ResourceDecodeError
from xdsclient.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE_CONFIGURATION, ResourceType


def _route_config() -> Any:
    from envoy.config.route.v3 import route_pb2

    message = route_pb2.RouteConfiguration(name="rc")
    vhost = message.virtual_hosts.add(name="vh", domains=["*.example.com", "*"])
    route = vhost.routes.add()
    route.match.prefix = "/svc/"
    route.match.headers.add(name="x").exact_match = "y"
    route.route.weighted_clusters.clusters.add(name="a").weight.value = 1
    route.route.retry_policy.retry_on = "unavailable"
    return message


def _aggregate() -> Any:
    message = cluster_pb2.Cluster(name="agg")
    message.cluster_type.name = "envoy.clusters.aggregate"
    message.cluster_type.typed_config.Pack(aggregate_pb2.ClusterConfig(clusters=["a", "b"]))
    return message


def _ring_hash_policy() -> Any:
    message = cluster("rh")
    policy = message.load_balancing_policy.policies.add()
    policy.typed_extension_config.typed_config.Pack(ring_hash_pb2.RingHash())
    return message


SEEDS: list[tuple[ResourceType[Any], Any]] = [
    (CLUSTER, cluster("c")),
    (CLUSTER, _aggregate()),
    (CLUSTER, _ring_hash_policy()),
    (ENDPOINT, endpoints("e")),
    (LISTENER, listener("l")),
    (ROUTE_CONFIGURATION, _route_config()),
]

# Messages worth finding inside an Any, so mutations reach the nested validators.
ANY_PAYLOADS = [
    router_pb2.Router(),
    ring_hash_pb2.RingHash(),
    tls_pb2.UpstreamTlsContext(),
    aggregate_pb2.ClusterConfig(clusters=["x"]),
]

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_ENUM: (-3, 12),
}


def _scalar(data: st.DataObject, field: FieldDescriptor) -> Any:
    kind = field.type
    if kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]
        return data.draw(
            st.one_of(st.integers(low, high), st.sampled_from([0, 1, -1 if low < 0 else 2, high]))
        )
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return data.draw(st.floats(allow_nan=True, allow_infinity=True, width=32))
    if kind == FieldDescriptor.TYPE_BOOL:
        return data.draw(st.booleans())
    if kind == FieldDescriptor.TYPE_BYTES:
        return data.draw(st.binary(max_size=12))
    return data.draw(
        st.one_of(st.sampled_from(["", "*", "/", "a*b", "(", "xdstp://a/b/c"]), st.text(max_size=8))
    )


def _mutate(message: Any, data: st.DataObject, depth: int = 0) -> None:
    if message.DESCRIPTOR.full_name == "google.protobuf.Any":
        choice = data.draw(st.integers(0, 2))
        if choice == 0:
            message.Pack(data.draw(st.sampled_from(ANY_PAYLOADS)))
        elif choice == 1:
            message.type_url = data.draw(
                st.sampled_from(["", "type.googleapis.com/nope", message.type_url])
            )
        else:
            message.value = data.draw(st.binary(max_size=16))
        return
    fields = message.DESCRIPTOR.fields
    if not fields:
        return
    field = data.draw(st.sampled_from(list(fields)))
    repeated = field.is_repeated
    if field.message_type is not None:
        if field.message_type.GetOptions().map_entry:
            return  # maps: covered through their values elsewhere
        if depth >= 6:
            return
        if repeated:
            container = getattr(message, field.name)
            target = container.add() if not container or data.draw(st.booleans()) else container[0]
        else:
            target = getattr(message, field.name)
            target.SetInParent()
        _mutate(target, data, depth + 1)
        return
    try:
        value = _scalar(data, field)
        if repeated:
            getattr(message, field.name).append(value)
        else:
            setattr(message, field.name, value)
    except (ValueError, TypeError):
        pass  # protobuf refused the value (e.g. an invalid UTF-8 string); nothing to test


def _decode(rtype: ResourceType[Any], data: bytes) -> None:
    with contextlib.suppress(ResourceDecodeError):
        rtype.decode(data)


_settings = settings(
    max_examples=examples(400),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@_settings
@given(seed=st.sampled_from(SEEDS), data=st.data())
def test_structural_mutations_decode_or_raise_our_error(
    seed: tuple[ResourceType[Any], Any], data: st.DataObject
) -> None:
    rtype, original = seed
    message = type(original)()
    message.CopyFrom(original)
    for _ in range(data.draw(st.integers(1, 4))):
        _mutate(message, data)
    _decode(rtype, message.SerializeToString())


@_settings
@given(seed=st.sampled_from(SEEDS), data=st.data())
def test_byte_mutations_decode_or_raise_our_error(
    seed: tuple[ResourceType[Any], Any], data: st.DataObject
) -> None:
    rtype, original = seed
    raw = bytearray(original.SerializeToString())
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, max(0, len(raw) - 1)))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip" and raw:
            raw[position] ^= data.draw(st.integers(1, 255))
        elif action == "cut":
            del raw[position:]
        else:
            raw[position:position] = data.draw(st.binary(min_size=1, max_size=4))
    _decode(rtype, bytes(raw))


def test_the_seeds_are_valid() -> None:
    """The mutations start from resources that decode, so a rejection is the mutation's doing."""
    for rtype, message in SEEDS:
        name, view = rtype.decode(message.SerializeToString())
        assert view.name == name
