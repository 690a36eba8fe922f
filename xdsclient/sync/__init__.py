"""xdsclient for synchronous code: services without an event loop (Flask, Django, Celery).

`SyncXdsClient` runs an `XdsClient` on a background event-loop thread it owns and answers
blocking calls: the latest value of a resource (`SyncXdsClient.get`) or configuration
snapshot of a listener (`SyncXdsClient.get_config`), on-demand `resolve`, watcher callbacks
on a thread of the caller's choosing, and blocking iteration over watches. `LoopThread` is
the runner under it: an event loop on a thread of its own, to which synchronous code hands
coroutines (the sync httpx transport shares it).
"""

from __future__ import annotations

from ._client import SyncXdsClient
from ._runner import BridgedIterator, LoopThread
from ._watchers import SyncWatch, SyncWatchHandle

__all__ = ["BridgedIterator", "LoopThread", "SyncWatch", "SyncWatchHandle", "SyncXdsClient"]

for _cls in (BridgedIterator, LoopThread, SyncWatch, SyncWatchHandle, SyncXdsClient):
    _cls.__module__ = __name__
del _cls
