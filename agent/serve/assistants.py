"""Assistants of `agentrt serve`: the built-in `agentrt` one, and those a tenant creates, kept with
every version in one document per tenant of the record store (`agent.session.assistant_doc`: a
file under `base_dir` on the files store, a row with `persistence.store: postgres`), where the
server's crons are kept too. Only these routes read it, and one tenant never reads another's.

Every change (create, update, set latest, delete) is a compare-and-swap of the tenant's document:
two servers (or two requests) changing assistants at once never lose each other's change, and the
versions of an assistant are numbered 1, 2, 3... without a gap or a number given twice.

Assistants kept by an earlier agentrt, one item each under `("agentrt-assistants", <tenant>)` of
the server's LangGraph store, are read from there until the tenant's first change, which moves them
into the document (and then removes the items).

An assistant's `config.configurable` (or `context`, the same thing: LangGraph keeps them equal)
holds only the keys of `agent.runner.overrides.ALLOWED`; a run that names the assistant applies them.
The built-in assistant (graph id `agentrt`) has none, and cannot be changed or deleted.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from langgraph.store.base import BaseStore, PutOp

from agent.core.config import AgentSettings, AssistantOverrides
from agent.core.errors import AssistantConflict, AssistantNotFound, ConfigError, quote_id
from agent.runner.overrides import CONFIG_NAME, check_overrides, resolve
from agent.session.assistant_doc import Assistants, assistants_session, change_assistants, read_assistants
from agent.session.tenant_store import ASSISTANTS_ROOT

GRAPH_ID = "agentrt"
# LangGraph's server derives a graph's default assistant id this way, so clients see the same id.
ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
ASSISTANT_ID = str(uuid.uuid5(ASSISTANT_NAMESPACE, GRAPH_ID))
ROOT = ASSISTANTS_ROOT
"""The first label of the namespace of the assistants an earlier agentrt kept in the LangGraph store."""
PAGE = 500
T = TypeVar("T")
VERSION_FIELDS = ("assistant_id", "graph_id", "config", "context", "metadata", "name", "description", "version")


def now() -> str:
    """The current time as the API writes it."""
    return _iso(time.time())


def _iso(t: float) -> str:
    """ISO 8601 in UTC with microseconds: the order of two changes shows in their stamps."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}+00:00"


def builtin(started_at: float) -> dict[str, Any]:
    """The server's own assistant: the agentrt graph with the server's settings."""
    created = _iso(started_at)
    return {
        "assistant_id": ASSISTANT_ID,
        "graph_id": GRAPH_ID,
        "name": GRAPH_ID,
        "description": "agentrt: the agent graph over crash-safe sessions",
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "version": 1,
        "created_at": created,
        "updated_at": created,
    }


def is_builtin(assistant_id: str) -> bool:
    """Whether the id names the built-in assistant (by its id or by the graph id)."""
    return assistant_id in (GRAPH_ID, ASSISTANT_ID)


def contains(whole: Any, part: Any) -> bool:
    """PostgreSQL's `@>` on JSON: every key of `part` is in `whole` with a value that contains its own."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and contains(whole[k], v) for k, v in part.items())
    if isinstance(part, list):
        return isinstance(whole, list) and all(any(contains(w, p) for w in whole) for p in part)
    return bool(whole == part)


def checked_config(
    settings: AgentSettings, config: Mapping[str, Any] | None, context: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """An assistant's (config, context), equal in their overrides as LangGraph keeps them; `ConfigError`
    (a 422) naming the first key outside the allowlist."""
    config = dict(config or {})
    extra = sorted(k for k in config if k != "configurable")
    if extra:
        raise ConfigError(f"config.{extra[0]}: an assistant's config holds only configurable; leave it out")
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, dict):
        raise ConfigError("config.configurable: must be an object")
    if configurable and context:
        raise ConfigError("context: give configurable or context, not both (they are the same settings)")
    if configurable:
        check_overrides(settings, configurable, "config.configurable")
        return {"configurable": dict(configurable)}, dict(configurable)
    if context:
        check_overrides(settings, context, "context")
        return {"configurable": dict(context)}, dict(context)
    return {}, {}


def settings_schema(settings: AgentSettings) -> dict[str, Any]:
    """The JSON schema of what an assistant's context (or configurable) may hold."""
    schema = AssistantOverrides.model_json_schema()
    names = sorted(settings.serve.assistant_configs)
    named: dict[str, Any] = {"type": "string", "description": "an entry of the server's serve.assistant_configs"}
    if names:
        named["enum"] = names
    schema["properties"][CONFIG_NAME] = named
    schema["title"] = "AssistantSettings"
    return schema


