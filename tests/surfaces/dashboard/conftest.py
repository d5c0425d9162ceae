"""Fixtures of the dashboard tests: one seeded server per session, one headless
Chromium per module (Debian's, driven by Playwright; never downloaded), one fresh
browser context (an empty sessionStorage) per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the dashboard is served by the REST API (server extra)")

from dashboard_support import CHROMIUM, Dash, Ui, browser_missing, start_dashboard


@pytest.fixture(scope="session")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    """The dashboard served over a seeded SQLite file, for the whole session."""
    yield from start_dashboard(tmp_path_factory.mktemp("dashboard"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium for one test module; skipped (failed under ``CI=true``) when
    Playwright or ``/usr/bin/chromium`` is missing."""
    missing = browser_missing()
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def ui(browser: Any, dash: Dash, tmp_path: Path) -> Iterator[Ui]:
    """A page in a fresh browser context (its own sessionStorage)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield Ui(page, dash, tmp_path)
    context.close()
