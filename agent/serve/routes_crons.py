"""Crons (`client.crons`): create for a thread or stateless, get, update, search, count, delete; each only
within the caller's tenant (and user, when the key names one): another's cron id answers 404.

A request is checked whole (its schedule, its types, and its run as a run request is checked)
before anything is stored: a refused create keeps nothing. The scheduler that fires the crons is
agent/serve/cron_scheduler.py; where they are kept, agent/serve/crons.py.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response
from starlette.concurrency import run_in_threadpool

from agent.core.errors import ConfigError
from agent.serve.assistants import ASSISTANT_ID, GRAPH_ID
from agent.serve.auth import Principal
from agent.serve.cron_bodies import PAYLOAD, CronCount, CronCreate, CronPatch, CronRun, CronSearch
from agent.serve.crons import Cron, CronBook, iso, new_cron, plan_next, utcnow, visible
from agent.serve.deps import get_ctx, get_principal
from agent.serve.run_requests import check_request
from agent.serve.serve_context import ServeContext

router = APIRouter(tags=["crons"])


@router.post("/threads/{thread_id}/runs/crons")
async def create_for_thread(
    thread_id: str,
    request: CronCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """A cron whose runs go to the thread (404 when the caller has no such thread)."""
    await run_in_threadpool(ctx.session, principal, thread_id)
    return await run_in_threadpool(_create, ctx, principal, thread_id, request)


@router.post("/runs/crons")
async def create_stateless(
    request: CronCreate,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """A cron whose every run goes to a new thread (deleted after the run unless `on_run_completed: keep`)."""
    return await run_in_threadpool(_create, ctx, principal, None, request)


def _create(ctx: ServeContext, principal: Principal, thread_id: str | None, request: CronCreate) -> Cron:
    body = request.given()
    assistant_id, _ = ctx.run_assistant(principal, request.assistant_id)  # 404: not the caller's
    payload = _payload(ctx, body, thread_id is None)
    if thread_id is not None and body.get("on_run_completed") is not None:
        raise ConfigError("on_run_completed: only a stateless cron (POST /runs/crons) makes threads to delete or keep")
    cron = new_cron(
        assistant_id=assistant_id,
        thread_id=thread_id,
        user_id=principal.user_id,
        schedule=request.schedule,
        payload=payload,
        end_time=request.end_time,
        enabled=request.enabled is not False,
        on_run_completed=(request.on_run_completed or "delete") if thread_id is None else None,
        now=utcnow(),
    )
    return CronBook(ctx.settings, principal.tenant_id).add(cron)


def _payload(ctx: ServeContext, body: dict[str, Any], stateless: bool) -> dict[str, Any]:
    """The body of the cron's runs, checked as a run request is (a 422 naming the field)."""
    payload = {k: body[k] for k in PAYLOAD if body.get(k) is not None}
    if stateless and payload.get("input") is None:
        raise ConfigError("input: a stateless cron starts a new thread each time; send the input of its runs")
    check_request(payload, ctx, stateless)
    return payload


@router.get("/runs/crons/{cron_id}")
async def get_cron(
    cron_id: str,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """One cron of the caller's (404 for another's, as for an unknown id)."""
    return await run_in_threadpool(CronBook(ctx.settings, principal.tenant_id).get, cron_id, principal.user_id)


@router.patch("/runs/crons/{cron_id}")
async def update_cron(
    cron_id: str,
    request: CronPatch,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> dict[str, Any]:
    """Change the fields sent; a new schedule, end time or `enabled` plans the next run from now."""
    return await run_in_threadpool(_update, ctx, principal, cron_id, request)


def _update(ctx: ServeContext, principal: Principal, cron_id: str, request: CronRun) -> Cron:
    body = request.given()
    changed = {k: body[k] for k in PAYLOAD if k in body}
    now = utcnow()

    def apply(cron: Cron) -> None:
        stateless = cron.get("thread_id") is None
        if "on_run_completed" in body:
            if not stateless:
                raise ConfigError("on_run_completed: only a stateless cron makes threads to delete or keep")
            cron["on_run_completed"] = body["on_run_completed"] or "delete"
        payload = {**cron["payload"], **changed}
        cron["payload"] = _payload(ctx, payload, stateless)
        cron["metadata"] = dict(cron["payload"].get("metadata") or {})
        for key in ("schedule", "enabled"):
            if body.get(key) is not None:
                cron[key] = body[key]
        if "end_time" in body:
            cron["end_time"] = iso(body["end_time"])
        if {"schedule", "end_time", "enabled"} & body.keys():
            cron["next_run_date"] = plan_next(cron, now)
        cron["updated_at"] = iso(now)

    return CronBook(ctx.settings, principal.tenant_id).update(cron_id, principal.user_id, apply)


@router.delete("/runs/crons/{cron_id}", status_code=204)
async def delete_cron(
    cron_id: str,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> Response:
    """Remove the cron: it fires no more (a run it started goes on)."""
    book = CronBook(ctx.settings, principal.tenant_id)
    await run_in_threadpool(book.delete, cron_id, principal.user_id)
    return Response(status_code=204)


@router.post("/runs/crons/search")
async def search_crons(
    request: CronSearch | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> list[dict[str, Any]]:
    """The caller's crons by `assistant_id`, `thread_id` and `enabled`; sorted (`created_at`, newest
    first, unless `sort_by` / `sort_order` say otherwise), paged, with the `select`ed fields."""
    body = request or CronSearch()
    found = await run_in_threadpool(_matching, ctx, principal, body.assistant_id, body.thread_id, body.enabled)
    key = body.sort_by or "created_at"
    found.sort(key=lambda c: (c.get(key) is not None, str(c.get(key) or "")), reverse=body.sort_order != "asc")
    page = found[body.offset :][: body.limit]
    if body.select:
        return [{k: c.get(k) for k in body.select} for c in page]
    return page


@router.post("/runs/crons/count")
async def count_crons(
    request: CronCount | None = None,
    ctx: ServeContext = Depends(get_ctx),
    principal: Principal = Depends(get_principal),
) -> int:
    """How many of the caller's crons match `assistant_id` / `thread_id`."""
    body = request or CronCount()
    return len(await run_in_threadpool(_matching, ctx, principal, body.assistant_id, body.thread_id, None))


def _matching(
    ctx: ServeContext, principal: Principal, assistant_id: str | None, thread_id: str | None, enabled: bool | None
) -> list[Cron]:
    if assistant_id == GRAPH_ID:
        assistant_id = ASSISTANT_ID
    return [
        c
        for c in CronBook(ctx.settings, principal.tenant_id).all()
        if visible(c, principal.user_id)
        and (assistant_id is None or c.get("assistant_id") == assistant_id)
        and (thread_id is None or c.get("thread_id") == thread_id)
        and (enabled is None or c.get("enabled") is enabled)
    ]
