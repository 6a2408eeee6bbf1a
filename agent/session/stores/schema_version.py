"""The SQL schema's version: Alembic migrations in agent/session/migrations, applied and checked here.

- `upgrade()` applies the migrations up to `HEAD` (what `agentrt db upgrade` and the embedded
  SQLite's first use call); safe to call twice, and serialised by a file lock for SQLite files.
- `check()` compares the database's revision with `HEAD` without changing anything, and raises
  `SchemaOutdated` naming the command to run when the schema is missing, older or newer.
- `create_database()` makes a missing PostgreSQL database (`agentrt db init`).

The revision lives in `<table_prefix>alembic_version` of the store's schema, so tests and several
deployments can share one database. Alembic is imported only when a migration must run: a process
that meets an up-to-date database reads one row and goes on.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError, ProgrammingError, SQLAlchemyError

from agent.core.errors import BackendUnavailable, SchemaOutdated
from agent.session.stores.sql_lazy import HEAD as HEAD  # one constant: the light SQLite path checks it too

REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008")
"""Every revision this agentrt knows, oldest first."""
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def version_table(table_prefix: str) -> str:
    """Name of the table that holds the schema revision."""
    return f"{table_prefix}alembic_version"


def current(engine: sa.Engine, table_prefix: str = "", schema: str | None = None) -> str | None:
    """The database's schema revision (None: no agentrt schema). Connection errors propagate."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(version_table(table_prefix), schema=schema):
            return None
        table = sa.Table(version_table(table_prefix), sa.MetaData(schema=schema), sa.Column("version_num", sa.String))
        return conn.execute(sa.select(table.c.version_num)).scalar_one_or_none()


def _alembic_config(conn: sa.Connection, table_prefix: str, schema: str | None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes.update(connection=conn, table_prefix=table_prefix, schema=schema)
    return cfg


def script_head() -> str:
    """The head revision of the shipped migration scripts."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations in {MIGRATIONS_DIR}")
    return head


@contextmanager
def _file_lock(engine: sa.Engine) -> Iterator[None]:
    db = engine.url.database if engine.dialect.name == "sqlite" else None
    if not db or db == ":memory:":
        yield
        return
    # Two processes meeting a fresh SQLite file at once would both try to create the tables.
    Path(db).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{db}.migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def upgrade(engine: sa.Engine, table_prefix: str = "", schema: str | None = None, target: str = "head") -> str | None:
    """Apply the migrations up to `target`; returns the revision before (None: a fresh database)."""
    if target == "head" and current(engine, table_prefix, schema) == HEAD:
        return HEAD  # the common case, without the file lock or importing Alembic
    command = _alembic_command()

    with _file_lock(engine):
        before = current(engine, table_prefix, schema)
        if before == HEAD and target == "head":
            return before
        with engine.begin() as conn:
            if schema and engine.dialect.name == "postgresql":
                conn.execute(sa.schema.CreateSchema(schema, if_not_exists=True))
            command.upgrade(_alembic_config(conn, table_prefix, schema), target)
        return before


def _alembic_command() -> Any:
    """`alembic.command`, imported without Pygments: Alembic's Mako loads Pygments' lexers (~5 MB a
    process keeps) only to colour template errors, and falls back to plain text without them."""
    if "pygments" in sys.modules or "mako" in sys.modules:
        from alembic import command
    else:
        sys.modules["pygments"] = None  # type: ignore[assignment]  # an import of it then raises ImportError
        try:
            from alembic import command
        finally:
            if sys.modules.get("pygments", 0) is None:
                del sys.modules["pygments"]
    return command


def downgrade(engine: sa.Engine, target: str, table_prefix: str = "", schema: str | None = None) -> None:
    """Undo migrations down to `target` ("base": no tables left)."""
    from alembic import command

    with _file_lock(engine), engine.begin() as conn:
        command.downgrade(_alembic_config(conn, table_prefix, schema), target)


def check(engine: sa.Engine, table_prefix: str = "", schema: str | None = None, config_hint: str = "") -> None:
    """Raise `SchemaOutdated` unless the database is at `HEAD`; `BackendUnavailable` if it does not answer.

    `config_hint` is appended to the commands in the message (e.g. " --config prod.yaml").
    """
    where = _display(engine)
    try:
        found = current(engine, table_prefix, schema)
    except OperationalError as err:
        if _missing_database(err):
            raise SchemaOutdated(
                f"the database {where} does not exist: run `agentrt db init{config_hint}` to create it and its tables"
            ) from None
        raise BackendUnavailable(f"SQL schema check failed: {_first_line(err)}") from err
    except (ProgrammingError, SQLAlchemyError) as err:
        raise BackendUnavailable(f"SQL schema check failed: {_first_line(err)}") from err
    if found == HEAD:
        return
    if found is None:
        raise SchemaOutdated(
            f"the database {where} has no agentrt schema (no {version_table(table_prefix)} table; this agentrt needs "
            f"revision {HEAD}): "
            f"run `agentrt db upgrade{config_hint}`"
        )
    if found in REVISIONS:
        raise SchemaOutdated(
            f"the database {where} has an older agentrt schema (revision {found}, this agentrt needs {HEAD}): "
            f"run `agentrt db upgrade{config_hint}`"
        )
    raise SchemaOutdated(
        f"the database {where} has schema revision {found!r}, which this agentrt does not know (newest: {HEAD}); "
        "it was upgraded by a newer agentrt: run that version, or restore the database"
    )


def create_database(url: str, connect_timeout: int = 5) -> bool:
    """Create the database `url` names if it does not exist (PostgreSQL; SQLite needs no step).

    Returns True when it was created. Connects to the server's `postgres` database to do it.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        return False
    name = parsed.database
    if not name:
        raise SchemaOutdated(f"the database URL {_display_url(url)} names no database; add /NAME to it")
    admin = sa.create_engine(
        parsed.set(database="postgres"), isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": connect_timeout}
    )
    try:
        with admin.connect() as conn:
            exists = conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first()
            if exists:
                return False
            quoted = admin.dialect.identifier_preparer.quote(name)
            conn.execute(sa.text(f"CREATE DATABASE {quoted}"))
            return True
    except SQLAlchemyError as err:
        raise BackendUnavailable(
            f"cannot create the database {name!r} on {_display_url(url)} ({_first_line(err)}); "
            "create it yourself (CREATE DATABASE) or use a role that may, then run `agentrt db upgrade`"
        ) from err
    finally:
        admin.dispose()


def _missing_database(err: Exception) -> bool:
    text = str(err).lower()
    return "does not exist" in text and "database" in text


def _first_line(err: Exception) -> str:
    text = str(getattr(err, "orig", None) or err)
    return text.splitlines()[0] if text else type(err).__name__


def _display(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def _display_url(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)
