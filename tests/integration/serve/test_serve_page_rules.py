"""The page of `agentrt serve` offers "fork here" only where `agentrt fork --from` accepts the entry,
and a browser that opens an unknown session gets a page saying so (API clients keep their JSON)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import httpx

from tests.support.runners import make_config
from tests.support.serve import cli, serving

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
ENTRY = re.compile(r'<div class="entry [\w-]+" data-entry="([^"]+)">(.*?)</div>', re.S)


def _offers(html: str) -> dict[str, bool]:
    """{entry id: whether its header offers "fork here"}, in page order."""
    return {m.group(1): "fork here" in m.group(2) for m in ENTRY.finditer(html)}


def _fork(config: Path, cwd: Path, sid: str, entry: str) -> subprocess.CompletedProcess[str]:
    return cli(config, cwd, "fork", sid, "--from", entry)


def test_fork_is_offered_exactly_where_the_cli_accepts_it(tmp_path: Path) -> None:
    """Entries before the first checkpoint have no button and `fork --from` refuses them; the first
    one with a button is accepted; a PAUSED session (which refuses every fork) shows none."""
    config = make_config(tmp_path)
    ran = cli(config, tmp_path, "run", "--json", "Summarise the 2026 sales by region")
    sid = json.loads(ran.stdout)["session_id"]  # paused for its approval: no terminal
    ended = cli(config, tmp_path, "run", "--json", "--approve-all", "Summarise the 2026 sales by region")
    done = json.loads(ended.stdout)["session_id"]
    with serving(config, tmp_path) as server:
        paused_page = httpx.get(f"{server.url}/ui/sessions/{sid}", headers={"accept": BROWSER})
        done_page = httpx.get(f"{server.url}/ui/sessions/{done}", headers={"accept": BROWSER})
    assert paused_page.status_code == 200 and done_page.status_code == 200
    assert _offers(paused_page.text) and not any(_offers(paused_page.text).values())

    offers = _offers(done_page.text)
    refused = [e for e, offered in offers.items() if not offered]
    accepted = [e for e, offered in offers.items() if offered]
    assert refused and accepted
    assert list(offers) == refused + accepted  # forkable from the first checkpoint on
    for entry in refused:
        no = _fork(config, tmp_path, done, entry)
        assert no.returncode == 2 and "before the session's first checkpoint" in no.stderr, no.stderr
    yes = _fork(config, tmp_path, done, accepted[0])
    assert yes.returncode == 0, yes.stderr


def test_unknown_session_is_a_page_for_a_browser_and_json_for_a_client(tmp_path: Path) -> None:
    """GET /ui/sessions/UNKNOWN: 404 as HTML for a browser's Accept, as JSON for an API client's."""
    config = make_config(tmp_path)
    with serving(config, tmp_path) as server:
        url = f"{server.url}/ui/sessions/s-nosuchsession"
        page = httpx.get(url, headers={"accept": BROWSER})
        api = httpx.get(url, headers={"accept": "application/json"})
        thread = httpx.get(f"{server.url}/threads/s-nosuchsession", headers={"accept": "*/*"})
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "<html" in page.text.lower() and "s-nosuchsession" in page.text and 'href="/"' in page.text
    assert not page.text.lstrip().startswith("{")
    assert api.status_code == 404 and "s-nosuchsession" in api.json()["detail"]
    assert thread.status_code == 404 and "detail" in thread.json()
