"""The doctor on the embedded default without LangGraph, LangChain, SQLAlchemy or psycopg.

`LightContext` gives the checks what a runner's parts would, read as they read it: the session
manager with its SQLite layer read by the standard library's `sqlite3` (`agent.session.stores.
sql_lazy`), the blob store, the file lease, the pins of the current code that the last runner
built kept (`agent.loop.surface_cache`), and the checkpoint read from the saver's own records
(`checkpointing.tail.ThreadTail`): its document, what runs next and the approvals it waits for,
and the channels the checks read: `messages` (its stored DTOs folded with `merge_messages`' rules
into `MessageView`s), the append channels (`extend_list`), and the plain ones.

Where only LangGraph, the tools or the full codec answer exactly, it raises `NeedsGraph`, and
`agentrt doctor` runs again with a runner (`RunnerContext`), so the report is always the one a
runner gives. That is when:

- the pins are not kept yet (no runner of this code, tool settings and libraries has run: the
  `model_context` and `recovery` checks compare them; the store-wide report needs them only with a
  worker broker);
- a checkpoint record cannot be read (damaged, or a referenced record missing): the reads of
  LangGraph and the saver word the `recovery` and `model_context` findings;
- the branch's checkpoint is not known (its head unreadable, no session document): LangGraph then
  reads the thread's newest checkpoint live, with its finished tasks' writes applied;
- the state holds what `ThreadTail` leaves to LangGraph (parallel or `Send` tasks, writes of the
  null task, an `Overwrite`, a stored class), messages `merge_messages` would convert or reject
  (chunks, dicts, a message without an id, the removal of one the context does not hold), or a
  message LangChain rebuilds with more than its DTO says (tool calls parsed from
  `additional_kwargs`, invalid tool calls, fields of another type than LangChain's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.doctor.subject import DoctorContext
from agent.loop.message_view import MessageKind, MessageView
from agent.runner.readable import RunnerFree
from checkpointing.tail import ABSENT, History, NeedsGraph, StoredMessage, ThreadTail

if TYPE_CHECKING:
    from pathlib import Path

    from agent.core.config import AgentSettings
    from agent.doctor.facts import SessionFacts
    from agent.loop.surface import SurfacePins
    from agent.session.lease import SessionLease
    from checkpointing.blobs import Blobs

APPENDED = ("tool_result_store", "execution_history_text")
"""The state's `extend_list` DeltaChannels the checks read."""
MESSAGES = "messages"
"""The state's `merge_messages` DeltaChannel."""
PLAIN = ("context_compression_count", "sandbox_manifest")
"""The state's last-value channels the checks read."""
REMOVE_ALL = "__remove_all__"
"""The id of the removal that drops every message before it (LangGraph's `REMOVE_ALL_MESSAGES`)."""
_TYPE_OF_ROLE = {
    "system": "system",
    "user": "human",
    "ai": "ai",
    "tool": "tool",
    "chat": "chat",
    "function": "function",
    "remove": "remove",
}


class LightContext(RunnerFree, DoctorContext):
    """The doctor's context on the embedded default, without a runner (see the module doc)."""

    def __init__(self, settings: AgentSettings) -> None:
        super().__init__(settings)
        self._pins: SurfacePins | None = None
        self._blobs: Blobs | None = None
        self._lease: SessionLease | None = None

    @property
    def pins(self) -> SurfacePins:
        """The pins a runner would have, as the last one built kept them (`NeedsGraph`: none kept)."""
        if self._pins is None:
            from agent.loop import surface_cache

            self._pins = surface_cache.pins(self.settings)
            if self._pins is None:
                raise NeedsGraph("the current code's pins are not kept yet: a runner computes them")
        return self._pins

    @property
    def blobs(self) -> Blobs:
        """The blob store of the settings."""
        if self._blobs is None:
            from agent.session.record_store import blobs

            self._blobs = blobs(self.settings)
        return self._blobs

    @property
    def lease(self) -> SessionLease:
        """The configured lease (read, never taken)."""
        if self._lease is None:
            from agent.runner.services import build_lease

            self._lease = build_lease(self.settings)
        return self._lease

    def read_checkpoint(self, facts: SessionFacts) -> None:
        """The branch's checkpoint facts from the saver's records (`NeedsGraph`: see the module doc),
        read where the other checks read them (on the PostgreSQL store, the copy of its rows)."""
        try:
            _read(ThreadTail(_record_store(self.settings, facts.base), facts.tenant_id), facts)
        except NeedsGraph:
            raise
        except Exception as err:  # damaged records: the runner's reads word what the checks report
            raise NeedsGraph(f"the checkpoint records cannot be read here: {type(err).__name__}: {err}") from err


def _record_store(settings: AgentSettings, copy: Path | None) -> Any:
    if copy is not None:  # the rows are written out already: reading them again costs a query each
        from checkpointing.store.file_store import FileStore

        return FileStore(copy)
    from agent.session.record_store import store

    return store(settings)


