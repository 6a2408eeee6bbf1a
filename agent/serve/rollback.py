"""Rolling a stopped run back: the thread's state is again what it was before the run started.

agentrt never rewrites history, so a rollback moves the thread instead: it forks the session at the
entry just before the run's turn started (`AgentRunner.fork`, as `agentrt fork --from` does), and
the thread's state, history and next turn follow the new branch; the old branch keeps the run's
entries for `agentrt show`, never shown to the API again. A session whose first turn is rolled back
has no state to go back to: it is removed and made again, empty, with the same id and metadata
(this needs `persistence.saver: jsonl`, as deleting a thread does).

A run that continued an earlier one (an answer to an approval, a run without input) cannot be
undone this way (the state before it is the middle of a run, and agentrt resumes a run only on its
own branch): it stays, `interrupted`, and a run without input continues it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.runner.run_lifecycle import fork_before_run
from agent.serve.auth import Principal
from agent.serve.run_record import RunRecord
from agent.serve.serve_context import METADATA_KEY
from agent.serve.thread_ops import delete_thread

if TYPE_CHECKING:
    from agent.serve.serve_context import ServeContext


def roll_back(ctx: ServeContext, rec: RunRecord) -> bool:
    """Undo `rec`'s writes (its run has stopped and let go of the session); False when it cannot be."""
    if rec.segment or not rec.agent_run_id:
        return False
    forked = fork_before_run(ctx.parts, rec.tenant_id, rec.thread_id, rec.agent_run_id)
    if forked is None:
        return False
    if not forked:
        renew_thread(ctx, rec)
    return True


def renew_thread(ctx: ServeContext, rec: RunRecord) -> None:
    """The thread of a rolled-back first turn: removed and made again, empty, same id and metadata."""
    session = ctx.runner.manager.get(rec.tenant_id, rec.thread_id)
    metadata = dict(session.context.get(METADATA_KEY) or {})
    delete_thread(ctx, session)
    ctx.create_session(Principal(rec.tenant_id, session.user_id), rec.thread_id, metadata or None)
