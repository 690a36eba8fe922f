"""Every example runs, and says what it should."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


async def test_watch_cluster_prints_each_change() -> None:
    lines = await load("watch_cluster").main(updates=3)
    assert lines == [
        "backend v1: eds cluster, endpoints from 'backend', max_requests=100",
        "backend v2: eds cluster, endpoints from 'backend', max_requests=200",
        "backend v3: eds cluster, endpoints from 'backend', max_requests=300",
    ]
