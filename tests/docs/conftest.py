"""What the documentation tests share: the built site, served on 127.0.0.1, and the rule that a
missing tool skips them, or fails them under ``make docs-check``.

The docs tools (the ``docs`` extra) and Debian's chromium are not part of ``make test``: there
the site tests skip with a message saying how to run them. ``make docs-check`` installs both and
sets ``XDSCLIENT_REQUIRE_BROWSER=1``, which turns every such skip into a failure.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: set by ``make docs-check``: the site and browser tests must run, not skip
REQUIRED = os.environ.get("XDSCLIENT_REQUIRE_BROWSER") == "1"


def unavailable(why: str) -> NoReturn:
    """Skip the test for want of ``why``; fail instead when the docs check requires it."""
    if REQUIRED:
        pytest.fail(f"{why} (XDSCLIENT_REQUIRE_BROWSER=1: the docs check must not skip)")
    pytest.skip(why)


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built with ``--strict`` from the working tree into a fresh directory."""
    if importlib.util.find_spec("mkdocs") is None:
        unavailable("mkdocs is not installed: `make docs` or `make docs-check` installs it")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,  # 50 s alone on a busy 2-core machine; 120 s was passed under load
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (an ephemeral port): its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
