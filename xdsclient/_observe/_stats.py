"""Envoy-style subscription counters, kept by an observer of the protocol events.

Why these names: operators who run Envoy read ``update_attempt``, ``update_success``,
``update_rejected``, ``update_failure``, ``update_empty``, ``version`` and
``connected_state`` every day; the same counters here need no translation. They are kept per
server and resource type (Envoy keeps them per subscription) by a `StatsRecorder` the client
registers on itself without per-resource verdicts, so keeping them costs a few dict updates
per response, and `XdsClient.stats` returns a frozen snapshot.

Where they differ from Envoy (docs/observability.md): a response counts once it is answered
(ACK: success, NACK: rejected); ``update_failure`` counts connectivity failures (gRFC A57), one
per failure of a server that was up, not one per retry while it stays down, for every type
subscribed on the failed stream (also when the server was down from the start and no request
went out, as Envoy counts it); ``version`` is the version text (Envoy's ``version_text``; its
``version`` is a hash of it). REST-JSON responses carry no nonce: the next request answers
them all the same (a poll answered 304 or with an empty body counts nothing).

Load reporting (LRS) is counted beside discovery, per server: ``lrs_state`` (the state of the
server's LRS stream: connecting, reporting, failing or closed; empty while none was opened)
and ``lrs_stream_failures`` (its streams that failed before an answer, one per change to
failing, not one per retry), so a server refusing LRS (UNIMPLEMENTED, connection refused) or
never answering it (stuck in connecting) shows here, as discovery failures do.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ._events import (
    ChannelClosed,
    ConnectivityChanged,
    LoadReportingChanged,
    ProtocolEvent,
    RequestSent,
    ResponseReceived,
)

__all__ = ["ClientStats", "ServerStats", "StatsRecorder", "TypeStats"]


@attrs.frozen(kw_only=True)
class TypeStats:
    """One resource type's counters on one server (Envoy's ``<type>.update_*`` stats)."""

    #: responses answered, plus connectivity failures (each a finished attempt)
    update_attempt: int = 0
    #: responses accepted (ACKed)
    update_success: int = 0
    #: responses rejected (NACKed)
    update_rejected: int = 0
    #: connectivity failures of the server while this type was subscribed
    update_failure: int = 0
    #: accepted responses that carried no resource
    update_empty: int = 0
    #: the version of the last accepted response (SotW ``version_info``; Delta
    #: ``system_version_info``)
    version: str = ""


@attrs.frozen(kw_only=True)
class ServerStats:
    """One server's counters: its connection and the types it serves."""

    server: str
    #: 1 while the server is usable (gRFC A78's ``connected``), else 0
    connected_state: int
    #: connectivity failures (gRFC A78's ``server_failure``), counted even before any type
    #: was requested from the server (its stream never came up)
    failures: int
    #: by type URL
    types: Mapping[str, TypeStats]
    #: the state of the server's load reporting (LRS) stream: ``connecting``, ``reporting``,
    #: ``failing`` or ``closed`` (empty: no LRS stream was opened to it)
    lrs_state: str = ""
    #: LRS streams that failed before the server answered (one per change to failing)
    lrs_stream_failures: int = 0


@attrs.frozen(kw_only=True)
class ClientStats:
    """A snapshot of every server's counters (`XdsClient.stats`)."""

    #: by server URI (or source name)
    servers: Mapping[str, ServerStats]
    #: `XdsClient.resolve` calls finished, by outcome: ``available``, ``missing``,
    #: ``timed_out``
    resolves: Mapping[str, int] = attrs.field(factory=dict)
    #: `ConfigWatch.resolve_cluster` calls finished, by outcome (the same three)
    cluster_resolves: Mapping[str, int] = attrs.field(factory=dict)

    def type_stats(self, type_url: str, server: str | None = None) -> TypeStats:
        """One type's counters on ``server``, or summed over every server (``version``: the
        last server's)."""
        found = [
            stats.types[type_url]
            for name, stats in self.servers.items()
            if type_url in stats.types and server in (None, name)
        ]
        if len(found) == 1:
            return found[0]
        total = TypeStats()
        for stats in found:
            total = TypeStats(
                update_attempt=total.update_attempt + stats.update_attempt,
                update_success=total.update_success + stats.update_success,
                update_rejected=total.update_rejected + stats.update_rejected,
                update_failure=total.update_failure + stats.update_failure,
                update_empty=total.update_empty + stats.update_empty,
                version=stats.version or total.version,
            )
        return total


