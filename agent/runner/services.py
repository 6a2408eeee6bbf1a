"""Builders from settings: the saver, the session manager, the lease, with fault points wired in."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent.core import faults
from agent.core.config import AgentSettings, config_hint
from agent.core.errors import ConfigError
from agent.session.manager import ChatSessionManager, open_manager
from checkpointing.layout import sqlite_checkpoints_file

if TYPE_CHECKING:  # LangGraph and the saver load only when a saver is built: `agentrt sessions` needs neither
    from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint

    from checkpointing.saver import JsonlCheckpointSaver

if TYPE_CHECKING:
    from agent.session.lease import SessionLease
    from agent.session.lease_postgres import PostgresLease


def build_saver(settings: AgentSettings) -> BaseCheckpointSaver:
    """The checkpoint saver named by `persistence.saver` (crash points around `put` when armed)."""
    kind = settings.persistence.saver
    saver: BaseCheckpointSaver
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        saver = InMemorySaver()
    elif kind == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        settings.base_dir.mkdir(parents=True, exist_ok=True)
        saver = SqliteSaver(sqlite3.connect(sqlite_checkpoints_file(settings.base_dir), check_same_thread=False))
    else:
        saver = jsonl_saver(settings)
    if faults.armed():
        _wrap_put(saver)
    return saver


def jsonl_saver(settings: AgentSettings) -> JsonlCheckpointSaver:
    """Our JSONL saver on the settings' record store (`base_dir`, or PostgreSQL with `store: postgres`).

    Recovery pins (graph version, digests) are checked by `agent.runner.recovery`, not by the saver's
    `expect_metadata`: `--accept-changes` must be able to re-pin a mismatch the saver would refuse.
    """
    from agent.session.record_store import pg_store
    from checkpointing.saver import JsonlCheckpointSaver

    p = settings.persistence
    store = pg_store(settings)
    return JsonlCheckpointSaver(
        None if store is not None else settings.base_dir,
        store=store,
        item_min_bytes=p.item_min_bytes,
        fsync=p.checkpoint_fsync or p.fsync,
        keep_last=p.keep_last,
        default_tenant=settings.session.tenant_id,
        runtime_snapshot=runtime_snapshot,
    )


def runtime_snapshot(checkpoint: Checkpoint, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint document's runtime snapshot (DESIGN §4): the pins the run was written under
    (from its metadata) and, from the state, the active skill, the todo list and the current task."""
    values = checkpoint["channel_values"]
    return {
        "surface_digest": metadata.get("surface_digest"),
        "toolset_hash": metadata.get("toolset_hash"),
        "active_skill": values.get("active_skill"),
        "todo": values.get("task_todo_list") or [],
        "current_task": values.get("current_task"),
    }


def _wrap_put(saver: BaseCheckpointSaver) -> None:
    original = saver.put

    @functools.wraps(original)
    def put(*args: Any, **kwargs: Any) -> Any:
        faults.crash_point("before_checkpoint_put")
        out = original(*args, **kwargs)
        faults.crash_point("after_checkpoint_put")
        return out

    saver.put = put  # type: ignore[method-assign]


def build_manager(settings: AgentSettings, *, lazy_sql: bool = False) -> ChatSessionManager:
    """The ChatSessionManager of the configured persistence mode (`lazy_sql`: see `open_manager`)."""
    from agent.session.record_store import pg_store

    p = settings.persistence
    return open_manager(
        p.mode,
        settings.base_dir,
        record_store=pg_store(settings),
        redis_url=p.redis_url,
        database_url=settings.database_url(),
        config_hint=config_hint(settings),
        inline_payload_max_bytes=p.inline_payload_max_bytes,
        fsync=p.fsync,
        default_max_loops=settings.session.max_loops,
        default_expire_minutes=settings.session.expire_minutes,
        lazy_sql=lazy_sql,
    )


def build_lease(settings: AgentSettings) -> SessionLease:
    """The session lease: in-process, a file lock on base_dir (one host), Redis or PostgreSQL
    (several hosts; PostgreSQL's is a table in the database of `persistence.database_url`)."""
    from agent.session.lease import InProcessLease
    from agent.session.lease_file import FileLease
    from agent.session.lease_redis import RedisLease  # redis only when a lease is built

    kind = settings.persistence.lease
    if kind == "memory":
        return InProcessLease()
    if kind == "redis":
        return RedisLease(url=settings.persistence.redis_url)
    if kind == "postgres":
        return postgres_lease(settings)
    return FileLease(settings.base_dir)


def postgres_lease(settings: AgentSettings, scope: str = "run") -> PostgresLease:
    """The PostgreSQL lease on the database of `persistence.database_url` (`scope`: run or drain)."""
    from agent.session.lease_postgres import PostgresLease  # psycopg only when this lease is used

    url = settings.database_url()
    if not url:
        raise ConfigError(
            "persistence.lease: postgres needs persistence.database_url (or AGENTRT_DATABASE_URL): "
            "the PostgreSQL database whose session_leases table holds the leases"
        )
    return PostgresLease(url, scope=scope, config_hint=config_hint(settings))
