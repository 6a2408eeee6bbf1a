"""RuntimeBuilder: rebuilds a session's LoopRuntime from config (never from a checkpoint).

It is the factory of the graph's context (`graph.context.AgentContext`): the init node calls it at
the start of each turn, and the first node of a resumed run calls it when the run's context has no
runtime yet (the recovery order rebuilds LoopRuntime and the sandbox: docs/concepts/recovery.md).
The runner attaches the run's EventRecorder while it drives.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from agent.core.config import AgentSettings
from agent.core.tool_spec import ToolContext, ToolSpec
from agent.loop.context_manager import ContextManager
from agent.loop.models import build_chat_model
from agent.loop.runtime import EventSink, LoopRuntime
from agent.loop.skills import check_skill_tools, load_skills
from agent.runner.overrides import CONFIG_KEY as OVERRIDES_KEY
from agent.runner.overrides import applied, decode
from agent.session.record_store import session_streams
from agent.tools.execute import execute_with_journal
from agent.tools.journal import JournalStatus, ToolExecutionJournal
from agent.tools.sandbox.room import Sandbox
from agent.tools.tool_results import ToolResultStore, make_entry
from checkpointing.blobs import Blobs
from checkpointing.layout import room_dir, session_dir
from checkpointing.store.base import SessionStreams

LAST_KEPT = 16  # runtimes `last_runtime` can still show (the runs own them; this is only a view)


class RuntimeBuilder:
    """Builds LoopRuntimes for one runner's settings and toolset."""

    def __init__(self, settings: AgentSettings, tools: dict[str, ToolSpec], blobs: Blobs, saver: Any = None) -> None:
        self.settings = settings
        self.saver = saver
        """The checkpoint saver: with `put_text` (ours), long tool results are kept once, in its run logs."""
        self.tools = tools
        self.blobs = blobs
        self._sinks: dict[str, EventSink] = {}
        self._holds: dict[str, SessionStreams] = {}
        """The sessions a run holds (`SessionStreams.hold`), released at `detach`."""
        self._datasets: dict[tuple[str, str], Any] = {}
        self._last: OrderedDict[tuple[str, str], LoopRuntime] = OrderedDict()  # newest LAST_KEPT only
        self._lock = threading.Lock()
        self.skills = load_skills(settings.skills_dir)
        check_skill_tools(self.skills, set(tools))

    def attach(self, session_id: str, sink: EventSink) -> None:
        """Send the session's runtime events to `sink` while a run is driven.

        With `fsync: always` (and a checkpoint policy other than "batch") the run also holds the
        session on the record store (`SessionStreams.hold`) until `detach`: the checkpoints,
        pending writes, events and journal records of the run reach disk at the store's commits
        (one per tool step, see `agent.runner.turns.EventRecorder.commit`; before an unsafe tool runs,
        see the journal) instead of one fsync per record, and `detach` makes everything durable.
        """
        held = self._run_streams(session_id, sink)
        if held is not None:
            held.hold()
        with self._lock:
            self._sinks[session_id] = sink
            old = self._holds.pop(session_id, None)
            if held is not None:
                self._holds[session_id] = held
        if old is not None:
            old.release()

    def detach(self, session_id: str) -> None:
        """Stop recording the session's events (and release the run's hold: everything durable)."""
        with self._lock:
            self._sinks.pop(session_id, None)
            held = self._holds.pop(session_id, None)
        if held is not None:
            held.release()

    def _run_streams(self, session_id: str, sink: EventSink) -> SessionStreams | None:
        p = self.settings.persistence
        if p.fsync != "always" or (p.checkpoint_fsync or p.fsync) == "batch" or p.saver != "jsonl":
            return None
        session = getattr(sink, "session", None)
        tenant = getattr(session, "tenant_id", None)
        if not isinstance(tenant, str):
            return None
        # The store owns group commit (on PostgreSQL each commit is durable on its own: a hold is free).
        return session_streams(self.settings, tenant, session_id, "batch")

    def journal(self, tenant: str, session_id: str, token: int | None) -> ToolExecutionJournal:
        """The session's tool journal on the record store, fenced with the run's lease token.

        Only an unsafe tool's INTENT is made durable before the tool runs. The rest is written at
        once, so a killed process loses nothing; a machine crash may lose a finished call's record,
        and the call is then "outcome unknown" (unsafe) or runs again (read-only), unless the
        step's checkpoint, which holds its result, reached the disk. A held session (`attach`)
        makes its records durable before an unsafe tool runs and when the run ends."""
        texts = _SaverTexts(self.saver, tenant, session_id, token) if hasattr(self.saver, "put_text") else None
        return ToolExecutionJournal.over(
            session_streams(self.settings, tenant, session_id, "batch"),
            self.blobs,
            token=token,
            fsync="batch",
            inline_max_bytes=self.settings.persistence.inline_payload_max_bytes,
            texts=texts,
        )

    def __call__(self, session_id: str, state: Mapping[str, Any], config: RunnableConfig) -> LoopRuntime:
        conf = config.get("configurable") or {}
        tenant = str(conf.get("tenant_id") or self.settings.session.tenant_id)
        run_id = str(conf.get("run_id") or "main")
        token = conf.get("fencing_token")
        sandbox = self.sandbox(tenant, session_id, str(conf.get("branch_id") or "main"), state)
        ctx = ToolContext(session_id=session_id, tenant_id=tenant, run_id=run_id, sandbox=sandbox)
        store = ToolResultStore.from_entries(list(state.get("tool_result_store") or []), self.blobs)
        ctx.tool_results = store
        settings = applied(self.settings, decode(conf.get(OVERRIDES_KEY)))  # the run's assistant's, if any
        rt = LoopRuntime(
            settings=settings,
            session_id=session_id,
            tenant_id=tenant,
            run_id=run_id,
            model=build_chat_model(settings.model),
            tools=self.tools,
            tool_context=ctx,
            compressor=ContextManager(settings) if settings.compression.enabled else None,
            fencing_token=token if isinstance(token, int) else None,
        )
        ctx.todos = rt.todos
        rt.skills = self.skills
        rt.activate_skill(state.get("active_skill"))
        rt.store_entry_factory = self._store_entry_factory(store)
        journal = self.journal(tenant, session_id, token if isinstance(token, int) else None)
        rt.tool_executor = _journaled(journal, run_id)
        # A call the journal has seen ran (or started): a later "reject" must not hide that.
        rt.journal_knows = lambda call_id: journal.lookup(run_id, call_id).status is not JournalStatus.NONE
        with self._lock:
            sink = self._sinks.get(session_id)
        if sink is not None:
            rt.sinks.append(sink)
        self._attach_datasets(rt, tenant)
        with self._lock:
            self._last[(tenant, session_id)] = rt
            self._last.move_to_end((tenant, session_id))
            while len(self._last) > LAST_KEPT:
                self._last.popitem(last=False)
        return rt

    def last_runtime(self, session_id: str, tenant_id: str | None = None) -> LoopRuntime | None:
        """The LoopRuntime this builder built last for a session (for inspection: tests, benchmarks)."""
        tenant = tenant_id or self.settings.session.tenant_id
        with self._lock:
            return self._last.get((tenant, session_id))

    def datasets_loaded(self, tenant: str, session_id: str) -> bool:
        """Whether this process loaded (and caches) the session's datasets."""
        with self._lock:
            return (tenant, session_id) in self._datasets

    def room_dir(self, tenant: str, session_id: str, branch_id: str) -> Path:
        """The sandbox room of a branch: `workspace/` for main, `rooms/<branch>/` for forks."""
        return room_dir(session_dir(self.settings.base_dir, tenant, session_id), branch_id)

    def sandbox(self, tenant: str, session_id: str, branch_id: str, state: Mapping[str, Any]) -> Sandbox:
        """The branch's room; refilled from the checkpoint's manifest when it is empty but should not be.

        On the `files` store a room that has files is left as it is: it holds the effects of tool
        calls the journal recorded as completed, which a resume replays instead of re-running (and
        finishes the interrupted one as the journal says, `agent.tools.execute`). Only the temp files
        of writes a crash cut short are removed: no tool of this run writes yet, and the lease keeps
        others out. On the `postgres` store the room under base_dir is only this machine's copy:
        another machine may have run the session since (the copy is stale), so the room is made the
        checkpoint's manifest whatever it holds. A room found empty or refilled either way is marked
        `refilled`: a resume then applies the room effects of the calls it replays again.
        """
        room = self.room_dir(tenant, session_id, branch_id)
        manifest = state.get("sandbox_manifest") or {}
        empty = not room.exists() or not any(room.iterdir())
        room.parent.mkdir(parents=True, exist_ok=True)
        # The Sandbox makes a missing room itself and reports it (a `sandbox_created` entry). On the
        # postgres store a room the session already has (a manifest) made again on this machine is
        # a local copy, not an event of the session: every machine then writes the same log.
        copy = self.settings.persistence.store == "postgres" and bool(manifest)
        sandbox = Sandbox(room, blobs=self.blobs, on_event=self._sandbox_event(session_id, skip_created=copy))
        if not empty:
            sandbox.sweep_temp()
        if (empty and manifest) or (not empty and self.settings.persistence.store == "postgres"):
            sandbox.refilled = sandbox.restore(manifest) > 0
        # An empty room holds only what the checkpoint had too: no effect of a call after it.
        sandbox.refilled = sandbox.refilled or empty
        return sandbox

    def _sandbox_event(self, session_id: str, skip_created: bool = False) -> Callable[[str, dict[str, Any]], None]:
        def on_event(kind: str, payload: dict[str, Any]) -> None:
            if skip_created and kind == "created":
                return
            with self._lock:
                sink = self._sinks.get(session_id)
            if sink is not None:
                sink("sandbox", {"kind": kind, **payload})

        return on_event

    def _attach_datasets(self, rt: LoopRuntime, tenant: str) -> None:
        if not self.settings.datasets:
            return
        from agent.tools.datasets.dataset_registry import DatasetCatalog

        key = (tenant, rt.session_id)
        with self._lock:
            catalog = self._datasets.get(key)
            if catalog is None:
                # Loaded once per session in this process: schema + stats are cached by the catalog.
                catalog = DatasetCatalog(
                    self.settings.datasets,
                    base_dir=self.settings.base_dir,
                    limits=self.settings.tools.query_limits.limits(),
                )
                catalog.load()
                self._datasets[key] = catalog
        rt.tool_context.datasets = catalog
        summary = catalog.to_summary()
        rt.datasets_summary = json.dumps(summary, ensure_ascii=False)[:4000]
        rt.dataset_info = list(summary.get("datasets") or [])

    def _store_entry_factory(self, store: ToolResultStore) -> Callable[[dict[str, Any], str], dict[str, Any] | None]:
        inline_max = self.settings.persistence.inline_payload_max_bytes
        preview = self.settings.compression.preview_chars

        def factory(call: dict[str, Any], content: str) -> dict[str, Any] | None:
            if call.get("name") == "read_tool_result":
                return None  # a read-back is a view of an archived result, not a new one
            entry = make_entry(call["id"], call["name"], content, self.blobs, inline_max, preview_chars=preview)
            store.add_entry(entry)
            return dict(entry)

        return factory


