"""Every bad scenario field, from a YAML file, a flag or Python, is one line naming the field
and what it must be: exit status 2 on the command line, `ScenarioError` from the constructor,
before anything connects."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from xdsclient._cli import main
from xdsclient.load import Faults, Push, Scenario, ScenarioError

BASE = {"server": "127.0.0.1:1", "listener": "l", "duration": 5}

#: (fields over `BASE`, what the one line says)
BAD_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"server": ["x"]}, "server: ['x'] must be host:port"),
    ({"server": "notahost"}, "server: 'notahost' must be host:port"),
    ({"server": "h:0"}, "server: 'h:0' must be host:port"),
    ({"server": "h:65536"}, "server: 'h:65536' must be host:port"),
    ({"server": "::1:80"}, "server: '::1:80' must be host:port"),
    ({"server": None, "bootstrap": ["b.json"]}, "bootstrap: ['b.json'] must be a file name"),
    ({"listener": ["svc"]}, "listener: ['svc'] must be a non-empty string"),
    ({"listener": ""}, "listener: '' must be a non-empty string"),
    ({"listener": None, "envoy": "maybe"}, "envoy: 'maybe' must be true or false"),
    ({"listener": None, "resources": "cluster:c0"}, "resources: 'cluster:c0' must be a list"),
    ({"listener": None, "resources": [5]}, "resources: 5 must be TYPE:NAME"),
    ({"listener": None, "resources": [{"type": "cluster", "name": 3}]},
     "resources: cluster 3: the name must be a non-empty string"),
    ({"clients": "many"}, "clients: 'many' must be a whole number above 0"),
    ({"clients": 2.5}, "clients: 2.5 must be a whole number above 0"),
    ({"clients": True}, "clients: True must be a whole number above 0"),
    ({"ramp": "fast"}, "ramp: 'fast' must be a number above 0"),
    ({"duration": "10s"}, "duration: '10s' must be a number above 0"),
    ({"ads": 1}, "ads: 1 must be true or false"),
    ({"delta": "maybe"}, "delta: 'maybe' must be true or false"),
    ({"node_id": 5}, "node_id: 5 must be a string"),
    ({"node_cluster": ["a"]}, "node_cluster: ['a'] must be a string"),
    ({"metadata": {"version": 2}}, "metadata: 'version': 2: keys and values must be strings"),
    ({"metadata": ["team=a"]}, "metadata: ['team=a'] must be a mapping of strings"),
    ({"localities": "us-east"}, "localities: 'us-east' must be a list of REGION[/ZONE"),
    ({"localities": [5]}, "localities: 5: expected REGION[/ZONE[/SUBZONE]]"),
    ({"share_connections": "nope"}, "share_connections: 'nope' must be true or false"),
    ({"validate": 0}, "validate: 0 must be true or false"),
    ({"faults": {"nack_every": 5}}, "faults: {'nack_every': 5} must be a list of fault entries"),
    ({"faults": [5]}, "faults: expected a mapping of fields, got int"),
    ({"faults": [{"fraction": "all"}]}, "faults: fraction: 'all' must be between 0 and 1"),
    ({"faults": [{"nack_every": "x"}]}, "faults: nack_every: 'x' must be a whole number above"),
    ({"faults": [{"nack_share": "x"}]}, "faults: nack_share: 'x' must be between 0 and 1"),
    ({"faults": [{"nack_names": "c1"}]}, "faults: nack_names: 'c1' must be a list of resource"),
    ({"faults": [{"nack_names": [1]}]}, "faults: nack_names: 1 must be a resource name"),
    ({"faults": [{"slow_ack": "slow"}]}, "faults: slow_ack: 'slow' must be a number of 0 or"),
    ({"faults": [{"reset_every": 0}]}, "faults: reset_every: 0 must be a number above 0"),
    ({"faults": [{"storms": 3}]}, "faults: storms: 3 must be a list of seconds"),
    ({"faults": [{"storms": [-1]}]}, "faults: storms: -1 must be a number of 0 or more"),
    ({"faults": [{"forgetful": "maybe"}]}, "faults: forgetful: 'maybe' must be true or false"),
    ({"faults": [{"churn_every": "x"}]}, "faults: churn_every: 'x' must be a number above 0"),
    ({"faults": [{"storms": [5]}]},
     "faults: the storm at 5 s is not before the run's end (duration 5 s)"),
    ({"push": 5}, "push: 5 must be a mapping of command, at, every and count"),
    ({"push": "./push.sh"}, "push: './push.sh' must be a mapping"),
    ({"push": {"at": "soon"}}, "push: at: 'soon' must be a number of 0 or more"),
    ({"push": {"command": ["a"]}}, "push: command: ['a'] must be a non-empty string"),
    ({"push": {"every": 0}}, "push: every: 0 must be a number above 0"),
    ({"push": {"count": 1.5}}, "push: count: 1.5 must be a whole number above 0"),
    ({"push": {"when": 1}}, "push: unknown field 'when'"),
    ({"push": {"at": 6}}, "push: the push at 6 s is not before the run's end (duration 5 s)"),
    ({"push": {"at": 1, "every": 2, "count": 3}},
     "push: push 3 at 5 s is not before the run's end (duration 5 s)"),
    ({"backoff_initial": "x"}, "backoff_initial: 'x' must be a number above 0"),
    ({"backoff_max": -1}, "backoff_max: -1 must be a number above 0"),
    ({"connect_timeout": "5s"}, "connect_timeout: '5s' must be a number above 0"),
    ({"seed": "x"}, "seed: 'x' must be a whole number"),
    ({"first_index": -1}, "first_index: -1 must be a whole number of 0 or more"),
]  # fmt: skip


def _ids(case: tuple[dict[str, Any], str]) -> str:
    return ",".join(f"{k}={v!r}" for k, v in case[0].items())


def _load(capsys: Any, *argv: str) -> tuple[int, str]:
    """``xdsclient load ARGV`` run in this process: its status and its one error line."""
    status = main(["load", *argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    return status, lines[0]


@pytest.mark.parametrize("case", BAD_FIELDS, ids=[_ids(c) for c in BAD_FIELDS])
def test_a_bad_field_in_a_yaml_scenario_is_status_2_naming_it(case, tmp_path, capsys):
    """Each bad field of a scenario file: exit 2 and one line naming the field (these crashed
    with 70, printed a traceback, split a string into characters or were taken silently)."""
    fields, message = case
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**BASE, **fields}))
    status, line = _load(capsys, "--scenario", str(path))
    assert status == 2
    assert line.startswith("xdsclient: ")
    assert message in line


@pytest.mark.parametrize("case", BAD_FIELDS, ids=[_ids(c) for c in BAD_FIELDS])
def test_a_bad_field_from_python_is_a_scenario_error_naming_it(case):
    """The same fields given to `Scenario.from_dict` raise `ScenarioError`, one line."""
    fields, message = case
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_dict({**BASE, **fields})
    assert message.removeprefix("scenario: ") in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"server": ["x"]}, "server: ['x'] must be host:port"),
        ({"listener": ["svc"]}, "listener: ['svc'] must be a non-empty string"),
        ({"delta": "maybe"}, "delta: 'maybe' must be true or false"),
        ({"localities": "us-east"}, "localities: 'us-east' must be a list"),
        ({"metadata": {"version": 2}}, "metadata: 'version': 2: keys and values must be"),
        ({"push": 5}, "push: 5 must be a mapping"),
        ({"push": Push(at=7.0)}, "push: the push at 7 s is not before the run's end"),
        ({"faults": [Faults(storms=[9.0])]}, "faults: the storm at 9 s is not before"),
    ],
)
def test_the_scenario_constructor_checks_every_field(kwargs, message):
    """A Python caller's wrong value is a `ScenarioError` from the constructor itself."""
    with pytest.raises(ScenarioError, match="^" + message.replace("[", r"\[").replace("(", r"\(")
                       .replace("]", r"\]").replace(")", r"\)")):  # fmt: skip
        Scenario(**{**BASE, **kwargs})


