"""The channel's connections: one grpc.aio channel per endpoint address and TLS policy, shared
by clusters.

Why an owner of its own: a connection outlives the call that opened it and the snapshot that
named it, and must not outlive both. Each is held while some assignment of the current snapshot
lists its endpoint as one gRPC balances over (health UNKNOWN or HEALTHY: a DRAINING endpoint is
no longer held) and while calls run on it; it closes once neither is true, so a call in flight
finishes on its connection whatever the control plane says meanwhile. A task per connection
reports its connectivity to the picker (through ``report``) as it changes, asking it to connect;
a call about to be sent on a connection reported READY checks it still is (`still_ready`), as
C-core picks again when the picked subchannel has lost its connection.

A connection's slot is (endpoint, `TlsPolicy` or None for plaintext): the same address under two
security policies gets two channels. It is made with the `Security` (certificates) that
``secure`` gives for its policy when it opens; when a later connect gets other certificates (the
provider's files were rotated), a new connection replaces it and the old one is retired: it no
longer reports and closes once its calls end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc

from ..lb import ConnectivityState, EndpointKey
from ._tls import Security, TlsPolicy

__all__ = ["Connection", "Connections", "Slot"]

_STATES = {
    grpc.ChannelConnectivity.IDLE: ConnectivityState.IDLE,
    grpc.ChannelConnectivity.CONNECTING: ConnectivityState.CONNECTING,
    grpc.ChannelConnectivity.READY: ConnectivityState.READY,
    grpc.ChannelConnectivity.TRANSIENT_FAILURE: ConnectivityState.TRANSIENT_FAILURE,
    grpc.ChannelConnectivity.SHUTDOWN: ConnectivityState.TRANSIENT_FAILURE,
}

Report = Callable[[EndpointKey, ConnectivityState], None]
#: an endpoint and the TLS policy its channel follows (None: plaintext)
Slot = tuple[EndpointKey, TlsPolicy | None]


class Connection:
    """One endpoint's grpc.aio channel, the calls running on it and whether a snapshot holds
    it."""

    __slots__ = ("calls", "channel", "held", "key", "security", "slot", "state", "watcher")

    def __init__(self, slot: Slot, channel: grpc.aio.Channel, security: Security | None) -> None:
        self.slot = slot
        self.key = slot[0]
        self.channel = channel
        #: the certificates the channel was made with (None: plaintext)
        self.security = security
        #: attempts running on this connection
        self.calls = 0
        self.held = True
        self.state = ConnectivityState.IDLE
        self.watcher: asyncio.Task[None] | None = None


class Connections:
    """Every connection of one `XdsChannel` (see the module's docstring)."""

    def __init__(
        self,
        report: Report,
        options: Sequence[tuple[str, Any]] = (),
        secure: Callable[[TlsPolicy], Security] | None = None,
        fallback: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._report = report
        self._options = tuple(options)
        self._secure = secure
        #: the credentials of a connection without a TLS policy (None: plaintext)
        self._fallback = fallback
        self._open: dict[Slot, Connection] = {}
        #: endpoint -> how many open connections it has (one per TLS policy)
        self._per_key: dict[EndpointKey, int] = {}
        #: replaced by a connection with newer certificates, closing once their calls end
        self._retired: set[Connection] = set()
        #: the slots the current snapshot holds
        self._held: frozenset[Slot] = frozenset()
        #: channels being closed, awaited by `close`
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False
        #: the endpoint whose connection failed last (gRPC names it in "all failing" errors)
        self.last_failure: EndpointKey | None = None

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key: object) -> bool:
        """Whether a connection to the endpoint ``key`` is open, whatever its policy."""
        return key in self._per_key

    def state_of(self, key: EndpointKey, policy: TlsPolicy | None) -> ConnectivityState | None:
        """The connectivity of the connection to ``key`` under ``policy`` (None: none is
        open)."""
        connection = self._open.get((key, policy))
        return None if connection is None else connection.state

    def states(self) -> list[ConnectivityState]:
        """The connectivity of every open connection."""
        return [connection.state for connection in self._open.values()]

    def connect(self, key: EndpointKey, policy: TlsPolicy | None = None) -> Connection:
        """The connection to ``key`` under ``policy``, opened if there is none or if its
        certificates are no longer the current ones (held while the snapshot holds the slot;
        otherwise it closes once unused, as soon as its first call ends). Raises `TlsError`
        when the policy cannot be met."""
        slot = (key, policy)
        if policy is None:  # plaintext: an open connection is the one (`held` is kept)
            found = self._open.get(slot)
            if found is not None:
                return found
        security = None
        if policy is not None:
            if self._secure is None:
                raise RuntimeError("a TLS policy needs certificates")
            security = self._secure(policy)
        connection = self._open.get(slot)
        if connection is not None and connection.security != security:
            self._retire(connection)
            connection = None
        if connection is None:
            if self._closed:
                raise RuntimeError("the channel is closed")
            channel = _channel(key, security, self._fallback, self._options)
            connection = self._open[slot] = Connection(slot, channel, security)
            self._per_key[key] = self._per_key.get(key, 0) + 1
            connection.watcher = asyncio.ensure_future(self._watch(connection))
        connection.held = slot in self._held
        return connection

    def still_ready(self, connection: Connection) -> bool:
        """False when ``connection`` was reported READY but its channel has left READY since
        (closed a moment ago, its watcher not yet run): its state is reported now, so a pick
        made again no longer names it. True otherwise, whatever the state (a call on an IDLE
        connection asks it to connect)."""
        if connection.state is not ConnectivityState.READY:
            return True
        state = _STATES[connection.channel.get_state()]
        if state is ConnectivityState.READY:
            return True
        connection.state = state
        if state is ConnectivityState.TRANSIENT_FAILURE:
            self.last_failure = connection.key
        self._report(connection.key, state)
        return False

    def hold_only(self, slots: Iterable[Slot]) -> None:
        """The current snapshot holds exactly ``slots``: release the others (each closes once
        its calls end)."""
        held = self._held = frozenset(slots)
        for connection in list(self._open.values()):
            connection.held = connection.slot in held
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
        for connection in [*self._open.values(), *self._retired]:
            self._close(connection)
        while self._closing:
            await asyncio.gather(*self._closing)

    def _close_if_unused(self, connection: Connection) -> None:
        if not connection.held and connection.calls == 0:
            self._close(connection)

    def _retire(self, connection: Connection) -> None:
        self._forget(connection)
        connection.held = False
        if connection.watcher is not None:
            connection.watcher.cancel()  # the new connection reports for the endpoint
        self._retired.add(connection)
        self._close_if_unused(connection)

    def _close(self, connection: Connection) -> None:
        if self._open.get(connection.slot) is connection:
            self._forget(connection)
        elif connection in self._retired:
            self._retired.discard(connection)
        else:
            return
        if connection.watcher is not None:
            connection.watcher.cancel()
        task = asyncio.ensure_future(_close_channel(connection))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _forget(self, connection: Connection) -> None:
        del self._open[connection.slot]
        key = connection.key
        left = self._per_key[key] - 1
        if left:
            self._per_key[key] = left
        else:
            del self._per_key[key]

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


def _channel(
    key: EndpointKey,
    security: Security | None,
    fallback: grpc.ChannelCredentials | None,
    options: tuple[tuple[str, Any], ...],
) -> grpc.aio.Channel:
    target = f"{_host(key[0])}:{key[1]}"
    if security is None:
        if fallback is not None:
            return grpc.aio.secure_channel(target, fallback, options=options)
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(
        target, security.credentials(), options=options + security.options()
    )


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
