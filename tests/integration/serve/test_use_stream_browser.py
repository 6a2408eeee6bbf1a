"""A browser page on the LangGraph JS SDK's React `useStream` (`fetchStateHistory: true`) chats with
`agentrt serve` in a real headless Chromium (Debian's, with its driver).

tests/js/browser/page.jsx is bundled with esbuild (both from the npm registry, pinned in
tests/js/browser/package-lock.json, installed once into ~/.cache/agentrt/js/) and served from
another origin than the API, as a browser app on its own dev server is: the server allows that
origin (`serve.cors_origins`). The user sends a message and sees the streamed answer and the
thread's history; answers the approval a run stopped at (a resume command) and sees the run finish;
edits an earlier message as agent-chat-ui does (a run from the checkpoint before that message) and
sees the new branch beside the original one, and switches between them.
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
DEMO_ANSWER = (
    "Revenue by region for 2026: West 12088.64, East 12014.97, North 11308.28, South 10415.45 "
    "(total 45827.34); every region beat its target. The report is in report.md and was published "
    "to the team outbox."
)
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


def _said(driver: Any, kind: str | None = None) -> list[str]:
    """The texts of the messages the page shows (of one type, when given; else all but the system
    prompt), read in one script: the page re-renders while it streams."""
    where = "#messages li" + (f"[data-type={kind}]" if kind else ":not([data-type=system])")
    read = "return [...document.querySelectorAll(arguments[0])].map(li => li.querySelector('.text').textContent)"
    return list(driver.execute_script(read, where))


def _attr(driver: Any, index: int, name: str) -> str:
    """An attribute of the page's `index`-th message."""
    read = "const li = document.querySelectorAll('#messages li')[arguments[0]];"
    read += "return li ? li.getAttribute(arguments[1]) : ''"
    return str(driver.execute_script(read, index, name) or "")


def _idle(driver: Any) -> bool:
    from selenium.webdriver.common.by import By

    return bool(driver.find_element(By.ID, "status").text == "idle")


def _send(driver: Any, text: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, "message").send_keys(text)
    driver.find_element(By.ID, "send").click()


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

        wait.until(lambda d: ANSWER in _said(d, "ai") and _idle(d))
        assert _said(driver, "human") == ["What is the capital of France?"]
        assert _said(driver)[-1] == ANSWER
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


def test_the_page_answers_the_approval_a_run_stopped_at_and_the_run_finishes(tmp_path: Path, page_site: str):
    """The demo stops to ask before `publish_report`; the page shows the interrupt (the hook's
    `interrupt`) and resumes it with `submit(undefined, {command: {resume: ...}})`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    config = make_config(tmp_path, serve={"cors_origins": [page_site]})  # the demo script
    with serving(config, tmp_path) as server, headless_chromium(tmp_path / "chromium-profile") as driver:
        driver.get(f"{page_site}/index.html?api={server.url}")
        wait = WebDriverWait(driver, WAIT_S)
        wait.until(lambda d: d.find_element(By.ID, "message"))
        _send(driver, "How did each region do against its target?")

        def asks(d: Any) -> str:
            found = d.find_elements(By.ID, "asks")
            return str(found[0].text) if found and _idle(d) else ""

        wait.until(asks)
        assert asks(driver) == "publish_report"
        assert DEMO_ANSWER not in _said(driver, "ai")
        tid = driver.find_element(By.ID, "thread").text
        client = get_sync_client(url=server.url)
        assert client.threads.get(tid)["status"] == "interrupted"

        driver.find_element(By.ID, "approve").click()
        wait.until(lambda d: _said(d)[-1:] == [DEMO_ANSWER] and _idle(d))
        assert driver.find_elements(By.ID, "asks") == []
        assert driver.find_element(By.ID, "error").text == ""
        assert _said(driver, "human") == ["How did each region do against its target?"]
        # The answer is a run of its own; both succeeded, and the thread is done.
        assert [r["status"] for r in client.runs.list(tid)] == ["success", "success"]
        assert client.threads.get(tid)["status"] == "idle"
        assert client.threads.get_state(tid)["values"]["messages"][-1]["content"] == DEMO_ANSWER


def _convo(state: dict[str, Any]) -> list[str]:
    """The texts of a state's messages, but the system prompt."""
    return [m["content"] for m in state["values"].get("messages") or [] if m["type"] != "system"]


