"""`XdsClient.wait_for` and `XdsClient.wait_for_config`: the first value of a resource, or the
first complete configuration of a listener, that satisfies a predicate.

Lives apart from the client so tests against any control plane can say "wait until the cluster
has three endpoints" in one line; it is only a consumer of a `Watch` and a `ConfigWatch` the
client made (`XdsClient.watch`, `XdsClient.watch_config`) and gave it: it never sees the
client. Errors do not end a wait (a later value may satisfy it); they are named in the
timeout's message, the last one seen, so a failing test says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._errors import ClientClosedError, WaitTimeoutError
from .._protocol import ResourceChanged
from ._config_watch import ConfigWatch
from ._dependencies import XdsConfig
from ._watchers import Watch

if TYPE_CHECKING:
    from ..resources import ResourceType


async def wait_for(
    watch: Watch,
    name: str,
    predicate: Callable[[Any], bool] | None,
    timeout: float,
    resource_type: ResourceType[Any] | str,
) -> Any:
    """The first valid value of ``name`` (cached or new) on ``watch``, a watch of it (of
    ``resource_type``, which the timeout's message names) not yet entered, for which
    ``predicate`` holds."""
    last: object = None
    try:
        async with asyncio.timeout(timeout), watch as events:
            async for event in events:
                last = event
                if isinstance(event, ResourceChanged) and (
                    predicate is None or predicate(event.value)
                ):
                    return event.value
    except TimeoutError:
        raise WaitTimeoutError(_timed_out(resource_type, name, predicate, timeout, last)) from None
    raise ClientClosedError(f"the client closed while waiting for {name!r}; last event: {last!r}")


def _timed_out(
    resource_type: ResourceType[Any] | str,
    name: str,
    predicate: Callable[[Any], bool] | None,
    timeout: float,
    last: object,
) -> str:
    """What `wait_for` waited for, and what came instead (nothing, or the last event)."""
    type_url = resource_type if isinstance(resource_type, str) else resource_type.type_url
    what = f"{type_url.rsplit('.', 1)[-1]} {name!r}"
    if predicate is not None:
        happened = "nothing arrived" if last is None else f"last event: {last!r}"
        return f"{what} did not satisfy the predicate within {timeout:g}s; {happened}"
    if last is None:
        return f"{what}: nothing arrived within {timeout:g}s (waited for its first valid value)"
    return f"{what}: no valid value arrived within {timeout:g}s; last event: {last!r}"


async def wait_for_config(
    configs: ConfigWatch,
    listener: str,
    predicate: Callable[[XdsConfig], bool] | None,
    timeout: float,
) -> XdsConfig:
    """The first complete configuration of ``listener`` on ``configs``, a configuration watch
    of it not yet entered, for which ``predicate`` holds."""
    last: object = None
    try:
        async with asyncio.timeout(timeout), configs as updates:
            async for update in updates:
                last = update
                if isinstance(update, XdsConfig) and (predicate is None or predicate(update)):
                    return update
    except TimeoutError:
        raise WaitTimeoutError(
            f"listener {listener!r}: no configuration satisfied the predicate within"
            f" {timeout:g}s; last update: {_brief(last)}"
        ) from None
    raise ClientClosedError(
        f"the client closed while waiting for listener {listener!r}; last update: {_brief(last)}"
    )


def _brief(update: object) -> str:
    """An update in a line: a snapshot of thousands of clusters is not repeated in full."""
    if update is None:
        return "none"
    if isinstance(update, XdsConfig):
        return f"a configuration of {len(update.clusters)} cluster(s)"
    return f"{type(update).__name__}: {update}"
