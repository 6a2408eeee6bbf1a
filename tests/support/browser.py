"""Headless Chromium for the browser tests: Debian's chromium and its chromedriver, nothing downloaded.

`needs_chromium` skips a module where they are not installed (never in CI, where a missing browser
is a failure); `headless_chromium` is a driver with its own profile folder, quit at the end.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMEDRIVER = "/usr/bin/chromedriver"

needs_chromium = pytest.mark.skipif(
    (shutil.which("chromium") is None or not Path(CHROMEDRIVER).exists()) and os.environ.get("CI") != "true",
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)",
)


@contextmanager
def headless_chromium(profile: Path, window: str = "1280,1600") -> Iterator[Any]:
    """A selenium Chrome driver on Debian's chromium, headless, profile in `profile`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--window-size={window}",
        f"--user-data-dir={profile}",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
