"""A user tool for the PostgreSQL restart drills: the database crashes while a tool runs.

`crash_database(note)` crash-restarts the private server of `tests.support.pg_server` named by the
environment (`env_of`), once per `note` (a marker file in the server's folder), then returns: the
run under test goes on against a server that has just lost every commit it had not flushed.
Declared read-only, so a resumed run may call it again; the second call does nothing.
"""

from __future__ import annotations

from tests.support.pg_server import server_from_env


def crash_database(note: str) -> str:
    """Crash-restart the test's private PostgreSQL server (once per `note`)."""
    server = server_from_env()
    marker = server.root / f"crashed-{note}"
    if marker.exists():
        return f"{note}: already crashed"
    marker.touch()
    server.restart("immediate")
    return f"{note}: crashed and restarted"
