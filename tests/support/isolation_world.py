"""The world of the tenant-isolation tests (tests/integration/session/test_isolation_stores.py): two
tenants' sessions on one store, made through the CLI, and `agentrt serve` over it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli_batch import Said, run_batch
from tests.support.serve import Server, start_server
from tests.support.store_configs import KINDS, StoreSetup
from tests.support.zygote import LAYERS, Zygote

SEES = {"alice": ["alice"], "bob": ["bob"], "galice": ["galice"], "globex": ["galice"], "acme": ["alice", "bob"]}
"""Whose sessions each principal acts for (a tenant's operator: every user of the tenant)."""
READ_CALL = "call_3_1"  # the read_file call of every principal's turn: its result is the archived note
NOTE_REPEAT = 1200  # the note is (word + " ") * 1200: over inline_payload_max_bytes, a blob


@dataclass(frozen=True)
class Who:
    """A principal: a tenant and a user (None: the operator of the tenant, every user), its secret
    word, its config (its own scripted model over the shared store) and its API key."""

    name: str
    tenant: str
    user: str | None
    word: str
    config: Path
    key: str

    def args(self) -> list[str]:
        """The options that make a command act as this principal."""
        return ["--config", str(self.config), "--tenant", self.tenant, *(["--user", self.user] if self.user else [])]

    def note(self) -> str:
        """The text its model wrote to note.txt (and read back as call_3_1)."""
        return (self.word + " ") * NOTE_REPEAT


@dataclass
class World:
    """The sessions of both tenants on one store, and a server over it."""

    kind: str
    dir: Path
    u: str  # this world's unique part of tenant names, words and ids
    setup: StoreSetup
    who: dict[str, Who]
    ids: dict[str, str]  # A (acme alice, and globex alice: the same id), A2, B, TA, TB, missing
    fork: str = ""  # the branch of A on acme's alice's side
    entry: str = ""  # the answer entry of A's main branch (acme's alice)
    server: Server | None = None
    alice_export: str = ""  # `agentrt export A` as acme's alice, before any test
    zygote: Zygote | None = None  # the fork server each batch's process is forked from

    def cli(self, commands: list[tuple[str, list[str]]]) -> list[Said]:
        """`agentrt ARGS` as each named principal, in order, in one process."""
        argvs = [[*args, *self.who[name].args()] for name, args in commands]
        return run_batch(argvs, cwd=self.dir, zygote=self.zygote)

    def one(self, name: str, *args: str) -> Said:
        """One command as `name`."""
        return self.cli([(name, list(args))])[0]

    def api(self, name: str, method: str, path: str, body: Any = None) -> httpx.Response:
        """One API call with `name`'s key."""
        headers = {"x-api-key": self.who[name].key}
        assert self.server is not None
        return httpx.request(method, self.server.url + path, json=body, headers=headers, timeout=60)

    def words_but(self, name: str) -> list[str]:
        """The secret words `name` may never see: those of every user but the ones it acts for."""
        mine = {self.who[n].word for n in SEES[name]}
        return sorted({w.word for w in self.who.values()} - mine)


def _script(where: Path, word: str) -> Path:
    """The principal's model: each turn writes its note, reads it back and answers (played again
    for every turn, also when one process runs several)."""
    responses = [
        {"content": json.dumps({"plan": "Write the note, read it back.", "todos": ["Note"]})},
        {"tool_calls": [{"name": "write_file", "args": {"path": "note.txt", "content": (word + " ") * NOTE_REPEAT}}]},
        {"tool_calls": [{"name": "read_file", "args": {"path": "note.txt"}}]},
        {"content": f"{word} answered"},
    ]
    where.mkdir(parents=True, exist_ok=True)
    path = where / "script.yaml"
    path.write_text(json.dumps({"responses": responses, "on_exhausted": "restart"}), encoding="utf-8")
    return path


def _ok(said: Said, what: str = "") -> Said:
    assert said.code == 0, f"{what}: {said.both[-2000:]}"
    return said


@pytest.fixture(scope="module", params=KINDS)
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Both tenants' sessions on a fresh store of each kind, and `agentrt serve` over it."""
    root = tmp_path_factory.mktemp(f"iso-{request.param}")
    u = uuid.uuid4().hex[:6]
    acme, globex = f"acme-{u}", f"globex-{u}"
    people = {  # name: tenant, user, secret word
        "alice": (acme, "alice", f"ALPHA{u}"),
        "bob": (acme, "bob", f"BRAVO{u}"),
        "galice": (globex, "alice", f"GOLF{u}"),
        "globex": (globex, None, f"GOLF{u}"),  # globex's operator: every user of globex
        "acme": (acme, None, f"ALPHA{u}"),  # acme's operator (its words: alice's and bob's)
    }
    keys = {name: f"{name}-key-{u}-0123456789" for name in people}
    api_keys = [
        {"key": keys[n], "tenant_id": t, **({"user_id": usr} if usr else {})} for n, (t, usr, _) in people.items()
    ]
    setup = StoreSetup(request.param)
    who: dict[str, Who] = {}
    for name, (tenant, user, word) in people.items():
        cfg = setup.config(
            root / name,
            model={"script": str(_script(root / name, word))},
            persistence={"base_dir": str(root / "base")},
            serve={"api_keys": api_keys},
        )
        who[name] = Who(name, tenant, user, word, cfg, keys[name])
    ids = {"A": f"s-a-{u}", "A2": f"s-a2-{u}", "B": f"s-b-{u}", "missing": f"s-none-{u}"}
    w = World(request.param, root, u, setup, who, ids)
    try:
        (root / "zygote").mkdir()
        w.zygote = Zygote(root / "zygote", (*LAYERS, "tests.support.cli_batch"))
        made = w.cli(
            [
                ("alice", ["run", "--new-session", ids["A"], "--json", f"{who['alice'].word} first"]),
                ("bob", ["run", "--new-session", ids["B"], "--json", f"{who['bob'].word} first"]),
                ("alice", ["run", "--new-session", ids["A2"], "--json", f"{who['alice'].word} second"]),
                ("galice", ["run", "--new-session", ids["A"], "--json", f"{who['galice'].word} first"]),
                ("alice", ["show", ids["A"], "--json"]),
            ]
        )
        for said in made:
            _ok(said, "setup")
        entries = json.loads(made[-1].out)["entries"]
        w.entry = next(e["id"] for e in entries if e["type"] == "assistant_message")
        forked, on_fork, ended = w.cli(
            [
                ("alice", ["fork", ids["A"], "--from", w.entry, "--json"]),
                ("alice", ["run", "--session", ids["A"], "--json", f"{who['alice'].word} on the fork"]),
                ("alice", ["end", ids["A2"]]),
            ]
        )
        w.fork = json.loads(_ok(forked, "fork").out)["branch_id"]
        _ok(on_fork, "run on the fork")
        _ok(ended, "end")
        w.server = start_server(who["alice"].config, root)
        meta = {"project": f"p{u}"}
        ta = w.api("alice", "POST", "/threads", {"metadata": meta}).json()["thread_id"]
        tb = w.api("bob", "POST", "/threads", {"metadata": meta}).json()["thread_id"]
        mine = w.api("galice", "POST", "/threads", {"thread_id": ta, "metadata": meta})
        assert mine.status_code == 200 and mine.json()["thread_id"] == ta, mine.text  # globex's own, same id
        ids.update(TA=ta, TB=tb)
        w.alice_export = _ok(w.one("alice", "export", ids["A"]), "export").out
        yield w
    finally:
        if w.server is not None:
            w.server.stop()
        if w.zygote is not None:
            w.zygote.close()
        setup.close()


def _owned(world: World) -> dict[str, set[tuple[str, str, str]]]:
    """(tenant, user, session id) of every session each principal may list."""
    ids = world.ids
    acme, globex = world.who["acme"].tenant, world.who["globex"].tenant
    alice = {(acme, "alice", ids[k]) for k in ("A", "A2", "TA")}
    bob = {(acme, "bob", ids[k]) for k in ("B", "TB")}
    galice = {(globex, "alice", ids[k]) for k in ("A", "TA")}
    return {"alice": alice, "bob": bob, "galice": galice, "globex": galice, "acme": alice | bob}


def _rows(said: Said) -> list[tuple[str, str, str]]:
    return [(r["tenant_id"], r["user_id"], r["session_id"]) for r in json.loads(_ok(said).out)]
