"""Typed settings: one `AgentSettings` tree, read from YAML with `AGENTRT_*` environment overrides.

Unknown keys are errors (a typo must not silently fall back to a default). Relative paths in a
config file are resolved against the file's folder, except `persistence.base_dir`, which is
relative to the working directory (so `./.agentrt` lands where you run the command). A path written
`builtin:NAME` is a file shipped with agentrt (agent/assets/), found wherever the config sits; the
defaults use those (the demo script, its datasets and skills). A model script, dataset file or
skills folder that does not exist is refused when the settings load (`ConfigError`, naming the key).

Environment overrides: `AGENTRT_BASE_DIR`, `AGENTRT_REDIS_URL`, `AGENTRT_DATABASE_URL`,
`AGENTRT_MODEL_BASE_URL`, `AGENTRT_MODEL_NAME`, `AGENTRT_PERSISTENCE_MODE`, `AGENTRT_BROKER_URL`,
`AGENTRT_RESULT_BACKEND`, `AGENTRT_QUEUE`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent.assets import DEMO_DATASETS, builtin_path, is_builtin
from agent.errors import ConfigError
from agent.text import shown_path
from agent.yaml_errors import yaml_problem

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"
"""The documented copy of the built-in defaults (in a checkout; the defaults themselves are below)."""
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


INPUT_CHARS_PER_WINDOW_TOKEN = 2


def max_input_chars(settings: AgentSettings) -> int:
    """The input limit of a turn: `loop.max_input_chars`, or sized from `model.context_window`."""
    if settings.loop.max_input_chars is not None:
        return settings.loop.max_input_chars
    return settings.model.context_window * INPUT_CHARS_PER_WINDOW_TOKEN


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
    """How long a turn's live events stay in Redis for `agentrt serve` to stream (agent/live.py)."""
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


class ApiKeyEntry(_Strict):
    """One API key of `agentrt serve` (header `x-api-key`) and whom it acts as.

    Write the key as `${ENV_VAR}` to keep it out of the file; without `user_id` the key sees every
    session of its tenant (as `agentrt sessions` without `--user` does).
    """

    key: str = Field(min_length=16)
    tenant_id: str
    user_id: str | None = None


