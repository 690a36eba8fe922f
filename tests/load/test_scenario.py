"""Scenarios: every way to describe a run is checked before anything connects."""

from __future__ import annotations

import pytest

from xdsclient import Locality
from xdsclient.load import Faults, Push, Scenario, ScenarioError, load_scenario


def test_a_scenario_round_trips_through_its_plain_data():
    """`to_dict` then `from_dict` gives the same scenario (what ``--json`` records runs again)."""
    scenario = Scenario(server="127.0.0.1:1", listener="l", clients=3, ramp=10.0,
                        localities=["r/z1", "r/z2"], metadata={"team": "t{i}"},
                        faults=[Faults(fraction=0.5, nack_every=3, storms=[1.0])],
                        push=Push(command="true", at=0.5))  # fmt: skip
    again = Scenario.from_dict(scenario.to_dict())
    assert again == scenario
    assert again.localities == (Locality(region="r", zone="z1"), Locality(region="r", zone="z2"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"server": "h:1", "listener": "l", "clinets": 3}, "unknown field 'clinets'"),
        ({"server": "h:1", "listener": "l", "clients": -3}, "clients: -3 must be a whole number"),
        ({"server": "h:1", "listener": "l", "duration": 0}, "duration: 0 must be a number above"),
        ({"listener": "l"}, "give server or bootstrap"),
        ({"server": "h:1"}, "watch one of"),
        ({"server": "h:1", "listener": "l", "envoy": True}, "watch one of"),
        ({"server": "h:1", "listener": "l", "node_id": "same"}, "must contain {i}"),
        (
            {"server": "h:1", "listener": "l", "faults": [{"nack_share": 2}]},
            "nack_share: 2 must be between 0 and 1",
        ),
        (
            {"server": "h:1", "listener": "l", "faults": [{"nack_evry": 2}]},
            "faults: unknown field 'nack_evry'",
        ),
        ({"server": "h:1", "listener": "l", "faults": [{"forgetful": True}]}, "needs delta"),
        ({"server": "h:1", "resources": [{"type": "secret", "name": "x"}]}, "unknown type"),
        ({"server": "h:1", "listener": "l", "push": {"count": 0}}, "count: 0 must be"),
        ({"server": "h:1", "listener": "l", "localities": ["a/b/c/d"]}, "REGION[/ZONE"),
    ],
)
def test_bad_scenarios_are_one_line_errors_naming_the_field(data, message):
    """An unknown field or a bad value is a `ScenarioError` of one line that names it."""
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_dict(data)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_yaml_scenario_loads_with_faults_and_resources(tmp_path):
    """A YAML file describes the same scenario as Python (resources as TYPE:NAME or mappings)."""
    path = tmp_path / "s.yaml"
    path.write_text(
        "server: 127.0.0.1:1\nclients: 5\ndelta: true\n"
        "resources: [cluster:c0, {type: endpoint, name: c0}]\n"
        "faults:\n  - {fraction: 0.2, forgetful: true}\n"
    )
    scenario = load_scenario(str(path))
    assert scenario.resources == (("cluster", "c0"), ("endpoint", "c0"))
    assert scenario.faults == (Faults(fraction=0.2, forgetful=True),)
    assert scenario.profile == "resources"


def test_yaml_that_does_not_parse_is_a_scenario_error(tmp_path):
    """Broken YAML is a one-line error with its line."""
    path = tmp_path / "s.yaml"
    path.write_text("server: [\n")
    with pytest.raises(ScenarioError, match="not valid YAML at line"):
        load_scenario(str(path))


def test_a_fault_fraction_spreads_evenly_over_the_clients():
    """``fraction`` picks that share of client numbers, spread out, not the first ones."""
    chosen = [i for i in range(100) if Faults(fraction=0.25).applies_to(i)]
    assert len(chosen) == 25
    assert chosen[:3] == [3, 7, 11]
    assert all(Faults().applies_to(i) for i in range(10))
    assert not any(Faults(fraction=0.0).applies_to(i) for i in range(10))
