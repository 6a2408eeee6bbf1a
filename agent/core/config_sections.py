"""The settings sections of the model, tools, loop, sessions, persistence, workers, compression and datasets."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent.assets import DEMO_DATASETS, builtin_path, is_builtin

DEMO_SCRIPT = "builtin:scripts/demo.yaml"
"""The script of a scripted model whose config names none."""


def _shipped(value: str | None) -> str | None:
    """A `builtin:` path as the shipped file's absolute path; any other value unchanged."""
    return str(builtin_path(value)) if value is not None and is_builtin(value) else value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSettings(_Strict):
    """Which chat model to use. `scripted` replays `script`; `openai` talks to any compatible server."""

    provider: Literal["scripted", "openai"] = "scripted"
    name: str = "scripted-demo"
    script: str | None = None
    """The script `scripted` replays: relative to the config's folder, or `builtin:...` (unset: the demo)."""
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_output_tokens: int | None = 1024
    timeout_s: float = 120.0
    max_retries: int = 2
    context_window: int = 32_000
    streaming: bool = True
    """Stream replies token by token (the CLI and `runner.stream()` show them as they come). Off: one
    plain request per call, e.g. for servers that report token usage only when not streaming (llama.cpp)."""

    @field_validator("script")
    @classmethod
    def _shipped_script(cls, v: str | None) -> str | None:
        return _shipped(v)

    @model_validator(mode="after")
    def _demo_script(self) -> ModelSettings:
        if self.provider == "scripted" and self.script is None:
            self.script = _shipped(DEMO_SCRIPT)
        return self


class ToolEntry(_Strict):
    """A user tool loaded by import path `module:callable` (a ToolSpec, a factory, or a function)."""

    path: str
    name: str | None = None
    effect: Literal["read_only", "idempotent", "unsafe"] | None = None
    requires_approval: bool | None = None
    permissions: list[str] | None = None


@dataclass(frozen=True)
class QueryLimits:
    """Limits of one dataset query (defaults sized for an agent exploring tables; enforced by
    agent/tools/datasets/limits.py, set by `datasets.query_limits`)."""

    cpu_seconds: float = 2.0
    """CPU time of the querying thread after which the statement is stopped."""
    wall_seconds: float = 3.0
    """Wall-clock time after which the statement is stopped (temp-file I/O does not count as CPU)."""
    max_steps: int = 50_000_000
    """SQLite VM instructions after which the statement is stopped."""
    check_every: int = 1000
    """VM instructions between two checks of the budgets above."""
    max_result_bytes: int = 1_000_000
    """Bytes of returned cell values (strings and hex-rendered blobs) after which the call fails."""
    max_value_bytes: int = 1_000_000
    """Largest string or blob any expression may build (SQLITE_LIMIT_LENGTH)."""
    max_format_width: int = 100_000
    """Largest total of widths and precisions in one printf()/format() call."""
    cache_size_kib: int = 8192
    """Page cache of the query connection (and of its temp b-trees) before it spills to temp files."""
    heap_limit_bytes: int | None = None
    """SQLite's process-wide hard heap limit (PRAGMA hard_heap_limit); None leaves it unset."""


# What graph.build.compute_graph_version makes ("g1-" + 16 hex digits), with room for a later scheme;
# a version read from a session's log becomes part of a queue name only when it has this form.
_VERSION = re.compile(r"g[0-9]{1,3}-[0-9a-f]{8,64}")


def valid_version(version: object) -> bool:
    """Whether `version` has the form of a graph version (`g1-` and hex digits)."""
    return isinstance(version, str) and _VERSION.fullmatch(version) is not None


_QL = QueryLimits()


class QueryLimitsSettings(_Strict):
    """Limits of one `query_dataset` call (see agent/tools/datasets/limits.py for each field)."""

    cpu_seconds: float = Field(default=_QL.cpu_seconds, gt=0)
    wall_seconds: float = Field(default=_QL.wall_seconds, gt=0)
    max_steps: int = Field(default=_QL.max_steps, gt=0)
    max_result_bytes: int = Field(default=_QL.max_result_bytes, gt=0)
    max_value_bytes: int = Field(default=_QL.max_value_bytes, gt=0)
    max_format_width: int = Field(default=_QL.max_format_width, ge=0)
    cache_size_kib: int = Field(default=_QL.cache_size_kib, gt=0)
    heap_limit_bytes: int | None = Field(default=_QL.heap_limit_bytes, gt=0)

    def limits(self) -> QueryLimits:
        """The limits as the dataset catalog takes them."""
        return QueryLimits(**self.model_dump())


