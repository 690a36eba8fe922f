"""gRFC A78's XdsClient metrics, exported through OpenTelemetry.

Why observable instruments only: the client counts with plain integers in an observer (a
dict update per event) and OpenTelemetry reads the totals when its reader collects, so a
response of 10,000 resources costs 10,000 dict updates, not 10,000 calls into the SDK, and
a client without metrics enabled pays nothing. `opentelemetry-api` is the optional extra
``metrics``; without it `XdsClient.enable_metrics` raises `MissingExtraError`.

Names, units, labels and descriptions are A78's. The ``resources`` gauge reads the cache when
collected; its ``grpc.xds.cache_state`` values are A78's five (requested, does_not_exist,
acked, nacked, nacked_but_cached) plus, for the states gRFC A57/A88 add, their
`ResourceStatus` names (timeout, expired, received_error, received_error_but_cached,
does_not_exist_but_cached).

A78 defines nothing for load reporting; two instruments of our own, under ``xdsclient.``
rather than A78's ``grpc.`` prefix, make a failing LRS stream visible: the
``xdsclient.lrs.reporting`` gauge (1 while a server's LRS stream has its answer) and the
``xdsclient.lrs.stream_failure`` counter (LRS streams going to failing, not one per retry).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._errors import MissingExtraError
from .._names import authority_of
from .._protocol import ResourceState
from .._version import __version__
from ._events import (
    ChannelClosed,
    ConnectivityChanged,
    LoadReportingChanged,
    ProtocolEvent,
    ResourceUpdate,
)

__all__ = ["METRICS", "MetricsRecorder", "enable_metrics"]

#: name -> (unit, description), as gRFC A78 defines them
METRICS: dict[str, tuple[str, str]] = {
    "grpc.xds_client.connected": (
        "{bool}",
        "Whether or not the xDS client currently has a working ADS stream to the xDS server.",
    ),
    "grpc.xds_client.server_failure": (
        "{failure}",
        "A counter of xDS servers going from healthy to unhealthy.",
    ),
    "grpc.xds_client.resource_updates_valid": (
        "{resource}",
        "A counter of resources received that were considered valid.",
    ),
    "grpc.xds_client.resource_updates_invalid": (
        "{resource}",
        "A counter of resources received that were considered invalid.",
    ),
    "grpc.xds_client.resources": ("{resource}", "Number of xDS resources."),
    "xdsclient.lrs.reporting": (
        "{bool}",
        "Whether the load reporting (LRS) stream to the server is up and answered.",
    ),
    "xdsclient.lrs.stream_failure": (
        "{failure}",
        "A counter of load reporting (LRS) streams going from healthy to failing.",
    ),
    "xdsclient.resolves": (
        "{resolve}",
        "A counter of on-demand resolves finished, by outcome (available, missing, timed_out).",
    ),
    "xdsclient.cluster_resolves": (
        "{resolve}",
        "A counter of clusters resolved at request time by configuration watches, by outcome "
        "(available, missing, timed_out).",
    ),
}
_PREFIX = "type.googleapis.com/"


def resource_type_label(type_url: str) -> str:
    """A78's ``grpc.xds.resource_type``: the message name, without the type URL's prefix."""
    return type_url[len(_PREFIX) :] if type_url.startswith(_PREFIX) else type_url


class MetricsRecorder:
    """The observer counting what A78's counters and ``connected`` gauge report."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.enabled = True
        self.connected: dict[str, int] = {}
        self.failures: Counter[str] = Counter()
        #: (server, type URL, valid) -> resources
        self.updates: Counter[tuple[str, str, bool]] = Counter()
        #: LRS server -> 1 while reporting; LRS stream failures by server
        self.lrs_reporting: dict[str, int] = {}
        self.lrs_failures: Counter[str] = Counter()

    def __call__(self, event: ProtocolEvent) -> None:
        if type(event) is ResourceUpdate:
            self.updates[event.server, event.type_url, event.valid] += 1
        elif type(event) is ConnectivityChanged:
            if not event.connected and self.connected.get(event.server, 1):
                self.failures[event.server] += 1
            self.connected[event.server] = int(event.connected)
        elif type(event) is ChannelClosed and event.server in self.connected:
            self.connected[event.server] = 0  # closed on purpose: not a failure
        elif type(event) is LoadReportingChanged:
            self.lrs_reporting[event.server] = int(event.state == "reporting")
            if event.state == "failing":
                self.lrs_failures[event.server] += 1

    def connected_values(self) -> list[tuple[int, dict[str, str]]]:
        return [(value, self._server(server)) for server, value in self.connected.items()]

    def failure_values(self) -> list[tuple[int, dict[str, str]]]:
        return [(count, self._server(server)) for server, count in self.failures.items()]

    def lrs_reporting_values(self) -> list[tuple[int, dict[str, str]]]:
        return [(value, self._server(server)) for server, value in self.lrs_reporting.items()]

    def lrs_failure_values(self) -> list[tuple[int, dict[str, str]]]:
        return [(count, self._server(server)) for server, count in self.lrs_failures.items()]

    def update_values(self, valid: bool) -> list[tuple[int, dict[str, str]]]:
        return [
            (count, {**self._server(server), "grpc.xds.resource_type": resource_type_label(url)})
            for (server, url, is_valid), count in self.updates.items()
            if is_valid is valid
        ]

    def resource_values(self, states: Iterable[ResourceState]) -> list[tuple[int, dict[str, str]]]:
        counts = Counter(
            (authority_of(state.name), state.type_url, state.status.value) for state in states
        )
        return [
            (
                count,
                {
                    "grpc.target": self.target,
                    "grpc.xds.authority": authority,
                    "grpc.xds.cache_state": cache_state,
                    "grpc.xds.resource_type": resource_type_label(type_url),
                },
            )
            for (authority, type_url, cache_state), count in counts.items()
        ]

    def _server(self, server: str) -> dict[str, str]:
        return {"grpc.target": self.target, "grpc.xds.server": server}


