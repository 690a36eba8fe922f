"""No tracker numbers in the code or the docs: "issue 25" means nothing to a reader without the
tracker, and goes stale when it moves. A docstring, comment or guide says what it means instead.
CHANGELOG.md, which records the history, keeps its own."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: "issue 25", "Issue 22:", "issues 14 and 22", "issue #7", "issue bug 1", "issue bugs 6 and 7"
TRACKER = re.compile(r"\bissues?\s+(?:bugs?\s+)?#?\d+", re.IGNORECASE)

#: what is read: the package, its docs and everything else a reader meets in the repository
FILES = sorted(
    {
        *ROOT.glob("xdsclient/**/*.py"),
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("docs/**/*.py"),
        *ROOT.glob("bench/**/*.py"),
        *ROOT.glob("examples/**/*.py"),
        *ROOT.glob("tests/**/*.py"),
        ROOT / "README.md",
        ROOT / "Makefile",
        ROOT / "mkdocs.yml",
        ROOT / "pyproject.toml",
    }
    - {Path(__file__).resolve()}
)


def tracker_numbers(text: str) -> list[tuple[int, str]]:
    """Each tracker number in ``text``: its line number and what it says."""
    return [
        (text.count("\n", 0, found.start()) + 1, found.group()) for found in TRACKER.finditer(text)
    ]


def test_the_pattern_finds_every_spelling_of_a_tracker_number() -> None:
    """The spellings seen in this repository are caught; words that only look alike are not."""
    text = "Cost (issue 14)\n# Issue 22: plugins\nissues 6 and 7\nissue #7\n(issue bugs 6 and 7)"
    assert [found for _, found in tracker_numbers(text)] == [
        "issue 14", "Issue 22", "issues 6", "issue #7", "issue bugs 6",
    ]  # fmt: skip
    assert tracker_numbers("total_issued_requests 3; the issuer 2; tissue 4") == []


def test_no_file_names_a_tracker_number() -> None:
    """Docstrings, comments, guides and the API reference say what they mean, not a number."""
    assert (ROOT / "xdsclient" / "__init__.py") in FILES
    found = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in FILES
        if path.is_file()
        for line, what in tracker_numbers(path.read_text(encoding="utf-8"))
    ]
    assert found == []
