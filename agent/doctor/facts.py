"""The facts the doctor's checks read: every file scanned, every layer asked, the state loaded (read-only)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent.errors import StorageError
from agent.session.session import ChatSession, SessionDocumentCorrupt
from checkpointing.records import decode_record

if TYPE_CHECKING:
    from agent.runner import AgentRunner

__all__ = ["STATUSES", "Check", "DoctorReport", "FileScan", "SessionFacts", "Status", "gather", "scan_file"]

Status = Literal["OK", "WARN", "FAIL"]
STATUSES: tuple[Status, ...] = ("OK", "WARN", "FAIL")


@dataclass(frozen=True)
class Check:
    """One diagnosis: what was looked at (`evidence`), how it stands, and what to do next."""

    name: str
    status: Status
    evidence: str | dict[str, Any]
    next_step: str

    def to_json(self) -> dict[str, Any]:
        """`{"name", "status", "evidence", "next_step"}`."""
        return {"name": self.name, "status": self.status, "evidence": self.evidence, "next_step": self.next_step}

    @property
    def summary(self) -> str:
        """The one-line finding (the evidence's `summary` when it is a dict)."""
        if isinstance(self.evidence, dict):
            return str(self.evidence.get("summary", ""))
        return self.evidence


@dataclass
class DoctorReport:
    """Every check run on one session, in the order of seed §8."""

    session_id: str
    tenant_id: str
    checks: list[Check] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What `agentrt doctor --json` prints."""
        return {"checks": [c.to_json() for c in self.checks]}

    @property
    def verdict(self) -> Status:
        """The worst status of any check."""
        return max((c.status for c in self.checks), key=STATUSES.index, default="OK")

    def exit_code(self) -> int:
        """0 unless a check FAILed (then 1)."""
        return 1 if any(c.status == "FAIL" for c in self.checks) else 0

    def check(self, name: str) -> Check:
        """The check called `name` (KeyError when it did not run)."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check {name!r}; ran {[c.name for c in self.checks]}")


# --- reading without repairing ---------------------------------------------------------------------


@dataclass
class FileScan:
    """One JSONL file read record by record with checksums verified, and nothing cut or rewritten."""

    path: Path
    exists: bool
    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    error: str | None = None
    torn: bool = False
    """Only the last line is bad: a crash mid-append, which the next writer moves aside."""
    size: int = 0

    @property
    def clean(self) -> bool:
        """Missing or fully intact."""
        return self.error is None

    def recs(self) -> Iterator[dict[str, Any]]:
        """The intact records in file order."""
        return (rec for _, rec in self.records)


def scan_file(path: Path) -> FileScan:
    """Read and verify `path` without the torn-tail repair (the doctor must not modify files)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return FileScan(path, exists=False)
    except OSError as err:
        return FileScan(path, exists=True, error=f"unreadable: {err}")
    scan = FileScan(path, exists=True, size=len(data))
    pos, line = 0, 0
    while pos < len(data):
        line += 1
        nl = data.find(b"\n", pos)
        try:
            if nl == -1:
                raise ValueError("no newline at the end (a torn write)")
            rec = decode_record(data[pos:nl])
        except (ValueError, UnicodeDecodeError) as err:
            scan.torn = nl == -1 or nl == len(data) - 1
            scan.error = f"line {line}: {err}"
            return scan
        scan.records.append((pos, rec))
        pos = nl + 1
    return scan


@dataclass
class SessionFacts:
    """Everything the checks look at, gathered once without side effects."""

    runner: AgentRunner
    tenant_id: str
    session_id: str
    user_id: str | None
    dir: Path
    files: dict[str, FileScan] = field(default_factory=dict)
    """Session-relative path -> scan (events.jsonl, journal.jsonl, runs/...)."""
    layers: dict[str, str] = field(default_factory=dict)
    """Layer name -> "present" / "absent" / "down" / "corrupt" / "error: ...", in read order."""
    copies: dict[str, ChatSession] = field(default_factory=dict)
    session: ChatSession | None = None
    other_tenants: list[str] = field(default_factory=list)
    saver_safe: bool = True
    unsafe_reason: str | None = None
    doc: dict[str, Any] | None = None
    doc_error: str | None = None
    state: dict[str, Any] | None = None
    state_error: str | None = None
    next_nodes: list[str] = field(default_factory=list)
    waiting_for_human: bool = False
    """The run is interrupted for a human decision (HITL)."""
    owed: list[str] = field(default_factory=list)
    """What the session's outbox says a layer still owes ("SQL messages", ...), or why it is unreadable."""
    hidden: bool = False
    """The caller named a user who does not own the session: nothing of it may be shown."""

    def owner(self) -> str | None:
        """The session's user, from the session document or else the event-log header."""
        if self.session is not None:
            return self.session.user_id
        user = (self.header or {}).get("user_id")
        return str(user) if user is not None else None

    @property
    def events(self) -> FileScan:
        """The scan of events.jsonl."""
        return self.files["events.jsonl"]

    @property
    def header(self) -> dict[str, Any] | None:
        """The header record (first line of events.jsonl), if intact."""
        first = next(self.events.recs(), None)
        return first if first is not None and first.get("kind") == "header" else None

    def entries(self) -> list[dict[str, Any]]:
        """The intact event entries (header excluded), raw."""
        return [r for r in self.events.recs() if r.get("kind") != "header"]

    def branch_path(self) -> list[dict[str, Any]]:
        """Entries from the root to the newest entry of the session's current branch."""
        entries = self.entries()
        by_id = {str(e.get("id")): e for e in entries}
        branch = self.session.current_branch_id if self.session else "main"
        leaf = next((e for e in reversed(entries) if e.get("branch_id") == branch), None)
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        while leaf is not None and str(leaf.get("id")) not in seen:
            seen.add(str(leaf.get("id")))
            out.append(leaf)
            leaf = by_id.get(str(leaf.get("parent_id")))
        return list(reversed(out))

    def thread(self) -> Any:
        """The LangGraph thread config of the session."""
        return {"configurable": {"thread_id": self.session_id, "tenant_id": self.tenant_id}}


