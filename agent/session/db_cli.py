"""`agentrt db upgrade` and `agentrt db init`: deploy the SQL schema of a configured database.

- `upgrade`: apply the Alembic migrations (agent/session/migrations) up to the newest revision
  (the session tables, and the lease table of `persistence.lease: postgres`).
- `init`: create the database itself when it does not exist and the server allows it, then upgrade.

Both read only the settings (no runner, no session manager: those refuse an old schema).
"""

from __future__ import annotations

from typing import Any

from agent.core.config import AgentSettings
from agent.core.errors import ConfigError
from agent.session.stores import schema_version as schema
from agent.session.stores.sql import SqlSessionStore, sqlite_url


def _url(settings: AgentSettings) -> str:
    if settings.persistence.mode == "JSONL_ONLY" and settings.persistence.lease != "postgres":
        raise ConfigError("persistence mode JSONL_ONLY uses no SQL database: there is nothing to upgrade")
    return settings.database_url() or sqlite_url(settings.base_dir)


def db_upgrade(settings: AgentSettings) -> dict[str, Any]:
    """Apply the migrations to the configured database; {database, before, revision}."""
    url = _url(settings)
    store = SqlSessionStore(url)
    try:
        before = store.init()
        return {"database": _display(url), "before": before, "revision": store.revision()}
    finally:
        store.dispose()


def db_init(settings: AgentSettings) -> dict[str, Any]:
    """Create the configured database if missing, then upgrade it; {database, created, before, revision}."""
    url = _url(settings)
    created = schema.create_database(url)
    return {**db_upgrade(settings), "created": created}


def render(data: dict[str, Any]) -> str:
    """One line for humans."""
    made = "created the database; " if data.get("created") else ""
    if data["before"] == data["revision"]:
        return f"{made}{data['database']} is at schema revision {data['revision']} (up to date)"
    return f"{made}{data['database']}: schema revision {data['before'] or 'none'} -> {data['revision']}"


def _display(url: str) -> str:
    from agent.core.text import display_url

    return display_url(url)
