"""The doctor's view of LangGraph's store (the store API's items, `agent.session.item_store`): the
`store_items` check of `agentrt doctor` without a session id, and its repair.

The check reads the store's tables beside it (`agent.session.item_sql`), changing nothing: its
database answers, its migrations (and with `store.index` the index's) are all applied, and how many
live items each tenant has. A store never opened is OK (it is made on first use). FAIL: a database
that does not answer or cannot be read (restore it from a backup), migrations not applied (an older
LangGraph made it: `agentrt doctor --repair` applies them, as the next `agentrt serve` would), or a
store made by a newer LangGraph than this one.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from agent.core.config import AgentSettings
from agent.doctor.facts import Check
from agent.doctor.finding import finding
from agent.session.item_sql import StoreNotMade, read_store, store_where, tenant_of_prefix

NAME = "store_items"
REPAIR = "run `agentrt doctor --repair` to apply them (the next `agentrt serve` applies them too)"
OUTSIDE = "-"
"""The tenant column of items outside every tenant's namespace (not written through agentrt)."""


@dataclass
class StoreState:
    """What the store's tables say (see `read_state`)."""

    made: bool = False
    version: int = -1
    """The last migration applied (-1: none)."""
    latest: int = -1
    """The last migration this LangGraph knows."""
    vector_version: int | None = None
    """The index's last migration applied (None: its table is not there)."""
    vector_latest: int | None = None
    """The index's last migration this LangGraph knows (None: no `store.index`)."""
    items: dict[str, int] = field(default_factory=dict)
    """Live items by tenant (expired ones left out)."""


def _migrations(settings: AgentSettings) -> tuple[int, int]:
    """How many migrations (store, index) this LangGraph's store of the settings' kind has."""
    if settings.store_url() is not None:
        from langgraph.store.postgres import base as postgres

        return len(postgres.MIGRATIONS), len(postgres.VECTOR_MIGRATIONS)
    from langgraph.store.sqlite import base as sqlite

    return len(sqlite.MIGRATIONS), len(sqlite.VECTOR_MIGRATIONS)


def _driver_errors(settings: AgentSettings) -> tuple[type[BaseException], ...]:
    """The errors of the store's database driver (psycopg imported only for a PostgreSQL store)."""
    if settings.store_url() is None:
        return (sqlite3.Error,)
    import psycopg

    return (psycopg.Error,)


def _version(settings: AgentSettings, table: str) -> int | None:
    try:
        rows = read_store(settings, f"SELECT max(v) FROM {table}")
    except StoreNotMade:
        return None
    value = rows[0][0] if rows else None
    return -1 if value is None else int(value)


def read_state(settings: AgentSettings) -> StoreState:
    """The state of the store of `settings`; raises the driver's error when it cannot be read."""
    version = _version(settings, "store_migrations")
    if version is None:  # never made: nothing to compare, and no LangGraph to import for it
        return StoreState()
    migrations, vectors = _migrations(settings)
    state = StoreState(made=True, version=version, latest=migrations - 1)
    if settings.store.index is not None:
        state.vector_latest = vectors - 1
    if state.vector_latest is not None:
        state.vector_version = _version(settings, "vector_migrations")
    if version < state.latest:  # an older schema: its rows are not counted (the check FAILs anyway)
        return state
    now = "CURRENT_TIMESTAMP" if settings.store_url() is None else "now()"
    try:
        rows = read_store(
            settings,
            f"SELECT prefix, count(*) FROM store WHERE expires_at IS NULL OR expires_at >= {now} GROUP BY prefix",
        )
    except StoreNotMade:
        rows = []
    for prefix, n in rows:
        tenant = tenant_of_prefix(str(prefix)) or OUTSIDE
        state.items[tenant] = state.items.get(tenant, 0) + int(n)
    return state


def items_check(settings: AgentSettings, tenant_id: str) -> Check:
    """LangGraph's store of the store API's items: its database answers, its migrations (and the
    semantic index's) are applied; the live items of each tenant (read-only)."""
    where = store_where(settings)
    try:
        state = read_state(settings)
    except _driver_errors(settings) as err:
        said = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        fix = (
            "check that PostgreSQL runs and persistence.store_url (or database_url)"
            if settings.store_url()
            else f"restore {where} from a backup (or move it aside: the next use makes an empty store)"
        )
        return finding(NAME, "FAIL", f"LangGraph's store {where} cannot be read ({said})", fix, store=where)
    ev: dict[str, Any] = {"store": where, "migration": state.version, "latest_migration": state.latest}
    if not state.made:
        return finding(NAME, "OK", "no item stored yet (LangGraph's store is made on first use)", "nothing to do", **ev)
    ev["items_by_tenant"] = dict(sorted(state.items.items()))
    if state.vector_latest is not None:
        ev["index_migration"], ev["latest_index_migration"] = state.vector_version, state.vector_latest
    index_version = -1 if state.vector_version is None else state.vector_version
    if state.version > state.latest or index_version > (state.vector_latest or 0):
        return finding(
            NAME,
            "FAIL",
            f"LangGraph's store {where} was made by a newer LangGraph (migration {state.version} of {state.latest})",
            "upgrade langgraph-checkpoint-sqlite / -postgres to the version that made it",
            **ev,
        )
    if state.version < state.latest:
        return finding(
            NAME,
            "FAIL",
            f"LangGraph's store {where} misses migrations {state.version + 1}..{state.latest}",
            REPAIR,
            **ev,
        )
    if state.vector_latest is not None and index_version < state.vector_latest:
        return finding(
            NAME,
            "FAIL",
            f"store.index is set but LangGraph's store {where} has not made its index tables",
            REPAIR,
            **ev,
        )
    mine, total = state.items.get(tenant_id, 0), sum(state.items.values())
    summary = (
        f"LangGraph's store answers, migrations applied; {mine} item(s) of tenant {tenant_id} "
        f"({total} in all, {len(state.items)} tenant(s))"
    )
    return finding(NAME, "OK", summary, "nothing to do", **ev)


def repair_items(settings: AgentSettings) -> str | None:
    """Apply the store's missing migrations by opening it as the server does; what was done, in one
    line (None when nothing was owed)."""
    check = items_check(settings, settings.session.tenant_id)
    if check.next_step != REPAIR:
        return None
    from agent.session.item_store import close_item_stores, item_store

    item_store(settings)
    close_item_stores()
    return f"applied the missing migrations of LangGraph's store {store_where(settings)}"
