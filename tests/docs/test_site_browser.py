"""The built site works in a real browser: Debian's Chromium, headless, driven by Selenium.

Each test opens pages of the site served on 127.0.0.1, checks what a reader would see, saves a
screenshot to ``build/screenshots/`` (the test artifacts), and fails on any console error the
pages logged. Without chromium and chromium-driver (or selenium) the tests skip, saying so;
``make docs-check`` installs them and fails instead of skipping.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT, unavailable

#: a Selenium Chrome driver: typed loosely, since `make test`'s environment lacks selenium
WebDriver = Any

SCREENSHOTS = ROOT / "build" / "screenshots"
#: flags that let Chromium run here: headless as root, and no connection to anywhere but the site
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)
WAIT = 10.0  # seconds for something on a page to appear
# Building the site and starting Chromium take a while on a loaded machine (the first test pays).
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """Headless Chromium with a fresh profile, logging the console."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        unavailable(
            "no browser: install Debian's chromium and chromium-driver (`make docs-check` does)"
        )
    try:
        webdriver = importlib.import_module("selenium.webdriver")
    except ImportError:
        unavailable("selenium is not installed: the docs extra has it (`make docs-check`)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: Selenium Manager (which downloads drivers) never runs.
    chrome = webdriver.Chrome(options=options, service=webdriver.ChromeService(driver))
    chrome.set_page_load_timeout(WAIT)
    try:
        yield chrome
    finally:
        chrome.quit()


def open_page(browser: WebDriver, url: str) -> None:
    """Drop the console entries of earlier pages, then load ``url``."""
    browser.get_log("browser")
    browser.get(url)


def console_errors(browser: WebDriver) -> list[Any]:
    """The console's errors (uncaught exceptions, failed loads) since the last look."""
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def screenshot(browser: WebDriver, name: str) -> Path:
    """Save what the browser shows as ``build/screenshots/NAME.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    assert browser.save_screenshot(str(path)), path
    return path


def wait_for(browser: WebDriver, css: str) -> list[Any]:
    """The elements matching ``css`` once at least one is displayed."""
    wait = importlib.import_module("selenium.webdriver.support.ui").WebDriverWait

    def shown(driver: WebDriver) -> list[Any] | bool:
        found = [e for e in driver.find_elements("css selector", css) if e.is_displayed()]
        return found or False

    found: list[Any] = wait(browser, WAIT).until(shown)
    return found


def test_home_page_loads_with_its_title_and_navigation(browser: WebDriver, served: str) -> None:
    """The home page shows the project's name, the guides and the API reference in its nav."""
    open_page(browser, served)
    assert browser.title.startswith("xdsclient")
    heading = wait_for(browser, "article h1")[0]
    assert heading.text.strip() == "xdsclient"
    nav = " ".join(e.get_attribute("textContent") or "" for e in wait_for(browser, "nav.md-nav"))
    for entry in ("Getting started", "Guides", "Command line", "API reference"):
        assert entry in nav
    screenshot(browser, "home")
    assert console_errors(browser) == []


def test_api_reference_shows_the_client_and_its_methods(browser: WebDriver, served: str) -> None:
    """The API reference page renders XdsClient, its signature and its methods' docstrings."""
    open_page(browser, served + "api/xdsclient/")
    client = wait_for(browser, '[id="xdsclient.XdsClient"]')[0]
    assert "XdsClient" in client.text
    watch = wait_for(browser, '[id="xdsclient.XdsClient.watch_config"]')[0]
    browser.execute_script("arguments[0].scrollIntoView()", client)
    assert "watch_config" in watch.get_attribute("textContent")
    screenshot(browser, "api-xdsclient")
    assert console_errors(browser) == []


def test_search_finds_pages_for_a_query(browser: WebDriver, served: str) -> None:
    """Typing a query in the search box lists matching pages, the API reference among them."""
    open_page(browser, served)
    box = wait_for(browser, "input.md-search__input")[0]
    box.click()
    box.send_keys("watch_config")
    results = wait_for(browser, ".md-search-result__item a")
    links = [r.get_attribute("href") or "" for r in results]
    assert any("/api/xdsclient/" in link for link in links), links
    screenshot(browser, "search")
    assert console_errors(browser) == []


def test_a_console_error_is_seen(browser: WebDriver, served: str) -> None:
    """The console check is not blind: an error a page logs is reported."""
    open_page(browser, served)
    browser.execute_script("console.error('a deliberate error')")
    messages = [e["message"] for e in console_errors(browser)]
    assert len(messages) == 1, messages
    assert "a deliberate error" in messages[0]


def _pages() -> list[str]:
    """Every page's path in the site, from the Markdown files it is built from."""
    docs = ROOT / "docs"
    paths = [p.relative_to(docs).with_suffix("") for p in docs.rglob("*.md")]
    return sorted("" if p.name == "index" else f"{p.as_posix()}/" for p in paths)


@pytest.mark.parametrize("page", _pages())
def test_each_page_loads_without_console_errors(browser: WebDriver, served: str, page: str) -> None:
    """The page loads, shows its title, and logs no error to the console."""
    open_page(browser, served + page)
    wait_for(browser, "article h1")
    assert console_errors(browser) == []