def _scan_session_files(facts: SessionFacts) -> None:
    names = ["events.jsonl", "journal.jsonl", "runs/index.jsonl"]
    runs = facts.dir / "runs"
    if runs.is_dir():
        for run in sorted(p.name for p in runs.iterdir() if p.is_dir()):
            names += [f"runs/{run}/checkpoints.jsonl", f"runs/{run}/writes.jsonl"]
    facts.files = {n: scan_file(facts.dir / n) for n in names}


def _index_lag(facts: SessionFacts) -> str | None:
    """Why reading through the saver would write its index (None: it would not)."""
    data = {n: s for n, s in facts.files.items() if n.endswith(("checkpoints.jsonl", "writes.jsonl")) and s.exists}
    if not data:
        return None
    index = facts.files["runs/index.jsonl"]
    if not index.exists:
        return "runs/index.jsonl is missing (the saver would rebuild it)"
    ends: dict[str, int] = {}
    for rec in index.recs():
        kind = "checkpoints.jsonl" if rec.get("k") == "c" else "writes.jsonl"
        key = f"runs/{rec.get('run')}/{kind}"
        ends[key] = max(ends.get(key, 0), int(rec.get("end") or 0))
    for name, scan in data.items():
        if ends.get(name, 0) != scan.size:
            return f"runs/index.jsonl lags {name} (a crash after an append; the saver would catch it up)"
    return None


def _read_layers(facts: SessionFacts) -> None:
    try:
        manager = facts.runner.manager
    except Exception as err:  # a layer that cannot even be opened is evidence too
        facts.layers["manager"] = f"down ({type(err).__name__}: {err})"
        return
    for layer in manager.read_order:
        try:
            if layer is manager.jsonl:
                got = _read_session_json(facts.dir / "session.json", facts.tenant_id, facts.session_id)
            else:
                got = layer.get(facts.tenant_id, facts.session_id)
        except SessionDocumentCorrupt:
            facts.layers[layer.name] = "corrupt"
            continue
        except StorageError:
            facts.layers[layer.name] = "down"
            continue
        except Exception as err:  # a damaged copy must become evidence, not a crash
            facts.layers[layer.name] = f"corrupt ({type(err).__name__}: {err})"
            continue
        facts.layers[layer.name] = "present" if got is not None else "absent"
        if got is not None:
            facts.copies[layer.name] = got
            facts.session = facts.session or got
    try:
        facts.owed = [f"{d.layer} {d.what}" for d in manager.outbox.debts(facts.tenant_id, facts.session_id, False)]
    except Exception as err:  # read-only: a damaged outbox is evidence (the next read replaces it)
        facts.owed = [f"unreadable outbox ({type(err).__name__}: {err})"]


