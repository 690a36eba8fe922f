"""`AioBalancer`, deprecated: kept for compatibility as a thin use of `xdsclient.grpc.XdsChannel`.

Why it is still here: code written against the example balancer (``async with AioBalancer(client,
listener) as balancer: await balancer.unary_unary(method, request_bytes)``) keeps running, with a
`DeprecationWarning`, on the channel that replaced it. It has no channels, picks or waiting of
its own any more: each call is an `XdsChannel` call, so it is routed, retried, fault-injected,
balanced and load-reported as the configuration says, keeps running when its endpoint leaves,
waits for a pick no longer than its deadline, fails at `close`, and fails UNAVAILABLE once the
listener is deleted.

What the channel cannot honour is refused or changed, loudly: ``picker=`` and ``clock=`` raise
`TypeError` (the channel owns its picker; a policy of your own is registered with
`xdsclient.grpc.register_lb_policy`); a failed or dropped pick fails the call with a
`grpc.aio.AioRpcError` (UNAVAILABLE, C-core's details), so `PickFailed` is no longer raised;
`start` waits for the first configuration as long as the client's does-not-exist timer, not
10 s. Use `XdsChannel` directly: ``XdsChannel(listener, client=client, rng=rand,
channel_options=options)`` and ``await channel.unary_unary(method)(request, timeout=...)``.
"""

from __future__ import annotations

import asyncio
import random
import warnings
from collections.abc import Sequence
from typing import Any

from .. import XdsClient, XdsConfig, XdsError
from ..grpc import XdsChannel
from ._base import PickResult

__all__ = ["AioBalancer", "PickFailed"]

_REMOVED = {
    "picker": "the channel owns its picker",
    "clock": "the channel runs on the event loop's time",
}


class PickFailed(XdsError):
    """Deprecated, no longer raised: a pick that fails or drops a call now fails it with a
    `grpc.aio.AioRpcError` (UNAVAILABLE), as `XdsChannel` does. Kept so code catching it still
    imports; ``PickFailed(result)`` still says why ``result`` refused the call."""

    def __init__(self, result: PickResult) -> None:
        reason = result.error or f"dropped ({result.drop_category or 'circuit breaker'})"
        super().__init__(f"{result.outcome.value}: {reason}")
        #: the pick that refused the call
        self.result = result


class AioBalancer:
    """Deprecated: use `xdsclient.grpc.XdsChannel`. Kept for compatibility, as a thin use of it.

    ``AioBalancer(client, listener, rand=..., channel_options=...)`` is
    ``XdsChannel(listener, client=client, rng=rand, channel_options=channel_options)``
    (`channel`), and warns that it is deprecated. ``picker=`` and ``clock=`` are refused with a
    `TypeError`: the channel owns its picker and its time (register a policy of your own with
    `xdsclient.grpc.register_lb_policy`). Calls fail with `grpc.aio.AioRpcError`, drops
    included (UNAVAILABLE, C-core's details); `PickFailed` is no longer raised.
    """

    def __init__(
        self,
        client: XdsClient,
        listener: str,
        *,
        rand: random.Random | None = None,
        channel_options: Sequence[tuple[str, Any]] = (),
        **removed: object,
    ) -> None:
        if removed:
            name = sorted(removed)[0]
            why = _REMOVED.get(name)
            if why is None:
                raise TypeError(f"AioBalancer() got an unexpected keyword argument {name!r}")
            raise TypeError(
                f"AioBalancer no longer takes {name}= ({why}): use xdsclient.grpc.XdsChannel, "
                "and xdsclient.grpc.register_lb_policy for a policy of your own"
            )
        warnings.warn(
            "AioBalancer is deprecated: use xdsclient.grpc.XdsChannel(listener, client=client)",
            DeprecationWarning,
            stacklevel=2,
        )
        self._client = client
        self._listener = listener
        self._channel = XdsChannel(
            listener, client=client, rng=rand, channel_options=channel_options
        )

    @property
    def channel(self) -> XdsChannel:
        """The `XdsChannel` every call goes through (for generated stubs too)."""
        return self._channel

    async def __aenter__(self) -> AioBalancer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, timeout: float | None = None) -> None:
        """Start the channel and wait for the listener's first complete configuration.

        Raises the client's `XdsError` when the configuration is unusable (a listener the
        server does not have: once the client's does-not-exist timer fires; a server that
        cannot be reached), or `TimeoutError` naming the listener after ``timeout`` seconds
        (None: no limit of its own). A start that fails closes the balancer: nothing is left
        watching.
        """
        try:
            self._channel.get_state(try_to_connect=True)  # the channel starts watching
            await asyncio.wait_for(self._first_configuration(), timeout)
        except TimeoutError:
            await self.close()
            raise TimeoutError(
                f"no configuration for listener {self._listener!r} within {timeout} s"
            ) from None
        except BaseException:
            await self.close()
            raise

    async def _first_configuration(self) -> None:
        async with self._client.watch_config(self._listener) as updates:
            async for update in updates:
                if isinstance(update, XdsConfig):
                    return
                if isinstance(update, XdsError):
                    raise update
                # an ambient error before any snapshot says nothing yet: wait on

    async def unary_unary(
        self,
        method: str,
        request: bytes,
        *,
        metadata: Sequence[tuple[str, str]] = (),
        timeout: float | None = None,
    ) -> bytes:
        """One unary call of ``method`` with ``request`` as its serialized message; its reply's
        bytes. ``await balancer.channel.unary_unary(method)(request, ...)``."""
        reply: bytes = await self._channel.unary_unary(method)(
            request, metadata=tuple(metadata), timeout=timeout
        )
        return reply

    async def close(self) -> None:
        """Close the channel: queued calls fail and calls in flight end (CANCELLED); the
        client is left open."""
        await self._channel.close()
