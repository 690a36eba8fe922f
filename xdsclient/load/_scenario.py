"""What a load run does: the server, the clients, what they watch, and what goes wrong.

Why frozen values with checks at construction: a scenario comes from Python, from the command
line or from a YAML file, and a mistake in any of them (an unknown field, a negative count, two
watch profiles at once) must be one clear line before anything connects, not a crash a minute
into a run. `Scenario.from_dict` is the one place a mapping becomes a scenario; its errors are
`ScenarioError`, which the CLI reports as a usage error (exit status 2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .._errors import MissingExtraError, XdsError
from .._settings._config import Locality
from ._lean import KINDS

__all__ = ["Faults", "Push", "Scenario", "ScenarioError", "load_scenario"]


class ScenarioError(XdsError, ValueError):
    """A scenario that cannot run: an unknown field, a bad value, options that do not go
    together. The message is one line naming the field."""


def _positive(instance: Any, attribute: Any, value: float | None) -> None:
    if value is not None and not (isinstance(value, int | float) and 0 < value < math.inf):
        raise ScenarioError(f"{attribute.name}: {value!r} must be a number above 0")


def _share(instance: Any, attribute: Any, value: float) -> None:
    if not (isinstance(value, int | float) and 0 <= value <= 1):
        raise ScenarioError(f"{attribute.name}: {value!r} must be between 0 and 1")


def _not_negative(instance: Any, attribute: Any, value: float) -> None:
    if not (isinstance(value, int | float) and 0 <= value < math.inf):
        raise ScenarioError(f"{attribute.name}: {value!r} must be a number of 0 or more")


def _count(instance: Any, attribute: Any, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ScenarioError(f"{attribute.name}: {value!r} must be a whole number above 0")


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _floats(value: Iterable[float]) -> tuple[float, ...]:
    return tuple(value)


def _strings(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


def _times(instance: Any, attribute: Any, value: tuple[float, ...]) -> None:
    for item in value:
        _not_negative(instance, attribute, item)


@attrs.frozen(kw_only=True)
class Faults:
    """Misbehaviour for a share of the clients (``fraction``, spread evenly over them).

    Every field is off by default; several can be combined.
    """

    #: the share of clients these faults apply to (1.0: all)
    fraction: float = attrs.field(default=1.0, validator=_share)
    #: NACK every Nth response a client receives (all its resources rejected)
    nack_every: int | None = attrs.field(default=None, validator=_count)
    #: NACK this share of responses, at random
    nack_share: float = attrs.field(default=0.0, validator=_share)
    #: always reject resources with these names (a per-resource NACK, gRFC A46)
    nack_names: tuple[str, ...] = attrs.field(default=(), converter=_names)
    #: seconds to wait before writing each ACK or NACK
    slow_ack: float = attrs.field(default=0.0, validator=_not_negative)
    #: mean seconds between stream resets a client makes at random (exponentially spread)
    reset_every: float | None = attrs.field(default=None, validator=_positive)
    #: seconds into the run at which every affected client drops its connection and
    #: reconnects at once (a reconnect storm)
    storms: tuple[float, ...] = attrs.field(default=(), converter=_floats, validator=_times)
    #: Delta: reconnect without ``initial_resource_versions`` (the client forgot its state)
    forgetful: bool = False
    #: mean seconds a client stays before it leaves and a new client joins in its place
    churn_every: float | None = attrs.field(default=None, validator=_positive)

    def applies_to(self, index: int) -> bool:
        """Whether client ``index`` has these faults: ``fraction`` of them, evenly spread."""
        return int((index + 1) * self.fraction) > int(index * self.fraction)


@attrs.frozen(kw_only=True)
class Push:
    """A push the run makes: a shell ``command`` (the CLI's ``--push``) or the Python hook
    given to `run`, at ``at`` seconds into the run, then every ``every`` seconds, ``count``
    times. Push-to-applied is measured from the moment the push starts."""

    command: str | None = None
    at: float = attrs.field(default=1.0, validator=_not_negative)
    every: float = attrs.field(default=1.0, validator=_positive)
    count: int = attrs.field(default=1, validator=_count)


def _localities(value: Any) -> tuple[Locality, ...]:
    result = []
    for item in value:
        if isinstance(item, Locality):
            result.append(item)
            continue
        parts = str(item).split("/")
        if len(parts) > 3 or not all(parts):
            raise ScenarioError(f"localities: {item!r}: expected REGION[/ZONE[/SUBZONE]]")
        region, zone, sub_zone = (*parts, "", "")[:3]
        result.append(Locality(region=region, zone=zone, sub_zone=sub_zone))
    return tuple(result)


def _resources(value: Any) -> tuple[tuple[str, str], ...]:
    result = []
    for item in value:
        if isinstance(item, Mapping):
            extra = set(item) - {"type", "name"}
            if extra or "type" not in item or "name" not in item:
                raise ScenarioError(f"resources: {dict(item)!r}: expected {{type: ..., name: ...}}")
            kind, name = item["type"], item["name"]
        elif isinstance(item, str) and ":" in item:
            kind, name = item.split(":", 1)
        else:
            kind, name = tuple(item)
        if kind not in KINDS:
            raise ScenarioError(f"resources: unknown type {kind!r}: one of {', '.join(KINDS)}")
        result.append((str(kind), str(name)))
    return tuple(result)


def _faults(value: Any) -> tuple[Faults, ...]:
    if isinstance(value, Faults):
        return (value,)
    return tuple(item if isinstance(item, Faults) else _build(Faults, item, "faults")
                 for item in value)  # fmt: skip


@attrs.frozen(kw_only=True)
class Scenario:
    """One load run. Give ``server`` (``host:port``, insecure) or ``bootstrap`` (a gRPC
    bootstrap file: its first server and node), and exactly one of ``listener`` (the gRPC
    walk from that listener), ``envoy`` (wildcard LDS and CDS, then the routes and
    assignments they name) or ``resources`` (``(type, name)`` pairs, type one of listener,
    route, cluster, endpoint)."""

    server: str | None = None
    bootstrap: str | None = None
    clients: int = attrs.field(default=1, validator=_count)
    #: clients started per second (None: all at once)
    ramp: float | None = attrs.field(default=None, validator=_positive)
    #: seconds the run lasts from its start; every client stops then
    duration: float = attrs.field(default=10.0, validator=_positive)
    listener: str | None = None
    envoy: bool = False
    resources: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_resources)
    ads: bool = True  #: one stream per client, else one per type
    delta: bool = False
    #: node id; ``{i}`` is the client's number
    node_id: str = "xdsclient-load-{i}"
    node_cluster: str = "xdsclient-load"
    #: node metadata (string values; ``{i}`` is the client's number)
    metadata: Mapping[str, str] = attrs.field(factory=dict, converter=_strings, hash=False)
    #: localities given to the clients in turn (client i gets ``localities[i % len]``)
    localities: tuple[Locality, ...] = attrs.field(default=(), converter=_localities)
    #: multiplex every client's stream on one connection (default: a connection each)
    share_connections: bool = False
    #: decode resources with the client's validating decoders (NACK what it would NACK)
    validate: bool = False
    faults: tuple[Faults, ...] = attrs.field(default=(), converter=_faults)
    push: Push | None = None
    #: reconnect backoff after a failed stream: first delay and cap (jittered +-20 %)
    backoff_initial: float = attrs.field(default=1.0, validator=_positive)
    backoff_max: float = attrs.field(default=30.0, validator=_positive)
    #: seconds to reach the server before the run starts, else the run fails at once
    connect_timeout: float = attrs.field(default=5.0, validator=_positive)
    #: seed of every random choice (faults, jitter): the same scenario runs the same way
    seed: int = 0
    #: the first client's number: a distributed run gives each worker its own range, so node
    #: ids, faults and random choices are those of one process running every client
    first_index: int = attrs.field(default=0, validator=_not_negative)

    def __attrs_post_init__(self) -> None:
        if (self.server is None) == (self.bootstrap is None):
            raise ScenarioError("give server or bootstrap (one of them)")
        profiles = [self.listener is not None, self.envoy, bool(self.resources)]
        if sum(profiles) != 1:
            raise ScenarioError("watch one of: listener, envoy, resources")
        if "{i}" not in self.node_id:
            raise ScenarioError(f"node_id: {self.node_id!r} must contain {{i}} (nodes differ)")
        if any(f.forgetful for f in self.faults) and not self.delta:
            raise ScenarioError("faults: forgetful needs delta (SotW always restates state)")

    @property
    def profile(self) -> str:
        """``listener``, ``envoy`` or ``resources``."""
        return "listener" if self.listener is not None else "envoy" if self.envoy else "resources"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """The scenario a mapping (a parsed YAML file) describes; `ScenarioError` otherwise."""
        scenario: Scenario = _build(cls, data, "scenario")
        return scenario

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what ``--json`` records of the scenario)."""

        data = attrs.asdict(self)
        data["localities"] = [
            "/".join(p for p in (loc.region, loc.zone, loc.sub_zone) if p)
            for loc in self.localities
        ]
        return data


def _build(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    known = {field.name for field in attrs.fields(cls)}
    unknown = sorted(str(key) for key in data if key not in known)
    if unknown:
        raise ScenarioError(f"{where}: unknown field {unknown[0]!r}")
    values = dict(data)
    if cls is Scenario and isinstance(values.get("push"), Mapping):
        values["push"] = _build(Push, values["push"], "push")
    try:
        return cls(**values)
    except ScenarioError:
        raise
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def load_scenario(path: str) -> Scenario:
    """The scenario in a YAML file (needs PyYAML: ``pip install 'xdsclient[load]'``)."""
    try:
        import yaml
    except ImportError:
        raise MissingExtraError(
            "YAML scenarios need PyYAML: pip install 'xdsclient[load]'"
        ) from None
    with open(path, encoding="utf-8") as file:
        try:
            data = yaml.safe_load(file)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise ScenarioError(f"{path}: not valid YAML{where}") from None
    return Scenario.from_dict(data if data is not None else {})