def _journaled(
    journal: ToolExecutionJournal, run_id: str
) -> Callable[[ToolSpec, dict[str, Any], ToolContext], dict[str, Any]]:
    def execute(spec: ToolSpec, call: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        text, status, replayed = execute_with_journal(journal, run_id, call, spec, ctx)
        return {
            "status": "success" if status == "success" else "error",
            "content": text,
            "replayed": replayed,
            "journal_status": status,
        }

    return execute


class _SaverTexts:
    """A session's long tool results kept as items of its checkpoint run logs (`ResultTexts`)."""

    def __init__(self, saver: Any, tenant: str, session_id: str, token: int | None = None) -> None:
        self.saver = saver
        self.tenant = tenant
        self.session_id = session_id
        self.token = token

    def _config(self, run_id: str) -> RunnableConfig:
        conf: dict[str, Any] = {"thread_id": self.session_id, "tenant_id": self.tenant, "run_id": run_id}
        if self.token is not None:
            conf["fencing_token"] = self.token  # a stale run's write is refused, as its journal's is
        return {"configurable": conf}

    def put(self, run_id: str, text: str) -> dict[str, Any] | None:
        """Store `text` in the run's log (None when it is too short to be an item)."""
        ref: dict[str, Any] | None = self.saver.put_text(self._config(run_id), text)
        return ref

    def get(self, run_id: str, ref: dict[str, Any]) -> str | None:
        """The stored text of `ref` (None when it never reached the disk)."""
        text: str | None = self.saver.get_text(self._config(run_id), ref)
        return text
