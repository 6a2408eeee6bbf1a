"""Whether a read-only command may read a session's records without a runner (no LangGraph).

It may when a runner would read the checkpoints with our JSONL saver on the record store (the
files under `base_dir`, or PostgreSQL's rows: both are read through `checkpointing.tail`) and would
start without an error a reader would not raise: the configured saver is our JSONL one, fault
injection is not armed, and the config's model,
tools, skills and datasets are the built-in ones (a runner checks those when it starts, and a
command that would fail there must fail with the same error). `agent.runner.reader.SessionReader`
(`show`, `tool-result`) and `agent.doctor.light.LightContext` (`doctor`) ask it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from agent.session.manager import ChatSessionManager


class RunnerFree:
    """The base of a runner-free reader: settings `readable_settings` accepted, and their session
    manager opened on first use (its embedded SQL layer only if a read reaches it)."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self._manager: ChatSessionManager | None = None

    @classmethod
    def open(cls, config: str | Path | None) -> Self | None:
        """A reader for `config` (None: the built-in defaults), or None when a runner must answer."""
        settings = readable_settings(config)
        return cls(settings) if settings is not None else None

    @property
    def manager(self) -> ChatSessionManager:
        """The session manager (built on first use)."""
        if self._manager is None:
            from agent.runner.services import build_manager

            if self.settings.persistence.redis_url:  # a one-shot reader: redis-py's metrics stay off
                from agent.session.stores.redis import load_redis_without_metrics

                load_redis_without_metrics()
            self._manager = build_manager(self.settings, lazy_sql=True)
        return self._manager

    @property
    def opened_manager(self) -> ChatSessionManager | None:
        """The session manager if a read opened it (what it read is cached there), else None."""
        return self._manager


def readable_settings(config: str | Path | None) -> AgentSettings | None:
    """The settings of `config` when the records can be read without a runner (see the module
    doc: our JSONL saver on the record store, the built-in model, tools and skills, no fault injection);
    None when only a runner answers as it does today."""
    from agent.core import faults
    from agent.core.config import load_settings

    settings = load_settings(config)
    faults.install()
    return settings if _readable(settings) and not faults.armed() else None


def _readable(settings: AgentSettings) -> bool:
    """Whether a runner built from `settings` would start without an error a reader would not
    raise, and read the checkpoints with our JSONL saver on the record store."""
    from agent.core.config import load_settings
    from checkpointing.exceptions import CheckpointingError
    from checkpointing.ids import validate_id

    p = settings.persistence
    if p.saver != "jsonl":
        return False
    if (p.keep_last is not None and p.keep_last < 1) or p.item_min_bytes < 16:
        return False
    try:
        validate_id(settings.session.tenant_id, "default_tenant")
        from checkpointing.records import fsync_policy_ok

        fsync_policy_ok(p.checkpoint_fsync or p.fsync)
    except (CheckpointingError, ValueError):
        return False
    shipped = load_settings(None)
    return all(
        getattr(settings, part) == getattr(shipped, part) for part in ("model", "tools", "skills_dir", "datasets")
    )
