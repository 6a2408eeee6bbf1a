"""Verify and repair a session's rows on the PostgreSQL store, as `checkpointing.verify` does its files.

    reports = streams.verify()                 # PostgresSessionStreams: one FileReport per stream/document
    done = streams.repair(report, fence_floor)  # one Repair, or None (the caller holds the session lease)

Each stream (`jsonl_streams` row: a run's checkpoints, `@events`, `@journal`, `@inbox`, `@outbox`)
is reported under the name its file has in a session folder (`runs/<run>/checkpoints.jsonl`,
`events.jsonl`, ...), each document under its own (`session.json`, `pins.json`, `<log>.idx`), so
the doctor reads one kind of report on either backend. What damage means on rows:

- An append is one transaction, so a crash or a killed connection leaves none of it: a stream has
  no torn tail. Its counterpart is `Health.BAD_TAIL`: from a row that does not verify (checksum,
  framing, no newline, or not where the previous row ends) to the stream's end, no row verifies.
  Reads refuse the stream (`CorruptRecordError`, unlike a file's torn tail, which reads skip), so
  the session stops until it is repaired. `repair` cuts those rows, in one transaction under the
  stream's row lock: their bytes are appended to the document `<file>.broken` (what a files repair
  keeps in the file `<file>.broken`), the stream ends where its last row that verifies ends, and
  its persisted index is dropped. Every row that verifies stays.
- A row that does not verify followed by one that does is `Health.CORRUPT`, as a bad line inside
  a file is: left as it is (restore the rows from a database backup).
- A damaged `session.json` or `pins.json` document is `CORRUPT` and repairable, as on files: it is
  moved aside to the document `<name>.broken` (the session is rebuilt from its other copies and
  the event log; the caller pins every fork point again). The fence is a bigint row with no
  checksum: never damaged this way.
- A persisted index document (`<log>.idx`) that does not verify is `STALE`: readers ignore it;
  `repair` drops it (the next append writes a new one).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from psycopg import sql

from checkpointing import indexfile
from checkpointing.layout import BROKEN_SUFFIX, CHECKPOINTS_FILE, EVENTS_FILE, INBOX_FILE, JOURNAL_FILE, OUTBOX_FILE
from checkpointing.records import scan_bytes
from checkpointing.store.base import EVENTS, INBOX, JOURNAL, OUTBOX, is_session_stream
from checkpointing.store.pg_queries import END
from checkpointing.verify import FileKind, FileReport, Health, Repair, verify_bytes

if TYPE_CHECKING:
    from checkpointing.store.postgres import PostgresSessionStreams

log = logging.getLogger(__name__)

__all__ = ["DOCUMENTS", "has_doc", "repair_rows", "stream_name", "verified_dump", "verify_rows"]

DOCUMENTS = ("session.json", "pins.json")
"""The one-record documents of a session on the PostgreSQL store that `verify_rows` verifies."""
_FILES = {EVENTS: EVENTS_FILE, JOURNAL: JOURNAL_FILE, INBOX: INBOX_FILE, OUTBOX: OUTBOX_FILE}

_Q = {
    # A stream's end is where its last row ends (`pg_queries.END`): there is no end recorded apart.
    "streams": "SELECT s.run, s.id, "
    + END
    + " FROM {s}.jsonl_streams s WHERE s.tenant = %s AND s.thread = %s ORDER BY s.run",
    "rows": "SELECT pos, line FROM {s}.jsonl_records WHERE stream = %s ORDER BY pos",
    "docs": "SELECT name, body FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s ORDER BY name",
    "lock": "SELECT id FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s FOR UPDATE",
    "cut": "DELETE FROM {s}.jsonl_records WHERE stream = %s AND pos >= %s",
    "drop_stream": "DELETE FROM {s}.jsonl_streams WHERE id = %s",
    "keep": (
        "INSERT INTO {s}.jsonl_documents (tenant, thread, name, body, version) VALUES (%s, %s, %s, %s, 1)"
        " ON CONFLICT (tenant, thread, name) DO UPDATE SET body = {s}.jsonl_documents.body || EXCLUDED.body,"
        " version = {s}.jsonl_documents.version + 1"
    ),
    "doc_lock": "SELECT body FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s AND name = %s FOR UPDATE",
    "doc_exists": "SELECT 1 FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s AND name = %s",
    "doc_drop": "DELETE FROM {s}.jsonl_documents WHERE tenant = %s AND thread = %s AND name = %s",
}


def _q(streams: PostgresSessionStreams, key: str) -> sql.Composed:
    return sql.SQL(_Q[key]).format(s=sql.Identifier(streams.store.schema))


def stream_name(run: str) -> str:
    """Stream `run`'s file in a session folder, relative to it (`runs/<run>/checkpoints.jsonl`,
    `events.jsonl`): how a report names it."""
    return _FILES[run] if is_session_stream(run) else f"runs/{run}/{CHECKPOINTS_FILE}"


def _bad(path: Path, pos: int, expect: int, raw: bytes) -> str | None:
    """Why the row at `pos` does not verify (None: it does)."""
    if pos != expect:
        return f"no record at byte {expect} (the next row is at {pos})"
    if not raw.endswith(b"\n"):
        return f"the row at byte {pos} has no terminating newline"
    try:
        found = scan_bytes(path, raw, pos)
    except Exception as err:  # CorruptRecordError, OldFormatError: the reason is the evidence
        return str(getattr(err, "reason", err))
    return None if len(found.records) == 1 else f"the row at byte {pos} is not one record"


def verify_stream(name: str, path: Path, rows: list[tuple[int, bytes]], end: int) -> FileReport:
    """The verdict on one stream's rows (`pos`, `line`), ordered by position; `end` its recorded end."""
    expect, first_bad, why = 0, None, ""
    for i, (pos, raw) in enumerate(rows):
        reason = _bad(path, pos, expect, raw)
        if reason is not None and first_bad is None:
            first_bad, why = i, reason
        elif reason is None and first_bad is not None:
            # A row that verifies after a damaged one: corruption inside the stream, as in a file.
            health = Health.OLD_FORMAT if "format" in why else Health.CORRUPT
            return FileReport(name, path, FileKind.LOG, health, first_bad, rows[first_bad][0], end, first_bad + 1, why)
        expect = pos + len(raw)
    if first_bad is None:
        if expect != end:
            why = f"the stream's recorded end is byte {end}, its rows end at byte {expect}"
            return FileReport(name, path, FileKind.LOG, Health.BAD_TAIL, len(rows), expect, end, len(rows) + 1, why)
        return FileReport(name, path, FileKind.LOG, Health.OK, len(rows), expect, end)
    good = rows[first_bad][0]
    return FileReport(name, path, FileKind.LOG, Health.BAD_TAIL, first_bad, good, end, first_bad + 1, why)


