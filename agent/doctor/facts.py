"""The facts the doctor's checks read: every file scanned, every layer asked, the state loaded (read-only).

The checkpoint facts (its document, the graph state, what runs next) are read by the context
(`agent.doctor.subject`): through LangGraph for a runner, from the saver's records without it on
the embedded default.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent.core.errors import BackendUnavailable
from agent.session.outbox import Lag
from agent.session.session import ChatSession, SessionDocumentCorrupt
from agent.session.stores.jsonl import read_session_file
from checkpointing import indexfile, records
from checkpointing.audit import RunLog
from checkpointing.blobs import BLOB_KEY
from checkpointing.exceptions import CheckpointingError, CorruptRecordError, OldFormatError
from checkpointing.layout import CHECKPOINTS_FILE, EVENTS_FILE, session_dir, session_file
from checkpointing.verify import FileReport, record_logs, verify_session

if TYPE_CHECKING:
    from agent.doctor.subject import DoctorContext

__all__ = [
    "STATUSES",
    "Check",
    "DoctorReport",
    "FileScan",
    "SessionFacts",
    "Status",
    "gather",
    "scan_file",
    "session_files",
]

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
    """Every check run on one session, in the order of the troubleshooting table."""

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
    """One record file read through `checkpointing.records.scan`: verified, and nothing cut or rewritten."""

    path: Path
    exists: bool
    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    error: str | None = None
    line: int | None = None
    """The line `error` is about (the bad record, or the torn last line)."""
    old_format: bool = False
    """Written by an agentrt of on-disk format 1 (refused, never rewritten)."""
    torn: bool = False
    """Only the last line is incomplete: a crash mid-append (`cut_torn_tail` moves it aside)."""
    size: int = 0
    may_ref_blobs: frozenset[int] = frozenset()
    """Indexes (into `records`) of the records whose bytes may hold a blob reference: the others
    are not walked for references (a long session has tens of thousands of records)."""
    good: int = 0
    """The end of the last intact record (the bytes past it are a torn tail, or damage)."""

    @property
    def clean(self) -> bool:
        """Missing, or every record intact and no torn tail."""
        return self.error is None

    @property
    def corrupt(self) -> bool:
        """A damaged record that is not a torn tail (recovery is blocked by it)."""
        return self.error is not None and not self.torn

    def recs(self) -> Iterator[dict[str, Any]]:
        """The intact records in file order."""
        return (rec for _, rec in self.records)

    def lines(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(line number, record) of the intact records."""
        return ((i + 1, rec) for i, (_, rec) in enumerate(self.records))


def scan_file(path: Path) -> FileScan:
    """Verify `path` with the one record module (`records.scan`); reads never modify files."""
    if not path.exists():
        return FileScan(path, exists=False)
    try:
        found = records.scan(path)
    except (CorruptRecordError, OldFormatError) as err:
        # The records before the damage still verify: keep them as evidence (header, references).
        return _partial(path, err)
    except OSError as err:
        return FileScan(path, exists=True, error=f"unreadable: {err}")
    out = FileScan(path, exists=True, size=found.size, records=_parsed(found.records), good=found.good)
    out.may_ref_blobs = _blob_rows(found.records)
    if found.torn:
        out.torn = True
        out.line = len(found.records) + 1
        out.error = (
            f"line {out.line}: incomplete last record ({found.size - found.good} bytes without a newline: a torn write)"
        )
    return out


def _parsed(bodies: list[tuple[int, bytes]]) -> list[tuple[int, dict[str, Any]]]:
    return [(off, records.loads(body)) for off, body in bodies]


_BLOB_KEY = json.dumps(BLOB_KEY).encode()


def _blob_rows(bodies: list[tuple[int, bytes]]) -> frozenset[int]:
    # A reference's key as our writers spell it, or any \u escape (which could spell it otherwise).
    return frozenset(i for i, (_, body) in enumerate(bodies) if _BLOB_KEY in body or b"\\u" in body)


