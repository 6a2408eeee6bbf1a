"""Where a tenant's crons are kept, and their compare-and-swap: what `agentrt serve`'s crons
(`agent.serve.crons`) and `agentrt erase` share.

The crons of a tenant are one document, `crons.json`, of the tenant's session `@crons` in the
record store (a thread id the API never accepts: `@` is outside the id alphabet): a file in a
session folder under `base_dir` (`files`), or a row of the PostgreSQL store. Every change is a
compare-and-swap of that document, so writers over one store never lose each other's changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.core.config import AgentSettings
from agent.session.doc_swap import T, swap_doc
from agent.session.record_store import store
from checkpointing.store.base import SessionStreams

CRONS_THREAD = "@crons"
"""The session holding a tenant's crons (never a thread id: `@` is outside the id alphabet)."""
CRONS_DOC = "crons.json"
Crons = dict[str, dict[str, Any]]
"""A tenant's crons by id (each LangGraph's `Cron`, see `agent.serve.crons`)."""


def crons_session(settings: AgentSettings, tenant_id: str) -> SessionStreams:
    """The record-store session of the tenant's crons document."""
    return store(settings).session(tenant_id, CRONS_THREAD, "always")


def read_crons(session: SessionStreams) -> Crons:
    """The crons of the document (none when there is no document)."""
    doc, _ = session.load_doc(CRONS_DOC)
    return dict((doc or {}).get("crons") or {})


def change_crons(session: SessionStreams, tenant_id: str, edit: Callable[[Crons], T]) -> T:
    """Apply `edit` to the crons (by id) and save them if nobody changed them meanwhile, else read
    them again and retry; what `edit` returns. An `edit` that raises saves nothing."""
    out, _ = swap_doc(session, CRONS_DOC, "crons", edit, dict, f"the crons of tenant {tenant_id}")
    return out


def cron_tenants(settings: AgentSettings) -> list[str]:
    """The tenants that keep crons on this record store."""
    return store(settings).doc_tenants(CRONS_THREAD, CRONS_DOC)