def verify_rows(streams: PostgresSessionStreams) -> list[FileReport]:
    """Every stream, document and persisted index of the session, verified (read-only), in the
    order `checkpointing.verify.verify_session` reports a session folder: streams, documents, indexes."""
    return verified_dump(streams)[0]


def verified_dump(streams: PostgresSessionStreams) -> tuple[list[FileReport], dict[str, bytes], dict[str, bytes]]:
    """`verify_rows` and what `PostgresSessionDocs.dump` gives (each stream's rows concatenated as
    stored, each document's body), from one read of the rows: (reports, {stream: bytes}, {document: bytes})."""
    base = streams.label.parent
    out: list[FileReport] = []
    data: dict[str, bytes] = {}
    with streams.store.connection("verifying a session") as conn:
        found = conn.execute(_q(streams, "streams"), (streams.tenant, streams.thread)).fetchall()
        ordered = sorted(found, key=lambda r: (not is_session_stream(str(r[0])), str(r[0])))
        for run, sid, end in ordered:
            rows = [(int(p), bytes(b)) for p, b in conn.execute(_q(streams, "rows"), (sid,))]
            out.append(verify_stream(stream_name(str(run)), streams.path(str(run)), rows, int(end)))
            data[str(run)] = b"".join(raw for _, raw in rows)
        docs = {str(n): bytes(b) for n, b in conn.execute(_q(streams, "docs"), (streams.tenant, streams.thread))}
    for name in DOCUMENTS:
        if name in docs:
            out.append(verify_bytes(base, name, docs[name], FileKind.DOCUMENT))
    for name in sorted(n for n in docs if n.endswith(indexfile.SUFFIX)):
        out.append(verify_bytes(base, name, docs[name], FileKind.INDEX))
    return out, data, docs


