"""The built site in headless Chromium: pages render with the theme's navigation and their content.

Screenshots are saved under the test's tmp_path (and copied to $ARTIFACTS_DIR when set).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import headless_chromium, needs_chromium

pytestmark = needs_chromium

PAGES = {  # page -> a text its content must show
    "": "Where to go",
    "tutorials/first-session": "Run a turn",
    "reference/cli": "usage: agentrt run",
    "reference/config": "persistence:",
}


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    with headless_chromium(tmp_path / "profile", "1280,1400") as driver:
        yield driver


def test_pages_render_with_navigation(site: Path, browser: Any, tmp_path: Path) -> None:
    """Each page shows the site name, the nav's sections and its own content; a screenshot of each."""
    from selenium.webdriver.common.by import By

    shots = []
    for page, text in PAGES.items():
        browser.get((site / page / "index.html").as_uri())
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "agentrt" in browser.title, browser.title
        assert "Tutorials" in body and "Reference" in body, body[:500]
        assert text in body, f"{page or 'index'}: {text!r} not shown"
        shot = tmp_path / f"docs-{page.replace('/', '-') or 'index'}.png"
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        shots.append(shot)
    if os.environ.get("ARTIFACTS_DIR"):
        target = Path(os.environ["ARTIFACTS_DIR"])
        target.mkdir(parents=True, exist_ok=True)
        for shot in shots:
            shutil.copy(shot, target / shot.name)
