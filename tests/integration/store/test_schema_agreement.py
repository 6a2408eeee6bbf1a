"""The migrations and the tables the code queries agree: migrate an empty database, compare it with
`session_tables()` through Alembic's autogenerate (columns, types, nullability, keys, indexes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from agent.session.stores.sql import SqlSessionStore
from agent.session.stores.tables import session_tables
from tests.integration.test_stores_support import sql_store, unique


def _differences(store: SqlSessionStore) -> list[Any]:
    tables = session_tables(store.table_prefix, store.schema)
    ours = {t.name for t in tables.metadata.sorted_tables}

    def include_name(name: str | None, kind: str, parents: Any) -> bool:
        # The database is shared (other tests' prefixes, the record store): compare only ours.
        return kind != "table" or name in ours

    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_name": include_name, "compare_type": True})
        return list(compare_metadata(context, tables.metadata))


def _assert_agree(store: SqlSessionStore) -> None:
    assert store.revision() is not None, "the migrations did not run"
    assert _differences(store) == []


def test_sqlite_migrations_make_exactly_the_tables_the_code_queries(tmp_path: Path) -> None:
    store = SqlSessionStore(f"sqlite:///{tmp_path / 'agentrt.sqlite'}", table_prefix=unique("p") + "_")
    store.init()  # what the embedded default's first write does
    _assert_agree(store)


def test_postgres_migrations_make_exactly_the_tables_the_code_queries() -> None:
    store = sql_store()
    try:
        _assert_agree(store)
    finally:
        store.drop()


def test_a_column_the_code_has_and_the_migrations_lack_is_found(tmp_path: Path) -> None:
    """The comparison can fail: a table migrated without one column differs from the metadata."""
    store = SqlSessionStore(f"sqlite:///{tmp_path / 'agentrt.sqlite'}", table_prefix="x_")
    store.init()
    with store.engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE x_sessions DROP COLUMN meta"))
    added = [d[3].name for d in _differences(store) if isinstance(d, tuple) and d[0] == "add_column"]
    assert added == ["meta"]
