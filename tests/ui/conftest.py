"""Fixtures of the browser tests: the real service (the HTTP tests' own helpers, with auth on
and the recording upstream model) driven by the system Chromium through Playwright.

Playwright's bundled browsers cannot be downloaded here, so the Debian `chromium` package is
used (`make test` installs it). Without it the browser tests are skipped with a one-line
reason, except with `CI=true`, where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import in_ci
from tests.server.conftest import (  # the HTTP tests' fixtures and helpers, reused
    Service,
    service_settings,
    start_service,
    upstream,
    upstream_server,
)
from tests.server.upstream import Upstream
from turnkeeper.server.ui.auth import COOKIE

__all__ = ["upstream", "upstream_server"]

CHROMIUM = os.environ.get("TURNKEEPER_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

try:
    from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None


def browser_missing(problem: str) -> None:
    if in_ci():
        pytest.fail(f"the browser tests need Chromium when CI=true: {problem}", pytrace=False)
    pytest.skip(f"browser tests skipped: {problem}; `make test` installs chromium")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if sync_playwright is None:
        browser_missing("the playwright package is not installed")
    if not os.access(CHROMIUM, os.X_OK):
        browser_missing(f"{CHROMIUM} not found")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


UI_MODEL = {"llm_timeout": "20s"}
"""The UI's model calls wait for the recording model as long as a browser test waits for the
page, not the server tests' 1 s (which they shorten to test timeouts; no UI test does): the
model, the service and the page's script share one loaded machine, and a turn answered after
a second of waiting for a core is a turn, not a timeout."""


@pytest.fixture
def ui(tmp_path: Path, upstream_server: tuple[Upstream, str]) -> Iterator[Service]:
    """The service with auth on, keys for projects alpha (a), beta (b) and an admin."""
    yield from start_service(service_settings(tmp_path, upstream_server[1], **UI_MODEL))


@pytest.fixture
def ui_without_keys(tmp_path: Path, upstream_server: tuple[Upstream, str]) -> Iterator[Service]:
    """The service as `make run` serves it: API keys off (`--no-auth`)."""
    yield from start_service(service_settings(tmp_path, upstream_server[1], auth=False, **UI_MODEL))


@pytest.fixture
def ui_without_model(tmp_path: Path) -> Iterator[Service]:
    """The service with no upstream model configured (no key, the default base URL)."""
    yield from start_service(service_settings(tmp_path, "", llm_base_url=None, llm_api_key=None))


def open_context(browser: Browser, service: Service, who: str | None) -> BrowserContext:
    """A fresh browser profile, logged in as `who` (the cookie the login form would set)."""
    context = browser.new_context(base_url=service.url, viewport={"width": 1320, "height": 900})
    if who is not None:
        context.add_cookies([{"name": COOKIE, "value": service.keys[who], "url": service.url}])
    return context


def new_page(context: BrowserContext) -> Page:
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.on("dialog", lambda dialog: dialog.accept())  # the confirmations: say yes
    return page


@pytest.fixture
def as_admin(browser: Browser, ui: Service) -> Iterator[Page]:
    context = open_context(browser, ui, "admin")
    yield new_page(context)
    context.close()


@pytest.fixture
def as_alpha(browser: Browser, ui: Service) -> Iterator[Page]:
    context = open_context(browser, ui, "a")
    yield new_page(context)
    context.close()


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def chip_seqs(chips: list[str]) -> list[int]:
    """The seqs a row of seq chips names: `#2–#13` is twelve of them, `#20` one."""
    seqs: list[int] = []
    for chip in chips:
        first, _, last = chip.replace("#", "").partition("–")
        seqs.extend(range(int(first), int(last or first) + 1))
    return seqs
