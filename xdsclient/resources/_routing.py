"""gRPC's routing rules over validated route values: the two pure functions a data plane needs.

`select_virtual_host` picks the virtual host for an authority (exact, then the longest suffix
wildcard, then the longest prefix wildcard, then ``*``) and `match_route` the first route of it
whose path, headers and runtime fraction match a request. Why apart: they run per request, not
per update, and read only the values (`_route_values`), never a protobuf.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._route_values import Route, VirtualHost

__all__ = ["match_route", "select_virtual_host"]


def select_virtual_host(
    virtual_hosts: tuple[VirtualHost, ...], authority: str
) -> VirtualHost | None:
    """The virtual host for ``authority`` (gRPC's rules): an exact domain wins, then the longest
    suffix wildcard (``*.example.com``), then the longest prefix wildcard (``example.*``), then
    ``*``. Case-insensitive."""
    host = authority.lower()
    best: tuple[int, int] | None = None  # (kind rank: lower is better, -pattern length)
    chosen = None
    for vhost in virtual_hosts:
        for domain in vhost.domains:
            pattern = domain.lower()
            if pattern == "*":
                rank = (3, 0)
                matched = True
            elif pattern.startswith("*"):
                rank, matched = (1, -len(pattern)), host.endswith(pattern[1:])
            elif pattern.endswith("*"):
                rank, matched = (2, -len(pattern)), host.startswith(pattern[:-1])
            else:
                rank, matched = (0, 0), host == pattern
            if matched and (best is None or rank < best):
                best, chosen = rank, vhost
    return chosen


def match_route(
    virtual_host: VirtualHost,
    path: str,
    headers: Mapping[str, str] | None = None,
    roll_ppm: int | None = None,
) -> Route | None:
    """The first route of ``virtual_host`` matching a request (header names lower-case)."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    for route in virtual_host.routes:
        if route.match.matches(path, lowered, roll_ppm):
            return route
    return None
