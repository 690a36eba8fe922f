"""What a load run does: the server, the clients, what they watch, and what goes wrong.

Why frozen values with checks at construction: a scenario comes from Python, from the command
line or from a YAML file, and a mistake in any of them (an unknown field, a value of the wrong
type, a negative count, two watch profiles at once, a push after the run's end) must be one
clear line before anything connects, not a crash a minute into a run. Every field has an attrs
validator or converter that checks its type and range (a string is never taken for a list, a
``maybe`` never for a flag); `Scenario.from_dict` is the one place a mapping becomes a
scenario. The errors are `ScenarioError`, naming the field (``faults: nack_every: ...``), which
the CLI reports as a usage error (exit status 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .._errors import MissingExtraError, XdsError
from .._settings._config import Locality
from ._lean import KINDS

__all__ = ["Faults", "Push", "Scenario", "ScenarioError", "load_scenario"]


class ScenarioError(XdsError, ValueError):
    """A scenario that cannot run: an unknown field, a bad value, options that do not go
    together. The message is one line naming the field."""


# Every field's type is checked where the value is made (from YAML, flags or Python alike):
# a YAML file says ``delta: maybe`` or ``localities: us-east`` as easily as the right thing,
# and a value of the wrong type must be one line naming its field, never a crash mid-run.


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rule(test: Callable[[Any], bool], expected: str, *, optional: bool = False) -> Any:
    """An attrs validator: ``test`` must hold of the value (None passes when ``optional``),
    else a `ScenarioError` naming the field and what was ``expected``."""

    def validate(instance: Any, attribute: Any, value: Any) -> None:
        if not ((optional and value is None) or test(value)):
            raise ScenarioError(f"{attribute.name}: {_shown(value)} must be {expected}")

    return validate


_positive = _rule(lambda v: _number(v) and 0 < v < math.inf, "a number above 0", optional=True)
_share = _rule(lambda v: _number(v) and 0 <= v <= 1, "between 0 and 1")
_not_negative = _rule(lambda v: _number(v) and 0 <= v < math.inf, "a number of 0 or more")
_count = _rule(lambda v: _whole(v) and v >= 1, "a whole number above 0", optional=True)
_integer = _rule(_whole, "a whole number")
_index = _rule(lambda v: _whole(v) and v >= 0, "a whole number of 0 or more")
_flag = _rule(lambda v: isinstance(v, bool), "true or false")
_text = _rule(lambda v: isinstance(v, str), "a string")
_name = _rule(lambda v: isinstance(v, str) and v != "", "a non-empty string", optional=True)
_path = _rule(lambda v: isinstance(v, str) and v != "", "a file name (a string)", optional=True)


def _host_port(value: Any) -> bool:
    """``host:port`` (``[v6]:port`` for an IPv6 address), port 1 to 65535."""
    if not isinstance(value, str):
        return False
    host, colon, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        return False  # an IPv6 address needs its brackets
    return bool(colon and host and port.isdigit() and 0 < int(port) < 65536)


_address = _rule(_host_port, "host:port (e.g. 127.0.0.1:18000)", optional=True)


def _items(field: str, value: Any, expected: str) -> list[Any] | tuple[Any, ...]:
    """``value`` when it is a list; a string is never split into its characters."""
    if not isinstance(value, list | tuple):
        raise ScenarioError(f"{field}: {_shown(value)} must be a list of {expected}")
    return value


def _names(value: Any) -> tuple[str, ...]:
    items = _items("nack_names", value, "resource names")
    for item in items:
        if not isinstance(item, str):
            raise ScenarioError(f"nack_names: {_shown(item)} must be a resource name (a string)")
    return tuple(items)


def _floats(value: Any) -> tuple[float, ...]:
    items = _items("storms", value, "seconds into the run")
    for item in items:
        if not (_number(item) and 0 <= item < math.inf):
            raise ScenarioError(f"storms: {_shown(item)} must be a number of 0 or more")
    return tuple(items)


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"metadata: {_shown(value)} must be a mapping of strings")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ScenarioError(f"metadata: {_shown(key)}: {_shown(item)}: keys and values "
                                "must be strings (quote them in YAML)")  # fmt: skip
    return dict(value)


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
    storms: tuple[float, ...] = attrs.field(default=(), converter=_floats)
    #: Delta: reconnect without ``initial_resource_versions`` (the client forgot its state)
    forgetful: bool = attrs.field(default=False, validator=_flag)
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

    command: str | None = attrs.field(default=None, validator=_name)
    at: float = attrs.field(default=1.0, validator=_not_negative)
    every: float = attrs.field(default=1.0, validator=_positive)
    count: int = attrs.field(default=1, validator=_count)


def _localities(value: Any) -> tuple[Locality, ...]:
    result = []
    for item in _items("localities", value, "REGION[/ZONE[/SUBZONE]]"):
        if isinstance(item, Locality):
            result.append(item)
            continue
        parts = item.split("/") if isinstance(item, str) else []
        if not 1 <= len(parts) <= 3 or not all(parts):
            raise ScenarioError(f"localities: {_shown(item)}: expected REGION[/ZONE[/SUBZONE]]")
        region, zone, sub_zone = (*parts, "", "")[:3]
        result.append(Locality(region=region, zone=zone, sub_zone=sub_zone))
    return tuple(result)


def _resource(item: Any) -> tuple[str, str]:
    """(type, name) of one ``resources`` entry: ``TYPE:NAME``, ``{type: .., name: ..}`` or a
    pair."""
    if isinstance(item, Mapping):
        if set(item) != {"type", "name"}:
            raise ScenarioError(f"resources: {_shown(dict(item))}: expected {{type: ..., "
                                "name: ...}")  # fmt: skip
        kind, name = item["type"], item["name"]
    elif isinstance(item, str) and ":" in item:
        kind, name = item.split(":", 1)
    elif isinstance(item, list | tuple) and len(item) == 2:
        kind, name = item
    else:
        raise ScenarioError(f"resources: {_shown(item)} must be TYPE:NAME or "
                            "{type: ..., name: ...}")  # fmt: skip
    if kind not in KINDS:
        raise ScenarioError(f"resources: unknown type {_shown(kind)}: one of {', '.join(KINDS)}")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"resources: {kind} {_shown(name)}: the name must be a non-empty "
                            "string")  # fmt: skip
    return kind, name


def _resources(value: Any) -> tuple[tuple[str, str], ...]:
    items = _items("resources", value, "TYPE:NAME or {type: ..., name: ...}")
    return tuple(_resource(item) for item in items)


def _faults(value: Any) -> tuple[Faults, ...]:
    if isinstance(value, Faults):
        return (value,)
    items = _items("faults", value, "fault entries (mappings)")
    return tuple(item if isinstance(item, Faults) else _build(Faults, item, "faults")
                 for item in items)  # fmt: skip


def _push(value: Any) -> Push | None:
    if value is None or isinstance(value, Push):
        return value
    if not isinstance(value, Mapping):
        raise ScenarioError(f"push: {_shown(value)} must be a mapping of command, at, every "
                            "and count")  # fmt: skip
    push: Push = _build(Push, value, "push")
    return push


@attrs.frozen(kw_only=True)
class Scenario:
    """One load run. Give ``server`` (``host:port``, insecure) or ``bootstrap`` (a gRPC
    bootstrap file: its first server and node), and exactly one of ``listener`` (the gRPC
    walk from that listener), ``envoy`` (wildcard LDS and CDS, then the routes and
    assignments they name) or ``resources`` (``(type, name)`` pairs, type one of listener,
    route, cluster, endpoint)."""

    server: str | None = attrs.field(default=None, validator=_address)
    bootstrap: str | None = attrs.field(default=None, validator=_path)
    clients: int = attrs.field(default=1, validator=_count)
    #: clients started per second (None: all at once)
    ramp: float | None = attrs.field(default=None, validator=_positive)
    #: seconds the run lasts from its start; every client stops then
    duration: float = attrs.field(default=10.0, validator=_positive)
    listener: str | None = attrs.field(default=None, validator=_name)
    envoy: bool = attrs.field(default=False, validator=_flag)
    resources: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_resources)
    ads: bool = attrs.field(default=True, validator=_flag)  #: one stream per client, or per type
    delta: bool = attrs.field(default=False, validator=_flag)
    #: node id; ``{i}`` is the client's number
    node_id: str = attrs.field(default="xdsclient-load-{i}", validator=_text)
    node_cluster: str = attrs.field(default="xdsclient-load", validator=_text)
    #: node metadata (string values; ``{i}`` is the client's number)
    metadata: Mapping[str, str] = attrs.field(factory=dict, converter=_strings, hash=False)
    #: localities given to the clients in turn (client i gets ``localities[i % len]``)
    localities: tuple[Locality, ...] = attrs.field(default=(), converter=_localities)
    #: multiplex every client's stream on one connection (default: a connection each)
    share_connections: bool = attrs.field(default=False, validator=_flag)
    #: decode resources with the client's validating decoders (NACK what it would NACK)
    validate: bool = attrs.field(default=False, validator=_flag)
    faults: tuple[Faults, ...] = attrs.field(default=(), converter=_faults)
    #: a push during the run; its last one must come before ``duration``
    push: Push | None = attrs.field(default=None, converter=_push)
    #: reconnect backoff after a failed stream: first delay and cap (jittered +-20 %)
    backoff_initial: float = attrs.field(default=1.0, validator=_positive)
    backoff_max: float = attrs.field(default=30.0, validator=_positive)
    #: seconds to reach the server before the run starts, else the run fails at once
    connect_timeout: float = attrs.field(default=5.0, validator=_positive)
    #: seed of every random choice (faults, jitter): the same scenario runs the same way
    seed: int = attrs.field(default=0, validator=_integer)
    #: the first client's number: a distributed run gives each worker its own range, so node
    #: ids, faults and random choices are those of one process running every client
    first_index: int = attrs.field(default=0, validator=_index)

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
        self._check_schedule()

    def _check_schedule(self) -> None:
        """A push or a storm the run would end before is a mistake, not a no-op."""
        push = self.push
        if push is not None:
            last = push.at + (push.count - 1) * push.every
            if last >= self.duration:
                which = "the push" if push.count == 1 else f"push {push.count}"
                raise ScenarioError(f"push: {which} at {last:g} s is not before the run's end "
                                    f"(duration {self.duration:g} s)")  # fmt: skip
        storms = [at for faults in self.faults for at in faults.storms if at >= self.duration]
        if storms:
            raise ScenarioError(f"faults: the storm at {storms[0]:g} s is not before the run's "
                                f"end (duration {self.duration:g} s)")  # fmt: skip

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
    try:
        return cls(**data)
    except ScenarioError as exc:
        if cls is Scenario:
            raise
        raise ScenarioError(f"{where}: {exc}") from None  # the entry's field, in its place
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def read_scenario(path: str) -> dict[str, Any]:
    """The fields a YAML scenario file holds, unchecked (the command line puts its flags over
    them before `Scenario.from_dict` checks the whole); needs PyYAML."""
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
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ScenarioError(f"scenario: expected a mapping of fields, got {type(data).__name__}")
    return data


def load_scenario(path: str) -> Scenario:
    """The scenario in a YAML file (needs PyYAML: ``pip install 'xdsclient[load]'``)."""
    return Scenario.from_dict(read_scenario(path))
