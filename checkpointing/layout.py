"""THE path layout of `base_dir`: where each file of this package for a tenant, session and run lives.

    base_dir/
      tenants/<tenant>/sessions/<session>/   one folder per thread (a "session")
        events.jsonl                 the event log (`checkpointing.events`)
        fence.json, fence.lock       fencing tokens (`checkpointing.fencing`)
        pins.json                    checkpoints retention keeps
        runs/<run>/checkpoints.jsonl checkpoints, channel values and pending writes of a run
      blobs/sha256/<2 hex>/<62 hex>  content-addressed payloads

A caller may keep files of its own in a session folder (`session_dir`); their names are its own.
Every id that becomes a path component is validated here (`validate_id`), so no caller builds a
path from an unchecked id.
"""

from __future__ import annotations

from pathlib import Path

from checkpointing.ids import validate_id

TENANTS = "tenants"
SESSIONS = "sessions"
RUNS = "runs"
CHECKPOINTS_FILE = "checkpoints.jsonl"
EVENTS_FILE = "events.jsonl"
BLOBS = ("blobs", "sha256")


def tenants_root(base_dir: Path | str) -> Path:
    """`base_dir/tenants`."""
    return Path(base_dir) / TENANTS


def sessions_root(base_dir: Path | str, tenant: str) -> Path:
    """`base_dir/tenants/<tenant>/sessions`."""
    return tenants_root(base_dir) / validate_id(tenant, "tenant id") / SESSIONS


def session_dir(base_dir: Path | str, tenant: str, session_id: str) -> Path:
    """`base_dir/tenants/<tenant>/sessions/<session>` (both ids validated)."""
    return sessions_root(base_dir, tenant) / validate_id(session_id, "session id")


def runs_dir(base_dir: Path | str, tenant: str, session_id: str) -> Path:
    """The folder holding a session's runs."""
    return session_dir(base_dir, tenant, session_id) / RUNS


def checkpoints_file(base_dir: Path | str, tenant: str, session_id: str, run_id: str) -> Path:
    """The checkpoint log of one run."""
    return runs_dir(base_dir, tenant, session_id) / validate_id(run_id, "run id") / CHECKPOINTS_FILE


def events_file(base_dir: Path | str, tenant: str, session_id: str) -> Path:
    """The event log of a session."""
    return session_dir(base_dir, tenant, session_id) / EVENTS_FILE


def blobs_root(base_dir: Path | str) -> Path:
    """`base_dir/blobs/sha256`."""
    return Path(base_dir).joinpath(*BLOBS)