def enable_metrics(
    add_observer: Callable[[Callable[[ProtocolEvent], None]], Callable[[], None]],
    states: Callable[[], list[ResourceState]],
    *,
    meter_provider: Any,
    target: str,
    connected: dict[str, int],
    resolves: Callable[[], Mapping[str, int]] | None = None,
    cluster_resolves: Callable[[], Mapping[str, int]] | None = None,
) -> Callable[[], None]:
    """Register A78's instruments on ``meter_provider`` (or the global one) fed by a new
    `MetricsRecorder` (``connected``: each server's state when metrics are enabled); returns
    the function that stops reporting. ``resolves``: the on-demand resolves finished so far,
    by outcome (``xdsclient.resolves``, labelled ``xdsclient.resolve.outcome``);
    ``cluster_resolves``: the configuration watches' ``resolve_cluster`` calls, likewise
    (``xdsclient.cluster_resolves``)."""
    try:
        from opentelemetry import metrics
    except ImportError:
        raise MissingExtraError(
            "metrics need OpenTelemetry: pip install 'xdsclient[metrics]'"
        ) from None
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    meter = provider.get_meter("xdsclient", __version__)
    recorder = MetricsRecorder(target)
    recorder.connected.update(connected)

    def observing(values: Callable[[], list[tuple[int, dict[str, str]]]]) -> Any:
        def callback(options: Any) -> Iterable[Any]:
            if not recorder.enabled:
                return []
            return [metrics.Observation(value, labels) for value, labels in values()]

        return [callback]

    def instrument(create: Any, name: str, values: Callable[[], Any]) -> None:
        unit, description = METRICS[name]
        create(name, callbacks=observing(values), unit=unit, description=description)

    instrument(
        meter.create_observable_gauge, "grpc.xds_client.connected", recorder.connected_values
    )
    instrument(
        meter.create_observable_counter, "grpc.xds_client.server_failure", recorder.failure_values
    )
    instrument(
        meter.create_observable_counter,
        "grpc.xds_client.resource_updates_valid",
        lambda: recorder.update_values(True),
    )
    instrument(
        meter.create_observable_counter,
        "grpc.xds_client.resource_updates_invalid",
        lambda: recorder.update_values(False),
    )
    instrument(
        meter.create_observable_gauge,
        "grpc.xds_client.resources",
        lambda: recorder.resource_values(states()),
    )
    instrument(
        meter.create_observable_gauge, "xdsclient.lrs.reporting", recorder.lrs_reporting_values
    )
    instrument(
        meter.create_observable_counter,
        "xdsclient.lrs.stream_failure",
        recorder.lrs_failure_values,
    )
    for metric, counts in (
        ("xdsclient.resolves", resolves),
        ("xdsclient.cluster_resolves", cluster_resolves),
    ):
        if counts is not None:
            instrument(meter.create_observable_counter, metric, _by_outcome(target, counts))
    remove = add_observer(recorder)

    def disable() -> None:
        recorder.enabled = False
        remove()

    return disable


def _by_outcome(
    target: str, counts: Callable[[], Mapping[str, int]]
) -> Callable[[], list[tuple[int, dict[str, str]]]]:
    """An outcome counter's values: one per outcome that happened (as the other counters)."""

    def values() -> list[tuple[int, dict[str, str]]]:
        return [
            (count, {"grpc.target": target, "xdsclient.resolve.outcome": outcome})
            for outcome, count in counts().items()
            if count
        ]

    return values
