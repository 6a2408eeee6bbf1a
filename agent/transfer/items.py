"""A tenant's items of LangGraph's store (the store API's long-term memory) as one file:
`agentrt items export` and `agentrt items import`.

Items belong to a tenant, not to a session (every thread and user of the tenant shares them), so
`agentrt export ID` does not carry them: a session's file would otherwise hand one user's export
every other user's memory. They move with their own file, JSON Lines:

- a header `{"format": "agentrt-store-items", "version": 1, "tenant_id": T, "items": N}`;
- one line per item `{"namespace": [...], "key", "value", "created_at", "updated_at", "ttl_minutes"}`
  (the namespace as the tenant sees it; `ttl_minutes` null for an item that never expires);
- a trailer `{"end": true, "items": N, "sha256": <hex of every byte before this line>}`.

Import checks the whole file first (a cut, changed or hostile file is refused, nothing written), then
checks every item against the store: one already there with the same value is left alone (importing
twice changes nothing), one there with another value stops the import before anything is written.
Imported items get the import's time as their times (LangGraph's stores set them), their TTL anew
from the import, and, with `store.index`, their embeddings from this machine's model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import BaseStore, Item
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.core.config import AgentSettings
from agent.core.errors import BackendUnavailable, Conflict, InputError, is_store_db_error
from agent.session.item_sql import StoreNotMade, read_store, store_where, tenant_condition
from agent.session.item_values import (
    MAX_TTL_MINUTES,
    MIN_TTL_MINUTES,
    RESERVED_ROOT,
    check_label,
    no_nul,
    storable_json,
)

FORMAT = "agentrt-store-items"
VERSION = 1
PAGE = 1000
"""Items read per search while exporting."""


class ItemLine(BaseModel):
    """One item of the file, checked as the store API checks a put."""

    model_config = ConfigDict(extra="forbid")

    namespace: list[str] = Field(min_length=1)
    key: str = Field(min_length=1)
    value: dict[str, Any]
    created_at: str | None = None
    updated_at: str | None = None
    ttl_minutes: float | None = Field(default=None, ge=MIN_TTL_MINUTES, le=MAX_TTL_MINUTES, allow_inf_nan=False)

    @field_validator("namespace")
    @classmethod
    def _labels(cls, v: list[str]) -> list[str]:
        for label in v:
            check_label(label)
        if v[0] == RESERVED_ROOT:
            raise ValueError(f"the first label cannot be {RESERVED_ROOT!r}: LangGraph reserves it")
        return v

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        return no_nul(v, "the key")

    @field_validator("value")
    @classmethod
    def _value(cls, v: dict[str, Any]) -> dict[str, Any]:
        return dict(storable_json(v))


@contextmanager
def store_errors(settings: AgentSettings) -> Iterator[None]:
    """A failure of the store's database as `BackendUnavailable` (exit 6), naming the store."""
    try:
        yield
    except Exception as err:
        if not is_store_db_error(err):
            raise
        raise BackendUnavailable(
            f"LangGraph's store {store_where(settings)} failed ({type(err).__name__}: {str(err).splitlines()[0]}); "
            "check that its database is reachable (`agentrt doctor`), then run this again"
        ) from err


@dataclass
class ItemsFile:
    """A checked items file."""

    tenant_id: str
    items: list[ItemLine]


def _ttls(settings: AgentSettings, tenant_id: str) -> dict[tuple[str, str], float]:
    """The TTL (minutes) of each of the tenant's items that has one (LangGraph's API does not say)."""
    where, params = tenant_condition(tenant_id)
    try:
        rows = read_store(
            settings, f"SELECT prefix, key, ttl_minutes FROM store WHERE ttl_minutes IS NOT NULL AND {where}", params
        )
    except StoreNotMade:
        return {}
    return {(str(prefix), str(key)): float(ttl) for prefix, key, ttl in rows}


