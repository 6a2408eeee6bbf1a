"""Files of one session (thread) and the index that finds records without scanning history.

    sessions/<thread>/runs/<run>/checkpoints.jsonl   one checkpoint document a line
    sessions/<thread>/runs/<run>/writes.jsonl        one put_writes call a line
    sessions/<thread>/runs/index.jsonl               one small line per record: where it is
    sessions/<thread>/pins.json                      checkpoint ids that retention must keep

The index is derived data: it is appended after the record it describes (not fsynced), caught up
from the data files when they are longer than it knows, and rebuilt from them when it does not
match. The data files are the truth and follow the record framing rules of `records.py`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkpointing.errors import CorruptCheckpointError, CorruptRecordError
from checkpointing.records import (
    FsyncPolicy,
    RecordLog,
    atomic_write,
    decode_record,
    encode_record,
    read_records_with_offsets,
)

CHECKPOINTS = "checkpoints.jsonl"
WRITES = "writes.jsonl"
INDEX = "index.jsonl"
PINS = "pins.json"
_DOC_CACHE_BYTES = 16 * 1024 * 1024


@dataclass
class CpLoc:
    """Where a checkpoint document is, plus what list/retention need without reading it."""

    run: str
    off: int
    end: int
    parent: str | None
    channels: list[str]
    meta_run: str | None


@dataclass
class WriteLoc:
    """Where one put_writes record is and which (task_id, idx) keys it holds."""

    run: str
    off: int
    end: int
    keys: list[tuple[str, int]]
    dl: list[str] = field(default_factory=list)


@dataclass
class SessionIndex:
    """The in-memory index of a session."""

    cps: dict[tuple[str, str], CpLoc] = field(default_factory=dict)
    latest: dict[str, str] = field(default_factory=dict)
    writes: dict[tuple[str, str], list[WriteLoc]] = field(default_factory=dict)
    ends: dict[tuple[str, str], int] = field(default_factory=dict)


class SessionStore:
    """Read and append the records of one session; keeps its index in memory."""

    def __init__(self, session_dir: Path, fsync: FsyncPolicy) -> None:
        self.dir = session_dir
        self.runs_dir = session_dir / "runs"
        self.index_path = self.runs_dir / INDEX
        self.fsync = fsync
        self._logs: dict[tuple[str, str], RecordLog] = {}
        self._index_log = RecordLog(self.index_path, fsync="never")
        self._idx: SessionIndex | None = None
        self._index_size = -1
        self._checked = False
        self._docs: OrderedDict[tuple[str, str, int], tuple[dict[str, Any], int]] = OrderedDict()
        self._doc_bytes = 0

    # -- index ---------------------------------------------------------------------------------

    @property
    def index(self) -> SessionIndex:
        """The index, loaded (or reloaded when another process appended) on demand."""
        if self._idx is None or (not self._checked and _size(self.index_path) != self._index_size):
            self._load_index()
        self._checked = True
        assert self._idx is not None
        return self._idx

    def begin(self) -> None:
        """Start of a saver call: look once whether another process grew the index."""
        self._checked = False

    def exists(self) -> bool:
        """Whether this session has any checkpoint."""
        return self.runs_dir.exists() and bool(self.index.cps)

    def _load_index(self) -> None:
        idx = SessionIndex()
        try:
            for rec in self._index_log.read():
                _apply_index_line(idx, rec)
            stale = self._catch_up(idx)
        except CorruptRecordError:
            stale = True
        if stale:
            idx = SessionIndex()
            self._rebuild_index_file(idx)
        self._idx = idx
        self._index_size = _size(self.index_path)

    def _catch_up(self, idx: SessionIndex) -> bool:
        """Index what the data files hold beyond the index (crash after append); True if stale."""
        if not self.runs_dir.exists():
            return False
        for run_dir in sorted(p for p in self.runs_dir.iterdir() if p.is_dir()):
            for kind in (CHECKPOINTS, WRITES):
                path = run_dir / kind
                if not path.exists():
                    continue
                known = idx.ends.get((run_dir.name, kind), 0)
                size = path.stat().st_size
                if size < known:
                    return True  # shorter than the index says: a torn tail was cut, or a rewrite
                if size > known:
                    found = self._scan_from(path, known)
                    lines = [_index_line(run_dir.name, kind, off, rec, path) for off, rec in found]
                    for line in lines:
                        _apply_index_line(idx, line)
                    if lines:
                        self._index_log.append_many(lines)
        return False

    def _scan_from(self, path: Path, start: int) -> list[tuple[int, dict[str, Any]]]:
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read()
        out: list[tuple[int, dict[str, Any]]] = []
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            try:
                if nl == -1:
                    raise ValueError("torn")
                out.append((start + pos, decode_record(data[pos:nl])))
            except (ValueError, UnicodeDecodeError):
                # Let the framing module apply the torn-tail rule (or raise for mid-file damage).
                try:
                    recs = read_records_with_offsets(path, repair=True)
                except CorruptRecordError as err:
                    raise CorruptCheckpointError(err.path, err.line, err.reason) from err
                return [(o, r) for o, r in recs if o >= start]
            pos = nl + 1
        return out

    def _rebuild_index_file(self, idx: SessionIndex) -> None:
        lines: list[dict[str, Any]] = []
        if self.runs_dir.exists():
            for run_dir in sorted(p for p in self.runs_dir.iterdir() if p.is_dir()):
                for kind in (CHECKPOINTS, WRITES):
                    path = run_dir / kind
                    try:
                        recs = read_records_with_offsets(path, repair=True)
                    except CorruptRecordError as err:
                        raise CorruptCheckpointError(err.path, err.line, err.reason) from err
                    for off, rec in recs:
                        line = _index_line(run_dir.name, kind, off, rec, path)
                        _apply_index_line(idx, line)
                        lines.append(line)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self.index_path, b"".join(encode_record(x) for x in lines))
        self._index_log = RecordLog(self.index_path, fsync="never")
        self._index_size = self.index_path.stat().st_size

    def rebuild_index(self) -> None:
        """Rebuild the index from the data files (after a rewrite, or when it was found stale)."""
        self._docs.clear()
        self._doc_bytes = 0
        idx = SessionIndex()
        self._rebuild_index_file(idx)
        self._idx = idx

    # -- appends -------------------------------------------------------------------------------

    def _log(self, run: str, kind: str) -> RecordLog:
        key = (run, kind)
        log = self._logs.get(key)
        if log is None:
            log = RecordLog(self.runs_dir / run / kind, fsync=self.fsync)
            self._logs[key] = log
        return log

    def append(self, run: str, kind: str, record: dict[str, Any]) -> None:
        """Append a checkpoint or writes record, then its index line (not fsynced: derived data)."""
        idx = self.index
        log = self._log(run, kind)
        try:
            off = log.append(record)
        except CorruptRecordError as err:
            raise CorruptCheckpointError(err.path, err.line, err.reason) from err
        # Under the saver's lock the file ends with our record (one writer per session, by lease).
        line = _index_line(run, kind, off, record, log.path, size=_size(log.path) - off)
        _apply_index_line(idx, line)
        self._docs_put((run, kind, off), record, line["end"] - off)
        frame = encode_record(line)
        fd = os.open(self.index_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, frame)
        finally:
            os.close(fd)
        self._index_size += len(frame)

    def sync(self) -> None:
        """fsync every data file appended to, and write the buffered index lines."""
        for log in self._logs.values():
            log.sync()

    # -- reads ---------------------------------------------------------------------------------

    def read(self, run: str, kind: str, off: int, expect_id: str | None = None) -> dict[str, Any]:
        """The record at `off` of a run file (cached), verified by checksum (and id if given)."""
        key = (run, kind, off)
        hit = self._docs.get(key)
        if hit is not None:
            self._docs.move_to_end(key)
            return hit[0]
        path = self.runs_dir / run / kind
        with open(path, "rb") as fh:
            fh.seek(off)
            line = fh.readline()
        try:
            if not line.endswith(b"\n"):
                raise ValueError("record is incomplete")
            rec = decode_record(line[:-1])
        except (ValueError, UnicodeDecodeError) as err:
            raise CorruptCheckpointError(str(path), _line_no(path, off), str(err)) from err
        if expect_id is not None and rec.get("checkpoint_id") != expect_id:
            raise LookupError("stale index")
        self._docs_put(key, rec, len(line))
        return rec

    def _docs_put(self, key: tuple[str, str, int], rec: dict[str, Any], size: int) -> None:
        self._docs[key] = (rec, size)
        self._doc_bytes += size
        while self._doc_bytes > _DOC_CACHE_BYTES and len(self._docs) > 1:
            _, (_, old) = self._docs.popitem(last=False)
            self._doc_bytes -= old

    def doc(self, ns: str, cp_id: str) -> dict[str, Any] | None:
        """The checkpoint document (ns, cp_id), or None when it is not in this session."""
        loc = self.index.cps.get((ns, cp_id))
        if loc is None:
            return None
        try:
            return self.read(loc.run, CHECKPOINTS, loc.off, cp_id)
        except (LookupError, FileNotFoundError):
            self.rebuild_index()
            loc = self.index.cps.get((ns, cp_id))
            return None if loc is None else self.read(loc.run, CHECKPOINTS, loc.off, cp_id)

    def writes_records(self, ns: str, cp_id: str) -> list[dict[str, Any]]:
        """The put_writes records of checkpoint (ns, cp_id), in append order."""
        return [self.read(w.run, WRITES, w.off) for w in self.index.writes.get((ns, cp_id), [])]

    def run_file(self, run: str, kind: str) -> Path:
        """Path of a run's data file."""
        return self.runs_dir / run / kind

    def forget_logs(self) -> None:
        """Drop open logs and caches (after files were rewritten or removed)."""
        self._logs.clear()
        self._docs.clear()
        self._doc_bytes = 0
        self._idx = None

    def remove(self) -> None:
        """Delete the whole session directory."""
        self.forget_logs()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- pins ----------------------------------------------------------------------------------

    def pins(self) -> set[tuple[str, str]]:
        """Pinned (checkpoint_ns, checkpoint_id) pairs."""
        path = self.dir / PINS
        try:
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            return set()
        return {(str(ns), str(i)) for ns, i in data.get("pinned", [])}

    def set_pins(self, pins: set[tuple[str, str]]) -> None:
        """Replace the pinned set (atomic file rewrite)."""
        body = json.dumps({"pinned": sorted([list(p) for p in pins])}, separators=(",", ":"))
        atomic_write(self.dir / PINS, body.encode())


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _line_no(path: Path, off: int) -> int:
    with open(path, "rb") as fh:
        return fh.read(off).count(b"\n") + 1


