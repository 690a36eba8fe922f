"""The SotW server stream's rules: what a request changes, and which responses are owed.

Why these rules (xDS spec, "State of the World"):
- A request answers the last response of its type; one carrying another nonce is stale (a newer
  response is on its way) and is ignored.
- An empty first request for a type is the legacy wildcard, kept while later requests stay
  empty; ``*`` asks for everything explicitly, with or without names (`Mode`, `TRANSITIONS`).
- LDS and CDS responses carry the full state: every change resends everything wanted,
  deletions included, and a changed request is answered even when nothing changed. Other types
  carry only what changed since it was sent.
- A newly requested name is sent again even if it was sent before (the client may have dropped
  it); a dropped name is forgotten unless a wildcard still covers it.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from .._names import WILDCARD
from .._protocol._messages import DiscoveryResponse
from ._encoding import Encoded
from ._server_stream import FULL_STATE, Mode, ServerStream, beat

__all__ = ["TRANSITIONS", "Asked", "SotwServerStream"]


class Asked(enum.Enum):
    """What a SotW request's ``resource_names`` say, as far as wildcard goes."""

    NOTHING = "no names"
    NAMES = "names, no '*'"
    STAR = "'*', with or without names"

    __hash__ = object.__hash__


_M, _A = Mode, Asked

#: (mode of the type, what the request asks) -> the mode after it.
TRANSITIONS: dict[tuple[Mode, Asked], Mode] = {
    (_M.UNREQUESTED, _A.NOTHING): _M.LEGACY_WILDCARD,
    (_M.UNREQUESTED, _A.NAMES): _M.NAMED,
    (_M.UNREQUESTED, _A.STAR): _M.WILDCARD,
    (_M.LEGACY_WILDCARD, _A.NOTHING): _M.LEGACY_WILDCARD,
    (_M.LEGACY_WILDCARD, _A.NAMES): _M.NAMED,
    (_M.LEGACY_WILDCARD, _A.STAR): _M.WILDCARD,
    (_M.WILDCARD, _A.NOTHING): _M.NAMED,
    (_M.WILDCARD, _A.NAMES): _M.NAMED,
    (_M.WILDCARD, _A.STAR): _M.WILDCARD,
    (_M.NAMED, _A.NOTHING): _M.NAMED,
    (_M.NAMED, _A.NAMES): _M.NAMED,
    (_M.NAMED, _A.STAR): _M.WILDCARD,
}


def asked(names: set[str]) -> Asked:
    """Classify a request's names."""
    if WILDCARD in names:
        return Asked.STAR
    return Asked.NAMES if names else Asked.NOTHING


@attrs.define
class _Subscription:
    """What one stream wants of one type, and what it has been sent."""

    mode: Mode = Mode.UNREQUESTED
    names: set[str] = attrs.Factory(set)  # without '*'
    reply_owed: bool = False  # LDS/CDS: the last request must be answered even if nothing changed
    sent: dict[str, str] = attrs.Factory(dict)  # name -> version the client has (or was sent)
    nonce: str = ""  # last nonce sent for this type


class SotwServerStream(ServerStream):
    """A SotW stream (``StreamAggregatedResources`` or a per-type ``Stream*``)."""

    def _apply(self, type_url: str, request: Any) -> None:
        sub: _Subscription = self._subs.setdefault(type_url, _Subscription())
        requested = sub.mode is not Mode.UNREQUESTED
        if requested and request.response_nonce != sub.nonce and not self._faults.answer_stale:
            return  # stale: a newer response is on its way
        if self._faults.resend_all(request):
            sub.sent.clear()
            sub.reply_owed = True
        names = set(request.resource_names)
        previous = (set(sub.names), sub.mode.wildcard)
        sub.mode = TRANSITIONS[sub.mode, asked(names)]
        names.discard(WILDCARD)
        if self._faults.resend_on_subscribe:
            for added in names - sub.names:
                sub.sent.pop(added, None)  # newly requested: send it again even if sent before
            if not sub.mode.wildcard:
                for dropped in sub.names - names:
                    sub.sent.pop(dropped, None)
        sub.names = names
        if not requested or (names, sub.mode.wildcard) != previous:
            sub.reply_owed = True  # LDS/CDS: a changed request is answered even if unchanged

    def _reply(self, type_url: str, sub: _Subscription) -> Encoded | None:
        everything = self._faults.send_unrequested or sub.mode.wildcard
        wanted = self._store.select(type_url, None if everything else sub.names)
        if type_url in FULL_STATE and self._faults.full_state:
            current = {name: s.version for name, s in wanted}
            if current == sub.sent and not sub.reply_owed:
                return None
            to_send = wanted
            sub.sent = current
        else:
            to_send = [(n, s) for n, s in wanted if sub.sent.get(n) != s.version]
            if not to_send:
                return None
            sub.sent.update({name: s.version for name, s in to_send})
        sub.reply_owed = False
        sub.nonce = self._nonce()
        version = self._store.type_version(type_url)
        return self._encoder.sotw(type_url, version, to_send, sub.nonce)

    def heartbeat(self, type_url: str, name: str) -> Any:
        """A TTL refresh (a body-less ``Resource``) of a resource this stream was sent at its
        current version, or None."""
        stored = self._store.get(type_url, name)
        sub: _Subscription | None = self._subs.get(type_url)
        if stored is None or sub is None or sub.sent.get(name) != stored.version:
            return None
        sub.nonce = self.next_nonce()
        message = DiscoveryResponse(
            type_url=type_url, nonce=sub.nonce, version_info=self._store.type_version(type_url, "")
        )
        message.resources.add().Pack(beat(name, stored))
        return message
