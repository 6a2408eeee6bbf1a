"""A dataset that is a real PostgreSQL table: copied into the session's engine, queried read-only."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from agent.core.errors import ToolError
from agent.tools.datasets.dataset_registry import DatasetCatalog

DATABASE_URL = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def pg_table() -> Iterator[str]:
    """A uniquely named table with typed rows, dropped afterwards."""
    name = f"agentrt_ds_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(DATABASE_URL)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"CREATE TABLE {name} (id integer, price numeric(8,2), day date, active boolean, meta jsonb, note text)"
            )
        )
        conn.execute(
            sa.text(f"INSERT INTO {name} VALUES (:id, :price, :day, :active, CAST(:meta AS jsonb), :note)"),
            [
                {
                    "id": i,
                    "price": decimal.Decimal(f"{i}.25"),
                    "day": dt.date(2026, 1, i),
                    "active": i % 2 == 0,
                    "meta": json.dumps({"k": i}),
                    "note": None if i == 3 else f"n{i}",
                }
                for i in range(1, 8)
            ],
        )
    try:
        yield name
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {name}"))
        engine.dispose()


def test_postgres_table_loads_with_types_and_stats(pg_table: str) -> None:
    """Numeric, date, boolean and JSON columns arrive as REAL, TEXT, INTEGER and JSON text."""
    catalog = DatasetCatalog([{"name": "orders", "url": f"{DATABASE_URL}#{pg_table}"}])
    info = catalog.load()["datasets"][0]
    assert (info["status"], info["row_count"], info["truncated"]) == ("loaded", 7, False)
    types = {c["name"]: c["type"] for c in info["columns"]}
    assert types == {
        "id": "INTEGER",
        "price": "REAL",
        "day": "TEXT",
        "active": "INTEGER",
        "meta": "TEXT",
        "note": "TEXT",
    }
    assert {c["name"]: c["null_count"] for c in info["columns"]}["note"] == 1
    rows = catalog.query("SELECT id, price, day, active, meta FROM orders WHERE id = 2")["rows"]
    assert rows == [[2, 2.25, "2026-01-02", 1, '{"k": 2}']]


def test_postgres_copy_is_bounded_and_source_untouched(pg_table: str) -> None:
    """Only max_sql_rows rows are copied, writes are refused, and the source table keeps its rows."""
    catalog = DatasetCatalog([{"name": "orders", "url": f"{DATABASE_URL}#{pg_table}"}], max_sql_rows=3)
    info = catalog.load()["datasets"][0]
    assert (info["row_count"], info["truncated"]) == (3, True)
    with pytest.raises(ToolError, match="read-only"):
        catalog.query("DELETE FROM orders")
    engine = sa.create_engine(DATABASE_URL)
    with engine.connect() as conn:
        assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {pg_table}")).scalar() == 7
    engine.dispose()


def test_postgres_missing_table_is_a_clear_error() -> None:
    """A table that does not exist is an error entry naming it, not a crash."""
    catalog = DatasetCatalog([{"name": "nope", "url": f"{DATABASE_URL}#agentrt_missing_{uuid.uuid4().hex[:8]}"}])
    info = catalog.load()["datasets"][0]
    assert info["status"] == "error" and "not found" in info["error"]
