"""`XdsClient.wait_for`: the first value of a resource that satisfies a predicate.

Lives apart from the client so tests against any control plane can say "wait until the cluster
has three endpoints" in one line; it is only a consumer of `XdsClient.watch`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import ClientClosedError, WaitTimeoutError
from ._protocol import ResourceChanged

if TYPE_CHECKING:
    from ._client import XdsClient
    from .resources import ResourceType


async def wait_for(
    client: XdsClient,
    resource_type: ResourceType[Any] | str,
    name: str,
    predicate: Callable[[Any], bool] | None,
    timeout: float,
) -> Any:
    """The first valid value of ``name`` (cached or new) for which ``predicate`` holds."""
    last: object = None
    try:
        async with asyncio.timeout(timeout), client.watch(resource_type, name) as events:
            async for event in events:
                last = event
                if isinstance(event, ResourceChanged) and (
                    predicate is None or predicate(event.value)
                ):
                    return event.value
    except TimeoutError:
        raise WaitTimeoutError(
            f"{name!r} did not satisfy the predicate within {timeout:g}s; last event: {last!r}"
        ) from None
    raise ClientClosedError(f"the client closed while waiting for {name!r}; last event: {last!r}")
