"""Checking the checker: run it against the control plane with each seeded bug switched on.

Why in the library: the same run feeds the test that proves every seeded bug fails at least one
rule (and the clean control plane none), `bench/conformance.py`, and the mutation table in the
docs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable
from typing import Any

from ..testing import ControlPlane, SeededBug, demo_resources
from . import Report, check

__all__ = ["mutation_table", "run_seeded"]


async def _checked(bugs: Collection[SeededBug], **options: Any) -> Report:
    async with ControlPlane(bugs=bugs) as control_plane:
        control_plane.set_all(demo_resources("shop.example.com"))
        return await check(control_plane.address, **options)


async def run_seeded(
    bugs: Iterable[SeededBug | None] = (None, *SeededBug), **options: Any
) -> dict[SeededBug | None, Report]:
    """The report for the clean control plane (None) and for each seeded bug, run at once."""
    chosen = list(bugs)
    reports = await asyncio.gather(
        *(_checked(() if bug is None else (bug,), **options) for bug in chosen)
    )
    return dict(zip(chosen, reports, strict=True))


def mutation_table(reports: dict[SeededBug | None, Report]) -> str:
    """Markdown: each seeded bug and the rules that caught it (rule@variants)."""
    lines = ["| seeded bug | rules that fail |", "|---|---|"]
    for bug, report in reports.items():
        caught: dict[str, list[str]] = {}
        for failure in report.failures:
            caught.setdefault(failure.rule.id, []).append(failure.variant)
        cells = ", ".join(
            f"`{rule}` ({', '.join(sorted(v))})" for rule, v in sorted(caught.items())
        )
        name = "clean control plane" if bug is None else f"`{bug.name}`: {bug.value}"
        lines.append(f"| {name} | {cells or 'none'} |")
    return "\n".join(lines)
