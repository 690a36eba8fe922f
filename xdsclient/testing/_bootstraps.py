"""Bootstraps naming test control planes: several servers, authorities, fallback lists.

Why: a federation or fallback test needs gRPC's bootstrap JSON with each server's address and
insecure credentials; writing it by hand in every test buries what the test is about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["bootstrap"]


class _HasAddress(Protocol):
    @property
    def address(self) -> str: ...


Server = str | _HasAddress  #: a control plane, or a "host:port" string (e.g. a closed port)


def bootstrap(
    servers: Sequence[Server],
    *,
    authorities: Mapping[str, Sequence[Server]] | None = None,
    node_id: str = "test-node",
    server_features: Sequence[str] = (),
    **fields: Any,
) -> dict[str, Any]:
    """A bootstrap dict: ``servers`` at the top level in priority order, each authority with
    its own servers (an empty list: the top-level ones). Extra ``fields`` (templates, ...) are
    added as they are."""
    result: dict[str, Any] = {
        "xds_servers": [_server(s, server_features) for s in servers],
        "node": {"id": node_id},
        **fields,
    }
    if authorities is not None:
        result["authorities"] = {
            name: {"xds_servers": [_server(s, server_features) for s in listed]} if listed else {}
            for name, listed in authorities.items()
        }
    return result


def _server(server: Server, features: Sequence[str]) -> dict[str, Any]:
    uri = server if isinstance(server, str) else server.address
    entry: dict[str, Any] = {"server_uri": uri, "channel_creds": [{"type": "insecure"}]}
    if features:
        entry["server_features"] = list(features)
    return entry
