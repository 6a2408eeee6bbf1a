"""What `agentrt erase` deletes beyond the sessions: the tenant's crons, its assistants and its
store items.

- Crons (`agent.session.cron_doc`): a whole-tenant erase deletes the tenant's crons document; a
  one-user erase deletes that user's crons from it (a stateless cron would otherwise go on making
  threads for the erased user). They go before the sessions, so none fires a run meanwhile.
- Assistants, every version (the tenant's document of `agent.session.assistant_doc`, and those an
  earlier agentrt kept under `(ASSISTANTS_ROOT, tenant)` of LangGraph's store) and store items
  (every namespace under `("tenants", tenant)`): they belong to the whole tenant (its users share
  them), so only a whole-tenant erase deletes them.

On the `files` store, LangGraph's store is a file under `base_dir`: when it does not exist there is
nothing in it to erase, and it is not made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langgraph.store.base import BaseStore, PutOp

from agent.session.assistant_doc import assistants_session, read_assistants
from agent.session.cron_doc import change_crons, crons_session, read_crons
from agent.session.removal import Removal
from agent.session.tenant_store import ASSISTANTS_ROOT, tenant_scope
from checkpointing.layout import langgraph_store_file

if TYPE_CHECKING:
    from agent.core.config import AgentSettings

PAGE = 500


def erase_crons(settings: AgentSettings, tenant: str, user: str | None, out: Removal) -> None:
    """Delete (or, `out.dry_run`, count) the tenant's crons, only `user`'s when given."""
    session = crons_session(settings, tenant)
    crons = read_crons(session)
    mine = [cid for cid, c in crons.items() if user is None or c.get("user_id") == user]
    if out.dry_run or not mine:
        out.crons += len(mine)
        return
    if user is None:
        session.remove()  # the document and whatever else the pseudo-session holds
        out.crons += len(mine)
        return

    def edit(crons: dict[str, dict[str, object]]) -> int:
        gone = [cid for cid, c in crons.items() if c.get("user_id") == user]
        for cid in gone:
            del crons[cid]
        return len(gone)

    out.crons += change_crons(session, tenant, edit)


def erase_items(settings: AgentSettings, tenant: str, out: Removal) -> None:
    """Delete (or, `out.dry_run`, count) the tenant's assistants and store items."""
    assistants = assistants_session(settings, tenant)
    kept, _ = read_assistants(assistants)
    if kept is not None:
        out.assistants += len(kept)
        if not out.dry_run:
            assistants.remove()  # the document and whatever else the pseudo-session holds
    store = _item_store(settings)
    if store is None:
        return
    if not out.dry_run:
        sweep = getattr(store, "sweep_ttl", None)
        if sweep is not None:
            sweep()  # expired items are not read, yet still kept until a sweep: they go too
    out.assistants += _drop(store, (ASSISTANTS_ROOT, tenant), out.dry_run)
    out.items += _drop(store, tenant_scope(tenant), out.dry_run)


def _item_store(settings: AgentSettings) -> BaseStore | None:
    from agent.session.item_store import item_store

    if settings.store_url() is None and not langgraph_store_file(settings.base_dir).exists():
        return None
    return item_store(settings)


def _drop(store: BaseStore, prefix: tuple[str, ...], dry_run: bool) -> int:
    """How many items are under `prefix`; deleted unless `dry_run`."""
    count = 0
    while True:
        page = store.search(prefix, limit=PAGE, offset=count if dry_run else 0, refresh_ttl=False)
        if not page:
            return count
        count += len(page)
        if not dry_run:
            store.batch([PutOp(item.namespace, item.key, None) for item in page])