def _read_session_json(path: Path, tenant_id: str, session_id: str) -> ChatSession | None:
    # The JSONL store's own `get` opens the event log, whose first read cuts a torn tail.
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise StorageError(f"cannot read {path}: {err}") from err
    try:
        session = ChatSession.from_json(decode_record(data.rstrip(b"\n")))
    except ValueError as err:
        raise SessionDocumentCorrupt(f"{path}: not a valid session document ({err})") from err
    return session if (session.tenant_id, session.session_id) == (tenant_id, session_id) else None


def _find_other_tenants(facts: SessionFacts) -> None:
    root = facts.runner.settings.base_dir / "tenants"
    if root.is_dir():
        facts.other_tenants = sorted(
            p.name for p in root.iterdir() if p.name != facts.tenant_id and (p / "sessions" / facts.session_id).is_dir()
        )


def _load_checkpoint(facts: SessionFacts) -> None:
    damaged = [n for n, s in facts.files.items() if n.startswith("runs/") and not s.clean]
    lag = _index_lag(facts)
    if damaged or lag:
        # Reading would cut a torn tail or write the index: read a throw-away copy instead.
        facts.saver_safe = False
        facts.unsafe_reason = f"{', '.join(damaged)} damaged" if damaged else lag
        with tempfile.TemporaryDirectory(prefix="agentrt-doctor-") as tmp:
            saver, graph = _copy_reader(facts, Path(tmp))
            _read_state(facts, partial(saver.get_document, facts.thread()), graph)
            real = str(facts.runner.settings.base_dir)
            facts.doc_error = facts.doc_error and facts.doc_error.replace(tmp, real)
            facts.state_error = facts.state_error and facts.state_error.replace(tmp, real)
        if facts.doc is None and facts.doc_error is not None:
            facts.doc = _latest_doc_from_files(facts)
        return
    _read_state(facts, partial(facts.runner._checkpoint_doc, facts.thread()), facts.runner.graph)


def _copy_reader(facts: SessionFacts, tmp: Path) -> tuple[Any, Any]:
    from checkpointing.saver import JsonlCheckpointSaver
    from graph.build import build_graph

    base = facts.runner.settings.base_dir
    shutil.copytree(facts.dir / "runs", tmp / "tenants" / facts.tenant_id / "sessions" / facts.session_id / "runs")
    (tmp / "blobs").symlink_to((base / "blobs").resolve(), target_is_directory=True)  # read only
    p = facts.runner.settings.persistence
    saver = JsonlCheckpointSaver(
        tmp, inline_payload_max_bytes=p.inline_payload_max_bytes, fsync="batch", default_tenant=facts.tenant_id
    )
    return saver, build_graph(saver)


def _read_state(facts: SessionFacts, read_doc: Callable[[], dict[str, Any] | None], graph: Any) -> None:
    try:
        facts.doc = read_doc()
    except Exception as err:
        facts.doc_error = f"{type(err).__name__}: {err}"
    if facts.doc is None and facts.doc_error is None:
        return
    try:
        snap = graph.get_state(facts.thread())
        facts.state = dict(snap.values or {})
        facts.next_nodes = list(snap.next or ())
        facts.waiting_for_human = bool(getattr(snap, "interrupts", ()))
    except Exception as err:
        facts.state_error = f"the graph state cannot be restored: {type(err).__name__}: {err}"


def _latest_doc_from_files(facts: SessionFacts) -> dict[str, Any] | None:
    docs = [
        rec
        for n, s in facts.files.items()
        if n.endswith("checkpoints.jsonl")
        for rec in s.recs()
        if (rec.get("checkpoint_ns") or "") == ""
    ]
    return max(docs, key=lambda d: str(d.get("checkpoint_id") or ""), default=None)


def gather(runner: AgentRunner, session_id: str, tenant_id: str, user_id: str | None) -> SessionFacts:
    """Collect the facts of one session (read-only)."""
    directory = runner.session_dir(tenant_id, session_id)
    facts = SessionFacts(runner, tenant_id, session_id, user_id, directory)
    _scan_session_files(facts)
    _read_layers(facts)
    if user_id is not None:
        # A user-scoped caller sees only their own sessions, as `show` and `tool-result` do: another
        # user's session (or another tenant's) reads as not found, and no fact of it is gathered.
        if facts.owner() not in (None, user_id):
            facts.hidden = True
            return facts
    else:
        _find_other_tenants(facts)
    if facts.session is not None or facts.header is not None:
        _load_checkpoint(facts)
    return facts
