"""A single-bit flip anywhere in any file kind is detected, never decoded into different state.

Each file the stores write (checkpoint log with items and writes, event log, tool journal, session
document, pins, fence, blob, a session's inbox and outbox, a turn file, the file lease's token
counter and holder record) is written once; then, for many random bit positions (seeded), a copy
with that one bit flipped is read back by the code that owns the file. The read must either raise
one of our errors or return exactly what the undamaged file returns (a flip of a record log's
final newline leaves a last record that still verifies: it is read as it was, see
`checkpointing.records`).

The persisted indexes beside the logs (`*.jsonl.idx`) are caches: a flip there must never change
what is read (the damaged index is ignored and the log scanned), and with the indexes present a
flip in a log is still detected. A turn file only points at the inbox that records its turn: a
flipped one is rebuilt from that inbox by the read (the same session, the file rewritten).
"""

from __future__ import annotations

import gc
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agent.core.errors import AgentrtError
from agent.core.events import session_event_log
from agent.session.inbox import Inbox
from agent.session.lease_file import FileLease
from agent.session.outbox import Outbox, Owed
from agent.session.session import ChatSession
from agent.session.stores.jsonl import JsonlSessionStore
from agent.session.turn_index import TurnIndex
from agent.tools.journal import ToolExecutionJournal
from checkpointing.blobs import BlobStore
from checkpointing.exceptions import CheckpointingError
from checkpointing.fencing import FencingGuard
from checkpointing.saver import JsonlCheckpointSaver
from tests.support.savers import delta_graph

FLIPS = 120
SESSION = Path("tenants/acme/sessions/s1")


CFG: Any = {"configurable": {"thread_id": "s1", "tenant_id": "acme"}}


def _write_everything(base: Path) -> dict[str, Any]:
    saver = JsonlCheckpointSaver(base)
    delta_graph(saver).invoke({"messages": [HumanMessage("go")], "n": 0}, CFG)
    latest = saver.get_tuple(CFG)
    assert latest is not None
    saver.pin(latest.config)
    events = session_event_log(base, "acme", "s1")
    events.create({"tenant_id": "acme", "agent_id": "a", "user_id": "u", "session_id": "s1",
                   "created_at": "2026-01-01T00:00:00+00:00", "config_digest": None})  # fmt: skip
    first = events.append("user_turn", {"content": "hello"})
    events.append("assistant_message", {"content": "hi there"}, parent_id=first.id)
    journal = ToolExecutionJournal(base, "acme", "s1")
    journal.record_intent("r1", "c0", "t", {"n": 0}, "read_only")
    journal.record_completed("r1", "c0", "result")
    JsonlSessionStore(base).put(ChatSession(session_id="s1", agent_id="a", tenant_id="acme", user_id="u"))
    FencingGuard(base / SESSION).check_and_raise(7)
    ref = BlobStore(base).put(b"blob payload " * 50)
    saver.save_indexes()
    events.save_index()
    assert (base / SESSION / "runs/main/checkpoints.jsonl.idx").exists()
    assert (base / SESSION / "events.jsonl.idx").exists()
    turn = "t-1"
    TurnIndex(base, "acme").reserve(turn, "s1")
    inbox = Inbox(base, "acme", "s1")
    inbox.submit("hello", turn, "u")
    inbox.mark_started(turn, "", "w1")
    inbox.mark_done(turn, {"status": "COMPLETED", "run_id": "r1", "answer": "hi"}, "w1")
    lease = FileLease(base)
    grant = lease.acquire("acme", "s1", holder="worker-1", ttl_s=30)
    holder_record = (base / SESSION / "lease.json").read_bytes()
    lease.release(grant)  # removes lease.json: put back what the holder wrote, as a live holder leaves it
    (base / SESSION / "lease.json").write_bytes(holder_record)
    Outbox(base).owe("acme", "s1", "SQL", Owed.MESSAGES)
    Outbox(base).owe("acme", "s1", "L2", Owed.SESSION)
    return {"blob": ref, "turn": turn}


