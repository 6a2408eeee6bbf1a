"""A browser page on the LangGraph JS SDK's React `useStream` (`fetchStateHistory: true`) chats with
`agentrt serve` in a real headless Chromium (Debian's, with its driver).

tests/js/browser/page.jsx is bundled with esbuild (both from the npm registry, pinned in
tests/js/browser/package-lock.json, installed once into ~/.cache/agentrt/js/) and served from
another origin than the API, as a browser app on its own dev server is: the server allows that
origin (`serve.cors_origins`). The user sends a message and sees the streamed answer and the
thread's history.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from tests.support.browser import headless_chromium, needs_chromium
from tests.support.npm import npm_modules
from tests.support.runners import ROOT, make_config
from tests.support.serve import serving

pytestmark = needs_chromium

PROJECT = ROOT / "tests" / "js" / "browser"
WAIT_S = 60
ANSWER = "Paris is the capital of France."
SCRIPT: list[dict[str, Any]] = [
    {"content": json.dumps({"plan": "Answer at once.", "todos": ["Answer"]})},
    {"content": ANSWER},
]
INDEX = '<!doctype html><html><head><meta charset="utf-8"><title>useStream</title></head>'
INDEX += '<body><div id="root"></div><script src="page.js"></script></body></html>'


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def page_site(tmp_path: Path) -> Iterator[str]:
    """The bundled page, served from its own origin; yields that origin."""
    modules = npm_modules(PROJECT)
    build = tmp_path / "build"
    build.mkdir()
    shutil.copy(PROJECT / "page.jsx", build / "page.jsx")
    (build / "node_modules").symlink_to(modules, target_is_directory=True)
    site = tmp_path / "site"
    site.mkdir()
    done = subprocess.run(
        [
            str(modules / ".bin" / "esbuild"),
            "page.jsx",
            "--bundle",
            "--format=iife",
            "--jsx=automatic",
            '--define:process.env.NODE_ENV="production"',
            f"--outfile={site / 'page.js'}",
        ],
        cwd=build,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"esbuild failed:\n{done.stderr[-3000:]}"
    (site / "index.html").write_text(INDEX)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        thread.join()


def test_use_stream_page_sends_a_message_and_shows_the_answer_and_the_history(tmp_path: Path, page_site: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    config = make_config(tmp_path, SCRIPT, serve={"cors_origins": [page_site]})
    with serving(config, tmp_path) as server, headless_chromium(tmp_path / "chromium-profile") as driver:
        driver.get(f"{page_site}/index.html?api={server.url}")
        wait = WebDriverWait(driver, WAIT_S)
        wait.until(lambda d: d.find_element(By.ID, "message"))
        driver.find_element(By.ID, "message").send_keys("What is the capital of France?")
        driver.find_element(By.ID, "send").click()

        def answered(d: Any) -> bool:
            said = [li.text for li in d.find_elements(By.CSS_SELECTOR, "#messages li[data-type=ai]")]
            return ANSWER in said and d.find_element(By.ID, "status").text == "idle"

        wait.until(answered)
        asked = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#messages li[data-type=human]")]
        assert asked == ["What is the capital of France?"]
        assert driver.find_elements(By.CSS_SELECTOR, "#messages li")[-1].text == ANSWER
        assert driver.find_element(By.ID, "error").text == ""

        # The history the hook fetched is the thread's whole branch, its head holding the answer.
        tid = driver.find_element(By.ID, "thread").text
        history = get_sync_client(url=server.url).threads.get_history(tid, limit=10)
        ids = [s["checkpoint"]["checkpoint_id"] for s in history]

        def listed(d: Any) -> list[str]:
            return [li.text for li in d.find_elements(By.CSS_SELECTOR, "#history li")]

        wait.until(lambda d: listed(d)[-1:] == ids[:1])  # the hook lists it oldest first
        assert listed(driver) == ids[::-1]
        head = driver.find_elements(By.CSS_SELECTOR, "#history li")[-1].get_attribute("data-messages")
        assert int(head or 0) == len(history[0]["values"]["messages"]) >= 2


def test_a_page_from_an_origin_the_server_does_not_name_is_refused_by_the_browser(
    tmp_path: Path, page_site: str
) -> None:
    """Without `serve.cors_origins` naming it, the browser keeps the page from reading the API."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(make_config(tmp_path, SCRIPT), tmp_path) as server:
        with headless_chromium(tmp_path / "chromium-profile") as driver:
            driver.get(f"{page_site}/index.html?api={server.url}")
            wait = WebDriverWait(driver, WAIT_S)
            wait.until(lambda d: d.find_element(By.ID, "message"))
            driver.find_element(By.ID, "message").send_keys("Hello?")
            driver.find_element(By.ID, "send").click()
            wait.until(lambda d: d.find_element(By.ID, "error").text != "")
            assert driver.find_elements(By.CSS_SELECTOR, "#messages li[data-type=ai]") == []
        assert get_sync_client(url=server.url).threads.search() == []
