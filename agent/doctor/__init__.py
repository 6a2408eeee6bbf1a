"""`agentrt doctor`: the troubleshooting table of docs/reference/doctor.md as read-only checks.

facts.py gathers what the checks read; checks.py and files.py judge it; report.py runs and renders.
The checks import the facts, never the reverse.
"""

from agent.doctor.facts import Check, DoctorReport, SessionFacts
from agent.doctor.report import render, run_doctor

__all__ = ["Check", "DoctorReport", "SessionFacts", "render", "run_doctor"]
