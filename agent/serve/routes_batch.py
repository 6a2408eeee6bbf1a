"""Several at once: `POST /runs/batch` (`runs.create_batch`) and `POST /threads/prune`
(`threads.prune`). Every item is checked before the first is acted on: a refused request starts
no run and deletes no thread."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from agent.core.errors import ConfigError, LeaseHeld, SessionNotFound
from agent.serve.auth import Principal
from agent.serve.deps import get_ctx, get_principal
from agent.serve.engine import ThreadBusy
from agent.serve.run_record import Strategy
from agent.serve.run_requests import check_request, strategy_of, with_assistant
from agent.serve.run_service import start
from agent.serve.serve_context import ServeContext
from agent.serve.stream_bodies import BatchRun, ThreadPrune
from agent.serve.thread_ops import remove_thread

log = logging.getLogger("agentrt.serve")
router = APIRouter(tags=["batch"])


@router.post("/runs/batch")
async def create_batch(
    request: Annotated[list[BatchRun], Body(min_length=1)],
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> JSONResponse:
    """Start several runs in the background, each as `runs.create` would (an item with a `thread_id`
    on that thread, one without it on a new thread deleted when it is over); the Runs, in order,
    each as it was when it started (as `runs.create` answers: a quick first run is not reported
    over because the later ones took time to start)."""
    items = [item.given() for item in request]
    threads = [item.pop("thread_id", None) for item in items]
    await run_in_threadpool(_check_all, ctx, principal, threads, items)
    runs = [(await start(ctx, principal, tid, body)).to_json() for tid, body in zip(threads, items, strict=True)]
    return JSONResponse(runs)


def _check_all(ctx: ServeContext, principal: Principal, threads: list[str | None], items: list[dict[str, Any]]) -> None:
    named = [t for t in threads if t]
    twice = sorted({t for t in named if named.count(t) > 1})
    if twice:
        raise ConfigError(f"thread_id {', '.join(twice)} appears more than once in the batch; send one run per thread")
    for n, (tid, body) in enumerate(zip(threads, items, strict=True)):
        try:
            check_request(with_assistant(ctx, principal, body), ctx, stateless=tid is None)
        except ConfigError as err:
            raise ConfigError(f"run {n}: {err}") from None
        if tid is None:
            continue
        try:
            ctx.session(principal, tid)
        except SessionNotFound:
            if body.get("if_not_exists") != "create":
                raise
            continue
        if strategy_of(body) is Strategy.REJECT and ctx.engine.busy(principal.tenant_id, tid):
            raise ThreadBusy(f"thread {tid} already has a run in flight; join it or cancel it first, or send enqueue")


@router.post("/threads/prune")
async def prune_threads(
    request: ThreadPrune, ctx: ServeContext = Depends(get_ctx), principal: Principal = Depends(get_principal)
) -> dict[str, Any]:
    """Delete the caller's threads named (`strategy: delete`), each as `threads.delete` does (as
    LangGraph's server prunes): a run going on it here is cancelled and waited for, its pending runs
    never start. Answers `{"pruned_count": N}`. An id the caller cannot see answers 404, and then
    none is deleted; a thread a run of another server holds is skipped, not counted (as the
    reference skips a thread it could not delete)."""
    if request.strategy == "keep_latest":
        raise ConfigError(
            "strategy keep_latest is not offered: agentrt keeps a session's checkpoints, and retention "
            "(persistence.keep_last) already drops the old ones; send strategy delete"
        )
    named = list(dict.fromkeys(request.thread_ids))
    for tid in named:
        await run_in_threadpool(ctx.session, principal, tid)  # 404 before any is deleted
    pruned = 0
    for tid in named:
        try:
            await remove_thread(ctx, principal, tid)
        except LeaseHeld as err:
            log.warning("prune skipped thread %s: %s", tid, err)
            continue
        except SessionNotFound:  # deleted meanwhile
            continue
        pruned += 1
    return {"pruned_count": pruned}