def _partial(path: Path, err: CorruptRecordError | OldFormatError) -> FileScan:
    before = records.scan_before(path, err.line)
    good = before.records
    old = isinstance(err, OldFormatError)
    return FileScan(
        path, True, _parsed(good), f"line {err.line}: {err.reason}", err.line, old, False, before.size, _blob_rows(good)
    )


@dataclass
class SessionFacts:
    """Everything the checks look at, gathered once without side effects."""

    ctx: DoctorContext
    tenant_id: str
    session_id: str
    user_id: str | None
    dir: Path
    files: dict[str, FileScan] = field(default_factory=dict)
    """Session-relative path -> scan (`SESSION_LOGS`, runs/<run>/checkpoints.jsonl)."""
    layers: dict[str, str] = field(default_factory=dict)
    """Layer name -> "present" / "absent" / "down" / "corrupt" / "error: ...", in read order."""
    copies: dict[str, ChatSession] = field(default_factory=dict)
    session: ChatSession | None = None
    doc: dict[str, Any] | None = None
    doc_error: str | None = None
    state: dict[str, Any] | None = None
    """The graph state's values at the checkpoint; `messages` as `MessageView`s (`agent.doctor.subject`)."""
    state_error: str | None = None
    next_nodes: list[str] = field(default_factory=list)
    waiting_for_human: bool = False
    """The run is interrupted for a human decision (HITL)."""
    approval_ids: list[str] = field(default_factory=list)
    """The interrupt ids of the pending approvals (what `agentrt resume ID --approve --interrupt` names)."""
    owed: list[str] = field(default_factory=list)
    """What the session's outbox says a layer still owes ("SQL messages", ...), or why it is unreadable."""
    behind: dict[str, Lag] = field(default_factory=dict)
    """How far behind each owed layer is (unpaid writes, since when), from the outbox."""
    hidden: bool = False
    """The caller named a user who does not own the session: nothing of it may be shown."""
    reports: list[FileReport] = field(default_factory=list)
    """Every record log, document and index of the folder, per `checkpointing.verify.verify_session`."""
    checkpoint_id: str | None = None
    """The current branch's checkpoint (None: the thread's newest; see `agent.runner.branches`)."""
    base: Path | None = None
    """Where the session's records were read (None: `persistence.base_dir`; on the PostgreSQL
    store, the temporary copy of `agent.doctor.store_copy`)."""

    @property
    def base_dir(self) -> Path:
        """The base_dir the session's records are read from."""
        return self.base if self.base is not None else self.ctx.settings.base_dir

    def owner(self) -> str | None:
        """The session's user, from the session document or else the event-log header."""
        if self.session is not None:
            return self.session.user_id
        user = (self.header or {}).get("user_id")
        return str(user) if user is not None else None

    @property
    def events(self) -> FileScan:
        """The scan of events.jsonl."""
        return self.files[EVENTS_FILE]

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
        """The LangGraph config of the session's current branch checkpoint (the thread's newest if unknown)."""
        conf: dict[str, Any] = {"thread_id": self.session_id, "tenant_id": self.tenant_id}
        if self.checkpoint_id is not None:
            conf["checkpoint_id"] = self.checkpoint_id
        return {"configurable": conf}

    def run_logs(self) -> list[RunLog]:
        """Each run file that exists with its intact records (`checkpointing.audit`)."""
        return [
            (s.path, [rec for _, rec in s.records])
            for n, s in self.files.items()
            if n.endswith(CHECKPOINTS_FILE) and s.exists
        ]

    def indexable_runs(self) -> list[tuple[str, FileScan]]:
        """(run id, scan) of each run file a saver may index from its scan: read and verified
        whole (a damaged one is left to the saver's own read, whose error is the evidence), and
        not described by its persisted index (indexed from that, cheaper still)."""
        return [
            (Path(name).parent.name, scan)
            for name, scan in self.files.items()
            if name.endswith(CHECKPOINTS_FILE)
            and scan.exists
            and not scan.corrupt
            and not scan.old_format
            and indexfile.load(scan.path) is None
        ]

    def fork_point(self) -> str | None:
        """The checkpoint the current branch was forked from, per its `branch_created` entry."""
        branch = self.session.current_branch_id if self.session else "main"
        first = next((e for e in self.entries() if e.get("branch_id") == branch), None)
        if first is None or first.get("type") != "branch_created":
            return None
        cp = (first.get("payload") or {}).get("checkpoint_id")
        return str(cp) if cp else None


