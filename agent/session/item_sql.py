"""Plain reads of the tables of LangGraph's store (`agent.session.item_store`), beside the store
itself: for the doctor and `agentrt items export`, which need what LangGraph's API does not answer
(migration versions, TTLs, counts by tenant). Read-only, over a connection of their own; nothing is
set up, so a store never opened stays unmade.

Statements are written with `?` placeholders and the SQL both SQLite and PostgreSQL run.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent.core.config import AgentSettings
from checkpointing.layout import langgraph_store_file


class StoreNotMade(Exception):
    """The store's database, or the table a statement reads, does not exist yet (made on first use)."""


def store_where(settings: AgentSettings) -> str:
    """Where the store of `settings` lives, for messages (a file, or a database without its password)."""
    url = settings.store_url()
    if url is None:
        return str(langgraph_store_file(settings.base_dir))
    from agent.session.record_store import db_where

    return f"{db_where(url)} (tables store, store_migrations)"


def read_store(settings: AgentSettings, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows of `sql` on the store's database.

    Raises `StoreNotMade` when the database or the table is not there, else the driver's error
    (`sqlite3.Error`, `psycopg.Error`) when the database cannot be read.
    """
    url = settings.store_url()
    if url is not None:
        return _postgres(url, sql.replace("?", "%s"), params)
    path = langgraph_store_file(settings.base_dir)
    if not path.is_file():
        raise StoreNotMade(str(path))
    conn = sqlite3.connect(path.as_uri() + "?mode=ro", uri=True)
    try:
        return list(conn.execute(sql, params).fetchall())
    except sqlite3.OperationalError as err:
        if "no such table" in str(err):
            raise StoreNotMade(str(err)) from None
        raise
    finally:
        conn.close()


def _postgres(url: str, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    import psycopg

    from agent.session.lease_postgres import libpq_url

    with psycopg.connect(libpq_url(url), connect_timeout=5, autocommit=True) as conn:
        try:
            return list(conn.execute(sql, params).fetchall())
        except psycopg.errors.UndefinedTable as err:
            raise StoreNotMade(str(err).splitlines()[0]) from None


def tenant_condition(tenant_id: str) -> tuple[str, tuple[Any, ...]]:
    """A `WHERE` condition on `prefix` for the items of `tenant_id` (ids hold no `.`, `%` or quote)."""
    from agent.session.tenant_store import tenant_scope

    scope = ".".join(tenant_scope(tenant_id)) + "."
    return "substr(prefix, 1, ?) = ?", (len(scope), scope)


def tenant_of_prefix(prefix: str) -> str | None:
    """The tenant of a stored namespace (`tenants.<tenant>....`), None for one outside every tenant."""
    from agent.session.tenant_store import SCOPE_ROOT

    labels = prefix.split(".")
    return labels[1] if len(labels) > 2 and labels[0] == SCOPE_ROOT else None
