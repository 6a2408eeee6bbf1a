"""Structured logs carry ids and never payload contents."""

from __future__ import annotations

import json
import logging

from agent.core.logs import EVENT_LOG, JsonFormatter, log_event


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_event_log_record_has_ids_not_contents() -> None:
    """A tool_result event logs session, run, tool and status, but not the tool's output or args."""
    keep = _Keep()
    EVENT_LOG.addHandler(keep)
    old_level, old_disable = EVENT_LOG.level, logging.root.manager.disable
    EVENT_LOG.setLevel(logging.INFO)  # setLevel also clears the logger's isEnabledFor cache
    logging.disable(logging.NOTSET)
    try:
        log_event(
            "tool_result",
            "s1",
            "t1",
            {
                "run_id": "r1",
                "tool_call_id": "c1",
                "name": "read_file",
                "status": "success",
                "content": "SECRET-TOKEN-123",
                "args": {"k": "pw"},
            },
        )
    finally:
        EVENT_LOG.removeHandler(keep)
        EVENT_LOG.setLevel(old_level)
        logging.disable(old_disable)
    line = JsonFormatter().format(keep.records[-1])
    data = json.loads(line)
    assert data["session_id"] == "s1" and data["run_id"] == "r1" and data["tool"] == "read_file"
    assert data["tool_call_id"] == "c1" and data["status"] == "success"
    assert "SECRET-TOKEN-123" not in line and "pw" not in line
