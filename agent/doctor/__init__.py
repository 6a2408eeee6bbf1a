"""`agentrt doctor`: the troubleshooting table of docs/reference/doctor.md as read-only checks.

facts.py gathers what the checks read; checks.py and storage_checks.py judge it; report.py runs and renders.
The checks import the facts, never the reverse. The names below load on first use, so the
store-wide report (`agent.doctor.index`) does not load the session checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.doctor.facts import Check, DoctorReport, SessionFacts
    from agent.doctor.report import render, run_doctor

__all__ = ["Check", "DoctorReport", "SessionFacts", "render", "run_doctor"]


def __getattr__(name: str) -> Any:
    if name in ("Check", "DoctorReport", "SessionFacts"):
        from agent.doctor import facts

        return getattr(facts, name)
    if name in ("render", "run_doctor"):
        from agent.doctor import report

        return getattr(report, name)
    raise AttributeError(name)
