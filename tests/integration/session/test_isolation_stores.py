"""Every read path of a session, asked by a second user of its tenant and by a second tenant, on the
files store and on the PostgreSQL store (`persistence.store: postgres`, configs/production.yaml).

One world per store (`tests.support.store_configs`): tenant acme-<u> with users alice and bob, and
tenant globex-<u> whose user is also named alice and owns a session of the same id as acme's alice
(ids collide across tenants). Acme's alice has a forked branch with a turn on it and a second,
ENDED, session. Each principal's model writes a note of its own secret word (large enough to be
archived as a blob) and reads it back; `agentrt serve` adds a thread with metadata for each (globex's
again with the id of alice's).

The CLI is driven through the console script's entry point, many commands per process
(`tests.support.cli_batch`); the API through a real `agentrt serve` with one key per principal.
Another principal's session must read exactly as a session that does not exist (same exit status,
same message with the id put in), and nothing of it (its words, its branches, its checkpoints) may
reach anyone else's screen; `erase` deletes the named tenant's or user's sessions and nothing else.
"""

from __future__ import annotations

import json
import uuid

import httpx

from tests.support.cli_batch import Said
from tests.support.isolation_world import READ_CALL, World, _ok, _owned, _rows


def test_sessions_lists_filters_and_pages_only_the_callers_own(world: World) -> None:
    """`agentrt sessions`: every row, every filter (--status, --meta) and every page (--after each
    row's cursor) holds only the caller's sessions; another principal's cursor is no way in."""
    owned = _owned(world)
    names = list(owned)
    meta = f"project=p{world.u}"
    listed = world.cli(
        [(n, ["sessions", "--json", "--limit", "0"]) for n in names]
        + [(n, ["sessions", "--json", "--limit", "0", "--status", "ENDED"]) for n in names]
        + [(n, ["sessions", "--json", "--limit", "0", "--meta", meta]) for n in names]
        + [(n, ["sessions", "--limit", "0"]) for n in names]
    )
    every, ended, tagged, text = (listed[i * len(names) : (i + 1) * len(names)] for i in range(4))
    for n, said in zip(names, every, strict=True):
        assert sorted(_rows(said)) == sorted(owned[n]), n
        for r in json.loads(said.out):
            assert not any(word in r["first_message"] for word in world.words_but(n)), (n, r)
    for n, said in zip(names, ended, strict=True):
        want = {(world.who["alice"].tenant, "alice", world.ids["A2"])} & owned[n]
        assert set(_rows(said)) == want, n
    for n, said in zip(names, tagged, strict=True):
        assert set(_rows(said)) == {r for r in owned[n] if r[2] in (world.ids["TA"], world.ids["TB"])}, n
    for n, said in zip(names, text, strict=True):
        for word in world.words_but(n):
            assert word not in _ok(said).out, (n, word)

    # Pages of two: the first, and the one after each row's cursor, are that listing's next rows.
    rows = {n: json.loads(said.out) for n, said in zip(names, every, strict=True)}
    asked = [(n, None, 0) for n in names] + [(n, r["cursor"], k + 1) for n in names for k, r in enumerate(rows[n])]
    # Another principal's cursor only says where to start in the caller's own sessions.
    pairs = [("bob", "alice"), ("galice", "alice"), ("globex", "acme"), ("acme", "globex")]
    paged = world.cli(
        [(n, ["sessions", "--json", "--limit", "2", *(["--after", c] if c else [])]) for n, c, _ in asked]
        + [(n, ["sessions", "--json", "--limit", "0", "--after", rows[o][0]["cursor"]]) for n, o in pairs]
    )
    for (n, _, k), said in zip(asked, paged, strict=False):
        assert _rows(said) == _rows(every[names.index(n)])[k : k + 2], (n, k)
    for (n, _), said in zip(pairs, paged[len(asked) :], strict=True):
        assert set(_rows(said)) <= owned[n], n


