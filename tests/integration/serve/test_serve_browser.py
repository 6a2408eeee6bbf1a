"""The page at `/` in a real headless Chromium (Debian's, with its driver; nothing downloaded).

List the sessions, open one that waits for approval, approve it, watch the run finish live.
A screenshot is saved under the test's tmp_path (and copied to $ARTIFACTS_DIR when set).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from tests.support.browser import headless_chromium, needs_chromium
from tests.support.runners import make_config
from tests.support.serve import serving

pytestmark = needs_chromium

WAIT_S = 60


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    with headless_chromium(tmp_path / "chromium-profile", "1280,1600") as driver:
        yield driver


def test_page_lists_sessions_approves_and_shows_the_run_finish(tmp_path: Path, browser):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    def _wait(d):  # the page reloads when a run ends: elements go stale in between
        return WebDriverWait(d, WAIT_S, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))

    driver = browser
    config = make_config(tmp_path)
    with serving(config, tmp_path) as server:
        client = get_sync_client(url=server.url)
        tid = client.threads.create()["thread_id"]
        client.runs.wait(tid, "agentrt", input={"user_input": "How did each region do against its target?"})

        driver.get(server.url + "/")
        row = _wait(driver).until(ec.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-session="{tid}"]')))
        assert "How did each region do" in row.text
        assert "interrupted" in row.text
        row.find_element(By.TAG_NAME, "a").click()

        approval = _wait(driver).until(ec.presence_of_element_located((By.ID, "approval")))
        assert "publish_report" in approval.text
        conversation = driver.find_element(By.ID, "conversation").text
        assert "query_dataset" in conversation and "write_file" in conversation
        todos = driver.find_element(By.ID, "todos").text
        assert "[done] Compute revenue by region" in todos

        # An archived / stored tool result read back on demand.
        driver.find_element(By.CSS_SELECTOR, "[data-tool-result]").click()
        _wait(driver).until(lambda d: d.find_element(By.CSS_SELECTOR, ".result pre").text)

        approval.find_element(By.XPATH, ".//button[text()='Approve']").click()
        _wait(driver).until(
            lambda d: (
                d.find_element(By.ID, "run-status").text == "idle"
                and "publish_report" in d.find_element(By.ID, "conversation").text
                and d.find_elements(By.CSS_SELECTOR, ".entry.assistant_message")
            )
        )
        assert not driver.find_elements(By.ID, "approval")
        answer = driver.find_elements(By.CSS_SELECTOR, ".entry.assistant_message")[-1].text
        assert client.threads.get_state(tid)["values"]["finish_reason"] == "completed"
        assert answer.strip()

        driver.find_element(By.CSS_SELECTOR, "[data-doctor]").click()
        _wait(driver).until(lambda d: "session_found" in d.find_element(By.ID, "doctor").text)

        # The OpenAPI page renders offline (its Swagger UI assets come from the server, not a CDN).
        driver.get(server.url + "/docs")
        _wait(driver).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) > 20)
        driver.back()

        shot = tmp_path / "serve-page.png"
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        if os.environ.get("ARTIFACTS_DIR"):
            target = Path(os.environ["ARTIFACTS_DIR"])
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, target / shot.name)


def test_page_switches_renames_and_deletes_a_branch(tmp_path: Path, browser):
    """Two forks made by the CLI; in the browser: switch to main, rename one fork, delete the other."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.support.serve import cli

    driver = browser
    config = make_config(tmp_path)
    sid = json.loads(cli(config, tmp_path, "run", "--json", "--approve-all", "Summarise the sales").stdout)[
        "session_id"
    ]
    shown = json.loads(cli(config, tmp_path, "show", sid, "--json", "--last", "5000").stdout)
    answer = [e["id"] for e in shown["entries"] if e["type"] == "assistant_message"][-1]
    one, two = (
        json.loads(cli(config, tmp_path, "fork", sid, "--from", answer, "--json").stdout)["branch_id"] for _ in "12"
    )

    def row(branch: str) -> Any:
        return driver.find_element(By.CSS_SELECTOR, f'tr.branch-row[data-branch="{branch}"]')

    def rows() -> list[tuple[str, bool]]:
        found = driver.find_elements(By.CSS_SELECTOR, "tr.branch-row")
        return [(r.get_attribute("data-branch"), "current" in (r.get_attribute("class") or "")) for r in found]

    wait = WebDriverWait(driver, WAIT_S, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
    with serving(config, tmp_path) as server:
        driver.get(f"{server.url}/ui/sessions/{sid}")
        wait.until(lambda d: rows() == [("main", False), (one, False), (two, True)])
        row("main").find_element(By.XPATH, ".//button[text()='switch']").click()
        wait.until(lambda d: rows() == [("main", True), (one, False), (two, False)])
        row(one).find_element(By.NAME, "name").send_keys("east-only")
        row(one).find_element(By.XPATH, ".//button[text()='rename']").click()
        wait.until(lambda d: "east-only" in row(one).find_element(By.CLASS_NAME, "name").text)
        row(two).find_element(By.XPATH, ".//button[text()='delete']").click()
        wait.until(lambda d: rows() == [("main", True), (one, False)])
    listed = json.loads(cli(config, tmp_path, "branches", sid, "--json").stdout)
    assert [(r["branch_id"], r["name"], r["current"]) for r in listed] == [
        ("main", None, True),
        (one, "east-only", False),
    ]
