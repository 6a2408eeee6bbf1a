"""One run of the graph for a session: the lease held, events recorded, the session kept in step.

`SessionHold` (agent/session/hold.py) acquires the session lease (fencing token checked at once,
heartbeat running) and releases it; `EventRecorder` is the LoopRuntime's event sink that appends entries to the
session's event tree (with the fencing token) and tracks which checkpoint each step produced.

Recording an event reads in three modules: `EventRecorder.record` -> `ChatMemory.record`
(agent/session/chat_memory.py: redaction, the branch cursor, the SQL page rows) ->
`EventLog.append` (checkpointing/entry_log.py, through the store's `SessionStreams.append`).
Durability is the store's: `EventRecorder.commit` -> `ChatMemory.commit` -> `EventLog.commit`
-> `SessionStreams.commit` (on files the session's group commit, on PostgreSQL a flush check).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from agent.core.logs import log_event
from agent.session.hold import SessionHold
from agent.session.manager import ChatSessionManager
from agent.session.session import ChatSession

__all__ = ["COMMIT_AFTER", "RECORDED_EVENTS", "EventRecorder", "SessionHold"]


# Runtime events that become entries of the session's event log (others only stream).
RECORDED_EVENTS = frozenset(
    {
        "model_call",
        "tool_call",
        "tool_result",
        "compression",
        "sandbox",
        "sandbox_created",
        "sandbox_destroyed",
        "hitl_request",
        "hitl_decision",
    }
)
ROOM_EVENTS = {"created": "sandbox_created", "destroyed": "sandbox_destroyed"}
"""Sandbox events (`Sandbox` callbacks, kind -> entry type) written as entries of their own type."""


# The steps after whose checkpoint the deferred entries are committed: once per tool step (the
# acting node) and at the start of a turn; a run's closing entry (run_end / run_fail / run_pause)
# commits the rest. A process killed in between loses nothing (the entries were written); only a
# machine crash can lose the entries of the unfinished tool step, never a checkpoint's.
COMMIT_AFTER = frozenset({"init", "acting"})


@dataclass
class EventRecorder:
    """Appends a session's runtime events to its event log, in order, from any node thread."""

    manager: ChatSessionManager
    session: ChatSession
    token: int | None
    run_id: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    pending_nodes: list[str] = field(default_factory=list)
    last_checkpoint_id: str | None = None
    last_values: dict[str, Any] | None = None
    """The state at `last_checkpoint_id`, as the graph streamed it (the run's result is read from it)."""

    def __call__(self, event_type: str, payload: dict[str, Any]) -> None:
        if event_type == "sandbox" and payload.get("kind") in ROOM_EVENTS:
            # A room made or removed is an entry of its own kind: readers find rooms without parsing payloads.
            room = {k: v for k, v in payload.items() if k != "kind"}
            event_type = ROOM_EVENTS[payload["kind"]]
            payload = {**room, "branch_id": self.session.current_branch_id}
        if event_type in RECORDED_EVENTS:
            self.record(event_type, {**payload, "run_id": self.run_id}, defer_commit=True)

    def record(self, event_type: str, payload: dict[str, Any], *, defer_commit: bool = False) -> str:
        """Append one entry on the session's current branch; returns its id.

        A runtime event (`defer_commit`) is written at once but made durable with the rest of its
        tool step (see `checkpoint`); any other entry commits itself and everything before it.
        """
        with self.lock:
            entry = self.manager.memory.record(
                self.session, event_type, payload, fencing_token=self.token, defer_commit=defer_commit
            )
        log_event(event_type, self.session.session_id, self.session.tenant_id, payload)
        return entry.id

    def node_done(self, node: str) -> None:
        """A node finished; its `node_end` entry is written with the checkpoint that follows."""
        with self.lock:
            self.pending_nodes.append(node)

    def checkpoint(self, checkpoint_id: str, next_nodes: list[str], values: dict[str, Any] | None = None) -> None:
        """A checkpoint was written: record `node_end` for the nodes of that step."""
        with self.lock:
            nodes, self.pending_nodes = self.pending_nodes, []
            self.last_checkpoint_id = checkpoint_id
            self.last_values = values
        for node in nodes:
            self.record(
                "node_end",
                {"node": node, "checkpoint_id": checkpoint_id, "next": next_nodes, "run_id": self.run_id},
                defer_commit=True,
            )
        if COMMIT_AFTER.intersection(nodes) or not next_nodes:
            self.commit()

    def commit(self) -> None:
        """Make the deferred entries durable: one fsync for a tool step's events (group commit).

        The store does it (`ChatMemory.commit` -> `EventLog.commit` -> `SessionStreams.commit`):
        while the run holds its session (`RuntimeBuilder.attach`), the checkpoint data written so
        far, then the event log, one fsync per file. The tool journal's lazy records wait for the
        next unsafe tool or the run's end.
        """
        with self.lock:
            self.manager.memory.commit(self.session)