def _readers(ctx: dict[str, Any]) -> dict[str, tuple[str, Callable[[Path], Any]]]:
    def saver_state(base: Path) -> Any:
        saver = JsonlCheckpointSaver(base)
        history = [(h.values, h.next, h.metadata) for h in delta_graph(saver).get_state_history(CFG)]
        tuples = [(t.checkpoint, t.pending_writes) for t in saver.list(CFG)]
        return history, tuples

    def pins(base: Path) -> Any:
        saver = JsonlCheckpointSaver(base)
        return saver._store("acme", "s1").pins()

    return {
        "checkpoint log": (str(SESSION / "runs/main/checkpoints.jsonl"), saver_state),
        "pins": (str(SESSION / "pins.json"), pins),
        "event log": (str(SESSION / "events.jsonl"), lambda b: (session_event_log(b, "acme", "s1").header(),
                                                               session_event_log(b, "acme", "s1").raw_entries())),
        "journal": (str(SESSION / "journal.jsonl"), lambda b: ToolExecutionJournal(b, "acme", "s1").entries()),
        "session document": (str(SESSION / "session.json"), lambda b: JsonlSessionStore(b).get("acme", "s1")),
        "fence": (str(SESSION / "fence.json"), lambda b: FencingGuard(b / SESSION).highest()),
        "blob": (str(BlobStore(Path("")).path_for(ctx["blob"])), lambda b: BlobStore(b).get(ctx["blob"])),
        "inbox": (str(SESSION / "inbox.jsonl"), lambda b: Inbox(b, "acme", "s1").turns()),
        "turn file": (f"tenants/acme/turns/{ctx['turn']}.json",
                      lambda b: TurnIndex(b, "acme").session_of(ctx["turn"])),
        "lease token": (str(SESSION / "lease.token"), lambda b: FileLease(b).counter("acme", "s1")),
        "lease state": (str(SESSION / "lease.json"), lambda b: FileLease(b).state("acme", "s1")),
        "outbox": (str(SESSION / "outbox.jsonl"), lambda b: Outbox(b).debts("acme", "s1")),
        "checkpoint index": (str(SESSION / "runs/main/checkpoints.jsonl.idx"), saver_state),
        "event index": (str(SESSION / "events.jsonl.idx"), lambda b: (session_event_log(b, "acme", "s1").header(),
                                                                     session_event_log(b, "acme", "s1").raw_entries())),
    }  # fmt: skip


CACHES = ("checkpoint index", "event index")
REBUILT = ("turn file",)
"""Rebuilt by the read from the record it only points at (the inbox): the original state, rewritten."""
LOGS = ("checkpoint log", "event log", "journal", "inbox", "outbox")


KINDS = ["checkpoint log", "pins", "event log", "journal", "session document", "fence", "blob"]
KINDS += ["inbox", "turn file", "lease token", "lease state", "outbox"]


@pytest.mark.parametrize("kind", [*KINDS, *CACHES])
def test_single_bit_flips_are_always_detected(tmp_path: Path, kind: str) -> None:
    """Every one-bit flip either raises our error or reads back exactly the original state."""
    seed_dir = tmp_path / "seed"
    ctx = _write_everything(seed_dir)
    rel, read = _readers(ctx)[kind]
    original = read(seed_dir)
    # The readers' SQLite connections close when collected, and the last one removes the WAL file:
    # collect now, not while copytree is listing the folder.
    gc.collect()
    data = (seed_dir / rel).read_bytes()
    rnd = random.Random(f"{kind}-flips")
    positions = sorted({len(data) - 1, 0, *(rnd.randrange(len(data)) for _ in range(FLIPS))})
    detected = 0
    for pos in positions:
        base = tmp_path / f"f{pos}"
        shutil.copytree(seed_dir, base, symlinks=True)
        damaged = bytearray(data)
        damaged[pos] ^= 1 << rnd.randrange(8)
        (base / rel).write_bytes(bytes(damaged))
        try:
            got = read(base)
        except (CheckpointingError, AgentrtError):
            detected += 1
        else:
            assert got == original, f"{kind}: flip at byte {pos} of {len(data)} read back as different state"
            if kind in LOGS and pos == len(data) - 1:
                detected += 1  # the final newline: the record it ends verifies, and is served as it was
        if kind in REBUILT:
            assert (base / rel).read_bytes() == data, f"{kind}: flip at byte {pos} was not rebuilt"
        else:
            assert (base / rel).read_bytes() == bytes(damaged), f"{kind}: the read modified the file"
        shutil.rmtree(base)
    if kind in CACHES or kind in REBUILT:  # never used damaged: the log is read instead
        assert detected == 0, f"{kind}: {detected} flips of a cache made a read fail"
    else:
        assert detected == len(positions), f"{kind}: {len(positions) - detected} flips went unnoticed"