# Who asks for whose session: the other user of the tenant (alice's sessions, the forked one and
# the ENDED one), the other tenant's user of the same name, the other tenant's operator.
STRANGERS = [("bob", "A"), ("bob", "A2"), ("bob", "TA"), ("galice", "A2"), ("globex", "A2")]


PROBES: list[list[str]] = [
    ["show", "{sid}"],
    ["show", "{sid}", "--json"],
    ["show", "{sid}", "--branch", "{fork}"],
    ["branches", "{sid}"],
    ["export", "{sid}"],
    ["doctor", "{sid}"],
    ["doctor", "{sid}", "--json"],
    ["tool-result", "{sid}", READ_CALL, "--limit", "20000"],
    ["resume", "{sid}"],
    ["run", "--session", "{sid}", "mine now"],
    ["fork", "{sid}", "--from", "{entry}"],
]


def _asked(world: World, sid: str, probe: list[str]) -> list[str]:
    return [a.format(sid=sid, fork=world.fork, entry=world.entry) for a in probe]


def _same_but_id(said: Said, sid: str) -> tuple[int, str, str]:
    return said.code, said.out.replace(sid, "<ID>"), said.err.replace(sid, "<ID>")


def test_another_users_or_tenants_session_reads_as_a_missing_one(world: World) -> None:
    """show (every branch), branches, export, doctor, tool-result, resume, run --session and fork of
    another principal's session: the exit status and output of a session that does not exist, and
    not a word of it; the owner reads all of it, fork included."""
    missing = world.ids["missing"]
    strangers = sorted({name for name, _ in STRANGERS})
    baseline = [(name, i) for name in strangers for i in range(len(PROBES))]
    cases = [(name, world.ids[key], i) for name, key in STRANGERS for i in range(len(PROBES))]
    said = world.cli(
        [(name, _asked(world, missing, PROBES[i])) for name, i in baseline]
        + [(name, _asked(world, sid, PROBES[i])) for name, sid, i in cases]
    )
    none = {key: _same_but_id(s, missing) for key, s in zip(baseline, said, strict=False)}
    for (name, sid, i), theirs in zip(cases, said[len(baseline) :], strict=True):
        probe = PROBES[i]
        assert theirs.code == 3, (name, probe, theirs.both)
        assert _same_but_id(theirs, sid) == none[(name, i)], (name, probe)
        assert theirs.out == "" and ("not found" in theirs.err or "no session" in theirs.err), (name, probe)
        for word in [*world.words_but(name), world.fork]:
            assert word not in theirs.both, (name, probe, word)

    # The owner: the forked branch's turn, the main branch, the note, every check.
    alice = world.who["alice"]
    a = world.ids["A"]
    show, main, branches, note, doctor = world.cli(
        [
            ("alice", ["show", a]),
            ("alice", ["show", a, "--branch", "main"]),
            ("alice", ["branches", a, "--json"]),
            ("alice", ["tool-result", a, READ_CALL, "--limit", "20000"]),
            ("alice", ["doctor", a, "--json"]),
        ]
    )
    assert f"{alice.word} on the fork" in _ok(show).out and f"branch {world.fork}" in show.out
    assert f"{alice.word} first" in _ok(main).out and f"{alice.word} on the fork" not in main.out
    assert {b["branch_id"] for b in json.loads(_ok(branches).out)} == {"main", world.fork}
    assert _ok(note).out == alice.note() + "\n"
    assert "FAIL" not in {c["status"] for c in json.loads(doctor.out)["checks"]}, doctor.out
    for own in (show, main, branches, note, doctor):
        assert not any(word in own.both for word in world.words_but("alice"))