def _run_of(name: str) -> str:
    """The stream a report's file name stands for (inverse of `stream_name`)."""
    for run, file in _FILES.items():
        if name == file:
            return run
    return name.split("/")[1]


def repair_rows(streams: PostgresSessionStreams, report: FileReport) -> Repair | None:
    """Repair what `report` (of `verify_rows`) found, if it is repairable (see the module
    docstring); None otherwise, or when the rows changed since (verify again).

    The caller must keep every writer of the session out while it runs (hold the session's lease).
    """
    key = (streams.tenant, streams.thread)
    kept = streams.label.parent / (report.name + BROKEN_SUFFIX)  # the document's name, as a path
    if report.health is Health.BAD_TAIL:
        return _cut_tail(streams, report, kept)
    if report.health is Health.STALE:
        with streams.store.connection("repairing a session") as conn:
            gone = conn.execute(_q(streams, "doc_drop"), (*key, report.name)).rowcount
        if not gone:
            return None
        return Repair(report.path, f"removed the damaged index {report.name} (rebuilt by the next append)")
    if not report.repairable:
        return None
    with streams.store.connection("repairing a session") as conn, conn.transaction():
        row = conn.execute(_q(streams, "doc_lock"), (*key, report.name)).fetchone()
        if row is None or verify_bytes(report.path.parent, report.name, bytes(row[0])).health is not Health.CORRUPT:
            return None
        conn.execute(_q(streams, "keep"), (*key, report.name + BROKEN_SUFFIX, bytes(row[0])))
        conn.execute(_q(streams, "doc_drop"), (*key, report.name))
    log.warning("moved the damaged %s aside to %s (%d bytes)", report.path, kept, len(bytes(row[0])))
    if report.name == "pins.json":
        return Repair(report.path, f"moved the damaged {report.name} aside (its checkpoints are pinned again)", kept)
    return Repair(report.path, f"moved the damaged {report.name} aside (rebuilt from the session's other copies)", kept)


def _cut_tail(streams: PostgresSessionStreams, report: FileReport, kept: Path) -> Repair | None:
    """Cut a stream's bad tail in one transaction, its rows kept in the document `<file>.broken`."""
    run = _run_of(report.name)
    key = (streams.tenant, streams.thread)
    with streams.store.connection("repairing a session") as conn, conn.transaction():
        conn.execute(streams.q["lock_session"], key)  # no append of the session in flight until commit
        row = conn.execute(_q(streams, "lock"), (*key, run)).fetchone()
        if row is None:
            return None
        sid = int(row[0])
        rows = [(int(p), bytes(b)) for p, b in conn.execute(_q(streams, "rows"), (sid,))]
        end = rows[-1][0] + len(rows[-1][1]) if rows else 0
        now = verify_stream(report.name, report.path, rows, end)
        if now.health is not Health.BAD_TAIL or now.good != report.good:
            return None  # changed since it was verified
        cut = [raw for pos, raw in rows if pos >= now.good]
        removed = b"".join(cut)
        if removed:
            conn.execute(_q(streams, "keep"), (*key, report.name + BROKEN_SUFFIX, removed))
        if now.records:  # the stream now ends where its last kept row does
            conn.execute(_q(streams, "cut"), (sid, now.good))
        else:  # nothing verified: the stream goes (its rows after it), as `replace` with no lines
            conn.execute(_q(streams, "drop_stream"), (sid,))
            conn.execute(_q(streams, "cut"), (sid, 0))
        conn.execute(_q(streams, "doc_drop"), (*key, report.name + indexfile.SUFFIX))
    streams.forget(run)
    log.warning(
        "cut the damaged tail of %s at byte %d: %d row(s), %d bytes moved to %s",
        report.path,
        now.good,
        len(cut),
        len(removed),
        kept,
    )
    said = f"cut the damaged tail of {report.name} at byte {now.good} ({len(cut)} row(s) from line {now.line})"
    return Repair(report.path, said, kept if removed else None)


def has_doc(streams: PostgresSessionStreams, name: str) -> bool:
    """Whether the session holds document `name` (its body not read, nor verified)."""
    with streams.store.connection("reading a document") as conn:
        return conn.execute(_q(streams, "doc_exists"), (streams.tenant, streams.thread, name)).fetchone() is not None
