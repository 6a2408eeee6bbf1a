"""The doctor's view of the index of sessions that `agentrt sessions` lists by.

- `index_check` (the `session_index` check): FAIL when the index file is missing, damaged or
  incomplete while sessions exist; WARN when one session's row is missing or older than its
  `session.json` (a crash between the two writes); each names `agentrt doctor --repair`.
- `store_report`: `agentrt doctor` without a session id: the store-wide checks (the index, the
  sessions whose outbox owes the SQL or Redis layer writes: `agent.doctor.behind`, LangGraph's
  store of the store API's items: `agent.doctor.items_check`, and with a
  broker the turns waiting in the workers' queues: `agent.doctor.queue_check`).
- `repair_index`: `agentrt doctor --repair`: rebuild the index by one walk of the session folders
  (the documents are the truth; the old file, if damaged, is kept as `<file>.broken`).

Where a SQL session table is the listing's index (MIRROR, PRIMARY on a server database) the files
index is still kept, but nothing lists by it: its state is reported as OK with that said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.doctor.facts import Check, DoctorReport
from agent.doctor.finding import finding
from agent.session.stores.jsonl import read_session_file
from agent.session.stores.listing import rebuild_index
from checkpointing.exceptions import CheckpointingError
from checkpointing.layout import tenants_root
from checkpointing.session_index import IndexUnusable

if TYPE_CHECKING:
    from agent.doctor.subject import RuntimeParts

NAME = "session_index"
REPAIR = "run `agentrt doctor --repair` to rebuild the index from the session folders"
STORE = "-"
"""The session id of a store-wide report."""


def lists_by_files_index(parts: RuntimeParts) -> bool:
    """Whether `agentrt sessions` lists by the files store's index (embedded PRIMARY, JSONL_ONLY)."""
    return parts.manager.sql_index() is None


def index_check(parts: RuntimeParts, tenant_id: str, session_id: str | None = None) -> Check:
    """The state of the index file, and of `session_id`'s row when given (read-only)."""
    store = parts.manager.jsonl
    index = store.index
    if not lists_by_files_index(parts):
        return finding(NAME, "OK", "sessions are listed by the SQL session table", "nothing to do")
    health = index.health()
    where = {"index": str(index.path), "rows": health.rows}
    if health.state == "missing" and not tenants_root(store.base_dir).is_dir():
        return finding(NAME, "OK", "no session stored yet (the index is made with the first one)", "nothing to do")
    if health.state != "ok":
        said = f"the session index is {health.state}" + (f" ({health.detail})" if health.detail else "")
        return finding(NAME, "FAIL", f"{said}: `agentrt sessions` cannot list by it", REPAIR, **where)
    if session_id is None:
        return finding(NAME, "OK", f"the session index holds {health.rows} session(s)", "nothing to do", **where)
    try:
        row = index.get(tenant_id, session_id)
        doc = read_session_file(store.path(tenant_id, session_id))
    except (IndexUnusable, CheckpointingError, ValueError, OSError) as err:
        return finding(NAME, "WARN", f"the session's index row could not be compared: {err}", REPAIR, **where)
    if row is None:
        if doc is None and not store.event_log(tenant_id, session_id).exists():
            return finding(NAME, "OK", "no session here, no row", "nothing to do", **where)
        return finding(
            NAME, "WARN", "the session has no row in the index: `agentrt sessions` omits it", REPAIR, **where
        )
    if doc is not None and doc.version > row.version:
        return finding(
            NAME,
            "WARN",
            f"the session's index row is older than its session.json (version {row.version} < {doc.version}); "
            "a listing that shows it corrects it",
            REPAIR,
            **where,
        )
    return finding(NAME, "OK", "the session's index row matches its session.json", "nothing to do", **where)


def store_report(parts: RuntimeParts, tenant_id: str) -> DoctorReport:
    """`agentrt doctor` with no session id: the store-wide checks."""
    from agent.doctor.behind import outbox_check
    from agent.doctor.items_check import items_check

    report = DoctorReport(STORE, tenant_id)
    report.checks.append(index_check(parts, tenant_id))
    report.checks.append(outbox_check(parts, tenant_id))
    report.checks.append(items_check(parts.settings, tenant_id))
    if parts.settings.workers.enabled:
        from agent.doctor.queue_check import queues_check

        report.checks.append(queues_check(parts))
    return report


def repair_index(parts: RuntimeParts) -> str:
    """Rebuild the index from one walk of the session folders; what was done, in one line."""
    n = rebuild_index(parts.manager.jsonl)
    return f"rebuilt the session index {parts.manager.jsonl.index.path} from the session folders ({n} session(s))"