def session_files(directory: Path) -> list[str]:
    """The session-relative names of the record logs the doctor scans (`checkpointing.verify.record_logs`)."""
    return record_logs(directory)


def _scan_session_files(facts: SessionFacts, verified: list[FileReport] | None) -> None:
    facts.files = {n: scan_file(facts.dir / n) for n in session_files(facts.dir)}
    if verified is not None:
        facts.reports = verified
    else:
        facts.reports = verify_session(facts.dir) if facts.dir.is_dir() else []


def _read_layers(facts: SessionFacts) -> None:
    try:
        manager = facts.ctx.manager
    except Exception as err:  # a layer that cannot even be opened is evidence too
        facts.layers["manager"] = f"down ({type(err).__name__}: {err})"
        return
    for layer in manager.read_order:
        try:
            if layer is manager.jsonl:
                got = _read_session_json(session_file(facts.dir), facts.tenant_id, facts.session_id)
            else:
                got = layer.get(facts.tenant_id, facts.session_id)
        except SessionDocumentCorrupt:
            facts.layers[layer.name] = "corrupt"
            continue
        except BackendUnavailable:
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
        facts.owed = [f"{d.layer} {d.what}" for d in manager.outbox.debts(facts.tenant_id, facts.session_id)]
        facts.behind = manager.outbox.behind(facts.tenant_id, facts.session_id)
    except Exception as err:  # a damaged outbox is evidence (`--repair` replaces it)
        facts.owed = [f"unreadable outbox ({type(err).__name__}: {err})"]


def _read_session_json(path: Path, tenant_id: str, session_id: str) -> ChatSession | None:
    # The JSONL store's own `get` opens the event log, whose first read cuts a torn tail.
    try:
        session = read_session_file(path)
    except OSError as err:
        raise BackendUnavailable(f"cannot read {path}: {err}") from err
    except CheckpointingError as err:
        raise SessionDocumentCorrupt(str(err)) from err
    if session is None:
        return None
    return session if (session.tenant_id, session.session_id) == (tenant_id, session_id) else None


def gather(
    ctx: DoctorContext,
    session_id: str,
    tenant_id: str,
    user_id: str | None,
    base: Path | None = None,
    verified: list[FileReport] | None = None,
) -> SessionFacts:
    """Collect the facts of one session (read-only), its records read under `base` (default:
    `persistence.base_dir`); `verified`: the record store's verdicts (`SessionStreams.verify`),
    when they are not those of the folder read."""
    directory = session_dir(base, tenant_id, session_id) if base is not None else ctx.session_dir(tenant_id, session_id)
    facts = SessionFacts(ctx, tenant_id, session_id, user_id, directory, base=base)
    _scan_session_files(facts, verified)
    _read_layers(facts)
    if user_id is not None:
        # A user-scoped caller sees only their own sessions, as `show` and `tool-result` do: another
        # user's session (or another tenant's) reads as not found, in the very words of a session
        # that does not exist at all, and no fact of it is gathered.
        nothing = facts.session is None and facts.header is None
        if nothing or facts.owner() not in (None, user_id):
            facts.hidden = True
            return facts
    if facts.session is not None or facts.header is not None:
        ctx.read_checkpoint(facts)
    return facts
