"""The page of `agentrt serve` lists a session's branches like `agentrt branches` and switches, renames
and deletes them through the same runner calls: plain form posts to a real server, checked against
the CLI. Deleting the current branch is refused with the CLI's line; another user or tenant gets the
not-found an unknown session gets."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
from langgraph_sdk import get_sync_client

from tests.support.runners import make_config
from tests.support.serve import Server, cli, serving

DEMO = "Summarise the 2026 sales by region"
ROW = re.compile(r'<tr class="branch-row( current)?" data-branch="([^"]+)">(.*?)</tr>', re.S)
ERROR_BOX = re.compile(r'<div class="error-box">(.*?)</div>', re.S)
ALICE, BOB, GLOBEX = "alice-key-0123456789", "bob-key-0123456789ab", "globex-key-0123456789"
KEYS = [
    {"key": ALICE, "tenant_id": "acme", "user_id": "alice"},
    {"key": BOB, "tenant_id": "acme", "user_id": "bob"},
    {"key": GLOBEX, "tenant_id": "globex"},
]


def _cli_json(config: Path, cwd: Path, *args: str) -> Any:
    ran = cli(config, cwd, *args, "--json")
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def _rows(html: str) -> list[tuple[str, bool, str]]:
    """(branch id, current, name cell) of each row of the page's branch table, in page order."""
    out = []
    for m in ROW.finditer(html):
        name = re.search(r'<td class="name">(.*?)</td>', m.group(3), re.S)
        out.append((m.group(2), bool(m.group(1)), name.group(1) if name else ""))
    return out


def _post(server: Server, sid: str, action: str, **form: str) -> httpx.Response:
    """A form post from the page; the redirect it answers with (303, to the session's page)."""
    r = httpx.post(f"{server.url}/ui/sessions/{sid}/{action}", data=form, follow_redirects=False, timeout=60)
    assert r.status_code == 303, r.text
    return r


def _error(r: httpx.Response) -> str | None:
    loc = r.headers["location"]
    return unquote(loc.split("?error=", 1)[1]) if "?error=" in loc else None


def _page(server: Server, sid: str, error: str | None = None) -> str:
    params = {"error": error} if error else None
    r = httpx.get(f"{server.url}/ui/sessions/{sid}", params=params, timeout=60)
    assert r.status_code == 200, r.text
    return r.text


