"""Pick first over one locality's endpoints (gRFC A62, C-core's ``pick_first``).

Why as A62: the endpoints are tried one at a time in order (shuffled first on each update when
``shuffle_address_list`` is set, with the random source given at construction); the first to be
READY is used for every pick. An endpoint already failed when the pass reaches it is passed
over. When the whole pass failed the state is TRANSIENT_FAILURE and stays so (sticky) until an
endpoint is READY, every endpoint then retrying on its own (the transport's backoff). When the
used endpoint stops being READY, pick first goes IDLE; the next pick starts a new pass. An update
that still holds the used endpoint keeps it.

Not here: A62's happy eyeballs (a second attempt started after 250 ms while the first is still
connecting): attempts are strictly one at a time.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..resources import Endpoint
from ._base import ConnectivityState, EndpointKey, PickOutcome, PickRequest, PickResult, key_of
from ._endpoint_list import usable

__all__ = ["PickFirstPicker"]

_READY = ConnectivityState.READY
_IDLE = ConnectivityState.IDLE
_CONNECTING = ConnectivityState.CONNECTING
_FAILED = ConnectivityState.TRANSIENT_FAILURE


class PickFirstPicker:
    """A62's pick first: one connection, to the first endpoint that connects."""

    def __init__(self, *, shuffle: bool = False, rand: random.Random | None = None) -> None:
        self._shuffle = shuffle
        self._rand = rand or random.Random()
        self._endpoints: list[Endpoint] = []
        #: the first listed endpoint of each key (a connectivity change is a lookup)
        self._by_key: dict[EndpointKey, Endpoint] = {}
        self._reported: dict[EndpointKey, ConnectivityState] = {}
        self._state = _IDLE
        self._selected: Endpoint | None = None
        #: the COMPLETE result for ``_selected`` (built once per selected endpoint)
        self._complete: PickResult | None = None
        #: the endpoint being tried in the current pass; None when no pass is running
        self._attempt: int | None = None

    def update(self, endpoints: Sequence[Endpoint], now: float) -> None:
        """A new list (shuffled if asked); the used endpoint kept if it is still listed."""
        self._endpoints = list(usable(endpoints))
        if self._shuffle:
            self._rand.shuffle(self._endpoints)
        self._by_key = {}
        for endpoint in self._endpoints:
            self._by_key.setdefault(key_of(endpoint), endpoint)
        keys = self._by_key
        self._reported = {k: s for k, s in self._reported.items() if k in keys}
        if self._selected is not None and key_of(self._selected) in keys:
            return
        self._selected = None
        self._start_pass()

    def set_endpoint_state(self, key: EndpointKey, state: ConnectivityState, now: float) -> None:
        """The user's transport reports an endpoint's connectivity."""
        found = self._by_key.get(key)
        if found is None:
            return
        self._reported[key] = state
        if self._selected is not None:
            if key == key_of(self._selected) and state is not _READY:
                self._selected, self._state, self._attempt = None, _IDLE, None
            return
        if state is _READY:
            self._selected = found
            self._state, self._attempt = _READY, None
        elif (
            state is _FAILED
            and self._attempt is not None
            and key == key_of(self._endpoints[self._attempt])
        ):
            self._advance(self._attempt + 1)

    def state(self) -> ConnectivityState:
        """READY with an endpoint in use; CONNECTING during the first pass; IDLE after the used
        endpoint dropped; TRANSIENT_FAILURE once a pass failed, until one is READY."""
        return self._state

    def wanted_connections(self) -> tuple[Endpoint, ...]:
        """The used endpoint; or the one the pass is trying; or, after a failed pass, all."""
        if self._selected is not None:
            return (self._selected,)
        if self._attempt is not None:
            return (self._endpoints[self._attempt],)
        if self._state is _FAILED:
            return tuple(self._endpoints)
        return ()

    def pick(self, request: PickRequest, rand: random.Random, now: float) -> PickResult:
        """The endpoint in use; in IDLE, start a new pass and queue."""
        if self._selected is not None:
            result = self._complete
            if result is None or result.endpoint is not self._selected:
                result = self._complete = PickResult(
                    outcome=PickOutcome.COMPLETE, endpoint=self._selected
                )
            return result
        if self._state is _IDLE:
            self._start_pass()
            return PickResult(outcome=PickOutcome.QUEUE, connect=self.wanted_connections())
        if self._state is _FAILED:
            what = "no endpoints" if not self._endpoints else "every endpoint failed to connect"
            return PickResult(outcome=PickOutcome.FAIL, error=f"pick_first: {what}")
        return PickResult(outcome=PickOutcome.QUEUE)

    def _start_pass(self) -> None:
        if self._state is not _FAILED:
            self._state = _CONNECTING
        self._advance(0)

    def _advance(self, index: int) -> None:
        """Try the endpoint at ``index`` or the next one not already failed; none: failed."""
        while index < len(self._endpoints):
            if self._reported.get(key_of(self._endpoints[index])) is not _FAILED:
                self._attempt = index
                return
            index += 1
        self._attempt = None
        self._state = _FAILED
