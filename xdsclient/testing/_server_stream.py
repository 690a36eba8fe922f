"""What the SotW and Delta server streams share: one stream's way of taking a request.

Why sans-I/O: as the client's protocol core, a server stream is a plain object fed messages and
the time, returning messages (as bytes) and records; it never awaits or reads a clock, so the
serving rules are tested alone, without gRPC (tests/control_plane/), and the gRPC front end
(`_grpc_front.py`) only moves bytes. A request's way (`ServerStream.receive`):

1. it is recorded (`ReceivedRequest`, stamped with the time passed in);
2. the faults may refuse it (`Faults.refuse`: dropped, or the stream ends);
3. a per-type stream ends over a request of another type (INVALID_ARGUMENT);
4. otherwise the variant's rules apply it to the subscription of its type.

`respond` then returns every response owed, read from the store. A stream to end carries its
status in `abort`; the front end ends it.

Wildcard state per type is a table (`Mode`): (mode, what a request says) -> mode. A request
the table does not allow raises `KeyError`, as the client's tables do.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Collection
from typing import Any

import attrs

from .._protocol._messages import Resource
from ..resources import CLUSTER, LISTENER
from ._encoding import Encoded, Encoder
from ._faults import DROP, Abort, Faults
from ._records import ReceivedRequest, SentResponse
from ._store import ResourceStore, Stored

__all__ = ["FULL_STATE", "Mode", "Outgoing", "ServerStream", "beat"]

#: Types whose SotW responses carry the whole state (so an absent name is deleted).
FULL_STATE = frozenset({LISTENER.type_url, CLUSTER.type_url})


class Mode(enum.Enum):
    """What a stream asked of one type, as far as wildcard goes."""

    UNREQUESTED = "no request for the type yet"
    LEGACY_WILDCARD = "everything: the first request named nothing (SotW keeps it while empty)"
    WILDCARD = "everything, asked for with '*' (Delta: also a first request naming nothing)"
    NAMED = "only the names asked for"

    __hash__ = object.__hash__

    @property
    def wildcard(self) -> bool:
        """Whether every resource of the type is wanted."""
        return self in (Mode.LEGACY_WILDCARD, Mode.WILDCARD)


@attrs.frozen
class Outgoing:
    """A response to write, and its record for `ControlPlane.responses`."""

    data: bytes
    record: SentResponse


class ServerStream:
    """One xDS stream as the server sees it; `SotwServerStream` and `DeltaServerStream` add
    their rules (`_apply`, `_reply`, `heartbeat`)."""

    delta = False

    def __init__(
        self,
        *,
        stream_id: int,
        method: str,
        type_url: str | None,
        store: ResourceStore,
        faults: Faults,
        encoder: Encoder,
    ) -> None:
        self.id = stream_id  #: counting from 1 per control plane, in order of arrival
        self.method = method  #: the gRPC method path
        self.type_url = type_url  #: the one type a per-type service carries; None on ADS
        #: the status to end the stream with, once something decided to end it
        self.abort: Abort | None = None
        self._store = store
        self._faults = faults
        self._encoder = encoder
        self._nonces = itertools.count(1)
        self._requests = 0
        #: type URL -> the variant's subscription (its ``mode`` says whether it was asked for)
        self._subs: dict[str, Any] = {}
        #: types whose responses may have changed since `respond` last looked
        self._dirty: set[str] = set()

    def receive(self, request: Any, now: float) -> ReceivedRequest:
        """Take one request; returns its record. Sets `abort` when the stream must end."""
        record = ReceivedRequest(time=now, stream=self.id, method=self.method, message=request)
        self._requests += 1
        type_url = request.type_url or self.type_url or ""
        refusal = self._faults.refuse(
            request,
            first=self._requests == 1,
            delta=self.delta,
            subscribed=self._subscribed(type_url),
        )
        if refusal is not None:
            if refusal is not DROP:
                self.abort = refusal
        elif self.type_url is not None and request.type_url and request.type_url != self.type_url:
            self.abort = Abort("INVALID_ARGUMENT", f"this stream carries {self.type_url} only")
        else:
            self._apply(type_url, request)
            self._dirty.add(type_url)
        return record

    def changed(self, type_url: str) -> bool:
        """The store changed this type: whether a response of it may now be owed."""
        if not self.asked_for(type_url):
            return False
        self._dirty.add(type_url)
        return True

    def asked_for(self, type_url: str) -> bool:
        """Whether a request for this type was applied (so a change of it may be owed)."""
        sub = self._subs.get(type_url)
        return sub is not None and sub.mode is not Mode.UNREQUESTED

    def respond(self, now: float) -> list[Outgoing]:
        """Every response owed now, from the store's current resources (only types that were
        asked for again or changed since the last call can owe one)."""
        dirty, self._dirty = self._dirty, set()
        outgoing = []
        for type_url, sub in self._subs.items():
            if type_url in dirty and sub.mode is not Mode.UNREQUESTED:
                encoded = self._reply(type_url, sub)
                if encoded is not None:
                    outgoing.append(self._outgoing(encoded, now))
        return outgoing

    def encode(self, message: Any, now: float) -> Outgoing:
        """A response message as given (`ControlPlane.send_raw`, heartbeats), no bookkeeping."""
        return self._outgoing(self._encoder.message(message, delta=self.delta), now)

    def _outgoing(self, encoded: Encoded, now: float) -> Outgoing:
        record = SentResponse(
            time=now,
            stream=self.id,
            type_url=encoded.type_url,
            nonce=encoded.nonce,
            names=encoded.names,
            removed=encoded.removed,
        )
        return Outgoing(encoded.data, record)

    def next_nonce(self) -> str:
        """A fresh nonce of this stream (``"<stream>-<n>"``)."""
        return f"{self.id}-{next(self._nonces)}"

    def _nonce(self) -> str:
        return self._faults.nonce(self.id, self.next_nonce)

    # The variant's rules.

    def _subscribed(self, type_url: str) -> Collection[str]:
        return ()

    def _apply(self, type_url: str, request: Any) -> None:
        raise NotImplementedError

    def _reply(self, type_url: str, sub: Any) -> Encoded | None:
        """The response owed for one type, or None."""
        raise NotImplementedError

    def heartbeat(self, type_url: str, name: str) -> Any:
        """A TTL refresh of a resource this stream holds at its current version, or None."""
        raise NotImplementedError


def beat(name: str, stored: Stored) -> Any:
    """A TTL refresh of a resource: a ``Resource`` with its name, version and TTL, no body."""
    refresh = Resource(name=name, version=stored.version)
    if stored.ttl is not None:
        refresh.ttl.FromNanoseconds(int(stored.ttl * 1e9))
    return refresh