class ToolsSettings(_Strict):
    """Built-in tools by name, plus user tools by import path."""

    builtins: list[str] = Field(
        default_factory=lambda: [
            "list_files",
            "read_file",
            "write_file",
            "edit_file",
            "delete_file",
            "calculator",
            "read_tool_result",
            "update_todo",
            "list_datasets",
            "query_dataset",
            "publish_report",
        ]
    )
    custom: list[ToolEntry] = Field(default_factory=list)
    result_preview_chars: int = 400
    query_limits: QueryLimitsSettings = Field(default_factory=QueryLimitsSettings)


class LoopSettings(_Strict):
    """Guards of the agent loop (refining node) and of the session (loop count)."""

    max_iterations: int = 25
    max_consecutive_failures: int = 3
    max_replans: int = 2
    planning: Literal["always", "auto", "never"] = "always"
    max_input_chars: int | None = Field(default=None, ge=1)
    """Longest user input a turn accepts, in characters; None: `INPUT_CHARS_PER_WINDOW_TOKEN` per
    token of `model.context_window` (about half the window at ~4 characters a token)."""
    system_prompt: str = (
        "You are agentrt, a careful agent. Work step by step with the tools you have; "
        "files live in your sandbox room. When the task is done, answer plainly."
    )


class SessionSettings(_Strict):
    """Defaults of new sessions."""

    agent_id: str = "agentrt-demo"
    tenant_id: str = "default"
    user_id: str = "local"
    max_loops: int = 100
    expire_minutes: float = 7 * 24 * 60
    room_on_end: Literal["keep", "delete"] = "keep"
    """What `end` does with the session's sandbox rooms: keep them (a later fork or a reader still sees the
    files) or delete them (a `sandbox_destroyed` entry each; a fork restores its room from the checkpoint)."""
    retention_days: float | None = Field(default=None, ge=0)
    """How long a finished session is kept before `agentrt store gc` (and the workers) delete it: one
    whose expiry passed more than this ago, or one ENDED with no activity for this long. None: kept forever."""
    gc_every_minutes: float = Field(default=60.0, gt=0)
    """How often (at most) a Celery worker runs that reclaim by itself; one worker at a time does it."""
    converge_every_s: float | None = Field(default=60.0, gt=0)
    """How often the Celery workers and `agentrt serve` replay, by themselves, what the SQL and Redis
    layers missed in an outage for sessions no process uses any more (a killed worker's, a CLI run
    that exited while a layer was down): what `agentrt store converge` does once. One process of
    the fleet at a time does it; a session a run holds is left to that run. None: never (only the
    next use of the session, or `agentrt store converge`, replays it)."""


