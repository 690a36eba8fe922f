"""The channel's connections: one grpc.aio channel per endpoint address, shared by clusters.

Why an owner of its own: a connection outlives the call that opened it and the snapshot that
named it, and must not outlive both. Each is held while some assignment of the current snapshot
lists its endpoint as one gRPC balances over (health UNKNOWN or HEALTHY: a DRAINING endpoint is
no longer held) and while calls run on it; it closes once neither is true, so a call in flight
finishes on its connection whatever the control plane says meanwhile. A task per connection
reports its connectivity to the picker (through ``report``) as it changes, asking it to connect.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc

from ..lb import ConnectivityState, EndpointKey

__all__ = ["Connection", "Connections"]

_STATES = {
    grpc.ChannelConnectivity.IDLE: ConnectivityState.IDLE,
    grpc.ChannelConnectivity.CONNECTING: ConnectivityState.CONNECTING,
    grpc.ChannelConnectivity.READY: ConnectivityState.READY,
    grpc.ChannelConnectivity.TRANSIENT_FAILURE: ConnectivityState.TRANSIENT_FAILURE,
    grpc.ChannelConnectivity.SHUTDOWN: ConnectivityState.TRANSIENT_FAILURE,
}

Report = Callable[[EndpointKey, ConnectivityState], None]


class Connection:
    """One endpoint's grpc.aio channel, the calls running on it and whether a snapshot holds
    it."""

    __slots__ = ("calls", "channel", "held", "key", "state", "watcher")

    def __init__(self, key: EndpointKey, channel: grpc.aio.Channel) -> None:
        self.key = key
        self.channel = channel
        #: attempts running on this connection
        self.calls = 0
        self.held = True
        self.state = ConnectivityState.IDLE
        self.watcher: asyncio.Task[None] | None = None


class Connections:
    """Every connection of one `XdsChannel` (see the module's docstring)."""

    def __init__(self, report: Report, options: Sequence[tuple[str, Any]] = ()) -> None:
        self._report = report
        self._options = tuple(options)
        self._open: dict[EndpointKey, Connection] = {}
        #: the endpoints the current snapshot holds
        self._held: frozenset[EndpointKey] = frozenset()
        #: channels being closed, awaited by `close`
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False
        #: the endpoint whose connection failed last (gRPC names it in "all failing" errors)
        self.last_failure: EndpointKey | None = None

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key: object) -> bool:
        return key in self._open

    def states(self) -> list[ConnectivityState]:
        """The connectivity of every open connection."""
        return [connection.state for connection in self._open.values()]

    def connect(self, key: EndpointKey) -> Connection:
        """The connection to ``key``, opened if there is none (held while the snapshot holds
        ``key``; otherwise it closes once unused, as soon as its first call ends)."""
        connection = self._open.get(key)
        if connection is None:
            if self._closed:
                raise RuntimeError("the channel is closed")
            channel = grpc.aio.insecure_channel(f"{_host(key[0])}:{key[1]}", options=self._options)
            connection = self._open[key] = Connection(key, channel)
            connection.watcher = asyncio.ensure_future(self._watch(connection))
        connection.held = key in self._held
        return connection

    def hold_only(self, keys: Iterable[EndpointKey]) -> None:
        """The current snapshot holds exactly ``keys``: release the others (each closes once
        its calls end)."""
        held = self._held = frozenset(keys)
        for connection in list(self._open.values()):
            connection.held = connection.key in held
            self._close_if_unused(connection)

    def call_started(self, connection: Connection) -> None:
        """An attempt starts on ``connection``."""
        connection.calls += 1

    def call_ended(self, connection: Connection) -> None:
        """An attempt on ``connection`` ended."""
        connection.calls -= 1
        self._close_if_unused(connection)

    async def close(self) -> None:
        """Close every connection now (calls still running on them end CANCELLED)."""
        self._closed = True
        for connection in list(self._open.values()):
            self._close(connection)
        while self._closing:
            await asyncio.gather(*self._closing)

    def _close_if_unused(self, connection: Connection) -> None:
        if not connection.held and connection.calls == 0:
            self._close(connection)

    def _close(self, connection: Connection) -> None:
        if self._open.get(connection.key) is not connection:
            return
        del self._open[connection.key]
        if connection.watcher is not None:
            connection.watcher.cancel()
        task = asyncio.ensure_future(_close_channel(connection))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _watch(self, connection: Connection) -> None:
        channel = connection.channel
        while True:
            state = channel.get_state(try_to_connect=True)
            connection.state = _STATES[state]
            if connection.state is ConnectivityState.TRANSIENT_FAILURE:
                self.last_failure = connection.key
            self._report(connection.key, connection.state)
            await channel.wait_for_state_change(state)


async def _close_channel(connection: Connection) -> None:
    if connection.watcher is not None:
        with contextlib.suppress(asyncio.CancelledError):
            await connection.watcher
    await connection.channel.close()


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
