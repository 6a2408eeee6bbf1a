"""One row of the doctor's report from a finding, and the next steps many checks share."""

from __future__ import annotations

from typing import Any

from agent.doctor.facts import Check, Status

NOTHING = "nothing to do"
RESTORE_CP = "restore the session's runs/ files from a backup"


def finding(name: str, status: Status, summary: str, next_step: str, **evidence: Any) -> Check:
    """A `Check` whose evidence is `{"summary": summary, **evidence}`."""
    return Check(name, status, {"summary": summary, **evidence}, next_step)