class AssistantOverrides(_Strict):
    """What an assistant (or a named `serve.assistant_configs` entry) may change for its runs: the
    model's name and sampling, the system prompt, planning and the loop's step limit. Nothing here
    names a file, a module or a tool: an HTTP client chooses among the server's own."""

    model_name: str | None = Field(default=None, min_length=1, max_length=200)
    """`model.name` (the scripted model reports it as its `model_name`)."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(default=None, ge=1)
    system_prompt: str | None = Field(default=None, min_length=1, max_length=20_000)
    """`loop.system_prompt`."""
    planning: Literal["always", "auto", "never"] | None = None
    max_iterations: int | None = Field(default=None, ge=1)
    """`loop.max_iterations`: the model calls of one turn."""


class ServeSettings(_Strict):
    """`agentrt serve`: who may call it. No keys and no auth function: loopback only, default tenant."""

    api_keys: list[ApiKeyEntry] = Field(default_factory=list)
    auth: str | None = None
    """`module:callable` taking the request headers, returning {tenant_id, user_id} or None (refused)."""
    run_threads: int = 8
    """How many turns run at the same time in the server process (or are followed, on workers)."""
    runs_on: Literal["auto", "server", "workers"] = "auto"
    """Where API runs execute: `server` (this process), `workers` (the Celery workers of `workers:`,
    streamed back through Redis), `auto` (workers when `workers.broker_url` is set)."""
    stream_ttl_s: float = Field(default=3600.0, gt=0)
    """How long a run's streamed events stay in the record store after its last one, for clients that
    reconnect with `Last-Event-ID` (also after the run ended or the server restarted); an older stream
    is removed when a client asks for it, and with its thread."""
    cron_poll_s: float | None = Field(default=5.0, gt=0)
    """How often (seconds) the server looks for crons that are due and starts their runs; a cron
    fires at most this late. Every server over one store may poll: each firing starts one run.
    null: this server fires no crons (its API still manages them)."""
    assistant_configs: dict[str, AssistantOverrides] = Field(default_factory=dict)
    """Named overrides an assistant may pick with `config_name` in its configurable (or context):
    name -> {model_name, temperature, max_output_tokens, system_prompt, planning, max_iterations}."""

    def on_workers(self, workers: WorkerSettings) -> bool:
        """Whether runs go to the Celery workers with these worker settings."""
        return self.runs_on == "workers" or (self.runs_on == "auto" and workers.enabled)


class StoreIndexSettings(_Strict):
    """The semantic index of LangGraph's store (`store.index`): an embedding model behind an
    OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, llama.cpp, Ollama) turns the chosen
    `fields` of each item into a vector of `dims` numbers; `search_items` with a `query` then ranks by
    similarity. The key is read from the environment variable `api_key_env`, never from the file."""

    model: str = Field(min_length=1)
    """The embedding model's name as the endpoint knows it (e.g. `text-embedding-3-small`)."""
    dims: int = Field(gt=0, le=16_000)
    """The length of the vectors the model returns (1536 for `text-embedding-3-small`)."""
    base_url: str | None = None
    """The endpoint's `/v1` URL; unset: OpenAI's."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the endpoint's key (a local endpoint may need none)."""
    fields: list[str] = Field(default_factory=lambda: ["$"], min_length=1)
    """The parts of an item's value that are embedded (JSON paths, `$`: the whole value)."""
    timeout_s: float = Field(default=30.0, gt=0)
    """How long one embedding request may take."""
    max_retries: int = Field(default=2, ge=0)
    """How often a failed embedding request is tried again."""


class StoreSettings(_Strict):
    """LangGraph's store (the store API's items, a run's `runtime.store`); where it lives follows
    `persistence.store`. `index` unset: no semantic index (a search's `query` is ignored)."""

    index: StoreIndexSettings | None = None
    """The semantic index (the `store.index` table); null: none."""


class AgentSettings(_Strict):
    """The whole configuration of one agent runtime."""

    model: ModelSettings = Field(default_factory=ModelSettings)
    tools: ToolsSettings = Field(default_factory=ToolsSettings)
    loop: LoopSettings = Field(default_factory=LoopSettings)
    session: SessionSettings = Field(default_factory=SessionSettings)
    persistence: PersistenceSettings = Field(default_factory=PersistenceSettings)
    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    datasets: list[DatasetEntry] = Field(default_factory=_demo_datasets)
    skills_dir: str | None = Field(default="builtin:skills", validate_default=True)
    """The folder of skills: relative to the config's folder, or `builtin:skills`; null: no skills."""
    serve: ServeSettings = Field(default_factory=ServeSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    source_path: str | None = Field(default=None, exclude=True)

    @field_validator("skills_dir")
    @classmethod
    def _shipped_skills(cls, v: str | None) -> str | None:
        return _shipped(v)

    @property
    def base_dir(self) -> Path:
        """The persistence root as an absolute path."""
        return Path(self.persistence.base_dir).expanduser().resolve()

    def database_url(self) -> str | None:
        """The SQL URL with `{base_dir}` filled in."""
        url = self.persistence.database_url
        return url.format(base_dir=self.base_dir) if url else None

    def store_url(self) -> str | None:
        """The PostgreSQL URL of the record store (`store: postgres`), None for `files`."""
        p = self.persistence
        return (p.store_url or self.database_url()) if p.store == "postgres" else None


_ENV = {
    "AGENTRT_BASE_DIR": ("persistence", "base_dir"),
    "AGENTRT_REDIS_URL": ("persistence", "redis_url"),
    "AGENTRT_DATABASE_URL": ("persistence", "database_url"),
    "AGENTRT_STORE": ("persistence", "store"),
    "AGENTRT_STORE_URL": ("persistence", "store_url"),
    "AGENTRT_MODEL_BASE_URL": ("model", "base_url"),
    "AGENTRT_MODEL_NAME": ("model", "name"),
    "AGENTRT_PERSISTENCE_MODE": ("persistence", "mode"),
    "AGENTRT_BROKER_URL": ("workers", "broker_url"),
    "AGENTRT_RESULT_BACKEND": ("workers", "result_backend"),
    "AGENTRT_QUEUE": ("workers", "queue"),
}


def _expand_env(value: Any) -> Any:
    if isinstance(value, str):
        return os.path.expandvars(value) if "${" in value else value
    if isinstance(value, dict):
        return {k: _expand_env(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v) for v in value]
    return value


def _format_error(err: ValidationError, source: str) -> str:
    parts = []
    for e in err.errors():
        loc = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in e["loc"]).lstrip(".")
        said = e["msg"].removeprefix("Value error, ")  # a validator's message, without pydantic's prefix
        msg = "unknown key (check spelling)" if e["type"] == "extra_forbidden" else said
        parts.append(f"{loc}: {msg}")
    return f"invalid config {source}: " + "; ".join(parts)


