"""A thread's tail read from the saver's own records, without LangGraph: for read-only commands.

Read-only commands (show a session, page an archived tool result, diagnose it) ask a checkpoint
thread a few questions: which checkpoint a branch is at, which nodes run next from it, which
approvals its stopped tasks wait for, what a channel holds there (a DeltaChannel as the writes to
replay onto its nearest snapshot), and the checkpoint's document (`get_document`). LangGraph
answers them by rebuilding the graph's state (`graph.get_state`); `ThreadTail` answers them from
the records `JsonlCheckpointSaver` wrote, with its index and its item references
(`checkpointing._saver_refs`), as `get_state` would for a checkpoint addressed by id
(`live=False`):

- the next nodes are the record's `next_nodes` (the saver computes them when it writes the
  checkpoint, with LangGraph's trigger rule for StateGraph channels);
- the interrupts are the `__interrupt__` pending writes of the next node's task, in the order the
  saver hands pending writes to LangGraph;
- a channel is its stored value; a DeltaChannel without one is a `History`: the nearest snapshot
  and the writes after it, as `get_delta_channel_history` gives them (the caller folds them with
  the channel's reducer; `append_channel` does for `extend_list`);
- messages are read as their canonical DTOs (`StoredMessage`, `checkpointing.messages`) when the
  caller asks for them (`messages=True`), never rebuilt as LangChain messages.

Only the plain case is answered: one next node reached by a pull task, values that are plain JSON
(with tuples, interrupts, dicts with `$` keys and, when asked, messages). Anything else (parallel
or `Send` tasks, an `Overwrite`, a stored class, a write of the null task) raises `NeedsGraph`, and
the caller asks LangGraph instead; so the answers are always the ones `get_state` gives.

Every checkpoint the saver would load to answer (the thread's newest, a branch's head) has its
records read as the saver reads them (values, items, texts, metadata, pending writes; checksums
verified) but not decoded: a missing item or a damaged record raises the saver's own error.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from checkpointing._saver_refs import (
    CHUNK_KEY,
    ITEM_KEY,
    TAG,
    _is_chunk,
    _is_ref,
    expand,
    metadata_json,
    pending_writes_raw,
    resolve,
    stored_value,
)
from checkpointing._saver_store import SessionStore
from checkpointing._saver_walk import raw_histories
from checkpointing.ids import validate_id
from checkpointing.store.base import Store

INTERRUPT = "__interrupt__"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
"""LangGraph's task id of writes no task made (`update_state`): `get_state` applies them."""
_PULL = "~__pregel_pull, "


class NeedsGraph(Exception):
    """The records hold what only LangGraph (or the full codec) reads exactly: ask `get_state`."""


@dataclass(frozen=True)
class StoredMessage:
    """A message of a channel value as stored: its canonical DTO (`checkpointing.messages`), which
    the codec would rebuild as a LangChain message (`dto_to_message`)."""

    dto: dict[str, Any]


@dataclass(frozen=True)
class History:
    """A DeltaChannel's value at a checkpoint that stores none: what LangGraph replays.

    `seed` is the nearest stored value (None: there is none, the channel starts empty), `writes`
    the values written after it, oldest first, to fold with the channel's reducer in one call."""

    seed: Any
    writes: list[Any]


ABSENT: Any = object()
"""What `ThreadTail.channel` answers for a channel without a version at the checkpoint."""


@dataclass(frozen=True)
class Found:
    """A checkpoint of the thread: its config (thread, ns, id) and its decoded metadata."""

    config: dict[str, Any]
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Tail:
    """What `get_state` says of a checkpoint's next step."""

    checkpoint_id: str | None
    next: list[str] = field(default_factory=list)
    interrupts: list[tuple[str, Any]] = field(default_factory=list)
    """(interrupt id, value) of each interrupt the next task raised, in LangGraph's order."""