def test_a_yaml_scenario_that_is_not_a_mapping_is_status_2(tmp_path, capsys):
    """A file holding a list: exit 2, one line."""
    path = tmp_path / "s.yaml"
    path.write_text("- server: h:1\n")
    assert _load(capsys, "--scenario", str(path)) == (
        2, "xdsclient: scenario: expected a mapping of fields, got list")  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--server", "notahost", "--listener", "l"),
         "server: 'notahost' must be host:port (e.g. 127.0.0.1:18000)"),
        (("--server", "127.0.0.1:1", "--listener", "l", "--duration", "5", "--push", "true",
          "--push-at", "20"), "push: the push at 20 s is not before the run's end (duration 5 s)"),
        (("--server", "127.0.0.1:1", "--listener", "l", "--duration", "5",
          "--storm-at", "5"),
         "faults: the storm at 5 s is not before the run's end (duration 5 s)"),
    ],
)  # fmt: skip
def test_bad_flags_are_usage_errors_at_once(argv, message, capsys):
    """``--server notahost`` or a push past the run's end: exit 2 before any client starts
    (127.0.0.1:1 is never dialled: it would be status 4)."""
    status, line = _load(capsys, *argv)
    assert (status, line) == (2, f"xdsclient: {message}")


def test_flags_over_a_bad_file_field_still_name_the_field(tmp_path, capsys):
    """``--push`` and ``--node-metadata`` beside a file whose push and metadata are of the
    wrong type: the file's field is named (this was an internal error, 70)."""
    path = tmp_path / "s.yaml"
    for field, flags, message in (
        ({"push": 5}, ("--push", "true"), "push: 5 must be a mapping"),
        ({"push": 5}, ("--push-at", "1"), "push: 5 must be a mapping"),
        ({"metadata": ["a"]}, ("--node-metadata", "a=b"), "metadata: ['a'] must be a mapping"),
        ({"faults": "x"}, ("--nack-every", "2"), "faults: 'x' must be a list"),
    ):
        path.write_text(yaml.safe_dump({**BASE, **field}))
        status, line = _load(capsys, "--scenario", str(path), *flags)
        assert status == 2
        assert message in line


def test_a_file_may_leave_a_required_field_to_the_flags(tmp_path, capsys):
    """A scenario file without ``server``, given ``--server``: the whole is checked, not the
    file alone (here the push past the end is the only error)."""
    path = tmp_path / "s.yaml"
    path.write_text("listener: l\nduration: 2\npush: {at: 3}\n")
    status, line = _load(capsys, "--scenario", str(path), "--server", "127.0.0.1:1")
    assert status == 2
    assert line == "xdsclient: push: the push at 3 s is not before the run's end (duration 2 s)"
