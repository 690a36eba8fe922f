"""The connectivity an HTTP endpoint reports to the pickers: a table over connect outcomes.

Why a rule of our own: an HTTP connection pool has no connectivity state, but the pickers of
`xdsclient.lb` (and outlier detection above them) need one per endpoint, as gRPC subchannels give
it. It follows from the pool's connects, as a gRPC subchannel's does:

- IDLE until asked: a pool is made IDLE; being asked for (`HttpConnections.connect`) opens one
  connection ahead of any request;
- CONNECTING while a connect runs and none has succeeded yet;
- READY once a connect (TCP, and TLS with its checks) succeeded; further connects keep it READY,
  and so does an idle pool whose connections the keep-alive expiry closed;
- TRANSIENT_FAILURE after a connect failed, whatever the state before (READY too: the pool can
  no longer open connections); a backoff starts (gRPC's: 1 s, x1.6, +-20 % jitter, at most
  120 s; consecutive failures lengthen it) and when it has passed the endpoint is IDLE again, to
  be asked again. A request sent meanwhile may still connect: a success makes it READY and
  resets the backoff; connects starting during the backoff leave it TRANSIENT_FAILURE (sticky,
  as gRPC's round robin treats a reconnecting subchannel).

Sans-I/O: `EndpointConnectivity.step` takes the event, ``now`` and a random source, and says
whether the state changed; `retry_at` is when the backoff ends (the owner sleeps until then).
"""

from __future__ import annotations

import enum
import random

import attrs

from .. import ProtocolError
from ..lb import ConnectivityState

__all__ = ["Backoff", "ConnectEvent", "EndpointConnectivity"]

_IDLE = ConnectivityState.IDLE
_CONNECTING = ConnectivityState.CONNECTING
_READY = ConnectivityState.READY
_FAILURE = ConnectivityState.TRANSIENT_FAILURE


class ConnectEvent(enum.Enum):
    """What happened to one of the endpoint's connects (or its backoff)."""

    STARTED = "started"
    CONNECTED = "connected"
    FAILED = "failed"
    BACKOFF_ELAPSED = "backoff elapsed"


#: (state, event) -> next state; an event the table lacks is a bug (the owner cancels the
#: backoff's timer when the state leaves TRANSIENT_FAILURE)
TRANSITIONS: dict[tuple[ConnectivityState, ConnectEvent], ConnectivityState] = {
    (_IDLE, ConnectEvent.STARTED): _CONNECTING,
    (_IDLE, ConnectEvent.CONNECTED): _READY,
    (_IDLE, ConnectEvent.FAILED): _FAILURE,
    (_CONNECTING, ConnectEvent.STARTED): _CONNECTING,
    (_CONNECTING, ConnectEvent.CONNECTED): _READY,
    (_CONNECTING, ConnectEvent.FAILED): _FAILURE,
    (_READY, ConnectEvent.STARTED): _READY,
    (_READY, ConnectEvent.CONNECTED): _READY,
    (_READY, ConnectEvent.FAILED): _FAILURE,
    (_FAILURE, ConnectEvent.STARTED): _FAILURE,
    (_FAILURE, ConnectEvent.CONNECTED): _READY,
    (_FAILURE, ConnectEvent.FAILED): _FAILURE,
    (_FAILURE, ConnectEvent.BACKOFF_ELAPSED): _IDLE,
}


@attrs.frozen(kw_only=True)
class Backoff:
    """gRPC's connection backoff (``connection-backoff.md``)."""

    initial: float = 1.0
    multiplier: float = 1.6
    jitter: float = 0.2
    maximum: float = 120.0

    def delay(self, failures: int, rng: random.Random) -> float:
        """The backoff after the ``failures``-th consecutive failure (1 for the first)."""
        base = min(self.initial * self.multiplier ** (failures - 1), self.maximum)
        return base * (1 + rng.uniform(-self.jitter, self.jitter))


class EndpointConnectivity:
    """One pool's state, its consecutive connect failures and when its backoff ends."""

    __slots__ = ("backoff", "failures", "retry_at", "state")

    def __init__(self, backoff: Backoff | None = None) -> None:
        self.backoff = backoff or Backoff()
        self.state = _IDLE
        self.failures = 0
        #: when the running backoff ends (None: none runs)
        self.retry_at: float | None = None

    def step(self, event: ConnectEvent, now: float, rng: random.Random) -> ConnectivityState | None:
        """Take ``event``; the new state when it changed, else None."""
        new = TRANSITIONS.get((self.state, event))
        if new is None:
            raise ProtocolError(f"{event.value} while {self.state.value}")
        if event is ConnectEvent.CONNECTED:
            self.failures, self.retry_at = 0, None
        elif event is ConnectEvent.BACKOFF_ELAPSED:
            self.retry_at = None
        elif event is ConnectEvent.FAILED and self.retry_at is None:
            self.failures += 1
            self.retry_at = now + self.backoff.delay(self.failures, rng)
        old, self.state = self.state, new
        return new if new is not old else None
