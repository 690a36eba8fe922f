"""A resource type is data plus a decoder, not a subclass of the client.

Why: the protocol core must handle Listener, Cluster and any user-defined type the same way. All
it needs to know about a type is its URL, how to turn the serialized bytes of one resource into
``(name, value)``, and whether SotW responses carry the full state of the world for it (which
makes absence mean deletion). Custom types register the same way as built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs

from .._errors import ResourceDecodeError

__all__ = ["V2_TYPE_URLS", "ResourceType", "removed_v2_type"]

T = TypeVar("T")

_TYPE_PREFIX = "type.googleapis.com/"

#: The type URLs of xDS v2 (removed from Envoy and from gRPC, which speak v3 only), each with
#: the v3 type URL that replaced it: a v2 URL is not "unknown", it is out of date.
V2_TYPE_URLS: dict[str, str] = {
    _TYPE_PREFIX + v2: _TYPE_PREFIX + v3
    for v2, v3 in (
        ("envoy.api.v2.Listener", "envoy.config.listener.v3.Listener"),
        ("envoy.api.v2.RouteConfiguration", "envoy.config.route.v3.RouteConfiguration"),
        ("envoy.api.v2.route.VirtualHost", "envoy.config.route.v3.VirtualHost"),
        (
            "envoy.api.v2.ScopedRouteConfiguration",
            "envoy.config.route.v3.ScopedRouteConfiguration",
        ),
        ("envoy.api.v2.Cluster", "envoy.config.cluster.v3.Cluster"),
        ("envoy.api.v2.ClusterLoadAssignment", "envoy.config.endpoint.v3.ClusterLoadAssignment"),
        ("envoy.api.v2.auth.Secret", "envoy.extensions.transport_sockets.tls.v3.Secret"),
        ("envoy.service.discovery.v2.Runtime", "envoy.service.runtime.v3.Runtime"),
    )
}


def removed_v2_type(type_url: str) -> str | None:
    """For an xDS v2 type URL (or its bare message name), the one line saying so and naming
    the v3 type URL to use instead; None for any other."""
    v3 = V2_TYPE_URLS.get(
        type_url if type_url.startswith(_TYPE_PREFIX) else _TYPE_PREFIX + type_url
    )
    if v3 is None:
        return None
    return f"{type_url} is an xDS v2 type, and xDS v2 was removed: use {v3}"


@attrs.frozen(kw_only=True)
class ResourceType(Generic[T]):
    """Describes one xDS resource type to the client.

    ``decode(data)`` receives the serialized resource (the ``value`` of its ``Any``) and returns
    ``(name, value)``; it raises `ResourceDecodeError` (naming the resource when it can) for
    anything it rejects. Any other exception it raises is caught and treated the same way, so a
    buggy decoder NACKs a resource instead of breaking the client.

    ``decode_is_pure``: ``decode`` is a pure function of the bytes (the default, true of every
    built-in type), so a resource whose bytes equal the cached ones is neither decoded,
    validated nor delivered again. Set it to False when decoding also depends on something else
    (a clock, a file, a registry that can change): every copy is then decoded.
    """

    type_url: str
    decode: Callable[[bytes], tuple[str, T]] = attrs.field(eq=False)
    #: SotW responses for this type hold every resource the client wants (LDS, CDS): a resource
    #: missing from such a response has been deleted.
    all_resources_required_in_sotw: bool = False
    decode_is_pure: bool = True

    @property
    def short_name(self) -> str:
        """The last component of the type URL, e.g. ``Cluster``."""
        return self.type_url.rsplit(".", 1)[-1]

    @classmethod
    def for_message(
        cls,
        message_class: Any,
        *,
        name_field: str = "name",
        all_resources_required_in_sotw: bool = False,
    ) -> ResourceType[Any]:
        """A type whose values are the protobuf messages themselves, named by ``name_field``.

        The type URL is derived from the message descriptor.
        """
        full_name: str = message_class.DESCRIPTOR.full_name
        if name_field not in message_class.DESCRIPTOR.fields_by_name:
            raise ValueError(f"{full_name} has no field {name_field!r} to name resources by")
        from_string = message_class.FromString

        def decode(data: bytes) -> tuple[str, Any]:
            try:
                message = from_string(data)
            except Exception as exc:  # protobuf raises DecodeError, a foreign type: map it here.
                raise ResourceDecodeError(f"cannot parse {full_name}: {exc}") from exc
            return getattr(message, name_field), message

        return ResourceType(
            type_url=_TYPE_PREFIX + full_name,
            decode=decode,
            all_resources_required_in_sotw=all_resources_required_in_sotw,
        )
