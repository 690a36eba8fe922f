"""gRPC's cluster specifier plugin registry: which ``cluster_specifier_plugins`` of a
RouteConfiguration a client can use, and what it does with the others.

Why a registry: as for HTTP filters (`_filters`), the verdict depends on the plugin's config
type, not its name. gRPC C-core knows one type, RLS (``grpc.lookup.v1.RouteLookupClusterSpecifier``,
gRFC A28's route lookup); a plugin of another type is NACKed unless it is ``is_optional``, in
which case every route that names it is ignored (C-core's ``xds_route_config_parser.cc``).

Rules, as C-core applies them: the ``extension`` must be present; names must be unique (an
empty name is a name); the ``typed_config`` must be present with a type URL that has a
``/`` and a type after it. A ``TypedStruct`` stands for the type it names, but gRPC reads RLS
only from its protobuf form, so a TypedStruct naming RLS is NACKed. The RLS config itself is
kept as it came, unchecked (we have no RLS protobuf; docs/validation.md lists the deviation).
"""

from __future__ import annotations

from typing import Any

from xds.type.v3 import typed_struct_pb2

from ._view import invalid

__all__ = ["KNOWN_CLUSTER_SPECIFIER_PLUGINS", "Plugins", "cluster_specifier_plugins"]

#: The cluster specifier plugin types gRPC clients know (the full protobuf name).
KNOWN_CLUSTER_SPECIFIER_PLUGINS: frozenset[str] = frozenset(
    {"grpc.lookup.v1.RouteLookupClusterSpecifier"}
)
_TYPED_STRUCTS = frozenset({"xds.type.v3.TypedStruct", "udpa.type.v1.TypedStruct"})

Plugins = dict[str, tuple[str, bytes] | None]
"""Plugins by name: (type URL, serialized config) for a known type, None for an optional one
of a type gRPC lacks (the routes naming it are ignored)."""


def cluster_specifier_plugins(name: str, prefix: str, message: Any) -> Plugins:
    """The ``cluster_specifier_plugins`` of a RouteConfiguration ``message``, validated."""
    plugins: Plugins = {}
    for i, plugin in enumerate(message.cluster_specifier_plugins):
        where = f"{prefix}cluster_specifier_plugins[{i}].extension"
        if not plugin.HasField("extension"):
            raise invalid(name, where, "required")
        extension = plugin.extension
        if extension.name in plugins:
            raise invalid(name, f"{where}.name", f"duplicate name {extension.name!r}")
        packed = extension.typed_config
        kind, typed_struct = _type_of(name, f"{where}.typed_config", extension)
        if kind in KNOWN_CLUSTER_SPECIFIER_PLUGINS:
            if typed_struct:
                raise invalid(name, f"{where}.typed_config", f"{kind} must not be a TypedStruct")
            plugins[extension.name] = (packed.type_url, packed.value)
        elif plugin.is_optional:
            plugins[extension.name] = None
        else:
            raise invalid(
                name, f"{where}.typed_config", f"unsupported cluster specifier plugin type {kind}"
            )
    return plugins


def _type_of(name: str, path: str, extension: Any) -> tuple[str, bool]:
    """The config type a TypedExtensionConfig names, and whether it came in a TypedStruct."""
    if not extension.HasField("typed_config"):
        raise invalid(name, path, "required")
    kind = _type_name(name, f"{path}.type_url", extension.typed_config.type_url)
    if kind not in _TYPED_STRUCTS:
        return kind, False
    try:
        inner = typed_struct_pb2.TypedStruct.FromString(extension.typed_config.value)
    except Exception as exc:  # protobuf's DecodeError
        raise invalid(name, path, f"cannot parse {kind}: {exc}") from exc
    return _type_name(name, f"{path}.value.type_url", inner.type_url), True


def _type_name(name: str, path: str, type_url: str) -> str:
    """The type after the last ``/`` of ``type_url``; an error when there is none."""
    if not type_url:
        raise invalid(name, path, "required")
    _, slash, kind = type_url.rpartition("/")
    if not slash or not kind:
        raise invalid(name, path, f"invalid type URL {type_url!r}")
    return kind
