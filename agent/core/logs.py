"""Structured logs: every recorded runtime event as one log record with session/run/node/tool ids.

`AGENTRT_LOG=json` writes JSON lines to stderr (`AGENTRT_LOG_LEVEL`, default INFO); `AGENTRT_LOG=text`
writes plain lines; unset, Python's defaults apply (warnings reach stderr). Payload contents (tool
arguments and results, model text) are never logged, only ids, names, sizes, statuses and token
counts, so no secret that a tool handles reaches a log.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

from agent.core.text import json_safe, printable

EVENT_LOG = logging.getLogger("agentrt.events")
_FIELDS = (
    "session_id",
    "tenant_id",
    "run_id",
    "node",
    "tool_call_id",
    "tool",
    "status",
    "finish_reason",
    "call_index",
    "size",
    "tier",
    "checkpoint_id",
    "replayed",
)
_configured = False


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg and the agentrt fields present."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in (*_FIELDS, "event", "usage"):
            if hasattr(record, key):
                out[key] = getattr(record, key)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json_safe(json.dumps(out, ensure_ascii=False, default=str))


class TextFormatter(logging.Formatter):
    """`LEVEL logger: message`, one line per message: every control, format or separator character
    of it escaped (`printable`), so an id from the outside can neither forge a log line nor drive
    the terminal that reads the log."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))


def configure_logging() -> None:
    """Set up agentrt's log handler from the environment (idempotent; nothing when AGENTRT_LOG is unset)."""
    global _configured
    mode = os.environ.get("AGENTRT_LOG", "").lower()
    if _configured or mode not in ("json", "text"):
        return
    _configured = True
    root = logging.getLogger("agentrt")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if mode == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(os.environ.get("AGENTRT_LOG_LEVEL", "INFO"))
    root.propagate = False


def log_event(event_type: str, session_id: str, tenant_id: str, payload: dict[str, Any]) -> None:
    """Log one runtime event with its ids (never its contents)."""
    if not EVENT_LOG.isEnabledFor(logging.INFO):
        return
    extra: dict[str, Any] = {"event": event_type, "session_id": session_id, "tenant_id": tenant_id}
    for key in _FIELDS:
        if key in payload and key not in extra:
            extra[key] = payload[key]
    if "name" in payload:  # `name` is reserved on log records
        extra["tool"] = payload["name"]
    usage = payload.get("usage")
    if isinstance(usage, dict):
        extra["usage"] = {k: usage.get(k) for k in ("input_tokens", "output_tokens")}
    EVENT_LOG.info(event_type, extra=extra)
