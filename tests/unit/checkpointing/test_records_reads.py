"""The single-record reads of `checkpointing.records`: by offset, first record, whole file, a
damaged file's readable part. Each applies the log's rules: a record located by its reader must
be a complete line that verifies."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkpointing.exceptions import CorruptRecordError
from checkpointing.record_log import RecordLog
from checkpointing.records import (
    check_line,
    crc_at,
    decode_file,
    encode_record,
    read_body_at,
    read_first_record,
    read_line_at,
    read_lines_at,
    read_record_at,
    record_crc,
    scan,
    scan_before,
    verify_file,
)


def _log(path: Path, n: int) -> list[int]:
    return RecordLog(path, fsync="never").append_many([{"k": "r", "i": i} for i in range(n)])


@pytest.mark.parametrize("n", [3, 40])
def test_lines_at_offsets_few_and_many(tmp_path: Path, n: int) -> None:
    """A seek per line for a few, one read of the span for many: the same lines either way."""
    path = tmp_path / "log.jsonl"
    offs = _log(path, n)
    lines = read_lines_at(path, offs)
    assert lines == path.read_bytes().splitlines(keepends=True)
    assert [read_record_at(path, off)["i"] for off in offs] == list(range(n))
    assert read_lines_at(path, []) == []


def test_a_record_by_offset_must_be_whole_and_intact(tmp_path: Path) -> None:
    """An incomplete line or a flipped byte at a known offset is corruption naming file and line."""
    path = tmp_path / "log.jsonl"
    offs = _log(path, 2)
    with path.open("ab") as fh:
        fh.write(b'{"_crc":"00')
    with pytest.raises(CorruptRecordError) as err:
        read_body_at(path, path.stat().st_size - 11, 3)
    assert err.value.line == 3 and "incomplete" in err.value.reason and err.value.path == str(path)
    data = bytearray(path.read_bytes())
    data[offs[1] + 20] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError) as err:
        read_record_at(path, offs[1], 2)
    assert err.value.line == 2 and f"byte {offs[1]}" in err.value.reason
    with pytest.raises(CorruptRecordError):
        check_line(path, read_line_at(path, offs[1]), 2)


def test_first_record(tmp_path: Path) -> None:
    """None for a missing or empty file; a torn first line is an error (its reader needs it)."""
    path = tmp_path / "events.jsonl"
    assert read_first_record(path) is None
    path.write_bytes(b"")
    assert read_first_record(path) is None
    path.write_bytes(encode_record({"kind": "header"})[:-3])
    with pytest.raises(CorruptRecordError):
        read_first_record(path)
    path.write_bytes(encode_record({"kind": "header"}) + encode_record({"kind": "x"}))
    assert read_first_record(path) == {"kind": "header"}


def test_whole_file_record(tmp_path: Path) -> None:
    """Exactly one complete framed line; anything else (empty, zeroed, no newline) is corruption."""
    path = tmp_path / "pins.json"
    framed = encode_record({"pinned": []})
    assert decode_file(path, framed) == {"pinned": []}
    assert verify_file(path, framed) == b'{"pinned":[]}'
    for bad in (b"", b"\x00" * 16, framed[:-1], framed + framed):
        with pytest.raises(CorruptRecordError) as err:
            decode_file(path, bad)
        assert err.value.line == 1


def test_checksums_by_offset(tmp_path: Path) -> None:
    """`crc_at` reads the checksum a record carries; `record_crc` of its body computes the same."""
    path = tmp_path / "log.jsonl"
    offs = _log(path, 2)
    bodies = [body for _, body in scan(path).records]
    assert [crc_at(path, off) for off in offs] == [record_crc(b) for b in bodies]
    assert record_crc(read_line_at(path, offs[0])) == record_crc(bodies[0])


def test_readable_part_of_a_damaged_file(tmp_path: Path) -> None:
    """The records before the damaged line, verified; `good` is where the damage starts."""
    path = tmp_path / "log.jsonl"
    offs = _log(path, 3)
    data = bytearray(path.read_bytes())
    data[offs[2] + 20] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError) as err:
        scan(path)
    before = scan_before(path, err.value.line)
    assert [off for off, _ in before.records] == offs[:2]
    assert before.good == offs[2] and before.size == len(data)


@pytest.mark.parametrize("limit", [1, 30, 100, 10_000])
def test_a_file_scanned_a_window_at_a_time_reads_as_one_scan(tmp_path: Path, limit: int) -> None:
    """Windows end at a line's end (a line longer than the window is read whole); scanning on from
    each window's `good` gives the records of one scan, and only the file's end is a torn tail."""
    path = tmp_path / "log.jsonl"
    _log(path, 7)
    with path.open("ab") as fh:
        fh.write(encode_record({"k": "r", "i": 99})[:-5])  # a torn tail
    whole = scan(path)
    got: list[tuple[int, bytes]] = []
    good = lines = 0
    while True:
        window = scan(path, good, lines + 1, limit)
        assert window.size >= window.good
        got += window.records
        good, lines = window.good, lines + len(window.records)
        if not window.records:
            break
    assert got == whole.records and good == whole.good < whole.size
