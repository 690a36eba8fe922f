"""The resource cache: every resource the client holds, keyed by (authority, type URL, name).

Why outside the stream state: a resource outlives the stream that brought it, and readers must
not care which server is serving an authority right now. The client owns the cache; it is read
by everything but the protocol sessions: watcher replay, `resource_state`, the dependency walk,
CSDS.

How it is written: each protocol session keeps one table per resource type (a plain dict, so
the per-resource hot path is a dict lookup), holding the names of every authority its server
serves. The cache maps (authority, type URL) to the table of the session currently serving that
authority (`assign`): its *writer*. With fallback (gRFC A71) an authority changes writer; the
client hands the entries over (`Session._adopt`) and re-assigns, so readers see one consistent
view throughout.

Invariants:
- A name is read from the table assigned to its own authority (`authority_of`); tables shared
  by several authorities are filtered by authority when listed.
- ``expires_at`` is set exactly while a TTL runs for a cached value; a session adopting an entry
  re-arms its TTL deadline from it, so a TTL survives a change of server.
- ``error`` is the latest error about the resource (a NACK, a timer, a server error, a failed
  connection) until a valid update clears it; it does not by itself say the value is unusable:
  the status does.
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

    def copy_from(self, source: CacheEntry) -> None:
        """Take every field of ``source`` (a hand-over between servers)."""
        self.status = source.status
        self.value = source.value
        self.raw = source.raw
        self.version = source.version
        self.updated_at = source.updated_at
        self.error = source.error
        self.error_at = source.error_at
        self.expires_at = source.expires_at

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
    """The writer's table of `CacheEntry` for each (authority, type URL), keyed by name."""

    def __init__(self) -> None:
        self._tables: dict[tuple[str, str], Table] = {}

    def assign(self, authority: str, type_url: str, table: Table) -> None:
        """Make ``table`` (a session's) the one that holds ``authority``'s resources of a type."""
        self._tables[authority, type_url] = table

    def table(self, authority: str, type_url: str) -> Table | None:
        """The table assigned to an authority and type, if any."""
        return self._tables.get((authority, type_url))

    def entry(self, type_url: str, name: str) -> CacheEntry | None:
        """The live entry of one resource (read-only to the caller: the dependency walk reads
        thousands per snapshot and needs no copy)."""
        table = self._tables.get((authority_of(name), type_url))
        return None if table is None else table.get(name)

    def state(self, type_url: str, name: str) -> ResourceState | None:
        """A snapshot of one resource, or None when the cache holds nothing for it."""
        table = self._tables.get((authority_of(name), type_url))
        entry = None if table is None else table.get(name)
        return None if entry is None else entry.snapshot(type_url, name)

    def states(self, type_url: str | None = None) -> list[ResourceState]:
        """Snapshots of every resource (of one type, or of all), by authority and type."""
        return [
            entry.snapshot(table_type, name)
            for (authority, table_type), table in self._tables.items()
            if type_url is None or table_type == type_url
            for name, entry in table.items()
            if authority_of(name) == authority
        ]
