"""Crash and corruption: torn tails, flipped bytes, missing or truncated blobs, lost index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpointing import record_log
from checkpointing.exceptions import CorruptCheckpointError
from checkpointing.saver import JsonlCheckpointSaver

RUN = Path("tenants/default/sessions/t1/runs/main")


def _cfg(cp: str | None = None) -> Any:
    conf: dict[str, Any] = {"thread_id": "t1", "checkpoint_ns": ""}
    if cp:
        conf["checkpoint_id"] = cp
    return {"configurable": conf}


def _put(saver: JsonlCheckpointSaver, parent: str | None, value: Any, version: int) -> str:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": version}
    return saver.put(_cfg(parent), cp, {"step": version}, {"v": version})["configurable"]["checkpoint_id"]


def _three(base: Path) -> list[str]:
    saver = JsonlCheckpointSaver(base)
    ids: list[str] = []
    for i in range(3):
        ids.append(_put(saver, ids[-1] if ids else None, f"value-{i}", i + 1))
    return ids


def _last_record_span(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    return start, len(data)


def test_torn_tail_at_every_byte_offset_is_skipped_by_reads_and_cut_by_the_next_append(tmp_path: Path) -> None:
    """Cutting the last record anywhere loses only that record; reads leave the file alone; the
    next append moves the tail to .broken first."""
    seed = tmp_path / "seed"
    ids = _three(seed)
    path = seed / RUN / "checkpoints.jsonl"
    original = path.read_bytes()
    start, end = _last_record_span(path)
    for cut in range(start + 1, end):
        base = tmp_path / f"cut{cut}"
        (base / RUN).mkdir(parents=True)
        for f in (seed / RUN).iterdir():
            (base / RUN / f.name).write_bytes(f.read_bytes())
        (base / RUN / "checkpoints.jsonl").write_bytes(original[:cut])
        saver = JsonlCheckpointSaver(base)
        latest = saver.get_tuple(_cfg())
        assert latest is not None and latest.checkpoint["id"] == ids[1], cut
        assert latest.checkpoint["channel_values"] == {"v": "value-1"}
        broken = base / RUN / "checkpoints.jsonl.broken"
        assert not broken.exists() and (base / RUN / "checkpoints.jsonl").read_bytes() == original[:cut]
        new_id = _put(saver, ids[1], "after", 9)
        assert broken.read_bytes() == original[start:cut]
        again = JsonlCheckpointSaver(base).get_tuple(_cfg())
        assert again is not None and again.checkpoint["id"] == new_id
        assert len(list(JsonlCheckpointSaver(base).list(_cfg()))) == 3


def test_crash_mid_append_keeps_previous_checkpoints(tmp_path: Path, monkeypatch: Any) -> None:
    """A process dying half-way through writing a record leaves the earlier ones readable."""
    ids = _three(tmp_path)

    class Killed(BaseException):
        pass

    def half_then_die(fd: int, data: bytes) -> None:
        import os

        if os.readlink(f"/proc/self/fd/{fd}").endswith("checkpoints.jsonl"):
            os.write(fd, data[: len(data) // 2])
            raise Killed

    monkeypatch.setattr(record_log, "write_hook", half_then_die)
    with pytest.raises(Killed):
        _put(JsonlCheckpointSaver(tmp_path), ids[-1], "lost", 4)
    monkeypatch.setattr(record_log, "write_hook", None)
    before = (tmp_path / RUN / "checkpoints.jsonl").read_bytes()
    latest = JsonlCheckpointSaver(tmp_path).get_tuple(_cfg())
    assert latest is not None and latest.checkpoint["id"] == ids[-1]
    assert not (tmp_path / RUN / "checkpoints.jsonl.broken").exists()
    assert (tmp_path / RUN / "checkpoints.jsonl").read_bytes() == before


def test_flipped_byte_mid_file_raises_naming_file_and_line(tmp_path: Path) -> None:
    """A damaged record that is not the last raises CorruptCheckpointError; nothing is changed."""
    ids = _three(tmp_path)
    path = tmp_path / RUN / "checkpoints.jsonl"
    data = bytearray(path.read_bytes())
    second = data.index(b"\n") + 1
    pos = data.index(b"value-1", second)
    data[pos] = ord("V")
    path.write_bytes(bytes(data))
    saver = JsonlCheckpointSaver(tmp_path)
    with pytest.raises(CorruptCheckpointError) as err:
        saver.get_tuple(_cfg(ids[1]))
    assert err.value.path.endswith("checkpoints.jsonl") and err.value.line == 2
    with pytest.raises(CorruptCheckpointError):
        list(saver.list(_cfg()))
    with pytest.raises(CorruptCheckpointError, match=":2: corrupt record"):
        saver.get_tuple(_cfg(ids[0]))  # the read stops: no state is served from a damaged file
    assert path.read_bytes() == bytes(data)


def test_a_flipped_last_newline_keeps_the_record_and_the_next_append_puts_it_back(tmp_path: Path) -> None:
    """A last record whose newline took a bit flip still verifies (no crash writes that): reads
    serve it unchanged, and the next append puts the newline back before writing after it."""
    ids = _three(tmp_path)
    path = tmp_path / RUN / "checkpoints.jsonl"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    latest = JsonlCheckpointSaver(tmp_path).get_tuple(_cfg())
    assert latest is not None and latest.checkpoint["id"] == ids[-1]
    assert path.read_bytes() == bytes(data)  # a read changed nothing
    saver = JsonlCheckpointSaver(tmp_path)
    _put(saver, ids[-1], "more", 5)
    assert path.read_bytes().startswith(bytes(data[:-1]) + b"\n")
    assert len(list(JsonlCheckpointSaver(tmp_path).list(_cfg()))) == len(ids) + 1


def test_flipped_byte_blocks_appends_instead_of_hiding_damage(tmp_path: Path) -> None:
    """Appending to a file with mid-file damage raises rather than writing past it."""
    ids = _three(tmp_path)
    path = tmp_path / RUN / "checkpoints.jsonl"
    data = bytearray(path.read_bytes())
    data[data.index(b"value-0")] = ord("X")
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match=r":1: corrupt record"):
        _put(JsonlCheckpointSaver(tmp_path), ids[-1], "more", 5)
    assert path.read_bytes() == bytes(data)


def test_lost_pending_write_is_an_error_not_a_different_history(tmp_path: Path) -> None:
    """A writes record a later checkpoint was built from, removed from the file, stops the history read."""
    saver = JsonlCheckpointSaver(tmp_path)
    first = _put(saver, None, "v0", 1)
    saver.put_writes(_cfg(first), [("log", "w1")], "task")
    second = _put(saver, first, "v1", 2)
    path = tmp_path / RUN / "checkpoints.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(x for x in lines if b'"k":"w"' not in x))
    fresh = JsonlCheckpointSaver(tmp_path)
    with pytest.raises(CorruptCheckpointError, match=r"task/0 of checkpoint .* which are not stored"):
        fresh.get_delta_channel_history(config=_cfg(second), channels=["log"])


def test_reader_catches_up_with_records_another_writer_appended(tmp_path: Path) -> None:
    """A saver that indexed a session sees checkpoints another process appended after that."""
    ids = _three(tmp_path)
    reader = JsonlCheckpointSaver(tmp_path)
    assert reader.get_tuple(_cfg()) is not None
    newer = _put(JsonlCheckpointSaver(tmp_path), ids[-1], "from elsewhere", 4)
    got = reader.get_tuple(_cfg())
    assert got is not None and got.checkpoint["id"] == newer
    assert got.checkpoint["channel_values"] == {"v": "from elsewhere"}