def test_a_colliding_id_in_another_tenant_is_that_tenants_own_session(world: World) -> None:
    """Globex's alice has a session with acme's alice's id: every read gives her own, none of acme's
    branches, entries or words; a turn she runs on it leaves acme's session byte for byte as it was."""
    a, g = world.ids["A"], world.who["galice"]
    acme_alice = world.who["alice"].word
    made_up = str(uuid.UUID(int=uuid.UUID(world.entry).int ^ 1))
    (show, branches, on_fork, no_branch, export, note, doctor, fork, no_entry, op_show) = world.cli(
        [
            ("galice", ["show", a]),
            ("galice", ["branches", a, "--json"]),
            ("galice", ["show", a, "--branch", world.fork]),
            ("galice", ["show", a, "--branch", "b-made-up"]),
            ("galice", ["export", a]),
            ("galice", ["tool-result", a, READ_CALL, "--limit", "20000"]),
            ("galice", ["doctor", a, "--json"]),
            ("galice", ["fork", a, "--from", world.entry]),
            ("galice", ["fork", a, "--from", made_up]),
            ("globex", ["show", a, "--json"]),
        ]
    )
    assert f"tenant {g.tenant}  user alice" in _ok(show).out and f"{g.word} first" in show.out
    assert [b["branch_id"] for b in json.loads(_ok(branches).out)] == ["main"]
    assert on_fork.code == no_branch.code != 0
    assert on_fork.err.replace(world.fork, "<B>") == no_branch.err.replace("b-made-up", "<B>")
    assert f'"tenant":"{g.tenant}"' in _ok(export).out and g.word in export.out
    assert _ok(note).out == g.note() + "\n"
    assert "FAIL" not in {c["status"] for c in json.loads(_ok(doctor).out)["checks"]}, doctor.out
    assert fork.code == no_entry.code != 0
    assert fork.err.replace(world.entry, "<E>") == no_entry.err.replace(made_up, "<E>")
    assert json.loads(_ok(op_show).out)["session"]["tenant_id"] == g.tenant
    for said in (show, branches, export, note, doctor, op_show):
        assert acme_alice not in said.both and world.fork not in said.both
    for said in (on_fork, fork):  # they echo the id asked for (as for a made-up one), nothing else of acme's
        assert acme_alice not in said.both

    turn, again, acme_export = world.cli(
        [
            ("galice", ["run", "--session", a, "--json", f"{g.word} again"]),
            ("galice", ["show", a, "--json"]),
            ("alice", ["export", a]),
        ]
    )
    assert json.loads(_ok(turn).out)["status"] == "COMPLETED"
    assert json.loads(_ok(again).out)["session"]["loop_count"] == 2
    assert _ok(acme_export).out == world.alice_export


def _thread_ids(resp: httpx.Response) -> set[tuple[str, str]]:
    assert resp.status_code == 200, resp.text
    return {(t["thread_id"], t["metadata"].get("user_id")) for t in resp.json()}