def _index_line(
    run: str, kind: str, off: int, rec: dict[str, Any], path: Path, size: int | None = None
) -> dict[str, Any]:
    if size is None:
        size = len(encode_record(rec))
    base = {"run": run, "off": off, "end": off + size, "id": rec.get("checkpoint_id"), "ns": rec.get("checkpoint_ns")}
    if kind == CHECKPOINTS:
        meta = rec.get("metadata") or {}
        mrun = meta.get("run_id") if isinstance(meta, dict) else None
        return {
            "k": "c",
            **base,
            "p": rec.get("parent_checkpoint_id"),
            "ch": sorted(rec.get("task_state") or {}),
            "mr": mrun if isinstance(mrun, str) else None,
        }
    line = {"k": "w", **base, "keys": [[rec.get("task_id"), w[0]] for w in rec.get("writes", [])]}
    if rec.get("dl"):
        line["dl"] = rec["dl"]
    return line


def _apply_index_line(idx: SessionIndex, line: dict[str, Any]) -> None:
    ns, cp_id, run = line["ns"], line["id"], line["run"]
    if line["k"] == "c":
        idx.cps[(ns, cp_id)] = CpLoc(run, line["off"], line["end"], line.get("p"), line.get("ch", []), line.get("mr"))
        if cp_id > idx.latest.get(ns, ""):
            idx.latest[ns] = cp_id
        kind = CHECKPOINTS
    else:
        keys = [(str(t), int(i)) for t, i in line.get("keys", [])]
        loc = WriteLoc(run, line["off"], line["end"], keys, list(line.get("dl", [])))
        idx.writes.setdefault((ns, cp_id), []).append(loc)
        kind = WRITES
    key = (run, kind)
    idx.ends[key] = max(idx.ends.get(key, 0), line["end"])


def fsync_policy_ok(value: str) -> FsyncPolicy:
    """Validate an fsync policy name."""
    if value not in ("always", "batch"):
        raise ValueError(f"fsync must be 'always' or 'batch', got {value!r}")
    return value  # type: ignore[return-value]
