"""An example-grade grpc.aio client-side balancer built on the `xdsclient.lb` blocks.

Superseded by `xdsclient.grpc.XdsChannel`, a grpc.aio channel for generated stubs with the call
path's routing, faults, deadlines, retries and load reporting, which keeps calls in flight when
their endpoint leaves and bounds the wait for a pick by the call's deadline. This module stays
as the shortest reading of how the blocks are driven.

Why it is here: the blocks are sans-I/O, so something must own the connections, report their
connectivity, wait when a pick says QUEUE and report each call's outcome. This module shows the
least that takes with grpc.aio, and is what the suite runs end to end against real backends:

- one insecure grpc.aio channel per endpoint the picker wants connected (`wanted_connections`,
  `PickResult.connect`), closed when the endpoint leaves every assignment;
- a task per channel reports its state as it changes (``get_state(try_to_connect=True)``,
  ``wait_for_state_change``), SHUTDOWN as TRANSIENT_FAILURE;
- snapshots from `XdsClient.add_config_watcher` go to `ComposedPicker.update`;
- a call picks with its method as the path and its metadata as the headers, waits on QUEUE
  until something changes (an update, a state, a timer), raises `PickFailed` on FAIL or DROP,
  and reports its outcome (ok = the RPC returned) with `call_finished`.

It is an example, not a production balancer: insecure channels only, no retries, no per-call
deadline beyond the one passed in, and every call goes through a Python pick. Take it as a
starting point for your own transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc

from .. import XdsClient, XdsConfig, XdsError
from ..resources import Endpoint
from ._base import (
    ConnectivityState,
    EndpointKey,
    PickOutcome,
    PickResult,
    header_map,
    key_of,
)
from ._composed import ComposedPicker

__all__ = ["AioBalancer", "PickFailed"]

_STATES = {
    grpc.ChannelConnectivity.IDLE: ConnectivityState.IDLE,
    grpc.ChannelConnectivity.CONNECTING: ConnectivityState.CONNECTING,
    grpc.ChannelConnectivity.READY: ConnectivityState.READY,
    grpc.ChannelConnectivity.TRANSIENT_FAILURE: ConnectivityState.TRANSIENT_FAILURE,
    grpc.ChannelConnectivity.SHUTDOWN: ConnectivityState.TRANSIENT_FAILURE,
}


class PickFailed(XdsError):
    """A call the balancer failed or dropped without sending it (``result`` says why)."""

    def __init__(self, result: PickResult) -> None:
        reason = result.error or f"dropped ({result.drop_category or 'circuit breaker'})"
        super().__init__(f"{result.outcome.value}: {reason}")
        #: the pick that refused the call
        self.result = result


class AioBalancer:
    """Balances unary calls over a listener's endpoints with grpc.aio channels (an example).

    ``async with AioBalancer(client, "listener") as balancer``: waits for the first snapshot;
    ``await balancer.unary_unary("/pkg.Service/Method", b"...")`` sends one call.
    ``channel_options`` go to every endpoint's channel (e.g. gRPC's reconnect backoff).
    """

    def __init__(
        self,
        client: XdsClient,
        listener: str,
        *,
        picker: ComposedPicker | None = None,
        rand: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        channel_options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        self.picker = picker if picker is not None else ComposedPicker()
        self._client = client
        self._listener = listener
        self._rand = rand if rand is not None else random.Random()
        self._clock = clock
        self._options = tuple(channel_options)
        self._channels: dict[EndpointKey, grpc.aio.Channel] = {}
        self._watchers: dict[EndpointKey, asyncio.Task[None]] = {}
        #: channels being closed (their endpoint left every assignment), awaited by `close`
        self._closing: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._first = asyncio.Event()
        self._watch: object = None

    async def __aenter__(self) -> AioBalancer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, timeout: float = 10.0) -> None:
        """Watch the listener's configuration and wait for its first snapshot."""
        self._watch = self._client.add_config_watcher(self._listener, self._on_config)
        await asyncio.wait_for(self._first.wait(), timeout)

    async def unary_unary(
        self,
        method: str,
        request: bytes,
        *,
        metadata: Sequence[tuple[str, str]] = (),
        timeout: float | None = None,
    ) -> bytes:
        """Pick an endpoint for one call (waiting while the pick queues) and send it."""
        result = await self._pick(method, header_map(metadata))
        assert result.endpoint is not None
        channel = self._connect(result.endpoint)
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(method)
        ok = False
        try:
            reply: bytes = await call(request, metadata=tuple(metadata), timeout=timeout)
            ok = True
            return reply
        finally:
            self.picker.call_finished(result, ok, self._clock())

    async def close(self) -> None:
        """Stop watching and close every channel."""
        cancel = getattr(self._watch, "cancel", None)
        if cancel is not None:
            cancel()
        for task in self._watchers.values():
            task.cancel()
        for task in self._watchers.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for channel in self._channels.values():
            await channel.close()
        for closing in list(self._closing):
            await closing
        self._watchers.clear()
        self._channels.clear()

    # -- picking -------------------------------------------------------------------------------

    async def _pick(self, method: str, headers: Mapping[str, str]) -> PickResult:
        while True:
            self._changed.clear()
            result = self.picker.pick(method, headers, self._rand, self._clock())
            for endpoint in result.connect:
                self._connect(endpoint)
            if result.outcome is PickOutcome.COMPLETE:
                return result
            if result.outcome is not PickOutcome.QUEUE:
                raise PickFailed(result)
            self._sync_connections()
            await self._wait_for_change()

    async def _wait_for_change(self) -> None:
        deadline = self.picker.next_deadline()
        timeout = None if deadline is None else max(0.0, deadline - self._clock())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    # -- configuration and connections ----------------------------------------------------------

    def _on_config(self, update: object) -> None:
        if not isinstance(update, XdsConfig):
            return  # an error keeps the last snapshot in use, as gRPC does
        self.picker.update(update, self._clock())
        self._sync_connections()
        self._first.set()
        self._changed.set()

    def _sync_connections(self) -> None:
        """Connect what the picker wants; close channels of endpoints no assignment has."""
        for endpoint in self.picker.wanted_connections():
            self._connect(endpoint)
        config = self.picker.config
        if config is None:
            return
        known = {
            key_of(e)
            for entry in config.clusters.values()
            if entry.endpoints is not None
            for e in entry.endpoints.healthy_endpoints()
        }
        for key in [k for k in self._channels if k not in known]:
            self._watchers.pop(key).cancel()
            task = asyncio.ensure_future(self._channels.pop(key).close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def _connect(self, endpoint: Endpoint) -> grpc.aio.Channel:
        key = key_of(endpoint)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = grpc.aio.insecure_channel(
                f"{key[0]}:{key[1]}", options=self._options
            )
            self._watchers[key] = asyncio.ensure_future(self._watch_channel(key, channel))
        return channel

    async def _watch_channel(self, key: EndpointKey, channel: grpc.aio.Channel) -> None:
        """Report the channel's connectivity on every change, asking it to connect."""
        while True:
            state = channel.get_state(try_to_connect=True)
            self.picker.set_endpoint_state(key, _STATES[state], self._clock())
            self._changed.set()
            self._sync_connections()
            await channel.wait_for_state_change(state)