_ATTEMPT, _SUCCESS, _REJECTED, _FAILURE, _EMPTY = range(5)


class StatsRecorder:
    """The observer that keeps the counters (register it with ``verdicts=False``)."""

    def __init__(self) -> None:
        #: (server, type URL) -> the five counters, in `TypeStats` order
        self._counts: dict[tuple[str, str], list[int]] = {}
        self._versions: dict[tuple[str, str], str] = {}
        #: (server, type URL) -> (nonce, resource count, version) of the response not yet answered
        self._pending: dict[tuple[str, str], tuple[str, int, str]] = {}
        self._connected: dict[str, int] = {}
        self._failures: dict[str, int] = {}
        #: server -> (LRS state, LRS stream failures)
        self._lrs: dict[str, tuple[str, int]] = {}

    def __call__(self, event: ProtocolEvent) -> None:
        if type(event) is ResponseReceived:
            key = (event.server, event.type_url)
            self._pending[key] = (event.nonce, event.resource_count, event.version_info)
        elif type(event) is RequestSent:
            self._answered(event)
        elif type(event) is ConnectivityChanged:
            self._connectivity(event)
        elif type(event) is ChannelClosed and event.server in self._connected:
            self._connected[event.server] = 0  # closed on purpose: not a failure
        elif type(event) is LoadReportingChanged:
            failures = self._lrs.get(event.server, ("", 0))[1]
            self._lrs[event.server] = (event.state, failures + (event.state == "failing"))

    def _counts_of(self, key: tuple[str, str]) -> list[int]:
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = [0, 0, 0, 0, 0]
        return counts

    def _answered(self, event: RequestSent) -> None:
        key = (event.server, event.type_url)
        counts = self._counts_of(key)  # a type counts from its first request
        pending = self._pending.get(key)
        if pending is None or event.nonce != pending[0]:  # REST: both nonces are empty
            return
        del self._pending[key]
        counts[_ATTEMPT] += 1
        if event.is_nack:
            counts[_REJECTED] += 1
            return
        counts[_SUCCESS] += 1
        if pending[1] == 0:
            counts[_EMPTY] += 1
        self._versions[key] = event.version_info if not event.delta else pending[2]

    def _connectivity(self, event: ConnectivityChanged) -> None:
        self._connected[event.server] = int(event.connected)
        if event.connected:
            return
        server = event.server
        self._failures[server] = self._failures.get(server, 0) + 1
        types = event.type_urls or [t for s, t in self._counts if s == server]
        for type_url in types:
            counts = self._counts_of((server, type_url))
            counts[_ATTEMPT] += 1
            counts[_FAILURE] += 1

    def snapshot(self) -> ClientStats:
        """The counters now, as frozen values."""
        types: dict[str, dict[str, TypeStats]] = {
            server: {} for server in (*self._connected, *self._lrs)
        }
        for (server, type_url), counts in self._counts.items():
            attempt, success, rejected, failure, empty = counts
            types.setdefault(server, {})[type_url] = TypeStats(
                update_attempt=attempt,
                update_success=success,
                update_rejected=rejected,
                update_failure=failure,
                update_empty=empty,
                version=self._versions.get((server, type_url), ""),
            )
        return ClientStats(
            servers={
                server: ServerStats(
                    server=server,
                    connected_state=self._connected.get(server, 0),
                    failures=self._failures.get(server, 0),
                    types=by_type,
                    lrs_state=self._lrs.get(server, ("", 0))[0],
                    lrs_stream_failures=self._lrs.get(server, ("", 0))[1],
                )
                for server, by_type in types.items()
            }
        )
