"""The HTML report of a real run, in a real browser: Debian's Chromium, headless.

The same rules as the docs site's browser check (`tests/docs/test_site_browser.py`, whose
helpers this reuses): a screenshot goes to ``build/screenshots/``, a console error fails the
test, and without chromium, chromium-driver or selenium the test skips, saying so, unless
``XDSCLIENT_REQUIRE_BROWSER=1`` (``make load-check``) turns the skip into a failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.test_site_browser import (  # the browser fixture and its helpers
    WebDriver,
    browser,
    console_errors,
    open_page,
    screenshot,
    wait_for,
)
from xdsclient.load import Push, Scenario, run
from xdsclient.load._html import write_html
from xdsclient.load._progress_view import Timeline

from .conftest import assignments

__all__ = ["browser"]  # a fixture, used by name
pytestmark = pytest.mark.timeout(300)  # starting Chromium takes a while on a loaded machine


@pytest.fixture
async def report(cp, tmp_path: Path) -> Path:
    """The report of a real run of 15 clients with one push, as a file."""
    timeline = Timeline()
    scenario = Scenario(server=cp.address, listener="l", clients=15, duration=1.5,
                        push=Push(at=0.7))  # fmt: skip
    result = await run(scenario, on_progress=timeline, push=lambda: cp.set_all(assignments(9)))
    path = tmp_path / "report.html"
    write_html(path, result, timeline.snapshots)
    return path


def test_the_report_renders_with_its_plots_and_no_console_error(browser: WebDriver, report):
    """The page shows its title and tables, both plots are drawn at a readable size with their
    curves, and the browser logs no error."""
    open_page(browser, report.as_uri())
    assert browser.title == "xdsclient load report"
    assert wait_for(browser, "h1")[0].text == "xdsclient load report"
    assert wait_for(browser, "table#latencies tbody tr")
    for plot in ("plot-latency", "plot-clients"):
        svg = wait_for(browser, f"figure#{plot} svg")[0]
        assert svg.size["width"] > 400, svg.size
        assert svg.size["height"] > 150, svg.size
        lines = browser.find_elements("css selector", f"figure#{plot} svg path")
        assert len(lines) > 10
    legend = browser.find_element("css selector", "figure#plot-latency svg").text
    assert "push to applied" in legend
    browser.execute_script("document.getElementById('plot-latency').scrollIntoView()")
    screenshot(browser, "load-report")
    assert console_errors(browser) == []
