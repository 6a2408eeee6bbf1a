"""Where a session's records live (the saver's run streams, the event log, the tool journal):
one interface (`base`), two backends.

- `files` (`FileStore`, the default): the folder tree under `base_dir`, as the saver, the event
  log and the tool journal always wrote it.
- `postgres` (`PostgresStore`): the same framed JSONL lines as rows of PostgreSQL tables.

`open_store(url)` picks one from a URL: `postgresql://...` (or `postgres://`) is PostgreSQL,
anything else a folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkpointing.store.base import SessionStreams, Store
from checkpointing.store.file_store import FileStore

if TYPE_CHECKING:
    from checkpointing.commit_group import CommitGroup
    from checkpointing.store.postgres import PostgresStore

__all__ = ["FileStore", "PostgresStore", "SessionStreams", "Store", "open_store"]

_PG_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


def open_store(
    url: str | Path, *, group: CommitGroup | None = None, schema: str = "public", setup: bool = True
) -> Store:
    """The store `url` names: PostgreSQL for a `postgresql://` URL (its tables in `schema`,
    created when `setup`), else the folder `url`."""
    text = str(url)
    if text.startswith(_PG_SCHEMES):
        from checkpointing.store.postgres import PostgresStore

        store = PostgresStore(text, schema=schema)
        if setup:
            store.setup()
        return store
    return FileStore(text, group)


def __getattr__(name: str) -> Any:
    # Lazy: psycopg is loaded only by a caller of the PostgreSQL backend.
    if name == "PostgresStore":
        from checkpointing.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)
