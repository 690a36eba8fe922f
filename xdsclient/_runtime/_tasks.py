"""TaskOwner: every task the client starts has an owner that ends it.

Why not `asyncio.TaskGroup` as is: a client's tasks (stream drivers, the watcher serializer,
config-watch callbacks) are started from synchronous calls (``add_config_watcher``) long after
the group was entered, and one of them failing must be logged without cancelling its siblings.
What we keep of a task group: nothing runs unowned, and `close` cancels every task and waits
for all of them. User code (watcher callbacks) never runs directly in an owned task's frame
where it could swallow the cancellation (the dispatcher runs it in a child it does not await
on cancellation), so `close` cannot hang on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskOwner"]

logger = logging.getLogger("xdsclient.tasks")


class TaskOwner:
    """Starts tasks, logs the ones that fail, and cancels and awaits them all on `close`."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, coro: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        """Run ``coro`` as an owned task."""
        if self._closed:
            coro.close()
            raise RuntimeError("the owner of this task is closed")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            logger.error("xdsclient task %s failed", task.get_name(), exc_info=error)

    async def close(self) -> None:
        """Cancel every task and wait until all have ended. Idempotent."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