class ThreadTail:
    """Read-only questions to the checkpoint threads of one record store (see the module doc).

    `get_tuple` / `list` answer as `JsonlCheckpointSaver`'s do for a thread config, with a `Found`
    (config and metadata) in place of a LangGraph tuple: enough for `agent.runner.branches.head_of`.
    """

    def __init__(self, store: Store, default_tenant: str = "default") -> None:
        self.store = store
        self.default_tenant = default_tenant
        self._open: dict[tuple[str, str], SessionStore] = {}
        self._read: set[tuple[str, str, str]] = set()

    def records(self, tenant: str, thread: str) -> SessionStore:
        """The saver's view of one session's checkpoint records (indexed, read on demand)."""
        rec = self._session(tenant, thread)
        rec.begin()
        return rec

    def _session(self, tenant: str, thread: str) -> SessionStore:
        key = (tenant, thread)
        rec = self._open.get(key)
        if rec is None:
            rec = self._open[key] = SessionStore(self.store.session(tenant, thread, "always"))
        return rec

    def index_from(self, tenant: str, thread: str, run: str, recs: list[tuple[int, dict[str, Any]]], good: int) -> None:
        """Index one run file from records the caller has just read and verified, as
        `JsonlCheckpointSaver.index_from` does (for an inspector that reads every file anyway)."""
        self._session(tenant, thread).index_from(run, recs, good)

    def document(self, tenant: str, thread: str, checkpoint_id: str | None) -> dict[str, Any] | None:
        """`JsonlCheckpointSaver.get_document` of the root namespace: the checkpoint record (the
        thread's newest when `checkpoint_id` is None) without its values, metadata decoded."""
        rec = self.records(tenant, thread)
        cp_id = checkpoint_id or rec.index.latest.get("")
        doc = rec.doc("", cp_id) if cp_id else None
        if doc is None:
            return None
        out = {k: v for k, v in doc.items() if k not in ("values", "k")}
        out["metadata"] = plain(metadata_json(doc.get("metadata"), rec.item))
        out["runtime_snapshot"] = plain(metadata_json(doc.get("runtime_snapshot") or {}, rec.item))
        return out

    def _ids(self, config: dict[str, Any]) -> tuple[str, str, str, str | None]:
        conf = config.get("configurable") or {}
        tenant = validate_id(str(conf.get("tenant_id") or self.default_tenant), "tenant_id")
        cp = conf.get("checkpoint_id")
        return tenant, str(conf["thread_id"]), str(conf.get("checkpoint_ns", "") or ""), str(cp) if cp else None

    def get_tuple(self, config: dict[str, Any]) -> Found | None:
        """The checkpoint `config` names (its id, else the thread's newest in its namespace)."""
        tenant, thread, ns, cp_id = self._ids(config)
        rec = self.records(tenant, thread)
        cp_id = cp_id or rec.index.latest.get(ns)
        return None if cp_id is None else self._found(rec, ns, cp_id)

    def list(self, config: dict[str, Any], *, filter: dict[str, Any], limit: int | None = None) -> Iterator[Found]:
        """The thread's checkpoints, newest first, whose metadata has every `filter` item."""
        conf = config.get("configurable") or {}
        tenant = validate_id(str(conf.get("tenant_id") or self.default_tenant), "tenant_id")
        out: builtins.list[Found] = []
        for t, thread in self.store.threads(tenant, str(conf["thread_id"])):
            rec = self.records(t, thread)
            for ns, cp_id in sorted(rec.index.cps, key=lambda k: k[1], reverse=True):
                if limit is not None and len(out) >= limit:
                    return iter(out)
                found = self._found(rec, ns, cp_id)
                if found is not None and all(found.metadata.get(k) == v for k, v in filter.items()):
                    out.append(found)
        return iter(out)

    def _found(self, rec: SessionStore, ns: str, cp_id: str) -> Found | None:
        doc = rec.doc(ns, cp_id)
        if doc is None:
            return None
        self._read_as_loaded(rec, doc)
        meta = plain(metadata_json(doc.get("metadata"), rec.item))
        conf = {"thread_id": doc["session_id"], "checkpoint_ns": ns, "checkpoint_id": cp_id}
        return Found({"configurable": conf}, meta if isinstance(meta, dict) else {})

    def _read_as_loaded(self, rec: SessionStore, doc: dict[str, Any]) -> None:
        """Read every record the saver reads to load checkpoint `doc` (its channel values, their
        items and texts, its metadata and pending writes), without decoding them: damage the
        saver's read would report (a missing item, a failed checksum) raises the same error here."""
        key = (doc["tenant_id"], doc["session_id"], doc["checkpoint_id"])
        if key in self._read:
            return
        ns = doc["checkpoint_ns"]
        for ch in doc["task_state"]:
            _fetch(stored_value(rec, ns, doc, ch), rec)
        metadata_json(doc.get("metadata"), rec.item)
        for _, _, enc in pending_writes_raw(rec, ns, doc["checkpoint_id"]):
            _fetch(enc, rec)
        self._read.add(key)

    def tail(self, tenant: str, thread: str, checkpoint_id: str | None) -> Tail:
        """`get_state`'s checkpoint id, `next` and `interrupts` at `checkpoint_id` (None: the
        thread has no checkpoint; a thread that has one is read live by LangGraph: `NeedsGraph`)."""
        rec = self.records(tenant, thread)
        if checkpoint_id is None:
            if rec.index.latest.get(""):
                raise NeedsGraph("the newest checkpoint read live")
            return Tail(None)
        doc = rec.doc("", checkpoint_id)
        if doc is None:
            return Tail(checkpoint_id)  # get_state of an unknown id: an empty snapshot with that id
        self._read_as_loaded(rec, doc)
        nxt = _next_nodes(doc)
        interrupts: builtins.list[tuple[str, Any]] = []
        for task, ch, enc, path in _writes_with_paths(rec, checkpoint_id):
            if ch != INTERRUPT:
                continue
            if not nxt or path != _PULL + nxt[0]:
                raise NeedsGraph(f"an interrupt of task {task} outside the next node")
            value = load(enc, rec)
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if not isinstance(item, _Interrupt):
                    raise NeedsGraph("an interrupt write that is no Interrupt")
                interrupts.append((item.id, item.value))
        return Tail(checkpoint_id, nxt, interrupts)

    def channel(self, tenant: str, thread: str, checkpoint_id: str, channel: str, *, messages: bool = False) -> Any:
        """Channel `channel` at checkpoint `checkpoint_id` as `get_state` starts from it: `ABSENT`
        (no version there, or no such checkpoint), its stored value decoded (a DeltaChannel
        snapshot unwrapped), or a `History` for a DeltaChannel that stores none there.
        `messages`: messages read as `StoredMessage` (else they raise `NeedsGraph`)."""
        rec = self.records(tenant, thread)
        doc = rec.doc("", checkpoint_id)
        if doc is None:
            return ABSENT
        self._read_as_loaded(rec, doc)
        if any(task == NULL_TASK_ID for task, _, _ in pending_writes_raw(rec, "", checkpoint_id)):
            raise NeedsGraph("writes of the null task are applied to the state")
        if channel not in doc["channel_versions"]:
            return ABSENT
        if channel in doc["task_state"]:
            value = load(stored_value(rec, "", doc, channel), rec, messages=messages)
            return value.value if isinstance(value, _Snapshot) else value
        # With the checks `get_delta_channel_history` makes on each step of its walk.
        hist = raw_histories(rec, "", checkpoint_id, [channel], check=True)[channel]
        seed = load(hist["seed"], rec, messages=messages) if "seed" in hist else None
        writes = []
        for _, enc in hist["writes"]:
            w = load(enc, rec, messages=messages)
            if _overwrites(w):
                raise NeedsGraph("an Overwrite write")
            writes.append(w)
        return History(seed.value if isinstance(seed, _Snapshot) else seed, writes)

    def append_channel(self, tenant: str, thread: str, checkpoint_id: str | None, channel: str) -> builtins.list[Any]:
        """An append-only (`extend_list`) channel's value at `checkpoint_id`, as `get_state` gives
        it ([] when the thread has no checkpoint)."""
        if checkpoint_id is None:
            if self.records(tenant, thread).index.latest.get(""):
                raise NeedsGraph("the newest checkpoint read live")
            return []
        got = self.channel(tenant, thread, checkpoint_id, channel)
        if got is ABSENT:
            return []
        if not isinstance(got, History):
            return _as_list(got)
        out = _as_list(got.seed) if got.seed is not None else []
        for w in got.writes:
            if isinstance(w, list):
                out.extend(w)
            else:
                out.append(w)
        return out


