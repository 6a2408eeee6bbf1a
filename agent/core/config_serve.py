"""The settings of `agentrt serve` and of LangGraph's store: API keys, assistants' overrides, the store's index."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.core.config_sections import WorkerSettings, _Strict


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
    cors_origins: list[str] = Field(default_factory=list)
    """Origins whose browser pages may call the API (CORS), e.g. `http://localhost:5173`; `*`: any.
    Empty (the default): none, only the server's own page."""
    stream_ttl_s: float = Field(default=3600.0, gt=0)
    """How long a run's streamed events stay in the record store after its last one, for clients that
    reconnect with `Last-Event-ID` (also after the run ended or the server restarted); an older stream
    is removed when a client asks for it, and with its thread."""
    cron_poll_s: float | None = Field(default=5.0, gt=0)
    """How often (seconds) the server looks for crons that are due and starts their runs; a cron
    fires at most this late. Every server over one store may poll: each firing starts one run.
    null: this server fires no crons (its API still manages them)."""
    cron_takeover_s: float = Field(default=60.0, gt=0)
    """How long (seconds) a firing claimed by a server may wait for that server to record the run it
    started; after that, a server (any one, this one after a restart) takes the firing over: it
    records the firing's run if it did start, and starts it otherwise. Keep it above the time a
    run takes to start under load: a firing taken over while its first server is still starting
    it would run twice."""
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
