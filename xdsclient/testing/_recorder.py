"""`ProtocolRecorder`: what a client sent and received, for assertions in tests.

Why: a test of a control plane must be able to say "nothing was NACKed" and "the change reached
the client within N ms" against any server, including one whose logs it cannot read. The
recorder is an observer of the client's protocol events (`XdsClient.add_observer`), so it sees
exactly what the client wrote and read, with the client's timestamps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .._observe._events import (
    ConnectivityChanged,
    ProtocolEvent,
    RequestSent,
    ResourceUpdate,
    ResponseReceived,
)

__all__ = ["ProtocolRecorder"]

_PREFIX = "type.googleapis.com/"


class ProtocolRecorder:
    """Records every protocol event of the clients it is attached to (see `attach`)."""

    def __init__(self) -> None:
        #: every event, in order
        self.events: list[ProtocolEvent] = []
        self._removers: list[Callable[[], None]] = []
        self._wake: asyncio.Event | None = None

    def attach(self, client: Any) -> ProtocolRecorder:
        """Start recording ``client``'s events (an `XdsClient`); returns the recorder."""
        self._removers.append(client.add_observer(self._record))
        return self

    def _record(self, event: ProtocolEvent) -> None:
        self.events.append(event)
        if self._wake is not None:
            self._wake.set()

    def detach(self) -> None:
        """Stop recording (what was recorded stays)."""
        for remove in self._removers:
            remove()
        self._removers.clear()

    def clear(self) -> None:
        """Forget what was recorded so far (to measure from a point in a test)."""
        self.events.clear()

    # ------------------------------------------------------------------ views

    @property
    def requests(self) -> list[RequestSent]:
        """Every `RequestSent` recorded, in order."""
        return [e for e in self.events if isinstance(e, RequestSent)]

    @property
    def nacks(self) -> list[RequestSent]:
        """Every NACK the client sent."""
        return [e for e in self.events if isinstance(e, RequestSent) and e.is_nack]

    @property
    def responses(self) -> list[ResponseReceived]:
        """Every `ResponseReceived` recorded, in order."""
        return [e for e in self.events if isinstance(e, ResponseReceived)]

    @property
    def connectivity(self) -> list[ConnectivityChanged]:
        """Every `ConnectivityChanged` recorded, in order."""
        return [e for e in self.events if isinstance(e, ConnectivityChanged)]

    def updates(
        self, type_url: str | None = None, name: str | None = None, *, valid: bool | None = None
    ) -> list[ResourceUpdate]:
        """The verdicts on resources received, filtered by type URL, name and validity."""
        return [
            e
            for e in self.events
            if isinstance(e, ResourceUpdate)
            and (type_url is None or e.type_url == type_url)
            and (name is None or e.name == name)
            and (valid is None or e.valid is valid)
        ]

    def rejected(self) -> list[ResourceUpdate]:
        """Every resource the client rejected, with the reason."""
        return self.updates(valid=False)

    def first_update(self, type_url: str, name: str, *, after: float = float("-inf")) -> float:
        """When (client clock) a valid update of ``name`` first arrived after ``after``;
        `LookupError` if none did. With the client's clock at the moment a change was pushed,
        this measures delivery latency against any control plane."""
        for event in self.updates(type_url, name, valid=True):
            if event.time > after:
                return event.time
        raise LookupError(f"no valid update of {_short(type_url)} {name!r} was recorded")

    def ack_latencies(self) -> list[float]:
        """Per response: seconds from reading it to writing its ACK or NACK (client side)."""
        read: dict[tuple[str, str, str], float] = {}
        latencies = []
        for event in self.events:
            if isinstance(event, ResponseReceived):
                read[event.server, event.type_url, event.nonce] = event.time
            elif isinstance(event, RequestSent) and event.nonce:
                start = read.pop((event.server, event.type_url, event.nonce), None)
                if start is not None:
                    latencies.append(event.time - start)
        return latencies

    async def answer(self, type_url: str | None = None, *, timeout: float = 10.0) -> RequestSent:
        """The first ACK or NACK recorded (of ``type_url``), waiting up to ``timeout`` seconds
        for one: after it, "nothing was NACKed" is a meaningful assertion."""
        async with asyncio.timeout(timeout):
            while True:
                for event in self.events:
                    if (
                        isinstance(event, RequestSent)
                        and event.nonce
                        and type_url in (None, event.type_url)
                    ):
                        return event
                self._wake = asyncio.Event()
                await self._wake.wait()

    # ------------------------------------------------------------------ assertions

    def assert_no_nacks(self) -> None:
        """Fail, naming each rejected resource and why, if the client NACKed anything."""
        nacks = self.nacks
        if not nacks:
            return
        lines = [f"the client NACKed {len(nacks)} response(s):"]
        for nack in nacks:
            lines.append(
                f"  {nack.server} {_short(nack.type_url)} nonce {nack.nonce!r}: {nack.error_detail}"
            )
        raise AssertionError("\n".join(lines))


def _short(type_url: str) -> str:
    return type_url[len(_PREFIX) :] if type_url.startswith(_PREFIX) else type_url
