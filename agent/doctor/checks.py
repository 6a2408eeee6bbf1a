"""The doctor's checks of records and state in the troubleshooting table's order (see `agent.doctor`), and running them.

Every check (in the modules imported below) takes the gathered `SessionFacts` and returns a `Check`
whose evidence is a dict with the one-line finding under `summary`. `run_all` runs them in order
and turns a check that itself trips over damaged data into a FAIL, so the doctor reports on any
session it can find.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from agent.doctor import storage_checks as doctor_files
from agent.doctor.context_checks import model_context, tool_journal, tool_pairing
from agent.doctor.facts import Check, SessionFacts
from agent.doctor.finding import finding
from agent.doctor.index import index_check
from agent.doctor.lease_check import lease
from agent.doctor.presence_checks import files, header, session_found, tenant_user
from agent.doctor.queue_check import worker_queue
from agent.doctor.recovery_checks import recovery
from checkpointing.tail import NeedsGraph

# --- running ---------------------------------------------------------------------------------------------

CheckFn = Callable[[SessionFacts], Check]
CHECKS: list[tuple[str, CheckFn]] = [
    ("session_found", session_found),
    ("tenant_user", tenant_user),
    ("header", header),
    ("files", files),
    ("model_context", model_context),
    ("tool_pairing", tool_pairing),
    ("tool_journal", tool_journal),
    ("recovery", recovery),
    ("blobs", doctor_files.blobs),
    ("sandbox", doctor_files.sandbox),
    ("lease", lease),
    ("session_index", lambda f: index_check(f.ctx, f.tenant_id, f.session_id)),
    ("worker_queue", worker_queue),
]
NOT_FOUND_CHECKS = ("session_found", "tenant_user", "header")


def run_all(f: SessionFacts) -> list[Check]:
    """Every check in the troubleshooting table's order; only the identity checks when the session is not there."""
    if f.hidden:
        return [
            Check(
                "session_found",
                "FAIL",
                f"session {f.session_id} not found for tenant {f.tenant_id} and user {f.user_id}",
                f"check the id, --tenant and --user; `agentrt sessions --user {f.user_id}` lists yours",
            )
        ]
    found = f.session is not None or f.header is not None
    workers = f.ctx.settings.workers.enabled  # without a broker no turn waits in a queue
    wanted = [c for c in CHECKS if (found or c[0] in NOT_FOUND_CHECKS) and (workers or c[0] != "worker_queue")]
    return list(_each(f, wanted))


def _each(f: SessionFacts, checks: list[tuple[str, CheckFn]]) -> Iterator[Check]:
    for name, fn in checks:
        try:
            yield fn(f)
        except NeedsGraph:
            raise  # not the session's data: the caller asks LangGraph (`agent.doctor.light`)
        except Exception as err:  # damaged data the check did not foresee is still a finding
            yield finding(
                name,
                "FAIL",
                f"the check failed on the session's data: {type(err).__name__}: {err}",
                "the data this check reads is damaged; restore the session folder from a backup",
            )
