"""What a check found, per variant and rule, and three ways to print it: a table for people,
JSON for tools, JUnit XML for CI systems.

Why "not served" is part of the verdict: a check that ran no rule (no xDS service on that port,
a variant asked for that is not served, no resource for this node) has proved nothing, so it
must not read as a pass; it is said once, in every format, and makes the report not ok.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from xml.etree import ElementTree

import attrs

from ._context import Finding
from ._rules import RULES, Level, Rule, RuleId

__all__ = ["Report", "RuleResult", "summarize"]

PASS, FAIL, NOT_APPLICABLE = "PASS", "FAIL", "N/A"


@attrs.frozen
class RuleResult:
    """One rule in one variant: PASS, FAIL or N/A, with the first failure's detail and
    evidence (the messages that show it), and the rule's `level`."""

    rule: Rule
    variant: str
    status: str
    detail: str = ""
    evidence: str = ""

    @property
    def level(self) -> Level:
        """How strongly the spec asks for the rule (its `Rule.level`): only a failing MUST
        makes a report not ok."""
        return self.rule.level


@attrs.frozen
class Report:
    """Every rule in every variant checked.

    ``skipped``: variants the server does not serve (why), when no variants were asked for;
    ``unserved``: variants asked for by name that the server does not serve (why);
    ``discovered``: per variant checked, how many resources discovery found.
    """

    results: tuple[RuleResult, ...]
    skipped: dict[str, str] = attrs.field(factory=dict)
    unserved: dict[str, str] = attrs.field(factory=dict)
    discovered: dict[str, int] = attrs.field(factory=dict)

    @property
    def failures(self) -> list[RuleResult]:
        """The rules that failed, MUST and SHOULD."""
        return [r for r in self.results if r.status == FAIL]

    @property
    def not_served(self) -> str:
        """Why this check proved nothing ("" when it checked something): a variant asked for
        is not served, no variant is, or no resource was found for this node in any."""
        if self.unserved:
            return "not served: " + "; ".join(f"{v} ({why})" for v, why in self.unserved.items())
        if not self.discovered:
            return "no xDS service: no variant is served"
        if not any(self.discovered.values()):
            return "no resources were served to this node in any variant"
        return ""

    @property
    def ok(self) -> bool:
        """Something was served, and no MUST rule failed."""
        return not self.not_served and not any(r.level is Level.MUST for r in self.failures)

    def status(self, rule: RuleId | str, variant: str) -> str:
        """PASS, FAIL or N/A; ValueError for a rule id or a variant not in the report."""
        rule = RuleId(rule)
        found = [r.status for r in self.results if r.rule.id is rule and r.variant == variant]
        if not found:
            raise ValueError(f"variant {variant!r} was not checked")
        return found[0]

    def table(self) -> str:
        """For people: a row per rule and a column per variant, then each failure with its detail
        and evidence (what ``xdsclient check`` prints)."""
        variants = sorted({r.variant for r in self.results})
        width = max(len(rule) for rule in RULES)
        lines = []
        if variants:  # no variant checked: no table of rules without a column
            lines.append(
                f"{'rule':<{width}}  {'level':<6}  " + "  ".join(f"{v:<9}" for v in variants)
            )
        for rule in RULES.values() if variants else ():
            cells = [self.status(rule.id, v) for v in variants]
            lines.append(
                f"{rule.id:<{width}}  {rule.level.value:<6}  " + "  ".join(f"{c:<9}" for c in cells)
            )
        for name, why in self.skipped.items():
            lines.append(f"skipped {name}: {why}")
        if self.not_served:
            lines.append(f"NOT SERVED: {self.not_served}")
        for failure in self.failures:
            lines.append(
                f"\nFAIL {failure.rule.id} ({failure.level.value}, "
                f"{failure.rule.source}) in {failure.variant}: {failure.rule.text}"
            )
            lines.append(f"  {failure.detail}")
            lines.extend(f"    {line}" for line in failure.evidence.splitlines())
        return "\n".join(lines)

    def to_json(self) -> str:
        """For tools: ``ok``, ``skipped`` and every result, as JSON (``xdsclient check --json``)."""
        data: dict[str, Any] = {
            "ok": self.ok,
            "not_served": self.not_served,
            "skipped": self.skipped,
            "unserved": self.unserved,
            "discovered": self.discovered,
            "results": [
                {
                    "rule": r.rule.id,
                    "level": r.level.value,
                    "source": r.rule.source,
                    "variant": r.variant,
                    "status": r.status,
                    "detail": r.detail,
                    "evidence": r.evidence,
                }
                for r in self.results
            ],
        }
        return json.dumps(data, indent=2)

    def to_junit(self) -> str:
        """For CI systems: JUnit XML, a test case per rule and variant (and one saying whether
        anything was served); failures carry their evidence, N/A results are skipped
        (``xdsclient check --junit FILE``)."""
        failed = bool(self.not_served)
        suite = ElementTree.Element(
            "testsuite",
            name="xdsclient check",
            tests=str(len(self.results) + 1),
            failures=str(len(self.failures) + failed),
            skipped=str(sum(r.status == NOT_APPLICABLE for r in self.results)),
        )
        served = ElementTree.SubElement(suite, "testcase", classname="xds.server", name="served")
        if failed:
            ElementTree.SubElement(served, "failure", message=self.not_served)
        for r in self.results:
            case = ElementTree.SubElement(
                suite,
                "testcase",
                classname=f"xds.{r.variant}",
                name=f"{r.rule.id} [{r.level.value}]",
            )
            if r.status == FAIL:
                failure = ElementTree.SubElement(case, "failure", message=r.detail)
                failure.text = f"{r.rule.text} ({r.rule.source})\n{r.evidence}"
            elif r.status == NOT_APPLICABLE:
                ElementTree.SubElement(case, "skipped", message=r.detail or "not applicable")
        return ElementTree.tostring(suite, encoding="unicode")


def summarize(findings: Iterable[Finding], variants: Iterable[str]) -> list[RuleResult]:
    """Per variant and rule: FAIL if any finding failed, PASS if one passed, else N/A."""
    by_key: dict[tuple[str, RuleId], list[Finding]] = {}
    for finding in findings:
        by_key.setdefault((finding.variant, finding.rule), []).append(finding)
    results = []
    for variant in variants:
        for rule in RULES.values():
            found = by_key.get((variant, rule.id), [])
            failed = next((f for f in found if f.passed is False), None)
            if failed is not None:
                results.append(RuleResult(rule, variant, FAIL, failed.detail, failed.evidence))
            elif any(f.passed for f in found):
                results.append(RuleResult(rule, variant, PASS))
            else:
                detail = next((f.detail for f in found if f.detail), "")
                results.append(RuleResult(rule, variant, NOT_APPLICABLE, detail))
    return results
