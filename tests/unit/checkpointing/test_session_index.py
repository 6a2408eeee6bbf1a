"""checkpointing.session_index: pages, cursors, filters, expiry at read, versions, damage, rebuild."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from checkpointing.session_index import BadCursor, IndexUnusable, RowFilter, SessionIndex, SessionRow

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _row(
    sid: str, minute: int, *, tenant: str = "t1", user: str = "u1", status: str = "ACTIVE", **kw: object
) -> SessionRow:
    expires = kw.pop("expires_at", None)
    version = kw.pop("version", 1)
    return SessionRow(
        tenant_id=tenant,
        session_id=sid,
        user_id=user,
        status=status,
        created_at=T0,
        last_activity=T0 + timedelta(minutes=minute),
        expires_at=expires,  # type: ignore[arg-type]
        version=version,  # type: ignore[arg-type]
        meta=dict(kw),
    )


def _index(tmp_path: Path, **kw: object) -> SessionIndex:
    index = SessionIndex(tmp_path / "sessions.index.sqlite", expiry=("ACTIVE", "EXPIRED"), **kw)  # type: ignore[arg-type]
    index.rebuild([])  # a complete, empty index
    return index


def _ids(rows: list[SessionRow]) -> list[str]:
    return [r.session_id for r in rows]


def test_pages_newest_first_and_cursor_continues_without_gaps_or_duplicates(tmp_path: Path) -> None:
    """Keyset pages walk every row once, newest activity first, ties broken by session id."""
    index = _index(tmp_path)
    for i in range(25):
        index.upsert(_row(f"s{i:02d}", i // 2))  # pairs share a last-activity time
    seen: list[str] = []
    after = None
    while True:
        page = index.page("t1", limit=7, after=after)
        if not page:
            break
        seen += _ids(page)
        after = index.cursor(page[-1])
    expected = [
        r.session_id
        for r in sorted(
            (_row(f"s{i:02d}", i // 2) for i in range(25)), key=lambda r: (r.last_activity, r.session_id), reverse=True
        )
    ]
    assert seen == expected


def test_every_query_binds_the_tenant_and_the_user_filter(tmp_path: Path) -> None:
    """Another tenant's rows never appear; `user_id` narrows to one user's."""
    index = _index(tmp_path)
    index.upsert(_row("a", 1))
    index.upsert(_row("b", 2, user="u2"))
    index.upsert(_row("c", 3, tenant="t2"))
    assert _ids(index.page("t1")) == ["b", "a"]
    assert _ids(index.page("t1", RowFilter(user_id="u2"))) == ["b"]
    assert _ids(index.page("t2")) == ["c"]
    assert index.count("t1") == 2 and index.count("t2", RowFilter(user_id="u1")) == 1
    assert index.get("t2", "a") is None


def test_expired_is_computed_at_read(tmp_path: Path) -> None:
    """An ACTIVE row past its expiry lists as EXPIRED and filters both ways accordingly."""
    now = datetime.now(UTC)
    index = _index(tmp_path)
    index.upsert(_row("old", 1, expires_at=now - timedelta(minutes=1)))
    index.upsert(_row("fresh", 2, expires_at=now + timedelta(hours=1)))
    index.upsert(_row("never", 3))
    index.upsert(_row("paused", 4, status="PAUSED", expires_at=now - timedelta(minutes=1)))
    assert {r.session_id: r.status for r in index.page("t1")} == {
        "old": "EXPIRED",
        "fresh": "ACTIVE",
        "never": "ACTIVE",
        "paused": "PAUSED",
    }
    assert _ids(index.page("t1", RowFilter(status="EXPIRED"))) == ["old"]
    assert _ids(index.page("t1", RowFilter(status="ACTIVE"))) == ["never", "fresh"]
    assert index.page("t1", RowFilter(status="EXPIRED"))[0].stored_status == "ACTIVE"


def test_meta_filters(tmp_path: Path) -> None:
    """Equality on nested JSON paths, one-of and none-of lists, ids and excluded ids."""
    index = _index(tmp_path)
    index.upsert(_row("a", 1, metadata={"project": "q3", "n": 2}, run="FAILED"))
    index.upsert(_row("b", 2, metadata={"project": "q4"}, run="COMPLETED"))
    index.upsert(_row("c", 3, run=None))
    assert _ids(index.page("t1", RowFilter(meta=[(("metadata", "project"), "q3")]))) == ["a"]
    assert _ids(index.page("t1", RowFilter(meta=[(("metadata", "n"), 2)]))) == ["a"]
    assert _ids(index.page("t1", RowFilter(meta_any=[(("run",), ["FAILED", "COMPLETED"])]))) == ["b", "a"]
    assert _ids(index.page("t1", RowFilter(meta_not=[(("run",), ["FAILED"])]))) == ["c", "b"]
    assert _ids(index.page("t1", RowFilter(ids=["a", "c"], exclude_ids=["c"]))) == ["a"]
    assert index.count("t1", RowFilter(meta=[(("metadata", "project"), "nope")])) == 0
    with pytest.raises(ValueError):
        index.page("t1", RowFilter(meta=[(("metadata", 'x"y'), 1)]))


def test_an_older_version_never_replaces_a_newer_row(tmp_path: Path) -> None:
    """Rows are guarded by the document version: a late, older write is ignored."""
    index = _index(tmp_path)
    index.upsert(_row("a", 5, version=3))
    index.upsert(_row("a", 1, version=2))
    got = index.get("t1", "a")
    assert got is not None and got.version == 3 and got.last_activity == T0 + timedelta(minutes=5)


def test_other_orders_and_offset(tmp_path: Path) -> None:
    """Order by session id ascending with offset/limit (what the API's sort_by/offset ask)."""
    index = _index(tmp_path)
    for sid in ("c", "a", "b", "d"):
        index.upsert(_row(sid, 1))
    assert _ids(index.page("t1", order="session_id", descending=False, offset=1, limit=2)) == ["b", "c"]


def test_bad_cursor_is_refused(tmp_path: Path) -> None:
    """A cursor this index did not hand out (or of another order) raises BadCursor."""
    index = _index(tmp_path)
    index.upsert(_row("a", 1))
    for bad in ("garbage!", "", index.cursor(_row("a", 1), order="created")):
        with pytest.raises(BadCursor):
            index.page("t1", after=bad)


def test_missing_and_incomplete_index_are_unusable_until_rebuilt(tmp_path: Path) -> None:
    """No file: reads raise IndexUnusable(missing) and make nothing; a file made by a write while
    other sessions exist is incomplete; rebuild makes it complete and drops rows not walked."""
    path = tmp_path / "sessions.index.sqlite"
    index = SessionIndex(path, empty=lambda key: False)
    with pytest.raises(IndexUnusable) as missing:
        index.page("t1")
    assert missing.value.state == "missing" and not path.exists()
    index.upsert(_row("a", 1))
    assert index.health().state == "incomplete"
    with pytest.raises(IndexUnusable):
        index.page("t1")
    assert index.rebuild([_row("b", 2)]) == 1
    assert index.health().state == "ok"
    assert _ids(index.page("t1")) == ["b"]


def test_a_fresh_store_makes_a_complete_index_on_its_first_write(tmp_path: Path) -> None:
    """When `empty` says no other session exists, the first write's new file is complete."""
    index = SessionIndex(tmp_path / "i.sqlite", empty=lambda key: True)
    index.upsert(_row("a", 1))
    assert index.health().state == "ok" and _ids(index.page("t1")) == ["a"]


def test_garbage_file_is_set_aside_on_write_and_reported_on_read(tmp_path: Path) -> None:
    """Garbage bytes: health says damaged, a read raises IndexUnusable, a write moves the file to
    .broken and goes on with a new (incomplete) index; rebuild completes it."""
    path = tmp_path / "sessions.index.sqlite"
    path.write_bytes(b"this is not a database" * 200)
    index = SessionIndex(path, empty=lambda key: False)
    assert index.health().state == "damaged"
    with pytest.raises(IndexUnusable):
        index.page("t1")
    index.upsert(_row("a", 1))
    assert (tmp_path / "sessions.index.sqlite.broken").read_bytes().startswith(b"this is not")
    assert index.health().state == "incomplete"
    index.rebuild([_row("a", 1), _row("b", 2)])
    assert _ids(index.page("t1")) == ["b", "a"]


def test_rebuild_keeps_rows_written_while_it_ran(tmp_path: Path) -> None:
    """A row upserted by a live writer during the rebuild's walk is not dropped by it."""
    index = _index(tmp_path)

    def walk():  # type: ignore[no-untyped-def]
        yield _row("a", 1)
        index.upsert(_row("new", 9))  # another writer, mid-walk
        yield _row("b", 2)

    index.rebuild(walk())
    assert _ids(index.page("t1")) == ["new", "b", "a"]


def test_file_is_wal_and_rows_are_real_sqlite(tmp_path: Path) -> None:
    """The file is an ordinary SQLite database in WAL mode (readable with any sqlite3)."""
    index = _index(tmp_path)
    index.upsert(_row("a", 1))
    conn = sqlite3.connect(index.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT session_id FROM sessions").fetchall() == [("a",)]
    conn.close()


def test_cursor_instants_are_exact_to_the_microsecond() -> None:
    """A cursor's activity value names the very instant of its row (no float rounding), so a SQL
    table compared with it (MIRROR) pages without a gap among equal timestamps."""
    from checkpointing._session_index_sql import us
    from checkpointing.session_index import decode_cursor, instant

    for when in (datetime(2026, 12, 5, 5, 30, 1, 123457, tzinfo=UTC), datetime.now(UTC), T0):
        row = _row("a", 0)
        row = SessionRow(**{**row.__dict__, "last_activity": when})
        value, sid = decode_cursor(SessionIndex.cursor(row), "activity")
        assert instant(value) == when and us(when) == value and sid == "a"


def test_concurrent_writers_and_hostile_keys(tmp_path: Path) -> None:
    """Threads upserting at once lose no row; a metadata key with a dot and a value that looks like
    SQL are matched literally (every value is bound)."""
    import threading

    index = _index(tmp_path)

    def write(t: int) -> None:
        for i in range(100):
            index.upsert(_row(f"w{t}-{i}", i, metadata={"a.b": "' OR 1=1 --"} if i == 7 else {}))

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert index.count("t1") == 400
    hostile = RowFilter(meta=[(("metadata", "a.b"), "' OR 1=1 --")])
    hits = index.page("t1", hostile, order="session_id", descending=False)
    assert _ids(hits) == ["w0-7", "w1-7", "w2-7", "w3-7"]
    assert index.count("t1", RowFilter(meta=[(("metadata", "a"), "' OR 1=1 --")])) == 0


def test_a_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    """A child process (a prefork worker) never reuses the parent's SQLite connection."""
    import os

    index = _index(tmp_path)
    index.upsert(_row("parent", 1))
    pid = os.fork()
    if pid == 0:  # the child: write and read through a connection of its own, then exit at once
        try:
            index.upsert(_row("child", 2))
            os._exit(0 if _ids(index.page("t1")) == ["child", "parent"] else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _ids(index.page("t1")) == ["child", "parent"]
