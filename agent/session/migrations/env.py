"""Alembic environment of agentrt's SQL schema (sessions, chat_messages, session_leases).

Run through `agent.session.stores.schema_version` (what `agentrt db upgrade` calls), which hands over the
connection and this deployment's `table_prefix` / `schema` in `config.attributes`; the version
table is `<table_prefix>alembic_version` in that schema, so several prefixes can share a database.
Online only: there is no `--sql` (offline) mode.
"""

from __future__ import annotations

from alembic import context

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run agentrt's migrations with `agentrt db upgrade`, not the alembic command")

context.configure(
    connection=connection,
    version_table=f"{config.attributes.get('table_prefix', '')}alembic_version",
    version_table_schema=config.attributes.get("schema"),
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
