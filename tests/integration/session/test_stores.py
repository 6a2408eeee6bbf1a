"""The L2 Redis and L3 SQL stores against the real Redis and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from agent.core.errors import BackendUnavailable
from agent.session.session import ChatSession, PageMessage, SessionStatus, utcnow
from agent.session.stores.redis import RedisSessionStore
from agent.session.stores.sql import SqlSessionStore
from tests.integration.test_stores_support import (
    DATABASE_URL,
    drop_redis_prefix,
    free_port,
    redis_store,
    sql_store,
    unique,
)


def mk(tenant: str = "t1", sid: str = "s1", user: str = "u1", **kw: object) -> ChatSession:
    """A small session."""
    return ChatSession(session_id=sid, agent_id="a", tenant_id=tenant, user_id=user, **kw)  # type: ignore[arg-type]


@pytest.fixture
def l2() -> Iterator[RedisSessionStore]:
    """A Redis store on a private key prefix, cleaned up afterwards."""
    store = redis_store()
    yield store
    drop_redis_prefix(store.client, store.key_prefix)


@pytest.fixture
def l3() -> Iterator[SqlSessionStore]:
    """A PostgreSQL store on private tables, dropped afterwards."""
    store = sql_store()
    yield store
    store.drop()
    store.dispose()


def test_redis_round_trip_with_tenant_key_and_ttl(l2: RedisSessionStore) -> None:
    """A session comes back equal, under a key carrying the tenant, with a TTL from its expiry."""
    s = mk(expire_minutes=10, context={"q": "'; DROP TABLE x; --", "ü": "✓"})
    l2.put(s)
    assert l2.get("t1", "s1") == s
    key = f"{l2.key_prefix}:t1:session:s1"
    assert l2.client.exists(key) == 1
    ttl = int(l2.client.ttl(key))
    assert 60 <= ttl <= 600
    assert l2.get("t2", "s1") is None


def test_redis_ended_sessions_keep_a_short_ttl(l2: RedisSessionStore) -> None:
    """An ENDED session's cached copy lives ended_ttl_seconds, not its expiry."""
    s = mk(status=SessionStatus.ENDED, last_active_time=utcnow() - timedelta(days=2))
    l2.put(s)
    assert 0 < int(l2.client.ttl(l2.key("t1", "s1"))) <= l2.ended_ttl_seconds


def test_redis_list_is_per_tenant_and_user(l2: RedisSessionStore) -> None:
    """list() returns only the tenant's sessions, filtered by user when given."""
    l2.put(mk("t1", "a", "u1"))
    l2.put(mk("t1", "b", "u2"))
    l2.put(mk("t2", "a", "u1"))
    assert sorted(s.session_id for s in l2.list("t1")) == ["a", "b"]
    assert [s.session_id for s in l2.list("t1", "u2")] == ["b"]
    assert [s.tenant_id for s in l2.list("t2")] == ["t2"]


def test_redis_prefixes_isolate_deployments(l2: RedisSessionStore) -> None:
    """Two prefixes on one Redis never see each other's sessions."""
    other = redis_store()
    try:
        l2.put(mk())
        assert other.get("t1", "s1") is None and other.list("t1") == []
    finally:
        drop_redis_prefix(other.client, other.key_prefix)


def test_redis_bad_value_and_outage_are_storage_errors(l2: RedisSessionStore) -> None:
    """A corrupt value and an unreachable Redis both raise BackendUnavailable with the cause kept."""
    l2.client.set(l2.key("t1", "s1"), b"\x80not json")
    with pytest.raises(BackendUnavailable, match="not a valid session"):
        l2.get("t1", "s1")
    down = RedisSessionStore(f"redis://127.0.0.1:{free_port()}", socket_timeout=1)
    with pytest.raises(BackendUnavailable, match="Redis GET failed") as info:
        down.get("t1", "s1")
    assert info.value.__cause__ is not None
    assert not down.ping()


def test_sql_round_trip_with_tenant_in_the_key(l3: SqlSessionStore) -> None:
    """The same session id under two tenants is two rows; each reads back its own."""
    a, b = mk("t1", "same", "u1"), mk("t2", "same", "u2", context={"x": "Ω"})
    l3.put(a)
    l3.put(b)
    assert l3.get("t1", "same") == a and l3.get("t2", "same") == b
    a.status = SessionStatus.PAUSED
    a.version = 7
    l3.put(a)
    assert l3.get("t1", "same") == a
    assert [s.user_id for s in l3.list("t1")] == ["u1"]
    assert l3.list("t2", "u1") == []
    l3.delete("t1", "same")
    assert l3.get("t1", "same") is None and l3.get("t2", "same") == b


def test_sql_init_is_idempotent_and_pk_includes_tenant(l3: SqlSessionStore) -> None:
    """init() twice is fine; both tables carry tenant_id in the primary key."""
    l3.init()
    assert "tenant_id" in [c.name for c in l3.sessions.primary_key.columns]
    assert "tenant_id" in [c.name for c in l3.chat_messages.primary_key.columns]


def test_sql_chat_messages_are_keyed_by_entry_and_never_duplicated(l3: SqlSessionStore) -> None:
    """Re-adding the same page messages adds no rows; rows are per tenant."""
    msgs = [PageMessage(role="user", content=f"m{i} ' \" ;", entry_id=f"e{i}") for i in range(3)]
    assert l3.add_messages("t1", "s1", "main", msgs) == 3
    assert l3.add_messages("t1", "s1", "main", msgs) == 0
    assert [m.content for _, m in l3.messages("t1", "s1")] == [m.content for m in msgs]
    assert l3.messages("t2", "s1") == []


def test_sql_missing_tables_say_run_db_init() -> None:
    """Without init the store is usable only after `agentrt db init`, and says so."""
    store = SqlSessionStore(DATABASE_URL, table_prefix=unique("agentrt_none_") + "_")
    try:
        with pytest.raises(BackendUnavailable, match="agentrt db init"):
            store.get("t1", "s1")
    finally:
        store.dispose()


def test_sql_unreachable_is_a_storage_error() -> None:
    """A PostgreSQL URL on a closed port raises BackendUnavailable naming the database."""
    store = SqlSessionStore(f"postgresql://postgres@127.0.0.1:{free_port()}/test", connect_timeout=1)
    with pytest.raises(BackendUnavailable, match="SQL read session failed") as info:
        store.get("t1", "s1")
    assert info.value.__cause__ is not None and not store.ping()
