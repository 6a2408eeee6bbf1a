"""The doctor on the PostgreSQL record store: a session's rows copied into a folder first.

A record row holds exactly the bytes its line has in the `files` store, so a session's rows
written out stream by stream are the session folder the files store would hold, byte for byte
(damaged rows included: nothing is verified on the way). The doctor's checks then read that copy
as they read a session folder, and the report names the store instead of the copy's path. The
copy is a temporary folder, removed when the doctor is done; nothing is written to the store.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from checkpointing.layout import session_dir
from checkpointing.store.files import FileSessionStreams
from checkpointing.store.postgres import PostgresStore
from checkpointing.verify import FileReport


@contextmanager
def copied_session(store: PostgresStore, tenant_id: str, session_id: str) -> Iterator[Path]:
    """A temporary base_dir holding session (tenant, session) as the files store would: its streams
    and documents (persisted stream indexes left out: the saver rebuilds them)."""
    streams, docs = store.session(tenant_id, session_id, "batch").dump()
    with _written(tenant_id, session_id, streams, docs) as root:
        yield root


@contextmanager
def verified_copy(store: PostgresStore, tenant_id: str, session_id: str) -> Iterator[tuple[Path, list[FileReport]]]:
    """`copied_session` and the store's verdicts on the same rows (`SessionStreams.verify`), from
    one read of them: (the copy's base_dir, the verdicts)."""
    from checkpointing.store.verify_ops import verified_dump

    reports, streams, docs = verified_dump(store.session(tenant_id, session_id, "batch"))
    with _written(tenant_id, session_id, streams, docs) as root:
        yield root, reports


@contextmanager
def _written(tenant_id: str, session_id: str, streams: dict[str, bytes], docs: dict[str, bytes]) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="agentrt-doctor-"))
    try:
        folder = session_dir(root, tenant_id, session_id)
        files = FileSessionStreams(folder, tenant_id, session_id, "batch", None)
        for run, data in streams.items():
            _write(files.path(run), data)
        for name, body in docs.items():
            if not name.endswith(".idx"):
                _write(folder / name, body)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def relabel(text: str, root: Path, store: PostgresStore) -> str:
    """`text` with the copy's folder named as the store it was read from."""
    return text.replace(str(root), store.name)
