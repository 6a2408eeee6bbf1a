"""Tenant isolation across every layer: random (tenant, user, session) triples with colliding ids,
the JSONL layer on the files store (400 triples, 1,000 with AGENTRT_FULL_DRILLS=1) and on the
PostgreSQL record store (200)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.core.errors import SessionNotFound
from agent.session.manager import ChatSessionManager
from agent.session.stores.redis import RedisSessionStore
from agent.session.stores.sql import SqlSessionStore
from tests.integration.test_stores_support import build_manager, drop_redis_prefix, redis_store, sql_store
from tests.support.drills import size
from tests.support.savers import KINDS, SaverKit

TRIPLES = {"files": size("AGENTRT_ISOLATION_TRIPLES", sample=400, full=1000), "postgres": 200}
"""How many (tenant, session) pairs: every one is written durably (session.json fsynced twice), then
read about a dozen times, each read that misses the caches a PostgreSQL round trip; on the
PostgreSQL record store every write is one too, so fewer (they still collide: 25 tenants share 60
session ids)."""


@pytest.fixture
def layers() -> Iterator[tuple[RedisSessionStore, SqlSessionStore]]:
    """Private Redis prefix and PostgreSQL tables, removed afterwards."""
    l2, l3 = redis_store(), sql_store()
    yield l2, l3
    drop_redis_prefix(l2.client, l2.key_prefix)
    l3.drop()
    l3.dispose()


@pytest.fixture(params=KINDS)
def records(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(kind, record store of the JSONL layer): None for the files under base_dir, or a
    `PostgresStore` over a schema of its own (dropped afterwards)."""
    if request.param == "files":
        yield "files", None
        return
    kit = SaverKit.open("postgres", tmp_path)
    yield "postgres", kit.store()
    kit.close()


def triples(seed: int, n: int) -> list[tuple[str, str, str]]:
    """`n` distinct (tenant, session) pairs drawn from small pools, so session ids collide across tenants."""
    rng = random.Random(seed)
    tenants = [f"tenant{i}" for i in range(25)]
    sessions = [f"sess{i}" for i in range(60)]
    out: dict[tuple[str, str], str] = {}
    while len(out) < n:
        t, s = rng.choice(tenants), rng.choice(sessions)
        out.setdefault((t, s), f"user{rng.randrange(8)}")
    return [(t, u, s) for (t, s), u in out.items()]


def check_all(m: ChatSessionManager, data: list[tuple[str, str, str]], rng: random.Random) -> tuple[str, int]:
    """Read every triple as its owner and as strangers; returns (layer that answered, cross reads)."""
    owners = {(t, s): u for t, u, s in data}
    tenants = sorted({t for t, _, _ in data})
    cross = 0
    hit_layers = set()
    for t, u, s in data:
        got = m.get(t, s, u)
        hit_layers.add(m.last_read_trace[-1][0])
        if (got.tenant_id, got.user_id, got.session_id, got.context["owner"]) != (t, u, s, f"{t}/{u}/{s}"):
            cross += 1
    # Strangers second: their reads fill the caches, which must not change what the owners saw.
    for t, u, s in data:
        stranger = rng.choice(tenants)
        if stranger != t:
            try:
                other = m.get(stranger, s, u)
                if (stranger, s) not in owners or other.tenant_id != stranger or other.user_id != u:
                    cross += 1
            except SessionNotFound:
                pass
        try:
            m.get(t, s, u + "x")
            cross += 1
        except SessionNotFound:
            pass
    assert len(hit_layers) == 1, hit_layers
    return hit_layers.pop(), cross


def test_no_cross_tenant_or_cross_user_reads_in_any_layer(
    tmp_path: Path, layers: tuple, records: tuple[str, Any]
) -> None:
    """Reads served by L1, then L2, then JSONL, then SQL never return another tenant's or user's session."""
    kind, store = records
    rng = random.Random(4)
    data = triples(4, TRIPLES[kind])
    assert len({s for _, _, s in data}) < len(data)  # ids really collide across tenants
    m = build_manager("PRIMARY", tmp_path, layers[0], layers[1], fsync="never", store=store)
    for t, u, s in data:
        m.create(t, "agent", u, s, context={"owner": f"{t}/{u}/{s}"})

    assert check_all(m, data, rng) == ("L1", 0)
    m.l1.clear()
    assert check_all(m, data, rng) == ("L2", 0)
    drop_redis_prefix(layers[0].client, layers[0].key_prefix)
    m.l1.clear()
    assert check_all(m, data, rng) == ("JSONL", 0)

    for t, _, s in data:
        if store is None:
            m.jsonl.delete(t, s)
            m.event_log(t, s).path.unlink()
        else:  # every row of the session: its document and its event log
            store.session(t, s, "never").remove()
    drop_redis_prefix(layers[0].client, layers[0].key_prefix)
    m.l1.clear()
    assert check_all(m, data, rng) == ("SQL", 0)

    for t in sorted({t for t, _, _ in data}):
        mine = {(x.tenant_id, x.session_id, x.user_id) for x in m.list(t)}
        assert mine == {(t, s, u) for tt, u, s in data if tt == t}