def test_branches_listed_switched_renamed_and_deleted_from_the_page(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    sid = _cli_json(config, tmp_path, "run", "--approve-all", DEMO)["session_id"]
    entries = _cli_json(config, tmp_path, "show", sid, "--last", "5000")["entries"]
    answer = [e["id"] for e in entries if e["type"] == "assistant_message"][-1]
    with serving(config, tmp_path) as server:
        for _ in range(2):
            assert _error(_post(server, sid, "fork", entry_id=answer)) is None

        # three branches, as `agentrt branches` lists them, the newest fork current
        listed = _cli_json(config, tmp_path, "branches", sid)
        main, one, two = (r["branch_id"] for r in listed)
        html = _page(server, sid)
        assert [(b, cur) for b, cur, _ in _rows(html)] == [(main, False), (one, False), (two, True)]
        for r in listed:
            row = next(m.group(3) for m in ROW.finditer(html) if m.group(2) == r["branch_id"])
            assert r["head_entry_id"] in row and f"<td>{r['turns']}</td>" in row
            assert (answer in row) == (r["branch_id"] != "main")
            # buttons only where the CLI would accept them: no switch to or delete of the current one,
            # no delete of main
            assert ("switch-branch" in row) == (not r["current"])
            assert ("delete-branch" in row) == (not r["current"] and r["branch_id"] != "main")

        # rename: the page and the CLI show the new name
        assert _error(_post(server, sid, "rename-branch", branch=one, name="east-only")) is None
        assert ("east-only" in dict((b, n) for b, _, n in _rows(_page(server, sid)))[one]) is True
        assert [r["name"] for r in _cli_json(config, tmp_path, "branches", sid)] == [None, "east-only", None]

        # switch by name, then the next turn from the page lands on that branch
        assert _error(_post(server, sid, "switch-branch", branch="east-only")) is None
        assert [cur for _, cur, _ in _rows(_page(server, sid))] == [False, True, False]
        assert _error(_post(server, sid, "turn", text="Once more")) is None
        client = get_sync_client(url=server.url)
        client.runs.join(sid, client.runs.list(sid)[0]["run_id"])
        if "Approval needed" in _page(server, sid):
            assert _error(_post(server, sid, "decision", approved="1")) is None
            client.runs.join(sid, client.runs.list(sid)[0]["run_id"])
        shown = _cli_json(config, tmp_path, "show", sid, "--last", "5000")["entries"]
        turn = [e for e in shown if e["type"] == "user_turn"][-1]
        assert turn["branch_id"] == one
        assert [r["turns"] for r in _cli_json(config, tmp_path, "branches", sid)] == [1, 1, 0]
        convo = _page(server, sid).split('<div id="conversation">')[1]
        assert f'data-entry="{turn["id"]}"' in convo and "Once more" in convo

        # deleting the current branch: refused with the CLI's line, shown on the page
        refused = _error(_post(server, sid, "delete-branch", branch=one))
        by_cli = cli(config, tmp_path, "branch", "delete", sid, one)
        assert refused and by_cli.returncode == 4
        assert by_cli.stderr.strip() == f"agentrt: error: {refused}"
        assert "current branch" in refused
        shown_error = ERROR_BOX.search(_page(server, sid, refused))
        assert shown_error and "current branch" in shown_error.group(1)

        # delete the other fork: gone from the page and from `agentrt branches`
        assert _error(_post(server, sid, "delete-branch", branch=two)) is None
        html = _page(server, sid)
        assert [b for b, _, _ in _rows(html)] == [main, one] and two not in html.split("<h2>Branches</h2>")[1]
        assert [r["branch_id"] for r in _cli_json(config, tmp_path, "branches", sid)] == [main, one]

        # a branch the session does not have: one line, escaped like every id on the page
        bad = "<script>x</script>"
        said = _error(_post(server, sid, "switch-branch", branch=bad))
        assert said and "has no branch" in said
        html = _page(server, sid, said)
        assert "&lt;script&gt;" in html and bad not in html


def test_another_users_or_tenants_session_is_not_found(tmp_path: Path) -> None:
    config = make_config(tmp_path, serve={"api_keys": KEYS})
    alice = ("--tenant", "acme", "--user", "alice")
    sid = _cli_json(config, tmp_path, "run", *alice, "--approve-all", DEMO)["session_id"]
    entries = _cli_json(config, tmp_path, "show", *alice, sid, "--last", "5000")["entries"]
    answer = [e["id"] for e in entries if e["type"] == "assistant_message"][-1]
    one = _cli_json(config, tmp_path, "fork", *alice, sid, "--from", answer)["branch_id"]
    _cli_json(config, tmp_path, "switch", *alice, sid, "main")
    before = _cli_json(config, tmp_path, "branches", *alice, sid)
    with serving(config, tmp_path) as server:
        mine = httpx.get(f"{server.url}/ui/sessions/{sid}", headers={"x-api-key": ALICE})
        assert [b for b, _, _ in _rows(mine.text)] == ["main", one]
        unknown = httpx.post(
            f"{server.url}/ui/sessions/s-nosuchsession/switch-branch", headers={"x-api-key": BOB}, data={"branch": one}
        )
        assert unknown.status_code == 404
        for key in (BOB, GLOBEX):
            for action, form in (
                ("switch-branch", {"branch": one}),
                ("rename-branch", {"branch": one, "name": "mine"}),
                ("delete-branch", {"branch": one}),
            ):
                r = httpx.post(
                    f"{server.url}/ui/sessions/{sid}/{action}", headers={"x-api-key": key}, data=form, timeout=60
                )
                assert r.status_code == 404, f"{action} with another principal's key: {r.status_code} {r.text}"
                assert r.text.replace(sid, "ID") == unknown.text.replace("s-nosuchsession", "ID")
    assert _cli_json(config, tmp_path, "branches", *alice, sid) == before