def _overwrites(value: Any) -> bool:
    """Whether LangGraph reads a write as an `Overwrite` (the dict forms; the class is a tagged value)."""
    return isinstance(value, dict) and ("__overwrite__" in value or value.get("type") == "__overwrite__")


def _next_nodes(doc: dict[str, Any]) -> list[str]:
    nxt = doc.get("next_nodes")
    if not isinstance(nxt, list) or len(nxt) > 1 or "pending_sends" in doc or "__pregel_tasks" in doc["task_state"]:
        raise NeedsGraph("more than one next task, or Send packets")
    return [str(n) for n in nxt]


def _writes_with_paths(rec: SessionStore, cp_id: str) -> list[tuple[str, str, Any, str]]:
    """`pending_writes_raw` with each write's task path."""
    paths = {r["task_id"]: r.get("task_path", "") for r in rec.writes_records("", cp_id)}
    return [(t, ch, enc, paths.get(t, "")) for t, ch, enc in pending_writes_raw(rec, "", cp_id)]


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, _Snapshot):
        value = value.value
    if not isinstance(value, list):
        raise NeedsGraph("an append channel whose value is no list")
    return list(value)


@dataclass(frozen=True)
class _Interrupt:
    id: str
    value: Any


@dataclass(frozen=True)
class _Snapshot:
    value: Any


