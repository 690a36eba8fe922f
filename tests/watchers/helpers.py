"""Shared helpers for the watcher-layer tests: real events, a running dispatcher, no waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from xdsclient import AmbientError, DataError, ResourceChanged, TransportError
from xdsclient._errors import ResourceDoesNotExistError
from xdsclient._runtime._tasks import TaskOwner
from xdsclient._watch._watchers import Dispatcher
from xdsclient.resources import CLUSTER, ENDPOINT

CDS = CLUSTER.type_url
EDS = ENDPOINT.type_url


def changed(name: str, version: str, type_url: str = EDS) -> ResourceChanged:
    return ResourceChanged(type_url=type_url, name=name, value=None, version=version)


def ambient(name: str, why: str = "down", type_url: str = EDS) -> AmbientError:
    return AmbientError(type_url=type_url, name=name, error=TransportError(why))


def missing(name: str, type_url: str = EDS) -> DataError:
    return DataError(
        type_url=type_url,
        name=name,
        error=ResourceDoesNotExistError(type_url, name, "does not exist"),
    )


__all__ = ["EDS", "ambient", "changed", "missing", "running"]


@asynccontextmanager
async def running(dispatcher: Dispatcher) -> AsyncIterator[asyncio.Task[None]]:
    """Run the dispatcher's serializer on an owned task for the block; cancel it after."""
    owner = TaskOwner()
    task = owner.start(dispatcher.run(), name="xdsclient-test-dispatcher")
    try:
        yield task
    finally:
        async with asyncio.timeout(5):
            await owner.close()
