"""The resource cache: every resource the client holds, keyed by (authority, type URL, name).

Why outside the stream state: a resource outlives the stream that brought it. The cache is
owned by the client, written by the protocol sessions (one per stream today; one per server
with federation) and read by everything else: watcher replay, `resource_state`, the dependency
walk, CSDS. A session is handed the tables of its (authority, type) pairs and writes into them
directly, so the per-resource hot path is a plain dict lookup.

Invariants:
- An entry exists for every name a session wants explicitly, and otherwise only for resources
  that hold a value received through a wildcard. Nothing unrequested lingers once a session has
  settled its interest.
- ``expires_at`` is set exactly while a TTL runs for a cached value; a session adopting a table
  (after a change of server) re-arms TTL deadlines from it, so a TTL survives the change.
- ``error`` is the latest error about the resource (a NACK, a timer, a server error, a failed
  connection) until a valid update clears it; it does not by itself say the value is unusable:
  the status does.

Federation (next issue) keeps this shape: sessions that serve several authorities write into
several tables; names already carry their authority (`authority_of`).
"""

from __future__ import annotations

from typing import Any

from .._errors import XdsError
from .._names import authority_of
from ._status import ResourceState, ResourceStatus

__all__ = ["CacheEntry", "ResourceCache"]

_REQUESTED = ResourceStatus.REQUESTED


class CacheEntry:
    """One cached resource. Mutable and private: users see `ResourceState` snapshots."""

    __slots__ = (
        "error",
        "error_at",
        "expires_at",
        "raw",
        "status",
        "updated_at",
        "value",
        "version",
    )

    def __init__(self) -> None:
        self.status = _REQUESTED
        self.value: Any = None
        self.raw: bytes | None = None  # serialized value, to tell an unchanged resource cheaply
        self.version: str | None = None
        self.updated_at: float | None = None
        self.error: XdsError | None = None
        self.error_at: float | None = None
        self.expires_at: float | None = None  # the TTL deadline while one runs

    def snapshot(self, type_url: str, name: str) -> ResourceState:
        return ResourceState(
            type_url=type_url,
            name=name,
            status=self.status,
            value=self.value,
            version=self.version,
            last_updated=self.updated_at,
            error=self.error,
            error_time=self.error_at,
            expires_at=self.expires_at,
        )


Table = dict[str, CacheEntry]


class ResourceCache:
    """Tables of `CacheEntry` by (authority, type URL), each keyed by resource name."""

    def __init__(self) -> None:
        self._tables: dict[tuple[str, str], Table] = {}

    def table(self, authority: str, type_url: str) -> Table:
        """The (mutable) table of one authority and type, created empty on first use."""
        key = (authority, type_url)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = {}
        return table

    def state(self, type_url: str, name: str) -> ResourceState | None:
        """A snapshot of one resource, or None when the cache holds nothing for it."""
        table = self._tables.get((authority_of(name), type_url))
        entry = None if table is None else table.get(name)
        return None if entry is None else entry.snapshot(type_url, name)

    def states(self, type_url: str | None = None) -> list[ResourceState]:
        """Snapshots of every resource (of one type, or of all), by authority and type."""
        return [
            entry.snapshot(table_type, name)
            for (_, table_type), table in self._tables.items()
            if type_url is None or table_type == type_url
            for name, entry in table.items()
        ]
