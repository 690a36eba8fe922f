"""VirtualHost, the resource of VHDS: one virtual host of a route configuration, on demand.

Why a view of its own: VHDS sends virtual hosts one by one, named
``<route configuration name>/<host>``, for a route configuration whose ``vhds`` says so. Each
is validated exactly as a virtual host inside a RouteConfiguration is (the route decoder's
own rules, `_route`), so routing over it (`select_virtual_host`, `match_route`) is the same.
A cluster specifier plugin is defined by the route configuration, not here: a route naming one
is rejected unless the plugin is optional.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
from envoy.config.route.v3 import route_components_pb2

from ._route import virtual_host_of
from ._route_values import VirtualHost
from ._view import View, parse

__all__ = ["VirtualHostView", "decode_virtual_host", "split_vhds_name", "vhds_name"]


@attrs.frozen(kw_only=True, eq=False)
class VirtualHostView(View):
    """A validated VirtualHost sent by VHDS: ``name`` (the resource name), ``virtual_host``
    (its domains and routes, as in a `RouteConfigurationView`)."""

    _message_class: ClassVar[Any] = route_components_pb2.VirtualHost

    name: str
    virtual_host: VirtualHost
    raw: bytes = attrs.field(repr=False)

    @classmethod
    def from_proto(cls, message: Any, raw: bytes | None = None) -> VirtualHostView:
        """Validate ``message``; raises `ResourceDecodeError` naming the field at fault."""
        return cls(
            name=message.name,
            virtual_host=virtual_host_of(message.name, message),
            raw=message.SerializeToString() if raw is None else raw,
        )


def decode_virtual_host(data: bytes) -> tuple[str, VirtualHostView]:
    """The VIRTUAL_HOST type's decoder: bytes -> (name, view)."""
    message = parse(route_components_pb2.VirtualHost, data)
    return message.name, VirtualHostView.from_proto(message, data)


def vhds_name(route_config_name: str, host: str) -> str:
    """The VHDS resource name of ``host`` in ``route_config_name``:
    ``<route configuration name>/<host>``. A host cannot hold a slash; the route configuration
    name can."""
    if not route_config_name:
        raise ValueError("a route configuration name cannot be empty")
    if not host or "/" in host:
        raise ValueError(f"a VHDS host is non-empty and holds no '/', not {host!r}")
    return f"{route_config_name}/{host}"


def split_vhds_name(name: str) -> tuple[str, str]:
    """``(route configuration name, host)`` of a VHDS resource name, split at its last slash
    (right to left, as the host holds none). Raises ValueError when either part is empty."""
    route_config_name, slash, host = name.rpartition("/")
    if not slash or not route_config_name or not host:
        raise ValueError(f"{name!r} is not a VHDS name <route configuration name>/<host>")
    return route_config_name, host
