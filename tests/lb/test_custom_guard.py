"""A custom policy's guard (gRFC A52): a factory that raised is asked again at the next update,
so a policy that could not be built yet fails its priority's picks only until it can."""

from __future__ import annotations

import random
from typing import Any

from xdsclient.lb import PickOutcome, PickRequest, RoundRobinPicker
from xdsclient.lb._custom import GuardedPolicy
from xdsclient.resources import CustomLbPolicy


def test_a_policy_whose_factory_raised_is_built_again_at_the_next_update() -> None:
    """The first build raises: picks fail saying so; the next update builds it again, and once
    that succeeds the error is gone and the policy picks."""
    configs: list[Any] = []

    def factory(config: Any) -> Any:  # a built-in picker stands in for a user policy
        configs.append(config)
        if len(configs) == 1:
            raise RuntimeError("not ready")
        return RoundRobinPicker()

    guard = GuardedPolicy(
        CustomLbPolicy(type_name="test.Flaky", config={"k": 1}), factory, cluster="c"
    )
    failed = guard.pick(PickRequest(), random.Random(1), 0.0)
    assert failed.outcome is PickOutcome.FAIL
    assert (
        failed.error == "LB policy test.Flaky of cluster c failed to build: RuntimeError: not ready"
    )
    guard.update([], 1.0)
    assert configs == [{"k": 1}, {"k": 1}]
    assert guard.error is None
    assert guard.policy is not None
    assert "failed to build" not in (guard.pick(PickRequest(), random.Random(1), 1.0).error or "")