class PersistenceSettings(_Strict):
    """Where and how state is kept (`base_dir` is the volume that must be mounted in containers).

    Saver settings (`saver: jsonl`): `checkpoint_fsync` ("always": every record durable when the
    call returns; "checkpoint": pending writes reach disk with the next checkpoint, one fsync per
    superstep, a crash may re-run finished tasks; "batch": left to the OS), default: `fsync`;
    `item_min_bytes`: list items of at least this size are stored once per session under their
    hash; `keep_last`. `keyframe_every` is accepted for old config files and ignored (on-disk
    format 2 has no keyframes); `inline_payload_max_bytes` applies to the event log, the tool
    journal and tool results, not to the saver.
    """

    base_dir: str = "./.agentrt"
    mode: Literal["MIRROR", "PRIMARY", "JSONL_ONLY"] = "PRIMARY"
    saver: Literal["jsonl", "sqlite", "memory"] = "jsonl"
    inline_payload_max_bytes: int = 8192
    fsync: Literal["always", "batch"] = "always"
    checkpoint_fsync: Literal["always", "checkpoint", "batch"] | None = None
    item_min_bytes: int = 64
    keep_last: int | None = 50
    keyframe_every: int = 16  # ignored since on-disk format 2; kept so old config files load
    redis_url: str | None = None
    database_url: str | None = "sqlite:///{base_dir}/agentrt.db"  # agent.session.stores.sql.SQLITE_FILE
    lease: Literal["memory", "file", "redis", "postgres"] = "file"
    """`postgres`: a table in the PostgreSQL database of `database_url` (`agentrt db upgrade` makes it).
    Default `file`, or `postgres` with `store: postgres`."""
    lease_ttl_s: float = 60.0
    store: Literal["files", "postgres"] = "files"
    """Where session records live (event log, checkpoints, tool journal, inbox, blobs): `files` under
    `base_dir`, or `postgres`: rows of the database `store_url` names, `base_dir` then only a local
    cache any machine may lose. Valid pairs: `files` with every mode; `postgres` with MIRROR or
    PRIMARY and a PostgreSQL `database_url` (its session table is the index of sessions)."""
    store_url: str | None = None
    """The PostgreSQL database of `store: postgres`; default: `database_url`."""

    @model_validator(mode="after")
    def _store_pairs(self) -> PersistenceSettings:
        if self.store != "postgres":
            return self
        url = self.store_url or self.database_url or ""
        if not url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
            raise ValueError(
                "store: postgres needs a PostgreSQL store_url (or database_url): postgresql://USER@HOST/DB"
            )
        if self.mode == "JSONL_ONLY":
            raise ValueError("store: postgres lists sessions from the SQL session table: use mode PRIMARY or MIRROR")
        if not (self.database_url or "").startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
            raise ValueError("store: postgres needs database_url on PostgreSQL too (the session table is the index)")
        if "lease" not in self.model_fields_set:
            self.lease = "postgres"
        elif self.lease in ("memory", "file"):
            raise ValueError(
                f"lease: {self.lease} holds only on this machine; with store: postgres use lease: postgres or redis"
            )
        if self.saver != "jsonl":
            raise ValueError("store: postgres keeps checkpoints with saver: jsonl; remove saver or set it to jsonl")
        return self

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, v: str | None) -> str | None:
        # Checked here: the client is made only when a command first reads Redis.
        if v and not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("redis_url must start with redis://, rediss:// or unix:// (e.g. redis://127.0.0.1:6379/0)")
        return v

    @field_validator("inline_payload_max_bytes", "keyframe_every")
    @classmethod
    def _positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("must be positive")
        return v

    @field_validator("item_min_bytes")
    @classmethod
    def _item_min(cls, v: int) -> int:
        if v < 16:
            raise ValueError("must be at least 16 (bytes)")
        return v


class WorkerSettings(_Strict):
    """Celery workers (docs: "Workers and several machines"); off while `broker_url` is unset."""

    broker_url: str | None = None  # redis://host:6379/0 or amqp://user:pass@host:5672/vhost
    result_backend: str | None = None  # redis://...; default: persistence.redis_url
    queue: str = "agentrt"
    key_prefix: str = "agentrt:celery:"  # Redis broker and result keys start with it
    visibility_timeout_s: float = 6 * 3600  # Redis broker: above the longest run
    restore_interval_s: float = 10.0  # Redis broker: how often unacked tasks past the timeout are restored
    soft_shutdown_s: float = 60.0  # SIGQUIT: how long running tasks get before they are requeued
    result_expires_s: int = 7 * 24 * 3600
    live_events_ttl_s: int = 3600
    """How long a turn's live events stay in Redis for `agentrt serve` to stream (agent/runner/live.py)."""
    adopt_graph_versions: list[str] = Field(default_factory=list)
    """Graph versions whose sessions these workers take over (docs/production.md "Rolling upgrade"):
    they also consume those versions' queues, and resume a run of one with the graph change accepted."""

    @property
    def enabled(self) -> bool:
        """Whether turns go to workers (`agentrt submit`, approvals enqueued)."""
        return bool(self.broker_url)

    @field_validator("adopt_graph_versions")
    @classmethod
    def _graph_versions(cls, v: list[str]) -> list[str]:
        for version in v:
            if not valid_version(version):
                raise ValueError(
                    f"{version!r} is not a graph version (like g1-0123456789abcdef: see `agentrt doctor ID`)"
                )
        return v


class CompressionConfig(_Strict):
    """Context compression tiers, as fractions of the model's context window."""

    enabled: bool = True
    tier_pointer: float = 0.5
    tier_placeholder: float = 0.8
    tier_hard: float = 0.95
    keep_full_mid: int = 3
    keep_full_high: int = 1
    preview_chars: int = 200
    max_hard_compressions: int = 2


class DatasetEntry(_Strict):
    """A dataset the session may query (CSV/JSON/Parquet file, or SQL table by URL)."""

    name: str
    path: str
    """A file relative to the config's folder, `builtin:datasets/...`, or a SQL URL `...://...#table`."""
    format: str | None = None
    description: str | None = None

    @field_validator("path")
    @classmethod
    def _shipped_path(cls, v: str) -> str:
        return _shipped(v) or v


def _demo_datasets() -> list[DatasetEntry]:
    return [DatasetEntry(**d) for d in DEMO_DATASETS]
