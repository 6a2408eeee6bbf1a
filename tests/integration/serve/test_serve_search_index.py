"""`threads.search` / `threads.count` of `agentrt serve` answer from the index of sessions: metadata,
status, ids, sort and limit/offset as the SDK sends them, and only the caller's own threads; on the
files store (its index of sessions) and on the PostgreSQL store (the session table)."""

from __future__ import annotations

from pathlib import Path

from langgraph_sdk import get_sync_client

from agent.runner import AgentRunner
from tests.support.serve import serving
from tests.support.store_configs import StoreSetup

ALICE, GLOBEX = "alice-key-0123456789", "globex-key-0123456789"
KEYS = [{"key": ALICE, "tenant_id": "acme", "user_id": "alice"}, {"key": GLOBEX, "tenant_id": "globex"}]


def test_search_and_count_by_the_index(tmp_path: Path, store: StoreSetup) -> None:
    """Filters, paging and sort on seven threads; a thread whose last run failed is `error`; another
    tenant sees none of them."""
    config = store.config(tmp_path, serve={"api_keys": KEYS})
    with serving(config, tmp_path) as server:
        alice = get_sync_client(url=server.url, api_key=ALICE)
        made = [alice.threads.create(metadata={"project": "q3" if i < 3 else "q4", "n": i}) for i in range(7)]
        tids = [t["thread_id"] for t in made]

        failed = tids[1]
        manager = AgentRunner.from_config(config).manager  # every layer, the index included
        session = manager.get("acme", failed)
        session.last_run_status = "FAILED"
        manager.save(session)

        q3 = alice.threads.search(metadata={"project": "q3"}, limit=100)
        assert sorted(t["thread_id"] for t in q3) == sorted(tids[:3])
        assert all(t["metadata"]["graph_id"] == "agentrt" and t["metadata"]["user_id"] == "alice" for t in q3)
        assert alice.threads.search(metadata={"project": "q3", "graph_id": "other"}) == []
        assert [t["thread_id"] for t in alice.threads.search(metadata={"n": 5})] == [tids[5]]
        assert alice.threads.count(metadata={"project": "q4"}) == 4

        assert [t["thread_id"] for t in alice.threads.search(status="error")] == [failed]
        assert alice.threads.count(status="idle") == 6
        assert alice.threads.count(status="busy") == 0

        by_id = sorted(tids)
        page = alice.threads.search(sort_by="thread_id", sort_order="asc", limit=3, offset=2)
        assert [t["thread_id"] for t in page] == by_id[2:5]
        newest = alice.threads.search(limit=2)
        assert [t["thread_id"] for t in newest] == [tids[6], tids[5]]  # newest activity first
        assert [t["thread_id"] for t in alice.threads.search(ids=[tids[0], tids[4]], sort_by="thread_id")] == sorted(
            [tids[0], tids[4]], reverse=True
        )

        globex = get_sync_client(url=server.url, api_key=GLOBEX)
        assert globex.threads.search(limit=100) == []
        assert globex.threads.count() == 0