def _fetch(enc: Any, rec: SessionStore) -> None:
    """Read the items (and the texts they reference) that loading stored value `enc` reads."""
    if isinstance(enc, dict) and enc.get(TAG) == "delta_snapshot" and isinstance(enc.get("v"), list):
        enc = enc["v"]
    if isinstance(enc, list):
        flat: list[Any] = []
        for x in enc:
            flat.extend(rec.item(x[CHUNK_KEY]) if _is_chunk(x) else [x])
        for x in flat:
            if _is_ref(x):
                expand(rec.item(x[ITEM_KEY]), rec)
        return
    resolve(enc, rec)


def load(enc: Any, rec: SessionStore, *, messages: bool = False) -> Any:
    """A stored value as `DocumentBuilder.load` reads it, for the plain values `plain` knows."""
    if isinstance(enc, list):
        return _load_list(enc, rec, messages)
    if isinstance(enc, dict) and enc.get(TAG) == "delta_snapshot" and isinstance(enc.get("v"), list):
        return _Snapshot(_load_list(enc["v"], rec, messages))
    return plain(resolve(enc, rec), messages=messages)


def _load_list(items: list[Any], rec: SessionStore, messages: bool = False) -> list[Any]:
    flat: list[Any] = []
    for x in items:
        flat.extend(rec.item(x[CHUNK_KEY]) if _is_chunk(x) else [x])
    return [plain(expand(rec.item(x[ITEM_KEY]), rec) if _is_ref(x) else x, messages=messages) for x in flat]


def plain(d: Any, *, messages: bool = False) -> Any:
    """Decoded JSON as `CheckpointStateCodec.decode` rebuilds it, for plain JSON, tuples, dicts
    with `$` keys, interrupts, DeltaChannel snapshots and (with `messages`) messages as
    `StoredMessage`; `NeedsGraph` for any other tagged value."""
    t = type(d)
    if t is list:
        return [plain(x, messages=messages) for x in d]
    if t is not dict:
        return d
    if TAG in d:
        return _tagged(d, messages)
    if any(type(k) is not str or k.startswith("$") for k in d):
        raise NeedsGraph("a blob or item reference inside a value")
    return {k: plain(x, messages=messages) for k, x in d.items()}


def _tagged(d: dict[str, Any], messages: bool) -> Any:
    tag, p = d[TAG], d.get("v")
    if tag == "tuple" and isinstance(p, list):
        return tuple(plain(x, messages=messages) for x in p)
    if tag == "dict" and isinstance(p, list):
        pairs = [(plain(k, messages=messages), plain(x, messages=messages)) for k, x in p]
        if any(type(k) is not str for k, _ in pairs):
            raise NeedsGraph("a dict with keys that are not strings")
        return dict(pairs)
    if tag == "interrupt" and isinstance(p, dict):
        return _Interrupt(str(p["id"]), plain(p["value"], messages=messages))
    if tag == "delta_snapshot":
        return _Snapshot(plain(p, messages=messages))
    if tag == "msg" and messages and isinstance(p, dict):
        return StoredMessage(p)
    raise NeedsGraph(f"a stored value tagged {tag!r}")


def interrupt_requests(interrupts: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The approvals among `interrupts`, as `agent.core.results.pending_approvals` lists them."""
    return [{**value, "interrupt_id": iid} for iid, value in interrupts if isinstance(value, dict)]
