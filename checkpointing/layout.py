"""THE path layout of `base_dir`: where each file of this package for a tenant, session and run lives.

    base_dir/
      tenants/<tenant>/
        sessions/<session>/
          session.json                 the session document (one framed record)
          events.jsonl                 the session event log
          journal.jsonl                the tool execution journal
          pins.json                    checkpoints retention must keep (one framed record)
          fence.json, fence.lock       fencing tokens of the session lease
          lease.lock, lease.state.lock the file lease's locks
          lease.json, lease.token      the file lease's holder record and token counter
          outbox.jsonl                 writes the SQL / Redis layers still owe
          inbox.jsonl, inbox.lock      turns submitted to the session (and their lock)
          workspace/, rooms/<branch>/  sandbox rooms (the main branch's, a fork's; `.making-<room>`
                                       while a new one is filled)
          runs/<run>/checkpoints.jsonl checkpoints, channel values and pending writes of a run
        turns/<turn>.json              which session a turn id was submitted to
        outbox-due/<session>           an empty marker: that session's outbox owes a layer writes
      blobs/sha256/<2 hex>/<62 hex>    content-addressed payloads
      <store>.db                       the embedded SQLite session store (named by its owner)
      sessions.index.sqlite            the index of sessions (a rebuildable cache, `session_index`)
      langgraph-store.sqlite           LangGraph's store (`SqliteStore`: the API's /store items, `runtime.store`;
                                       `.migrate.lock` beside it while its tables are made)
      drain-leases/                    a base_dir of its own for the workers' drain file leases

    <log>.idx                          the persisted index beside a record log
    <file>.broken                      bytes a repair moved aside (a torn tail, a damaged outbox)

Every module finds its files here: nothing else joins these names. Every id that becomes a path
component is validated (`validate_id`), so no caller builds a path from an unchecked id. The
functions for a file inside a session folder take that folder (`session_dir`, or `thread_dir` for
a LangGraph thread id of any form), so a caller holding a folder and one holding ids agree.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import validate_id

TENANTS = "tenants"
SESSIONS = "sessions"
RUNS = "runs"
TURNS = "turns"
ROOMS = "rooms"
WORKSPACE = "workspace"
CHECKPOINTS_FILE = "checkpoints.jsonl"
EVENTS_FILE = "events.jsonl"
JOURNAL_FILE = "journal.jsonl"
SESSION_FILE = "session.json"
PINS_FILE = "pins.json"
FENCE_FILE = "fence.json"
FENCE_LOCK_FILE = "fence.lock"
LEASE_LOCK_FILE = "lease.lock"
LEASE_STATE_LOCK_FILE = "lease.state.lock"
LEASE_STATE_FILE = "lease.json"
LEASE_TOKEN_FILE = "lease.token"
OUTBOX_FILE = "outbox.jsonl"
OUTBOX_DUE = "outbox-due"
INBOX_FILE = "inbox.jsonl"
INBOX_LOCK_FILE = "inbox.lock"
TURN_SUFFIX = ".json"
BLOBS = ("blobs", "sha256")
SQLITE_CHECKPOINTS_FILE = "checkpoints.sqlite"
"""LangGraph's SqliteSaver file when `persistence.saver: sqlite` (not this package's saver)."""
DRAIN_LEASES = "drain-leases"
SESSION_INDEX_FILE = "sessions.index.sqlite"
LANGGRAPH_STORE_FILE = "langgraph-store.sqlite"
"""The index of sessions for listing (`checkpointing.session_index`), at the root of base_dir."""
INDEX_SUFFIX = ".idx"
MAKING_PREFIX = ".making-"
BROKEN_SUFFIX = ".broken"
MAIN_BRANCH = "main"
"""The branch whose room is `workspace/` (every other branch's is `rooms/<branch>/`)."""
SESSION_LOGS = (EVENTS_FILE, JOURNAL_FILE, OUTBOX_FILE, INBOX_FILE)
"""The record logs of a session folder besides its run files (only events.jsonl always exists)."""

_HASHED = "~"  # outside the id alphabet: a digest folder never collides with a plain id
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def is_id(name: str) -> bool:
    """Whether `name` (e.g. a folder found on disk) is a valid id, so a path function accepts it."""
    try:
        validate_id(name)
    except InvalidIdError:
        return False
    return True


# -- base_dir and tenants ------------------------------------------------------------------------


def tenants_root(base_dir: Path | str) -> Path:
    """`base_dir/tenants`."""
    return Path(base_dir) / TENANTS


def tenant_dir(base_dir: Path | str, tenant: str) -> Path:
    """`base_dir/tenants/<tenant>` (tenant id validated)."""
    return tenants_root(base_dir) / validate_id(tenant, "tenant id")


def tenant_ids(base_dir: Path | str) -> list[str]:
    """The tenants with a folder under `base_dir`, sorted (folders that are not valid ids skipped)."""
    root = tenants_root(base_dir)
    return sorted(p.name for p in root.iterdir() if is_id(p.name)) if root.is_dir() else []


def sessions_root(base_dir: Path | str, tenant: str) -> Path:
    """`base_dir/tenants/<tenant>/sessions`."""
    return tenant_dir(base_dir, tenant) / SESSIONS


def session_dir(base_dir: Path | str, tenant: str, session_id: str) -> Path:
    """`base_dir/tenants/<tenant>/sessions/<session>` (both ids validated)."""
    return sessions_root(base_dir, tenant) / validate_id(session_id, "session id")


def folder_name(thread_id: str) -> str:
    """The session folder name of a LangGraph thread id: the id itself when it is a valid id (so
    `thread_dir` and `session_dir` name the same folder), else `~` + 40 hex of its SHA-256."""
    try:
        return validate_id(thread_id, "thread_id")
    except InvalidIdError:
        return _HASHED + hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def is_digest_folder(name: str) -> bool:
    """Whether session folder `name` is a digest (`folder_name` of a thread id that is not an id):
    its thread id is only known from the records inside."""
    return name.startswith(_HASHED)


def thread_dir(base_dir: Path | str, tenant: str, thread_id: str) -> Path:
    """The session folder of a LangGraph thread id of any form (see `folder_name`)."""
    return sessions_root(base_dir, tenant) / folder_name(thread_id)


def turns_dir(base_dir: Path | str, tenant: str) -> Path:
    """`base_dir/tenants/<tenant>/turns`: the tenant's turn index."""
    return tenant_dir(base_dir, tenant) / TURNS


def turn_file(base_dir: Path | str, tenant: str, turn_id: str) -> Path:
    """`base_dir/tenants/<tenant>/turns/<turn>.json` (both ids validated)."""
    return turns_dir(base_dir, tenant) / (validate_id(turn_id, "turn id") + TURN_SUFFIX)


def blobs_root(base_dir: Path | str) -> Path:
    """`base_dir/blobs/sha256`."""
    return Path(base_dir).joinpath(*BLOBS)


def blob_path(base_dir: Path | str, hexdigest: str) -> Path:
    """The file of the blob whose SHA-256 is `hexdigest` (64 lowercase hex, checked)."""
    if not _HEX64.fullmatch(hexdigest):
        raise InvalidIdError(f"invalid blob digest {hexdigest[:80]!r}: 64 lowercase hex digits")
    return blobs_root(base_dir) / hexdigest[:2] / hexdigest[2:]


def sqlite_checkpoints_file(base_dir: Path | str) -> Path:
    """LangGraph SqliteSaver's file (`persistence.saver: sqlite`)."""
    return Path(base_dir) / SQLITE_CHECKPOINTS_FILE


def session_index_file(base_dir: Path | str) -> Path:
    """`base_dir/sessions.index.sqlite`: the index of sessions (a cache; see `session_index`)."""
    return Path(base_dir) / SESSION_INDEX_FILE


def langgraph_store_file(base_dir: Path | str) -> Path:
    """`base_dir/langgraph-store.sqlite`: LangGraph's `SqliteStore` (the embedded item store)."""
    return Path(base_dir) / LANGGRAPH_STORE_FILE


def drain_leases_root(base_dir: Path | str) -> Path:
    """The base_dir of the workers' drain leases (a layout of its own: `<root>/tenants/...`)."""
    return Path(base_dir) / DRAIN_LEASES


# -- files of a session folder -------------------------------------------------------------------


def events_file(session: Path) -> Path:
    """The event log of session folder `session`."""
    return session / EVENTS_FILE


def journal_file(session: Path) -> Path:
    """The tool journal of session folder `session`."""
    return session / JOURNAL_FILE


def session_file(session: Path) -> Path:
    """The session document (`session.json`) of session folder `session`."""
    return session / SESSION_FILE


def pins_file(session: Path) -> Path:
    """The checkpoint pins of session folder `session`."""
    return session / PINS_FILE


def fence_file(session: Path) -> Path:
    """The highest fencing token of session folder `session`."""
    return session / FENCE_FILE


def fence_lock_file(session: Path) -> Path:
    """The `flock` file guarding `fence_file`."""
    return session / FENCE_LOCK_FILE


class LeaseFiles(NamedTuple):
    """The file lease's files in a session folder."""

    lock: Path
    """`lease.lock`: held (`flock`) by the owner for as long as it owns the session."""
    state_lock: Path
    """`lease.state.lock`: serializes reads and writes of the two files below."""
    state: Path
    """`lease.json`: the holder record (informational)."""
    token: Path
    """`lease.token`: the token counter (the last token granted)."""


def lease_files(session: Path) -> LeaseFiles:
    """The file lease's files of session folder `session`."""
    return LeaseFiles(
        session / LEASE_LOCK_FILE,
        session / LEASE_STATE_LOCK_FILE,
        session / LEASE_STATE_FILE,
        session / LEASE_TOKEN_FILE,
    )


def outbox_file(session: Path) -> Path:
    """The outbox of session folder `session`."""
    return session / OUTBOX_FILE


def outbox_due_dir(base_dir: Path | str, tenant: str) -> Path:
    """`base_dir/tenants/<tenant>/outbox-due`: one marker per session whose outbox owes writes."""
    return tenant_dir(base_dir, tenant) / OUTBOX_DUE


def inbox_file(session: Path) -> Path:
    """The inbox of session folder `session`."""
    return session / INBOX_FILE


def inbox_lock_file(session: Path) -> Path:
    """The `flock` file guarding `inbox_file`."""
    return session / INBOX_LOCK_FILE


def runs_dir(session: Path) -> Path:
    """The folder holding the runs of session folder `session`."""
    return session / RUNS


def run_dir(session: Path, run_id: str) -> Path:
    """The folder of one run (run id validated)."""
    return runs_dir(session) / validate_id(run_id, "run id")


def checkpoints_file(session: Path, run_id: str) -> Path:
    """The checkpoint log of one run (run id validated)."""
    return run_dir(session, run_id) / CHECKPOINTS_FILE


def run_ids(session: Path) -> list[str]:
    """The runs of session folder `session` that have a checkpoint log, sorted (a folder whose
    name is not a valid id was not written here and is skipped)."""
    runs = runs_dir(session)
    if not runs.is_dir():
        return []
    return sorted(p.name for p in runs.iterdir() if is_id(p.name) and (p / CHECKPOINTS_FILE).is_file())


def room_path(branch_id: str) -> PurePosixPath:
    """The room of a branch relative to its session folder: `workspace` for the main branch,
    `rooms/<branch>` for a fork (branch id validated)."""
    if branch_id == MAIN_BRANCH:
        return PurePosixPath(WORKSPACE)
    return PurePosixPath(ROOMS, validate_id(branch_id, "branch id"))


def room_dir(session: Path, branch_id: str) -> Path:
    """The sandbox room of a branch in session folder `session` (see `room_path`)."""
    return session.joinpath(*room_path(branch_id).parts)


def room_making_dir(room: Path) -> Path:
    """Where a new room is filled before it is renamed into place (`.making-<room>` beside it)."""
    return room.with_name(MAKING_PREFIX + room.name)


def session_of(path: Path | str) -> tuple[str, str] | None:
    """(tenant, session folder name) of a file inside a session folder (`.../tenants/<tenant>/
    sessions/<session>/...`), or None for a path outside one."""
    parts = Path(path).parts
    for i in range(len(parts) - 4, -1, -1):
        if parts[i] == TENANTS and parts[i + 2] == SESSIONS and i + 4 < len(parts):
            return parts[i + 1], parts[i + 3]
    return None


# -- files beside a file -------------------------------------------------------------------------


def index_file(log: Path) -> Path:
    """Where the persisted index of record log `log` is kept (`<log>.idx`)."""
    return log.with_name(log.name + INDEX_SUFFIX)


def broken_file(path: Path) -> Path:
    """Where a repair moves bytes of `path` aside (`<file>.broken`, appended to)."""
    return path.with_name(path.name + BROKEN_SUFFIX)