def export_items(settings: AgentSettings, tenant_id: str) -> bytes:
    """The file of every live item of `tenant_id`. Reads leave the items' TTLs alone; a store never
    made is not made now (its file says no items)."""
    items: list[Item] = []
    with store_errors(settings):
        try:
            read_store(settings, "SELECT count(*) FROM store_migrations")
        except StoreNotMade:
            return _file(tenant_id, [], {})
        from agent.session.item_store import item_store
        from agent.session.tenant_store import TenantStore

        store = TenantStore(item_store(settings), tenant_id)
        while True:
            page = store.search((), limit=PAGE, offset=len(items), refresh_ttl=False)
            items.extend(page)
            if len(page) < PAGE:
                break
        items.sort(key=lambda i: (list(i.namespace), i.key))
        return _file(tenant_id, items, _ttls(settings, tenant_id))


def _file(tenant_id: str, items: list[Item], ttls: dict[tuple[str, str], float]) -> bytes:
    scope = f"tenants.{tenant_id}."
    lines = [json.dumps({"format": FORMAT, "version": VERSION, "tenant_id": tenant_id, "items": len(items)})]
    for item in items:
        ttl = ttls.get((scope + ".".join(item.namespace), item.key))
        line = {
            "namespace": list(item.namespace),
            "key": item.key,
            "value": item.value,
            "created_at": item.created_at.isoformat(),
            "updated_at": item.updated_at.isoformat(),
            "ttl_minutes": ttl,
        }
        lines.append(json.dumps(line))
    body = "".join(line + "\n" for line in lines).encode()
    trailer = {"end": True, "items": len(items), "sha256": hashlib.sha256(body).hexdigest()}
    return body + (json.dumps(trailer) + "\n").encode()


def read_items(data: bytes, name: str) -> ItemsFile:
    """The checked file `data` (named `name` in errors); raises `InputError` saying what is wrong."""

    def refuse(what: str) -> InputError:
        return InputError(f"{name} is not a usable items file: {what}; nothing was imported")

    if not data.endswith(b"\n"):
        raise refuse("it is cut short (no final line break)")
    body, _, last = data[:-1].rpartition(b"\n")
    body += b"\n"
    lines = body.splitlines()
    try:
        header, trailer = json.loads(lines[0]), json.loads(last)
    except (ValueError, IndexError):
        raise refuse("its first or last line is not JSON (give the file `agentrt items export` wrote)") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise refuse(f"its first line does not name the format {FORMAT!r} (give the file `agentrt items export` wrote)")
    if header.get("version") != VERSION:
        raise refuse(f"format version {str(header.get('version'))[:20]} is not {VERSION}; export it again here")
    if not isinstance(trailer, dict) or trailer.get("end") is not True:
        raise refuse("it is cut short (no end line)")
    if trailer.get("sha256") != hashlib.sha256(body).hexdigest():
        raise refuse("its content does not match its checksum (changed or damaged after export)")
    tenant = header.get("tenant_id")
    from checkpointing.exceptions import InvalidIdError
    from checkpointing.ids import validate_id

    try:
        tenant = validate_id(tenant, "tenant id")
    except InvalidIdError as err:
        raise refuse(str(err)) from None
    items: list[ItemLine] = []
    for n, line in enumerate(lines[1:], start=2):
        try:
            items.append(ItemLine.model_validate_json(line))
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise refuse(f"line {n}: {where}: {first['msg'].removeprefix('Value error, ')}") from None
    if len(items) != header.get("items") or len(items) != trailer.get("items"):
        raise refuse(f"it holds {len(items)} items, its header says {str(header.get('items'))[:20]}")
    if len({(tuple(i.namespace), i.key) for i in items}) != len(items):
        raise refuse("an item (namespace and key) appears twice")
    return ItemsFile(tenant, items)


def import_items(store: BaseStore, items: list[ItemLine]) -> tuple[int, int]:
    """Put `items` into `store` (the tenant's view); (added or replaced, already there). Raises
    `Conflict` before writing anything when an item is there with another value."""
    todo: list[ItemLine] = []
    for item in items:
        there = store.get(tuple(item.namespace), item.key, refresh_ttl=False)
        if there is None:
            todo.append(item)
        elif there.value != item.value:
            shown = ".".join(item.namespace)[:80]
            raise Conflict(
                f"item {item.key[:80]!r} in namespace {shown!r} is already in this store with another value; "
                "nothing was imported (delete it through the store API, or keep this store's)"
            )
    for item in todo:
        store.put(tuple(item.namespace), item.key, item.value, ttl=item.ttl_minutes)
    return len(todo), len(items) - len(todo)
