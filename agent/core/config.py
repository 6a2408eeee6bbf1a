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

The sections are defined in agent/core/config_sections.py and agent/core/config_serve.py and named from here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, field_validator

from agent.core.config_sections import DEMO_SCRIPT as DEMO_SCRIPT
from agent.core.config_sections import CompressionConfig as CompressionConfig
from agent.core.config_sections import DatasetEntry as DatasetEntry
from agent.core.config_sections import LoopSettings as LoopSettings
from agent.core.config_sections import ModelSettings as ModelSettings
from agent.core.config_sections import PersistenceSettings as PersistenceSettings
from agent.core.config_sections import QueryLimits as QueryLimits
from agent.core.config_sections import QueryLimitsSettings as QueryLimitsSettings
from agent.core.config_sections import SessionSettings as SessionSettings
from agent.core.config_sections import ToolEntry as ToolEntry
from agent.core.config_sections import ToolsSettings as ToolsSettings
from agent.core.config_sections import WorkerSettings as WorkerSettings
from agent.core.config_sections import _demo_datasets, _shipped, _Strict
from agent.core.config_sections import valid_version as valid_version
from agent.core.config_serve import ApiKeyEntry as ApiKeyEntry
from agent.core.config_serve import AssistantOverrides as AssistantOverrides
from agent.core.config_serve import ServeSettings as ServeSettings
from agent.core.config_serve import StoreIndexSettings as StoreIndexSettings
from agent.core.config_serve import StoreSettings as StoreSettings
from agent.core.errors import ConfigError
from agent.core.text import shown_path
from agent.core.yaml_errors import yaml_problem

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"
"""The documented copy of the built-in defaults (in a checkout; the defaults themselves are below)."""


INPUT_CHARS_PER_WINDOW_TOKEN = 2


def max_input_chars(settings: AgentSettings) -> int:
    """The input limit of a turn: `loop.max_input_chars`, or sized from `model.context_window`."""
    if settings.loop.max_input_chars is not None:
        return settings.loop.max_input_chars
    return settings.model.context_window * INPUT_CHARS_PER_WINDOW_TOKEN


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