def _events(server: Any, tid: str) -> bytes:
    found = list(server.log.parent.rglob(f"{tid}/events.jsonl"))  # the server runs in its base folder
    assert len(found) == 1, found
    return found[0].read_bytes()


def test_editing_an_earlier_message_makes_a_branch_the_page_shows_beside_the_original(tmp_path: Path, page_site: str):
    """As agent-chat-ui edits a message: a run from the checkpoint before it (`submit` with
    `checkpoint`). The thread forks (a new branch of the session, the original's entries kept byte
    for byte), the history holds both branches, and `getMessagesMetadata` offers both."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    answers = [{"content": f"Answer {n}."} for n in (1, 2, 3)]
    config = make_config(tmp_path, answers, loop={"planning": "never"}, serve={"cors_origins": [page_site]})
    with serving(config, tmp_path) as server, headless_chromium(tmp_path / "chromium-profile") as driver:
        driver.get(f"{page_site}/index.html?api={server.url}&limit=200")
        wait = WebDriverWait(driver, WAIT_S)
        wait.until(lambda d: d.find_element(By.ID, "message"))
        _send(driver, "First question?")
        wait.until(lambda d: _said(d, "ai") == ["Answer 1."] and _idle(d))
        _send(driver, "Second question?")
        original = ["First question?", "Answer 1.", "Second question?", "Answer 2."]
        wait.until(lambda d: _said(d) == original and _idle(d))
        tid = driver.find_element(By.ID, "thread").text
        client = get_sync_client(url=server.url)
        before = _events(server, tid)
        assert client.threads.get(tid)["branch_id"] == "main"

        at = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#messages li")].index("Second question?")
        driver.find_element(By.ID, "edit-at").send_keys(str(at))
        driver.find_element(By.ID, "edit-text").send_keys("Another second question?")
        driver.find_element(By.ID, "edit").click()
        # (the scripted model answers by the conversation's turn: the edited turn is its second)
        edited = ["First question?", "Answer 1.", "Another second question?", "Answer 2."]
        wait.until(lambda d: _said(d) == edited and _idle(d))
        assert driver.find_element(By.ID, "error").text == ""

        # The page offers both versions of the edited message (the hook read them from the history).
        def options(d: Any) -> list[str]:
            return _attr(d, at, "data-options").split()

        wait.until(lambda d: len(options(d)) == 2)
        here = _attr(driver, at, "data-branch")
        assert here in options(driver)
        (other,) = [o for o in options(driver) if o != here]
        driver.find_element(By.CSS_SELECTOR, f'#messages li button.switch[data-to="{other}"]').click()
        wait.until(lambda d: _said(d) == original)
        driver.find_element(By.CSS_SELECTOR, f'#messages li button.switch[data-to="{here}"]').click()
        wait.until(lambda d: _said(d) == edited)

        # The server: a new branch is current, the original branch's entries are as they were, and
        # the history (newest first) holds the states of both branches.
        thread = client.threads.get(tid)
        assert thread["branch_id"] != "main" and thread["status"] == "idle"
        assert _events(server, tid).startswith(before)
        texts = [_convo(h) for h in client.threads.get_history(tid, limit=200)]
        assert texts[0] == edited
        assert original in texts
        # Back on the original branch, a new message goes on from its end (the hook sends that
        # branch's head as the run's checkpoint): one more branch, the edited one kept.
        driver.find_element(By.CSS_SELECTOR, f'#messages li button.switch[data-to="{other}"]').click()
        wait.until(lambda d: _said(d) == original)
        _send(driver, "Third question?")
        third = [*original, "Third question?", "Answer 3."]
        wait.until(lambda d: _convo(client.threads.get_state(tid)) == third and _idle(d))
        assert client.threads.get(tid)["branch_id"] not in ("main", thread["branch_id"])
        texts = [_convo(h) for h in client.threads.get_history(tid, limit=200)]
        assert texts[0] == third and edited in texts
        # A submit without a `checkpoint` sets the hook's view back to its default (at each fork, the
        # child with the newest checkpoint id, here the edit, as with LangGraph's server); the
        # switch shows the branch just continued.
        wait.until(lambda d: len(options(d)) == 2)
        driver.find_element(By.CSS_SELECTOR, f'#messages li button.switch[data-to="{other}"]').click()
        wait.until(lambda d: _said(d) == third)
