"""Where a tenant's assistants are kept, and their compare-and-swap: what `agentrt serve`'s
assistants (`agent.serve.assistants`) and `agentrt erase` share.

The assistants of a tenant, each with every version, are one document, `assistants.json`, of the
tenant's session `@assistants` in the record store (a thread id the API never accepts: `@` is outside
the id alphabet): a file in a session folder under `base_dir` (`files`), or a row of the PostgreSQL
store. Every change is a compare-and-swap of that document, so servers over one store never lose
each other's versions: of two updates made at once, one is saved and the other is made again on
top of it, with the next version number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.core.config import AgentSettings
from agent.session.doc_swap import T, swap_doc
from agent.session.record_store import store
from checkpointing.store.base import DocVersion, SessionStreams

ASSISTANTS_THREAD = "@assistants"
"""The session holding a tenant's assistants (never a thread id: `@` is outside the id alphabet)."""
ASSISTANTS_DOC = "assistants.json"
Assistants = dict[str, dict[str, Any]]
"""A tenant's assistants by id: `{"assistant": <as it is now>, "versions": [<each version>]}`."""


def assistants_session(settings: AgentSettings, tenant_id: str) -> SessionStreams:
    """The record-store session of the tenant's assistants document."""
    return store(settings).session(tenant_id, ASSISTANTS_THREAD, "always")


def read_assistants(session: SessionStreams) -> tuple[Assistants | None, DocVersion]:
    """The assistants of the document and its version (None, None: there is no document yet)."""
    doc, version = session.load_doc(ASSISTANTS_DOC)
    if doc is None:
        return None, version
    return dict(doc.get("assistants") or {}), version


def change_assistants(
    session: SessionStreams,
    tenant_id: str,
    edit: Callable[[Assistants], T],
    first: Callable[[], Assistants],
) -> tuple[T, bool]:
    """Apply `edit` to the assistants (by id) and save them if nobody changed them meanwhile, else
    read them again and retry; what `edit` returns, and whether this call made the document (from
    `first()`, the assistants kept before there was one). An `edit` that raises saves nothing."""
    return swap_doc(session, ASSISTANTS_DOC, "assistants", edit, first, f"the assistants of tenant {tenant_id}")
