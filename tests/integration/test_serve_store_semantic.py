"""Semantic search in the store API (`store.index`): `agentrt serve` embeds items and queries through
langchain-openai's client against a loopback OpenAI-compatible `/v1/embeddings` (a bag-of-words
vector per text), and `search_items` with a `query` ranks a tenant's items by similarity, with a
score; another tenant's items never show. On the PostgreSQL store the index needs pgvector: where
the server does not offer it, the server refuses to start and says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph_sdk import get_sync_client

from tests.support.celery_drill import database_url
from tests.support.openai_server import EMBED_DIMS, OpenAIStub
from tests.support.serve import cli, serving
from tests.support.store_configs import StoreSetup

pytestmark = pytest.mark.integration

ACME, GLOBEX = "acme-key-0123456789ab", "globex-key-0123456789"
KEYS = [{"key": ACME, "tenant_id": "acme"}, {"key": GLOBEX, "tenant_id": "globex"}]
SECRET = "sk-embed-secret-0123456789"
NOTES = {
    "cats": "cats purr and chase mice",
    "dogs": "dogs chase cats in the park",
    "stocks": "stock markets fell sharply today",
}


def _index(stub: OpenAIStub) -> dict[str, Any]:
    index = {"model": "stub-embed", "dims": EMBED_DIMS, "base_url": stub.base_url, "fields": ["text"]}
    return {"index": {**index, "api_key_env": "STUB_EMBED_KEY"}}


def _import_nothing(config: Path, cwd: Path) -> Any:
    """`agentrt items import` of an empty items file: what opening the config's store answers."""
    empty = cwd / "empty-items.jsonl"
    made = cli(config, cwd, "items", "export", "--output", str(empty))
    assert made.returncode == 0, made.stderr
    return cli(config, cwd, "items", "import", str(empty))


def _pgvector() -> bool:
    with psycopg.connect(database_url("test"), autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is not None


def test_on_postgres_without_pgvector_an_index_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if _pgvector():
        pytest.skip("this PostgreSQL offers pgvector: the ranking test runs on it instead")
    monkeypatch.setenv("STUB_EMBED_KEY", SECRET)
    setup = StoreSetup("postgres")
    try:
        with OpenAIStub([]) as stub:
            ran = _import_nothing(setup.config(tmp_path, store=_index(stub)), tmp_path)
        assert ran.returncode == 2, ran.stderr
        assert "needs the pgvector extension" in ran.stderr and SECRET not in ran.stderr + ran.stdout
    finally:
        setup.close()


def test_a_query_ranks_the_tenants_items_by_similarity_with_a_score(
    tmp_path: Path, store: StoreSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    if store.kind == "postgres" and not _pgvector():
        pytest.skip("this PostgreSQL offers no pgvector extension (its refusal is tested above)")
    monkeypatch.setenv("STUB_EMBED_KEY", SECRET)
    with OpenAIStub([]) as stub:
        config = store.config(tmp_path, serve={"api_keys": KEYS}, store=_index(stub))
        with serving(config, tmp_path) as server:
            acme = get_sync_client(url=server.url, api_key=ACME)
            globex = get_sync_client(url=server.url, api_key=GLOBEX)
            for key, text in NOTES.items():
                acme.store.put_item(["notes"], key, {"text": text, "kind": "note"})
            acme.store.put_item(["notes"], "unindexed", {"text": "cats chase mice"}, index=False)
            globex.store.put_item(["notes"], "theirs", {"text": "cats purr and chase mice loudly"})

            found = acme.store.search_items(["notes"], query="cats chase mice", limit=10)["items"]
            assert [i["key"] for i in found] == ["cats", "dogs", "stocks"]
            scores = [i["score"] for i in found]
            assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)
            assert scores[0] > scores[2]
            assert found[0]["value"] == {"text": NOTES["cats"], "kind": "note"} and found[0]["namespace"] == ["notes"]

            # Pages of a ranking, also past twice the page size.
            for offset, key in ((1, "dogs"), (2, "stocks")):
                page = acme.store.search_items(["notes"], query="cats chase mice", limit=1, offset=offset)["items"]
                assert [i["key"] for i in page] == [key], offset
            # A filter narrows the ranking; no query: the plain listing, no score.
            filtered = acme.store.search_items(["notes"], query="stock markets", filter={"kind": "note"})["items"]
            assert filtered[0]["key"] == "stocks"
            listed = acme.store.search_items(["notes"])["items"]
            assert {i["key"] for i in listed} == {*NOTES, "unindexed"} and all(i["score"] is None for i in listed)

            theirs = globex.store.search_items([], query="cats chase mice")["items"]
            assert [i["key"] for i in theirs] == ["theirs"] and theirs[0]["score"] is not None
            assert all(i["key"] != "theirs" for i in acme.store.search_items([], query="cats purr loudly")["items"])
        log = server.log.read_text()
    embedded = [r for r in stub.requests if r["path"].endswith("/embeddings")]
    assert embedded and all(r["body"]["model"] == "stub-embed" for r in embedded)
    assert all(r["auth"] == f"Bearer {SECRET}" for r in embedded)  # the key went to the endpoint only
    assert SECRET not in log


def test_without_an_index_a_query_answers_the_plain_listing(tmp_path: Path) -> None:
    config = StoreSetup("files").config(tmp_path, serve={"api_keys": KEYS})
    with serving(config, tmp_path) as server:
        acme = get_sync_client(url=server.url, api_key=ACME)
        acme.store.put_item(["notes"], "old", {"text": "cats"})
        acme.store.put_item(["notes"], "new", {"text": "stocks"})
        found = acme.store.search_items(["notes"], query="cats")["items"]
        assert sorted(i["key"] for i in found) == ["new", "old"] and all(i["score"] is None for i in found)


def test_an_openai_index_without_its_key_is_refused_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_EMBED_KEY", raising=False)
    index = {"model": "text-embedding-3-small", "dims": 1536, "api_key_env": "NO_SUCH_EMBED_KEY"}
    config = StoreSetup("files").config(tmp_path, store={"index": index})
    ran = _import_nothing(config, tmp_path)
    assert ran.returncode == 2 and "$NO_SUCH_EMBED_KEY is not set" in ran.stderr, ran.stderr
    assert not (tmp_path / "agentrt" / "langgraph-store.sqlite").exists()