def _read(tail: ThreadTail, facts: SessionFacts) -> None:
    tenant, sid = facts.tenant_id, facts.session_id
    for run, scan in facts.indexable_runs():  # read and verified already: indexed from the scan
        try:
            tail.index_from(tenant, sid, run, scan.records, scan.good)
        except Exception:  # the reads below meet what stopped it
            break
    if facts.session is not None:
        from agent.runner.branches import head_of

        facts.checkpoint_id = head_of(tail, facts.session, fork_point=facts.fork_point()).checkpoint_id
    facts.doc = tail.document(tenant, sid, facts.checkpoint_id)
    if facts.doc is None:
        return
    cp = facts.checkpoint_id
    if cp is None:
        raise NeedsGraph("the thread's newest checkpoint is read live")
    facts.state = state_of(tail, tenant, sid, cp)
    step = tail.tail(tenant, sid, cp)
    facts.next_nodes = list(step.next)
    facts.waiting_for_human = bool(step.interrupts)
    facts.approval_ids = [iid for iid, _ in step.interrupts]


def state_of(tail: ThreadTail, tenant: str, thread: str, checkpoint_id: str) -> dict[str, Any]:
    """The graph state's values at a checkpoint that the checks read, as `get_state` gives them
    (messages as `MessageView`s)."""
    state: dict[str, Any] = {}
    for channel in (*APPENDED, MESSAGES, *PLAIN):
        got = tail.channel(tenant, thread, checkpoint_id, channel, messages=channel == MESSAGES)
        if got is ABSENT:
            if channel not in PLAIN:
                state[channel] = []  # a DeltaChannel never written starts empty, and reads so
            continue
        if isinstance(got, History):
            if channel in PLAIN:
                raise NeedsGraph(f"no stored value of {channel!r}")
            got = merged(got.seed, got.writes) if channel == MESSAGES else _extended(got.seed, got.writes)
        if channel == MESSAGES:
            if not isinstance(got, list):
                raise NeedsGraph("a messages value that is no list")
            got = [view_of_stored(_message(m)) for m in got]
        state[channel] = got
    return state


def _extended(seed: Any, writes: list[Any]) -> list[Any]:
    """`extend_list(seed, writes)` (LangGraph starts from [] without a seed)."""
    if seed is not None and not isinstance(seed, list):
        raise NeedsGraph("an append channel whose value is no list")
    out = list(seed or [])
    for w in writes:
        if isinstance(w, list):
            out.extend(w)
        else:
            out.append(w)
    return out


def merged(seed: Any, writes: list[Any]) -> list[StoredMessage]:
    """`graph.state.merge_messages(seed, writes)` on stored messages: a new id appends, a known id
    replaces in place, a removal deletes its id, `REMOVE_ALL` drops everything before it."""
    if seed is not None and not isinstance(seed, list):
        raise NeedsGraph("a messages value that is no list")
    out: list[StoredMessage | None] = [_message(m) for m in seed or []]
    index = {str(m.dto["id"]): i for i, m in enumerate(out) if m is not None and m.dto.get("id") is not None}
    for write in writes:
        for item in write if isinstance(write, list) else [write]:
            msg = _message(item)
            mid = msg.dto.get("id")
            if msg.dto.get("role") == "remove":
                if mid == REMOVE_ALL:
                    out, index = [], {}
                elif isinstance(mid, str) and mid in index:
                    out[index.pop(mid)] = None
                else:
                    raise NeedsGraph("the removal of a message the context does not hold")
                continue
            if mid is None:
                raise NeedsGraph("a message without an id (merge_messages gives it one)")
            pos = index.get(str(mid))
            if pos is None:
                index[str(mid)] = len(out)
                out.append(msg)
            else:
                out[pos] = msg
    return [m for m in out if m is not None]


def _message(value: Any) -> StoredMessage:
    """`value` when it is a stored message LangChain rebuilds as it is (no chunk)."""
    if not isinstance(value, StoredMessage) or value.dto.get("chunk") or value.dto.get("role") not in _TYPE_OF_ROLE:
        raise NeedsGraph("a messages value LangChain converts")
    return value


def view_of_stored(msg: StoredMessage) -> MessageView:
    """The `MessageView` of the LangChain message a DTO rebuilds (`checkpointing.messages.dto_to_message`)."""
    dto = msg.dto
    role = str(dto.get("role"))
    kwargs = dto.get("additional_kwargs", {})
    if not isinstance(kwargs, dict):
        raise NeedsGraph("additional_kwargs that are no object")
    if role == "tool":
        call = dto.get("tool_call_id")
        if not isinstance(call, str):
            raise NeedsGraph("a tool_call_id that is no string")
        return MessageView("tool", MessageKind.TOOL, tool_call_id=call, additional_kwargs=kwargs)
    if role != "ai":
        return MessageView(_TYPE_OF_ROLE[role], MessageKind.OTHER, additional_kwargs=kwargs)
    calls = dto.get("tool_calls", [])
    if dto.get("invalid_tool_calls") or not isinstance(calls, list) or (not calls and kwargs.get("tool_calls")):
        raise NeedsGraph("tool calls LangChain rebuilds otherwise")
    for tc in calls:
        plain_call = isinstance(tc, dict) and isinstance(tc.get("name"), str) and isinstance(tc.get("args", {}), dict)
        if not plain_call or not isinstance(tc.get("id"), (str, type(None))):
            raise NeedsGraph("a tool call LangChain validates otherwise")
    return MessageView("ai", MessageKind.AI, call_ids=tuple(tc.get("id") for tc in calls), additional_kwargs=kwargs)