def test_serve_search_count_and_thread_reads_are_the_callers_own(world: World) -> None:
    """threads/search (filters, ids, paging), threads/count, GET threads/{id}, its state and history
    (both forms, and with another session's checkpoint ids): the caller's own sessions only."""
    owned = {n: {(sid, user) for _, user, sid in rows} for n, rows in _owned(world).items()}
    ids, u = world.ids, world.u
    for n, want in owned.items():
        assert _thread_ids(world.api(n, "POST", "/threads/search", {"limit": 100})) == want, n
        assert world.api(n, "POST", "/threads/count", {}).json() == len(want), n
        by_meta = world.api(n, "POST", "/threads/search", {"metadata": {"project": f"p{u}"}, "limit": 100})
        assert _thread_ids(by_meta) == {t for t in want if t[0] in (ids["TA"], ids["TB"])}, n
        by_id = world.api(n, "POST", "/threads/search", {"ids": [ids[k] for k in ("A", "A2", "B")], "limit": 100})
        assert _thread_ids(by_id) == {t for t in want if t[0] in (ids["A"], ids["A2"], ids["B"])}, n
        by_user = world.api(n, "POST", "/threads/search", {"metadata": {"user_id": "bob"}, "limit": 100})
        assert _thread_ids(by_user) == {t for t in want if t[1] == "bob"}, n
        idle = world.api(n, "POST", "/threads/count", {"status": "idle"}).json()
        assert idle == len(want), n
        paged: list[tuple[str, str]] = []
        for offset in range(0, len(want) + 1, 2):
            body = {"limit": 2, "offset": offset, "sort_by": "thread_id", "sort_order": "asc"}
            paged += sorted(_thread_ids(world.api(n, "POST", "/threads/search", body)))
        assert sorted(paged) == sorted(want), n

    a = ids["A"]
    mine = world.api("alice", "GET", f"/threads/{a}")
    assert mine.status_code == 200 and f"{world.who['alice'].word} on the fork" in mine.text
    history = world.api("alice", "GET", f"/threads/{a}/history?limit=100").json()
    acme_cps = {s["checkpoint"]["checkpoint_id"] for s in history}
    cp = world.api("alice", "GET", f"/threads/{a}/state").json()["checkpoint"]["checkpoint_id"]
    assert cp in acme_cps
    other_cp = str(uuid.UUID(int=uuid.UUID(cp).int ^ 1))

    # globex's alice and operator: the thread of that id is theirs, acme's checkpoints are not.
    for n in ("galice", "globex"):
        got = [
            world.api(n, "GET", f"/threads/{a}"),
            world.api(n, "GET", f"/threads/{a}/state"),
            world.api(n, "GET", f"/threads/{a}/history?limit=100"),
            world.api(n, "POST", f"/threads/{a}/history", {"limit": 100}),
        ]
        for r in got:
            assert r.status_code == 200 and world.who["galice"].word in r.text, (n, r.text[:300])
            assert world.who["alice"].word not in r.text and world.fork not in r.text, n
        theirs = {s["checkpoint"]["checkpoint_id"] for s in got[2].json()}
        assert theirs and not theirs & acme_cps
        for ask, made_up in (
            (("GET", f"/threads/{a}/state/{cp}", None), ("GET", f"/threads/{a}/state/{other_cp}", None)),
            (
                ("POST", f"/threads/{a}/history", {"before": cp}),
                ("POST", f"/threads/{a}/history", {"before": other_cp}),
            ),
            (
                ("POST", f"/threads/{a}/state/checkpoint", {"checkpoint": {"checkpoint_id": cp}}),
                ("POST", f"/threads/{a}/state/checkpoint", {"checkpoint": {"checkpoint_id": other_cp}}),
            ),
        ):
            r, m = world.api(n, *ask), world.api(n, *made_up)
            assert (r.status_code, r.text.replace(cp, "<CP>")) == (m.status_code, m.text.replace(other_cp, "<CP>"))
            assert world.who["alice"].word not in r.text

    # bob (and globex, for alice's sessions of no colliding id): 404, as for a thread that never was.
    for n, key in (("bob", "A"), ("bob", "A2"), ("bob", "TA"), ("galice", "A2"), ("globex", "A2")):
        sid = ids[key]
        for path in ("", "/state", f"/state/{cp}", "/history"):
            r = world.api(n, "GET", f"/threads/{sid}{path}")
            m = world.api(n, "GET", f"/threads/{ids['missing']}{path}")
            assert r.status_code == m.status_code == 404, (n, key, path, r.text)
            assert r.text.replace(sid, "<ID>") == m.text.replace(ids["missing"], "<ID>")
        r = world.api(n, "POST", f"/threads/{sid}/history", {"limit": 5})
        assert r.status_code == 404 and world.who["alice"].word not in r.text
        r = world.api(n, "GET", f"/threads/{ids['B'] if n == 'bob' else ids['A']}/state/{cp}")
        assert r.status_code == 404, (n, r.text)  # alice's checkpoint in the caller's own thread


