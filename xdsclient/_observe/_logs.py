"""The client's own log lines about the wire, written by an observer of the protocol events.

Why an observer: the lines an operator needs (a NACK, a server lost or back) are the facts the
drivers already report as events, so logging them is one more observer and the protocol code
holds no log calls. Rules (docs/observability.md lists every line):

- ``xdsclient.protocol`` WARNING, one per NACK: server, type, the rejected version and nonce,
  and the NACK's text (each rejected resource with its reason, as sent to the server). The same
  rejection again (the same version and text, as a REST-JSON source's every poll brings until
  the server changes) is DEBUG: once per change, not once per poll.
- ``xdsclient.connectivity`` WARNING when a server is lost (gRFC A57's connectivity failure),
  INFO when it answers again; on changes only, never once per retry. A REST-JSON source (an
  ``http(s)://`` URL) says so: WARNING at its first failed poll (HTTP error, timeout, a body
  that is not a response), INFO at its next good one.
- ``xdsclient.lrs`` WARNING when a server's load reporting (LRS) stream fails before the
  server answered it (refused, UNIMPLEMENTED...), INFO when it reports again; on changes only,
  never once per retry. DEBUG when one opens or is closed. Each line names LRS and the server.
- ``xdsclient.protocol`` DEBUG: a one-line summary of each request and response.
- Names the authority as an operator knows it: gRFC A47's ``#old`` (the authority of every
  name that is not an xdstp:// name) is an internal key, so `authority_words` says "plain
  (non-xdstp) names" instead.
- Never a credential: lines carry server URIs, type URLs, versions, nonces, names and the
  NACK's text; no node metadata, headers or call credentials.
"""

from __future__ import annotations

import logging

from .._names import OLD_AUTHORITY
from ._events import (
    ConnectivityChanged,
    LoadReportingChanged,
    ProtocolEvent,
    RequestSent,
    ResponseReceived,
)

__all__ = ["ProtocolLogger", "authority_words"]

protocol_logger = logging.getLogger("xdsclient.protocol")
connectivity_logger = logging.getLogger("xdsclient.connectivity")
lrs_logger = logging.getLogger("xdsclient.lrs")

_PREFIX = "type.googleapis.com/"
_NAMES_SHOWN = 5
_REST_SCHEMES = ("http://", "https://")


class ProtocolLogger:
    """The observer writing the client's protocol log lines (register with verdicts=False)."""

    def __init__(self) -> None:
        #: (server, type URL) -> version of the last response read (what a NACK rejects)
        self._versions: dict[tuple[str, str], str] = {}
        self._lost: set[str] = set()
        self._lrs_failing: set[str] = set()
        #: (server, type URL) -> (version, text) of the last NACK, until an ACK of that type
        self._nacked: dict[tuple[str, str], tuple[str, str]] = {}

    def __call__(self, event: ProtocolEvent) -> None:
        if type(event) is ResponseReceived:
            self._versions[event.server, event.type_url] = event.version_info
            if protocol_logger.isEnabledFor(logging.DEBUG):
                protocol_logger.debug(
                    "<- %s %s version=%r nonce=%r resources=%d%s",
                    event.server,
                    _short(event.type_url),
                    event.version_info,
                    event.nonce,
                    event.resource_count,
                    f" removed={_names(event.removed)}" if event.removed else "",
                )
        elif type(event) is RequestSent:
            self._request(event)
        elif type(event) is ConnectivityChanged:
            self._connectivity(event)
        elif type(event) is LoadReportingChanged:
            self._load_reporting(event)

    def _request(self, event: RequestSent) -> None:
        key = (event.server, event.type_url)
        if event.is_nack:
            rejected = (self._versions.get(key, ""), event.error_detail or "")
            again = self._nacked.get(key) == rejected
            self._nacked[key] = rejected
            protocol_logger.log(
                logging.DEBUG if again else logging.WARNING,
                "NACK to %s: %s version %r (nonce %r) rejected%s: %s",
                event.server,
                _short(event.type_url),
                rejected[0],
                event.nonce,
                " again" if again else "",
                event.error_detail,
            )
            return
        if event.nonce or event.version_info:
            self._nacked.pop(key, None)  # an ACK (REST's carry no nonce): the next NACK is news
        if protocol_logger.isEnabledFor(logging.DEBUG):
            kind = "ACK" if event.nonce else "request"
            protocol_logger.debug(
                "-> %s %s %s version=%r nonce=%r names=%s%s",
                event.server,
                _short(event.type_url),
                kind,
                event.version_info,
                event.nonce,
                _names(event.resource_names),
                f" unsubscribe={_names(event.unsubscribed)}" if event.unsubscribed else "",
            )

    def _connectivity(self, event: ConnectivityChanged) -> None:
        rest = event.server.startswith(_REST_SCHEMES)
        if not event.connected:
            self._lost.add(event.server)
            if rest:
                connectivity_logger.warning(
                    "REST-JSON source %s failing: %s", event.server, event.error
                )
            else:
                connectivity_logger.warning("xDS server %s lost: %s", event.server, event.error)
        elif event.server in self._lost:
            self._lost.discard(event.server)
            if rest:
                connectivity_logger.info("REST-JSON source %s answers again", event.server)
            else:
                connectivity_logger.info("xDS server %s answers again", event.server)

    def _load_reporting(self, event: LoadReportingChanged) -> None:
        server = event.server
        if event.state == "failing":
            self._lrs_failing.add(server)
            lrs_logger.warning(
                "LRS stream to %s failing: %s; load reports wait, retrying", server, event.error
            )
        elif event.state == "reporting" and server in self._lrs_failing:
            self._lrs_failing.discard(server)
            lrs_logger.info("LRS stream to %s reporting again", server)
        else:
            lrs_logger.debug("LRS stream to %s %s", server, event.state)


def authority_words(authority: str) -> str:
    """An authority as a log line or an error message names it: ``authority 'x'``, or for
    the internal ``#old`` key, the names it stands for."""
    if authority == OLD_AUTHORITY:
        return "plain (non-xdstp) names"
    return f"authority {authority!r}"


def _short(type_url: str) -> str:
    return type_url[len(_PREFIX) :] if type_url.startswith(_PREFIX) else type_url


def _names(names: tuple[str, ...]) -> str:
    """At most a few names, then how many more (a request may carry thousands)."""
    if not names:
        return "[]"
    shown = ", ".join(names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    return f"[{shown}{f', ... {more} more' if more > 0 else ''}]"
