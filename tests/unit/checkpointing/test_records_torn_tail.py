"""Cutting a torn tail is never silent: each cut is logged with file, offset and size, no content."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from checkpointing.record_log import RecordLog
from checkpointing.records import read_records
from checkpointing.torn_tail import cut_torn_tail

TORN = b'{"_crc":"0a1b2c3d","api_key":"sk-s3cret-value","te'


def _log_with_torn_tail(path: Path) -> int:
    log = RecordLog(path)
    log.append({"k": "a", "secret": "sk-s3cret-value"})
    log.append({"k": "b"})
    good = path.stat().st_size
    with path.open("ab") as fh:
        fh.write(TORN)
    return good


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_the_first_append_logs_the_cut_it_makes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An appender that cuts a crashed writer's torn tail says so: file, offset, bytes moved, where to."""
    path = tmp_path / "events.jsonl"
    good = _log_with_torn_tail(path)
    caplog.set_level(logging.WARNING)
    assert [r["k"] for r in read_records(path)] == ["a", "b"]
    assert _warnings(caplog) == []  # a read cuts nothing, so it has nothing to say
    RecordLog(path).append({"k": "c"})
    (said,) = _warnings(caplog)
    assert str(path) in said and f"byte {good}" in said and f"{len(TORN)} bytes" in said
    assert str(path.with_name("events.jsonl.broken")) in said
    assert "s3cret" not in said
    assert path.with_name("events.jsonl.broken").read_bytes() == TORN
    assert [r["k"] for r in read_records(path)] == ["a", "b", "c"]


def test_an_explicit_cut_is_logged_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`cut_torn_tail` (recovery, `agentrt doctor --repair`) logs the same line; nothing to cut, no line."""
    path = tmp_path / "journal.jsonl"
    good = _log_with_torn_tail(path)
    caplog.set_level(logging.WARNING)
    assert cut_torn_tail(path)
    (said,) = _warnings(caplog)
    assert str(path) in said and f"byte {good}" in said and f"{len(TORN)} bytes" in said and "s3cret" not in said
    assert not cut_torn_tail(path)
    assert len(_warnings(caplog)) == 1
