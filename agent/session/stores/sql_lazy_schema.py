"""The embedded SQLite session database made at the newest schema revision without Alembic.

A first turn in an empty folder makes `agentrt.db`. Through the real store that means SQLAlchemy,
Alembic, Mako and the eight migration scripts loaded into the process (about 25 MB it keeps for
its whole life) to run statements that, on a database with no table yet, always end the same:
the tables and indexes below, and the version row `HEAD`. `create_at_head` runs exactly those
statements with the standard library's `sqlite3`, in one transaction, under the file lock
`schema_version.upgrade` takes (`<file>.migrate.lock`), so a process migrating the same file
with Alembic and this one take turns. It only makes a database that has no agentrt table yet:
a file another process made meanwhile, or one with anything else in it, is left to the real
store (and so to Alembic). A test makes one database each way and compares their `sqlite_master`.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from pathlib import Path

HEAD_DDL = (
    "CREATE TABLE alembic_version (\n\tversion_num VARCHAR(32) NOT NULL, \n\t"
    "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)\n)",
    "CREATE TABLE sessions (\n\ttenant_id VARCHAR(64) NOT NULL, \n\tsession_id VARCHAR(64) NOT NULL, \n\t"
    "agent_id VARCHAR(255) NOT NULL, \n\tuser_id VARCHAR(255) NOT NULL, \n\tstatus VARCHAR(16) NOT NULL, \n\t"
    "version INTEGER NOT NULL, \n\tcreated_at DATETIME NOT NULL, \n\tlast_active_time DATETIME NOT NULL, \n\t"
    "data TEXT NOT NULL, expires_at DATETIME, meta TEXT, \n\tPRIMARY KEY (tenant_id, session_id)\n)",
    "CREATE INDEX ix_sessions_user ON sessions (tenant_id, user_id)",
    "CREATE TABLE chat_messages (\n\ttenant_id VARCHAR(64) NOT NULL, \n\tsession_id VARCHAR(64) NOT NULL, \n\t"
    "message_id VARCHAR(64) NOT NULL, \n\tbranch_id VARCHAR(64) NOT NULL, \n\trole VARCHAR(32) NOT NULL, \n\t"
    "content TEXT NOT NULL, \n\tts DATETIME NOT NULL, \n\tPRIMARY KEY (tenant_id, session_id, message_id)\n)",
    "CREATE INDEX ix_chat_messages_session ON chat_messages (tenant_id, session_id, ts)",
    "CREATE INDEX ix_sessions_activity ON sessions (tenant_id, last_active_time, session_id)",
    "CREATE TABLE session_leases (\n\ttenant_id VARCHAR(64) NOT NULL, \n\tsession_id VARCHAR(64) NOT NULL, \n\t"
    "scope VARCHAR(16) DEFAULT 'run' NOT NULL, \n\tholder TEXT, \n\ttoken BIGINT NOT NULL, \n\t"
    "expires_at DATETIME NOT NULL, \n\tPRIMARY KEY (tenant_id, session_id, scope)\n)",
)
"""The statements the migrations run on an empty SQLite database, in their order, as SQLite keeps
them (`sqlite_master.sql`): the schema at revision `HEAD`."""


def create_at_head(file: Path, head: str) -> bool:
    """Make the SQLite database `file` with the schema at revision `head` when it has no table yet;
    False (nothing changed) when it has any: the real store then checks or migrates it."""
    file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{file}.migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        conn = sqlite3.connect(file, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    conn.execute("ROLLBACK")
                    return False
                for statement in HEAD_DDL:
                    conn.execute(statement)
                conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (head,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()
        return True
    finally:
        os.close(fd)
