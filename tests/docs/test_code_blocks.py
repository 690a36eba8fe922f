"""The code in the docs cannot go stale: every Python block type-checks against the package.

The guides' runnable programs are included from ``examples/`` (pymdownx snippets), which
``tests/test_examples.py`` runs. The other ``python`` blocks of ``docs/*.md`` and the README are
fragments: they use a ``client`` they do not create, or a response from a server. Each is
wrapped in an ``async def`` whose parameters are those free names, typed by `CONTEXT`, and the
lot goes through ``mypy --strict`` with the project's configuration: a renamed method, a wrong
argument or an import of a name that is gone fails here, naming the page and line. ``json``
blocks that hold a bootstrap must load with `xdsclient.load_bootstrap`.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from xdsclient import load_bootstrap

from .conftest import ROOT

#: the Markdown files whose code blocks are checked
PAGES = (*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md")
#: free names a fragment may use, and their types (a name missing here fails the check)
CONTEXT = {
    "client": "xdsclient.XdsClient",
    "reader": "opentelemetry.sdk.metrics.export.MetricReader",
    "meter_provider": "opentelemetry.metrics.MeterProvider",
    "response": "typing.Any",  # a DiscoveryResponse (protobuf messages are typed Any)
}
_FENCE = re.compile(r"^```(?P<lang>\w+)\n(?P<code>.*?)^```", re.S | re.M)
_SNIPPET = "--8<--"
#: a block that must fail, so that a check that reports nothing is known to be looking
_CANARY = "client.no_such_method()\n"
pytestmark = pytest.mark.timeout(240)  # one mypy run over the package (cached by make typecheck)


@attrs.frozen
class Block:
    """One fenced block: where it is, its language and its code."""

    page: Path
    line: int  # of the block's first line of code
    lang: str
    code: str

    @property
    def where(self) -> str:
        """``page:line``, relative to the repository."""
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path, lang: str) -> list[Block]:
    """The fenced blocks of ``page`` in language ``lang``, snippet includes left out."""
    text = page.read_text()
    found = []
    for match in _FENCE.finditer(text):
        if match["lang"] == lang and _SNIPPET not in match["code"]:
            line = text.count("\n", 0, match.start("code")) + 1
            found.append(Block(page, line, lang, match["code"]))
    return found


def free_names(code: str) -> list[str]:
    """Names the code reads but never binds (builtins aside)."""
    tree = ast.parse("async def _():\n" + _indent(code))
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return sorted(read - bound - set(dir(builtins)))


def _indent(code: str) -> str:
    return "".join(f"    {line}\n" if line.strip() else "\n" for line in code.splitlines())


def module_of(fragments: list[Block]) -> tuple[str, dict[int, str]]:
    """One module holding each fragment as an async function of its free names, and where
    each of its lines comes from (``page:line``)."""
    modules = sorted({t.rsplit(".", 1)[0] for t in CONTEXT.values()})
    lines = ["from __future__ import annotations", *(f"import {m}" for m in modules)]
    origin: dict[int, str] = {}
    for number, block in enumerate(fragments):
        unknown = [n for n in free_names(block.code) if n not in CONTEXT]
        assert not unknown, f"{block.where}: uses {unknown}: define them or add them to CONTEXT"
        params = ", ".join(f"{n}: {CONTEXT[n]}" for n in free_names(block.code))
        lines += ["", "", f"async def _block_{number}({params}) -> None:"]
        for offset, text in enumerate(_indent(block.code).splitlines()):
            lines.append(text)
            origin[len(lines)] = f"{block.page.relative_to(ROOT)}:{block.line + offset}"
    return "\n".join(lines) + "\n", origin


def type_errors(fragments: list[Block], tmp_path: Path) -> list[str]:
    """mypy's errors for the fragments, each at its page and line."""
    source, origin = module_of(fragments)
    module = tmp_path / "docs_blocks.py"
    module.write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(module)],
        cwd=ROOT,  # the project's configuration, and make typecheck's cache
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    errors = []
    for line in done.stdout.splitlines():
        path, _, rest = line.partition(":")
        number, _, message = rest.partition(":")
        if Path(path).name == module.name and number.isdigit():
            where = origin.get(int(number), f"generated line {number}")
            errors.append(f"{where}:{message}")
    return errors


def test_every_python_block_of_the_docs_type_checks(tmp_path: Path) -> None:
    """Each Python fragment of the guides and README passes mypy --strict against xdsclient."""
    fragments = [b for page in PAGES for b in blocks(page, "python")]
    assert len(fragments) >= 8, [b.where for b in fragments]
    canary = Block(ROOT / "docs" / "canary.md", 1, "python", _CANARY)
    errors = type_errors([*fragments, canary], tmp_path)
    assert any(e.startswith("docs/canary.md:1: error") for e in errors), errors
    assert [e for e in errors if not e.startswith("docs/canary.md")] == []


def test_every_bootstrap_in_the_docs_loads() -> None:
    """Each JSON block holding a bootstrap (``xds_servers``) is one the client accepts."""
    bootstraps = [
        b for page in PAGES for b in blocks(page, "json") if "xds_servers" in json.loads(b.code)
    ]
    assert bootstraps, "no bootstrap found in the docs"
    for block in bootstraps:
        load_bootstrap(json.loads(block.code))


def test_snippets_name_files_that_exist() -> None:
    """Every ``--8<--`` include names a file of the repository (mkdocs --strict checks it too)."""
    included = [
        name
        for page in PAGES
        for name in re.findall(rf'^{_SNIPPET} "([^"]+)"$', page.read_text(), re.M)
    ]
    assert included, "no snippet includes found"
    assert [name for name in included if not (ROOT / name).is_file()] == []