def test_erase_deletes_only_the_named_users_or_tenants_sessions(world: World) -> None:
    """erase --tenant acme --user bob deletes bob's sessions only; erase --tenant globex deletes
    globex's, its session of alice's id included, and not a byte of acme's; the server agrees."""
    ids = world.ids
    acme, globex = world.who["acme"].tenant, world.who["globex"].tenant
    listed = world.cli([("acme", ["erase", "--tenant", acme, "--user", "bob", "--json"])])[0]
    assert listed.code == 2
    assert sorted(json.loads(listed.out)["session_ids"]) == sorted(f"{acme}/{ids[k]}" for k in ("B", "TB"))
    assert world.api("bob", "GET", f"/threads/{ids['B']}").status_code == 200  # read once: in the server's cache

    bob_gone, globex_gone = world.cli(
        [
            ("acme", ["erase", "--tenant", acme, "--user", "bob", "--yes", "--json"]),
            ("globex", ["erase", "--tenant", globex, "--yes", "--json"]),
        ]
    )
    assert sorted(json.loads(_ok(bob_gone).out)["session_ids"]) == sorted(f"{acme}/{ids[k]}" for k in ("B", "TB"))
    assert sorted(json.loads(_ok(globex_gone).out)["session_ids"]) == sorted(f"{globex}/{ids[k]}" for k in ("A", "TA"))

    left = world.cli(
        [(n, ["sessions", "--json", "--limit", "0"]) for n in ("acme", "bob", "globex")]
        + [
            ("alice", ["export", ids["A"]]),
            ("alice", ["tool-result", ids["A"], READ_CALL, "--limit", "20000"]),
            ("galice", ["show", ids["A"]]),
        ]
    )
    alice_rows = {(acme, "alice", ids[k]) for k in ("A", "A2", "TA")}
    assert set(_rows(left[0])) == alice_rows
    assert _rows(left[1]) == [] and _rows(left[2]) == []
    assert _ok(left[3]).out == world.alice_export  # byte for byte
    assert _ok(left[4]).out == world.who["alice"].note() + "\n"
    assert left[5].code == 3 and f"not found for tenant {globex}" in left[5].err

    for n, gone in (("bob", "B"), ("bob", "TB"), ("galice", "A"), ("galice", "TA")):
        assert world.api(n, "GET", f"/threads/{ids[gone]}").status_code == 404, (n, gone)
    # A thread deleted through the API (one that never ran) is gone too.
    made = world.api("alice", "POST", "/threads", {}).json()["thread_id"]
    assert world.api("alice", "DELETE", f"/threads/{made}").status_code == 204
    assert world.api("alice", "GET", f"/threads/{made}").status_code == 404
    for n in ("bob", "galice", "globex"):
        assert world.api(n, "POST", "/threads/search", {"limit": 100}).json() == []
    assert world.api("alice", "GET", f"/threads/{ids['A']}").status_code == 200
    assert _thread_ids(world.api("acme", "POST", "/threads/search", {"limit": 100})) == {
        (sid, "alice") for _, _, sid in alice_rows
    }
    if world.kind == "postgres":  # nothing of the erased sessions is left in the record store
        import psycopg

        from tests.support.celery_drill import database_url

        assert world.setup.database is not None
        with psycopg.connect(database_url(world.setup.database)) as conn:
            for table in ("jsonl_streams", "jsonl_documents", "jsonl_fences"):
                # '@store' rows are the store's own bookkeeping (when it last converged), no tenant's
                rows = conn.execute(f"SELECT DISTINCT tenant, thread FROM {table} WHERE tenant <> '@store'").fetchall()
                assert {(t, s) for t, s in rows} <= {(acme, ids["A"]), (acme, ids["A2"]), (acme, ids["TA"])}, table
            rows = conn.execute("SELECT DISTINCT tenant_id, session_id FROM chat_messages").fetchall()
            assert {(t, s) for t, s in rows} <= {(acme, ids["A"]), (acme, ids["A2"])}
            rows = conn.execute("SELECT DISTINCT tenant_id, session_id FROM session_leases").fetchall()
            assert {(t, s) for t, s in rows} <= {(acme, ids["A"]), (acme, ids["A2"]), (acme, ids["TA"])}
            assert (acme, ids["A"]) in {(t, s) for t, s in rows}  # alice's runs took leases; theirs stay
