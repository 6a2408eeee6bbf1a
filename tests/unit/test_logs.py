"""Structured logs carry ids and never payload contents."""

from __future__ import annotations

import json
import logging

import pytest

from agent.logs import EVENT_LOG, JsonFormatter, log_event


def test_event_log_record_has_ids_not_contents(caplog: pytest.LogCaptureFixture) -> None:
    """A tool_result event logs session, run, tool and status, but not the tool's output or args."""
    with caplog.at_level(logging.INFO, logger="agentrt.events"):
        EVENT_LOG.propagate = True
        log_event("tool_result", "s1", "t1", {"run_id": "r1", "tool_call_id": "c1", "name": "read_file",
                                               "status": "success", "content": "SECRET-TOKEN-123", "args": {"k": "pw"}})
    line = JsonFormatter().format(caplog.records[-1])
    data = json.loads(line)
    assert data["session_id"] == "s1" and data["run_id"] == "r1" and data["tool"] == "read_file"
    assert data["tool_call_id"] == "c1" and data["status"] == "success"
    assert "SECRET-TOKEN-123" not in line and "pw" not in line