def load_settings(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> AgentSettings:
    """Load settings from `path` (None: the built-in defaults, which configs/default.yaml spells out)."""
    source = str(path) if path is not None else "<built-in defaults>"
    data: dict[str, Any] = {}
    folder = Path.cwd()
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError as err:
            raise ConfigError(f"config file not found: {shown_path(p)}") from err
        except OSError as err:  # e.g. a name too long, a folder: the path is the user's to fix
            raise ConfigError(f"cannot read config file {shown_path(p)}: {err.strerror}; check --config") from err
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"config file {shown_path(p)} is not valid YAML: {yaml_problem(err, text)}") from err
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(f"config file {p} must hold a mapping at the top level")
        data = _expand_env(raw)
        folder = p.resolve().parent
    for env, (section, key) in _ENV.items():
        if os.environ.get(env):
            data.setdefault(section, {})
            if isinstance(data[section], dict):
                data[section][key] = os.environ[env]
    for dotted, value in (overrides or {}).items():
        section, key = dotted.split(".", 1)
        data.setdefault(section, {})[key] = value
    try:
        settings = AgentSettings.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, source)) from None
    _resolve_paths(settings, folder, "the settings" if path is None else str(Path(path).resolve()))
    settings.source_path = source
    return settings


def _resolve_paths(settings: AgentSettings, folder: Path, where: str) -> None:
    """Make the files a config names absolute (relative to `folder`), refusing any that is absent:
    a dataset or skill the model is told about but cannot read would fail the run only later."""

    def existing(key: str, value: str, is_there: Callable[[Path], bool]) -> str:
        p = (folder / Path(value).expanduser()).resolve()
        try:
            if is_there(p):
                return str(p)
            what = "does not exist" if not p.exists() else f"is not a {'folder' if key == 'skills_dir' else 'file'}"
        except OSError as err:  # e.g. a name too long: the path is the user's to fix
            raise ConfigError(f"cannot read {key} {shown_path(p)}: {err.strerror}; check {key}") from None
        raise ConfigError(f"{key}: {shown_path(p)} {what} (fix the path in {where})")

    if settings.model.script is not None:
        settings.model.script = existing("model.script", settings.model.script, Path.is_file)
    for i, ds in enumerate(settings.datasets):
        if "://" not in ds.path:
            ds.path = existing(f"datasets[{i}].path", ds.path, Path.is_file)
    if settings.skills_dir is not None:
        settings.skills_dir = existing("skills_dir", settings.skills_dir, Path.is_dir)


def config_hint(settings: AgentSettings) -> str:
    """` --config F` for commands printed in messages, when the settings came from a named file."""
    src = settings.source_path
    if not src or src.startswith("<") or Path(src).resolve() == DEFAULT_CONFIG_PATH.resolve():
        return ""
    return f" --config {src}"
