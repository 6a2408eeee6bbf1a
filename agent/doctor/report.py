"""`agentrt doctor`: the recovery troubleshooting table as checks that run.

| symptom                               | checks                                  |
|---------------------------------------|-----------------------------------------|
| session not found                     | session_found, tenant_user, header      |
| the model sees incomplete context     | model_context, tool_pairing             |
| a tool executed twice                 | tool_journal                            |
| recovery blocked                      | recovery                                |
| file results vanished                 | blobs, sandbox                          |
| the same session recovered concurrently | lease                                 |
| a session missing from `agentrt sessions` | session_index (also without a session id) |
| a submitted turn never starts           | worker_queue                            |

plus `files` (every JSONL file of the session verified record by record).

The doctor never changes anything: every record file (events, journal, outbox, inbox, checkpoint
logs) is verified with `checkpointing.records.scan`, and reads never modify files (a torn tail is
skipped, not cut); no lease is taken, no layer is refilled (each layer is asked directly, not
through the manager's read path), and the state is read in place by a fresh checkpoint saver (on
the embedded default, from the saver's records without LangGraph: `agent.doctor.light`).
Damaged data becomes a FAIL with its evidence, never a crash. Only `agentrt doctor ID --repair`
changes anything: it cuts torn tails (files) and bad tails (PostgreSQL rows), moves damaged
documents aside and replaces a damaged outbox, under the session lease (see `repair`). On the
PostgreSQL store the verdict on each stream and document is the store's (`SessionStreams.verify`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent.doctor.facts import STATUSES, Check, DoctorReport
from agent.session.record_store import pg_store
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import printable, validate_id

if TYPE_CHECKING:
    from agent.doctor.subject import DoctorContext
    from agent.runner.agent_runner import AgentRunner

__all__ = ["render", "run_doctor"]


def run_doctor(
    runner: AgentRunner | DoctorContext, session_id: str, tenant_id: str | None = None, user_id: str | None = None
) -> DoctorReport:
    """Diagnose one session through a runner or a context (`agent.doctor.subject`); read-only, and
    a FAIL (not an exception) for damaged data. A `LightContext` raises `NeedsGraph` when only
    LangGraph reads the session exactly (then run it again with the runner)."""
    from agent.doctor import checks as doctor_checks
    from agent.doctor.facts import gather
    from agent.doctor.subject import as_context

    ctx = as_context(runner)
    tenant = tenant_id or ctx.settings.session.tenant_id
    report = DoctorReport(session_id, tenant)
    try:
        validate_id(tenant, "tenant id")
        validate_id(session_id, "session id")
        if user_id is not None:
            validate_id(user_id, "user id")
    except InvalidIdError as err:
        report.checks.append(Check("session_found", "FAIL", str(err), "check the session id with `agentrt sessions`"))
        return report
    store = pg_store(ctx.settings)
    if store is None:
        report.checks = doctor_checks.run_all(gather(ctx, session_id, tenant, user_id))
        return report
    from agent.doctor.store_copy import relabel, verified_copy

    # The store's own verdicts name the damaged rows (a bad tail that `--repair` cuts); the copy
    # holds the same bytes, read by every other check as a session folder.
    with verified_copy(store, tenant, session_id) as (root, verified):
        checks = doctor_checks.run_all(gather(ctx, session_id, tenant, user_id, base=root, verified=verified))
        report.checks = [
            Check(
                c.name,
                c.status,
                json.loads(relabel(json.dumps(c.evidence), root, store)),
                relabel(c.next_step, root, store),
            )
            for c in checks
        ]
    return report


# --- rendering ---------------------------------------------------------------------------------------

_MARK = {"OK": "OK  ", "WARN": "WARN", "FAIL": "FAIL"}


def render(report: DoctorReport) -> str:
    """The report for humans: one block per check (status, finding, evidence, next step)."""
    what = "the session store" if report.session_id == "-" else f"session {report.session_id}"
    lines = [f"agentrt doctor: {what} (tenant {report.tenant_id})", ""]
    for c in report.checks:
        lines.append(f"[{_MARK[c.status]}] {c.name}: {c.summary}")
        if isinstance(c.evidence, dict):
            for key, value in c.evidence.items():
                if key != "summary":
                    lines.append(f"         {key}: {_short(value)}")
        lines.append(f"         next: {c.next_step}")
    counts = {s: sum(1 for c in report.checks if c.status == s) for s in STATUSES}
    lines += ["", f"verdict: {report.verdict} ({counts['OK']} OK, {counts['WARN']} WARN, {counts['FAIL']} FAIL)"]
    return "\n".join(printable(line) for line in lines)  # ids, paths and evidence: escaped, never acted on


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