def checked_graph(graph_id: str | None) -> str:
    """The graph id of an assistant: this server serves one graph."""
    if graph_id != GRAPH_ID:
        raise ConfigError(f"graph_id: no graph {quote_id(str(graph_id))} here; this server serves {GRAPH_ID!r}")
    return graph_id


def checked_id(assistant_id: str | None) -> str:
    """A new assistant's id (a UUID, as LangGraph's server takes them; a fresh one when none is given)."""
    if assistant_id is None:
        return str(uuid.uuid4())
    try:
        return str(uuid.UUID(assistant_id))
    except ValueError:
        raise ConfigError(f"assistant_id: {quote_id(assistant_id)} is not a UUID") from None


class AssistantStore:
    """The assistants of every tenant, in the record store (see the module docstring)."""

    def __init__(self, settings: AgentSettings, store: BaseStore, started_at: float) -> None:
        self.settings = settings
        self.store = store
        """The LangGraph store, where an earlier agentrt kept assistants (read until moved)."""
        self.builtin = builtin(started_at)

    # --- reading ---------------------------------------------------------------------------------------
    def _legacy(self, tenant_id: str) -> Assistants:
        """The tenant's assistants an earlier agentrt kept in the LangGraph store, by id."""
        out: Assistants = {}
        while True:
            page = self.store.search((ROOT, tenant_id), limit=PAGE, offset=len(out), refresh_ttl=False)
            out.update({i.key: dict(i.value) for i in page})
            if len(page) < PAGE:
                return out

    def _items(self, tenant_id: str) -> Assistants:
        found, _ = read_assistants(assistants_session(self.settings, tenant_id))
        return self._legacy(tenant_id) if found is None else found

    def _item(self, tenant_id: str, assistant_id: str) -> dict[str, Any] | None:
        try:
            key = str(uuid.UUID(assistant_id))
        except ValueError:
            return None
        return self._items(tenant_id).get(key)

    def get(self, tenant_id: str, assistant_id: str) -> dict[str, Any]:
        """The assistant as it is now (the built-in one by its id or graph id); `AssistantNotFound` else."""
        if is_builtin(assistant_id):
            return dict(self.builtin)
        item = self._item(tenant_id, assistant_id)
        if item is None:
            raise AssistantNotFound(f"assistant {quote_id(assistant_id)} not found")
        return dict(item["assistant"])

    def all(self, tenant_id: str) -> list[dict[str, Any]]:
        """Every assistant of the tenant, the built-in one first."""
        return [dict(self.builtin), *(dict(i["assistant"]) for i in self._items(tenant_id).values())]

    def versions(self, tenant_id: str, assistant_id: str) -> list[dict[str, Any]]:
        """Every version of the assistant, newest first."""
        if is_builtin(assistant_id):
            b = self.builtin
            return [{**{k: b[k] for k in VERSION_FIELDS}, "created_at": b["created_at"]}]
        item = self._item(tenant_id, assistant_id)
        if item is None:
            raise AssistantNotFound(f"assistant {quote_id(assistant_id)} not found")
        return sorted(item["versions"], key=lambda v: -int(v["version"]))

    def overrides(self, tenant_id: str, assistant_id: str) -> tuple[str, dict[str, Any]]:
        """(assistant id, the overrides its runs apply), checked again against this server's settings."""
        assistant = self.get(tenant_id, assistant_id)
        configurable = (assistant.get("config") or {}).get("configurable") or {}
        check_overrides(self.settings, configurable, f"assistant {assistant['assistant_id']}: config.configurable")
        return str(assistant["assistant_id"]), resolve(self.settings, configurable)

    def resolved(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The overrides of a checked configurable (a named config's, then the keys beside it)."""
        return resolve(self.settings, given)

    # --- writing ---------------------------------------------------------------------------------------
    def _change(self, tenant_id: str, edit: Callable[[Assistants], T]) -> T:
        """Apply `edit` to the tenant's assistants by compare-and-swap of its document (made from the
        LangGraph store's items the first time, which then go)."""
        legacy: Assistants = {}

        def first() -> Assistants:
            legacy.clear()
            legacy.update(self._legacy(tenant_id))
            return legacy

        out, made = change_assistants(assistants_session(self.settings, tenant_id), tenant_id, edit, first)
        if made and legacy:
            self.store.batch([PutOp((ROOT, tenant_id), key, None) for key in legacy])
        return out

    def create(self, tenant_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """A new assistant (version 1) from a create body; with `if_exists: do_nothing` the one that
        has the id already. Everything is checked before anything is written."""
        graph_id = checked_graph(body.get("graph_id"))
        config, context = checked_config(self.settings, body.get("config"), body.get("context"))
        assistant_id = checked_id(body.get("assistant_id"))
        if is_builtin(assistant_id):
            raise AssistantConflict(f"assistant {assistant_id} is the built-in one; pick another id")

        def edit(items: Assistants) -> dict[str, Any]:
            existing = items.get(assistant_id)
            if existing is not None:
                if body.get("if_exists") == "do_nothing":
                    return dict(existing["assistant"])
                raise AssistantConflict(
                    f"assistant {assistant_id} already exists; update it, or send if_exists: do_nothing"
                )
            stamp = now()
            version = {
                "assistant_id": assistant_id,
                "graph_id": graph_id,
                "config": config,
                "context": context,
                "metadata": dict(body.get("metadata") or {}),
                "name": body.get("name") or "Untitled",
                "description": body.get("description"),
                "version": 1,
                "created_at": stamp,
            }
            assistant = {**version, "updated_at": stamp}
            items[assistant_id] = {"assistant": assistant, "versions": [version]}
            return assistant

        return self._change(tenant_id, edit)

    def _changeable(self, items: Assistants, assistant_id: str) -> dict[str, Any]:
        if is_builtin(assistant_id):
            raise AssistantConflict(
                f"assistant {quote_id(assistant_id)} is the server's own and cannot change; "
                f"create one with graph_id {GRAPH_ID!r} and change that"
            )
        try:
            item = items.get(str(uuid.UUID(assistant_id)))
        except ValueError:
            item = None
        if item is None:
            raise AssistantNotFound(f"assistant {quote_id(assistant_id)} not found")
        return item

    def update(self, tenant_id: str, assistant_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """A new version from a patch body (metadata merged, the other fields given replaced) made
        latest, numbered one past the highest version there is."""
        if "graph_id" in body:
            checked_graph(body["graph_id"])
        # As LangGraph's server: an empty config keeps the current one; a context (even empty) replaces it.
        given_config = bool(body.get("config")) or body.get("context") is not None
        if given_config:
            config, context = checked_config(self.settings, body.get("config"), body.get("context"))

        def edit(items: Assistants) -> dict[str, Any]:
            item = self._changeable(items, assistant_id)
            current = item["assistant"]
            stamp = now()
            version = {
                **{k: current.get(k) for k in VERSION_FIELDS},
                "metadata": {**(current.get("metadata") or {}), **(body.get("metadata") or {})},
                "version": max(int(v["version"]) for v in item["versions"]) + 1,
                "created_at": stamp,
            }
            if given_config:
                version["config"], version["context"] = config, context
            for key in ("name", "description"):
                if body.get(key) is not None:
                    version[key] = body[key]
            assistant = {**current, **{k: version[k] for k in VERSION_FIELDS}, "updated_at": stamp}
            item["assistant"], item["versions"] = assistant, [*item["versions"], version]
            return assistant

        return self._change(tenant_id, edit)

    def set_latest(self, tenant_id: str, assistant_id: str, number: int) -> dict[str, Any]:
        """Make an earlier (or later) version the assistant's current one."""

        def edit(items: Assistants) -> dict[str, Any]:
            item = self._changeable(items, assistant_id)
            found = next((v for v in item["versions"] if int(v["version"]) == number), None)
            if found is None:
                raise AssistantNotFound(f"version {number} not found for assistant {quote_id(assistant_id)}")
            assistant = {**item["assistant"], **{k: found[k] for k in VERSION_FIELDS}, "updated_at": now()}
            item["assistant"] = assistant
            return assistant

        return self._change(tenant_id, edit)

    def delete(self, tenant_id: str, assistant_id: str) -> str:
        """Remove the assistant and its versions; its id."""

        def edit(items: Assistants) -> str:
            item = self._changeable(items, assistant_id)
            key = str(item["assistant"]["assistant_id"])
            del items[key]
            return key

        return self._change(tenant_id, edit)
