"""gRPC's xDS bootstrap JSON -> `ClientConfig`.

Why the same format as gRPC: services that already run gRPC xDS have this file (or the
``GRPC_XDS_BOOTSTRAP`` / ``GRPC_XDS_BOOTSTRAP_CONFIG`` variables) in place. Unknown fields are
ignored, as gRPC does; a present field of the wrong shape fails with its path in the message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._certificates import parse_certificate_providers
from ._config import (
    AuthorityConfig,
    BootstrapError,
    ChannelCredentials,
    ClientConfig,
    Locality,
    NodeConfig,
    ServerConfig,
)
from ._sources import FileSource, RestSource, Source

__all__ = ["load_bootstrap"]


def load_bootstrap(
    source: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> ClientConfig:
    """Read a bootstrap: a dict, a JSON file path, or (with no argument) the environment.

    The environment is ``GRPC_XDS_BOOTSTRAP`` (a file path), then
    ``GRPC_XDS_BOOTSTRAP_CONFIG`` (the JSON itself), as gRPC reads them.
    """
    if source is None:
        path = os.environ.get("GRPC_XDS_BOOTSTRAP")
        if path:
            return _from_file(path)
        inline = os.environ.get("GRPC_XDS_BOOTSTRAP_CONFIG")
        if inline:
            return _from_json(inline, "GRPC_XDS_BOOTSTRAP_CONFIG")
        raise BootstrapError("no bootstrap: set GRPC_XDS_BOOTSTRAP or GRPC_XDS_BOOTSTRAP_CONFIG")
    if isinstance(source, Mapping):
        return parse_bootstrap(source)
    return _from_file(source)


def _from_file(path: str | os.PathLike[str]) -> ClientConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BootstrapError(
            f"cannot read bootstrap file {os.fspath(path)!r}: {exc.strerror}"
        ) from None
    return _from_json(text, os.fspath(path))


def _from_json(text: str, origin: str) -> ClientConfig:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BootstrapError(f"{origin}: not valid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise BootstrapError(f"{origin}: must be a JSON object")
    return parse_bootstrap(data)


def parse_bootstrap(data: Mapping[str, Any]) -> ClientConfig:
    """Validate a bootstrap already decoded from JSON."""
    sourced = bool(data.get("xdsclient_sources"))
    servers = _get(data, "xds_servers", list, "") if "xds_servers" in data or not sourced else []
    if not servers and not sourced:
        raise BootstrapError("xds_servers: must list at least one server")
    node = _node(_get(data, "node", dict, "")) if "node" in data else NodeConfig()
    template = _optional_str(data, "client_default_listener_resource_name_template", "")
    authorities = _get(data, "authorities", dict, "") if "authorities" in data else {}
    sources = _get(data, "xdsclient_sources", dict, "") if "xdsclient_sources" in data else {}
    return ClientConfig(
        sources=_sources(sources),
        servers=_servers(servers, "xds_servers"),
        node=node,
        authorities={
            name: _authority(name, value, f"authorities[{name!r}]")
            for name, value in authorities.items()
        },
        client_default_listener_resource_name_template=template if template is not None else "%s",
        certificate_providers=parse_certificate_providers(data.get("certificate_providers", {})),
    )


def _sources(data: Mapping[str, Any]) -> dict[str, Source]:
    """``xdsclient_sources``, our extension (gRPC ignores it): a file, a REST endpoint or a
    server for a resource type, keyed by type URL or REST name (``listeners``, ``clusters``...)."""
    from .._protocol._services import PER_TYPE_SERVICES

    by_rest = {s.rest: url for url, s in PER_TYPE_SERVICES.items() if s.rest is not None}
    result: dict[str, Source] = {}
    for key, value in data.items():
        path = f"xdsclient_sources[{key!r}]"
        type_url = by_rest.get(key, key)
        if "/" not in type_url:
            known = ", ".join(sorted(by_rest))
            raise BootstrapError(f"{path}: not a type URL or one of {known}")
        if not isinstance(value, Mapping):
            raise BootstrapError(f"{path}: must be an object")
        result[type_url] = _source(value, path)
    return result


def _source(data: Mapping[str, Any], path: str) -> Source:
    kinds = [k for k in ("path", "rest", "xds_servers") if k in data]
    if len(kinds) != 1:
        raise BootstrapError(f"{path}: needs exactly one of path, rest, xds_servers")
    if kinds[0] == "path":
        return FileSource(
            path=_get(data, "path", str, path),
            watched_directory=_optional_str(data, "watched_directory", path),
        )
    if kinds[0] == "xds_servers":
        servers = _get(data, "xds_servers", list, path)
        if len(servers) != 1:
            raise BootstrapError(f"{path}.xds_servers: must list exactly one server")
        return _server(servers[0], f"{path}.xds_servers[0]")
    rest = _get(data, "rest", dict, path)
    where = f"{path}.rest"
    headers = _get(rest, "headers", dict, where) if "headers" in rest else {}
    for name, value in headers.items():
        if not isinstance(value, str):
            raise BootstrapError(f"{where}.headers[{name!r}]: must be a string")
    credentials = (
        _server({"server_uri": "-", **rest}, where).channel_credentials
        if "channel_creds" in rest
        else ChannelCredentials()
    )
    try:
        return RestSource(
            url=_get(rest, "url", str, where),
            refresh_delay=_seconds(rest, "refresh_delay", where, 1.0),
            request_timeout=_seconds(rest, "request_timeout", where, 1.0),
            headers=headers,
            channel_credentials=credentials,
        )
    except ValueError as exc:
        raise BootstrapError(f"{where}: {exc}") from None


def _seconds(data: Mapping[str, Any], key: str, path: str, default: float) -> float:
    if key not in data:
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise BootstrapError(f"{path}.{key}: must be a positive number of seconds")
    return float(value)


def _servers(servers: list[Any], path: str) -> tuple[ServerConfig, ...]:
    return tuple(_server(s, f"{path}[{i}]") for i, s in enumerate(servers))


def _authority(name: str, data: Any, path: str) -> AuthorityConfig:
    """One ``authorities`` entry: its own servers (none: the top-level ones) and template."""
    if not isinstance(data, Mapping):
        raise BootstrapError(f"{path}: must be an object")
    servers = _get(data, "xds_servers", list, path) if "xds_servers" in data else []
    template = _optional_str(data, "client_listener_resource_name_template", path)
    prefix = f"xdstp://{name}/"
    if template is not None and not template.startswith(prefix):
        raise BootstrapError(
            f"{path}.client_listener_resource_name_template: must start with {prefix!r}"
        )
    return AuthorityConfig(
        servers=_servers(servers, f"{path}.xds_servers"),
        client_listener_resource_name_template=template,
    )


def _server(data: Any, path: str) -> ServerConfig:
    if not isinstance(data, Mapping):
        raise BootstrapError(f"{path}: must be an object")
    uri = _get(data, "server_uri", str, path)
    if not uri:
        raise BootstrapError(f"{path}.server_uri: must not be empty")
    creds_list = _get(data, "channel_creds", list, path)
    credentials = None
    for i, creds in enumerate(creds_list):
        where = f"{path}.channel_creds[{i}]"
        if not isinstance(creds, Mapping):
            raise BootstrapError(f"{where}: must be an object")
        kind = _get(creds, "type", str, where)
        if kind == "insecure":
            credentials = ChannelCredentials(type="insecure")
        elif kind == "tls":
            config = _get(creds, "config", dict, where) if "config" in creds else {}
            credentials = ChannelCredentials(
                type="tls",
                ca_certificate_file=_optional_str(config, "ca_certificate_file", f"{where}.config"),
                certificate_file=_optional_str(config, "certificate_file", f"{where}.config"),
                private_key_file=_optional_str(config, "private_key_file", f"{where}.config"),
            )
        else:
            continue  # gRPC takes the first type it supports
        break
    if credentials is None:
        raise BootstrapError(f"{path}.channel_creds: no supported type (insecure, tls)")
    features = _get(data, "server_features", list, path) if "server_features" in data else []
    for i, feature in enumerate(features):
        if not isinstance(feature, str):
            raise BootstrapError(f"{path}.server_features[{i}]: must be a string")
    return ServerConfig(
        uri=uri, channel_credentials=credentials, server_features=frozenset(features)
    )


def _node(data: Mapping[str, Any]) -> NodeConfig:
    locality = None
    if "locality" in data:
        loc = _get(data, "locality", dict, "node")
        locality = Locality(
            region=_optional_str(loc, "region", "node.locality") or "",
            zone=_optional_str(loc, "zone", "node.locality") or "",
            sub_zone=_optional_str(loc, "sub_zone", "node.locality") or "",
        )
    return NodeConfig(
        id=_optional_str(data, "id", "node") or "",
        cluster=_optional_str(data, "cluster", "node") or "",
        metadata=dict(_get(data, "metadata", dict, "node")) if "metadata" in data else {},
        locality=locality,
    )


def _get(data: Mapping[str, Any], key: str, kind: type, path: str) -> Any:
    where = f"{path}.{key}" if path else key
    if key not in data:
        raise BootstrapError(f"{where}: required")
    value = data[key]
    if not isinstance(value, kind):
        names: dict[type, str] = {list: "an array", dict: "an object", str: "a string"}
        expected = names.get(kind, kind.__name__)
        raise BootstrapError(f"{where}: must be {expected}, got {type(value).__name__}")
    return value


def _optional_str(data: Mapping[str, Any], key: str, path: str) -> str | None:
    return _get(data, key, str, path) if key in data else None
