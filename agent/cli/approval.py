"""The approval prompt: the tool, its arguments with secrets masked, and a literal `[y/N]`.

Answers: `y` / `yes` approve; `n`, an empty line or end of input reject; `n: reason` rejects with
a reason. The decision carries the operator so the `hitl_decision` event records who decided.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO


def describe(request: dict[str, Any]) -> str:
    """`name(args)` of an approval request, secrets masked, on one line, escaped (`printable`)."""
    from agent.core.text import printable
    from checkpointing.digest import redact

    args = json.dumps(redact(request.get("args") or {}), ensure_ascii=False, default=str)
    if len(args) > 300:
        args = args[:299] + "…"
    return printable(f"{request.get('name')}({args})")


def parse_answer(line: str | None) -> dict[str, Any]:
    """A typed answer as a decision: y/yes approve; n, `n: reason`, empty or None reject."""
    text = (line or "").strip()
    head, sep, reason = text.partition(":")
    word = (head if sep else text).strip().lower()
    if word in ("y", "yes"):
        return {"approved": True}
    return {"approved": False, "reason": reason.strip() or "rejected at the prompt"}


def ask(
    request: dict[str, Any], operator: str | None, stdin: TextIO | None = None, out: TextIO | None = None
) -> dict[str, Any]:
    """Prompt a human on the terminal for one request and return the decision."""
    src = stdin if stdin is not None else sys.stdin
    dst = out if out is not None else sys.stderr
    from agent.core.text import printable

    call_id = request.get("tool_call_id")
    call = printable(f"  (call {call_id})") if call_id else ""
    dst.write(f"\nThe agent wants to run {describe(request)}{call}\n")
    dst.write("Approve? [y/N] (n: reason to reject with a reason) ")
    dst.flush()
    decision = parse_answer(src.readline())
    if operator:
        decision["operator"] = operator
    return decision
