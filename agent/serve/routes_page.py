"""The page at `/` and its actions (approve/reject, next turn, fork, pause, end, continue; switch,
rename and delete a branch), for browsers.

Forms post here; each action goes through the same AgentRunner calls as the API and the CLI. A
browser authenticates with the cookie `/ui/login` sets; posts from another origin are refused
(no cross-site form can steer a session).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from agent.core.errors import AgentrtError, ConfigError, ToolError, as_agentrt_error, quote_id
from agent.core.results import RunEvent
from agent.core.text import printable
from agent.doctor import run_doctor
from agent.runner.run_lifecycle import forkable_entries
from agent.serve import page
from agent.serve.auth import KEY_COOKIE, KEY_HEADER, Principal, Unauthorized
from agent.serve.deps import get_ctx
from agent.serve.run_record import RunRecord
from agent.serve.run_requests import make_job, make_record
from agent.serve.serve_context import ServeContext
from agent.serve.streams import sse
from agent.serve.workers import CANCELLING
from agent.session.lifecycle import SessionAction, allowed
from checkpointing.exceptions import CheckpointingError
from checkpointing.session_index import RowFilter

router = APIRouter(include_in_schema=False)
PAGE_SESSIONS = 200
"""The newest sessions the page lists (by the index of sessions: no walk of every folder)."""
QUIET_KINDS = frozenset({"graph", "token", "final", CANCELLING})


def _principal(request: Request, ctx: ServeContext) -> Principal:
    return ctx.auth.authenticate(request.headers, request.cookies)


async def _form(request: Request) -> dict[str, str]:
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise Unauthorized("cross-origin form posts are refused")
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[-1] for k, v in parse_qs(body).items()}


def _back(sid: str | None, error: str | None = None) -> RedirectResponse:
    url = f"/ui/sessions/{quote(sid)}" if sid else "/"
    if error:
        url += "?error=" + quote(error)
    return RedirectResponse(url, status_code=303)


@router.get("/", response_class=HTMLResponse)
def index(request: Request, error: str | None = None, ctx: ServeContext = Depends(get_ctx)) -> Response:
    """The tenant's sessions."""
    try:
        principal = _principal(request, ctx)
    except Unauthorized:
        return RedirectResponse("/ui/login", status_code=303)
    rows = []
    mine = RowFilter(user_id=principal.user_id)
    for item in ctx.runner.manager.page(principal.tenant_id, mine, limit=PAGE_SESSIONS).items:
        first = str(item.row.meta.get("first_message") or "")
        rows.append((item.session, ctx.thread_status(item.session), first))
    return HTMLResponse(page.sessions_page(rows, principal.tenant_id, error))


@router.get("/ui/login", response_class=HTMLResponse)
def login_form(error: str | None = None) -> HTMLResponse:
    """The API key form."""
    return HTMLResponse(page.login_page(error))


@router.post("/ui/login")
async def login(request: Request, ctx: ServeContext = Depends(get_ctx)) -> Response:
    """Check the key and keep it in a cookie."""
    key = (await _form(request)).get("key", "")
    try:
        ctx.auth.authenticate({KEY_HEADER: key})
    except Unauthorized:
        return HTMLResponse(page.login_page("unknown API key"), status_code=401)
    resp = RedirectResponse("/", status_code=303)
    resp.set_cookie(KEY_COOKIE, key, httponly=True, samesite="strict")
    return resp


async def _start(ctx: ServeContext, principal: Principal, sid: str, body: dict[str, Any]) -> RunRecord:
    rec = make_record(body, sid, principal)
    return await ctx.engine.submit(rec, make_job(ctx, principal, sid, body, rec))


@router.post("/ui/sessions")
async def new_session(request: Request, ctx: ServeContext = Depends(get_ctx)) -> Response:
    """Start a session with its first turn."""
    principal = _principal(request, ctx)
    text = (await _form(request)).get("text", "").strip()
    if not text:
        return _back(None, "write what the agent should do")
    session = await run_in_threadpool(ctx.create_session, principal, None, None)
    try:
        await _start(ctx, principal, session.session_id, {"input": {"user_input": text}})
    except (AgentrtError, CheckpointingError) as err:
        return _back(session.session_id, str(as_agentrt_error(err) or err))
    return _back(session.session_id)


def _view(ctx: ServeContext, principal: Principal, sid: str) -> dict[str, Any]:
    s = ctx.session(principal, sid)
    events = ctx.runner.manager.event_log(s.tenant_id, sid)
    entries = events.projection(s.current_leaf_entry_id) if s.current_leaf_entry_id else []
    live = ctx.engine.active(s.tenant_id, sid) is not None
    snap = ctx.snapshot(s)
    approvals = [] if live else [i.value for i in snap.interrupts if isinstance(i.value, dict)]
    return {
        "session": s,
        "run_status": ctx.thread_status(s),
        "entries": entries,
        "forkable": forkable_entries(entries) if allowed(s.status, SessionAction.FORK) else set(),
        "branches": ctx.runner.branches(sid, principal.tenant_id, principal.user_id),
        "compressions": [e for e in entries if e.type == "compression"],
        "todos": list((snap.values or {}).get("task_todo_list") or []),
        "approvals": approvals,
        "live": live,
        "resumable": not live and not approvals and bool(snap.next),
    }


@router.get("/ui/sessions/{sid}", response_class=HTMLResponse)
def session_page(
    sid: str, request: Request, error: str | None = None, ctx: ServeContext = Depends(get_ctx)
) -> Response:
    """One session."""
    try:
        principal = _principal(request, ctx)
    except Unauthorized:
        return RedirectResponse("/ui/login", status_code=303)
    return HTMLResponse(page.session_page(_view(ctx, principal, sid), principal.tenant_id, error))


@router.post("/ui/sessions/{sid}/{action}")
async def act(sid: str, action: str, request: Request, ctx: ServeContext = Depends(get_ctx)) -> Response:
    """turn / decision / resume / fork / pause / end, and switch-, rename- and delete-branch."""
    principal = _principal(request, ctx)
    form = await _form(request)
    await run_in_threadpool(ctx.session, principal, sid)  # 404 unless the caller may see it
    runner = ctx.runner
    try:
        if action == "turn":
            await _start(ctx, principal, sid, {"input": {"user_input": form.get("text", "")}})
        elif action == "decision":
            await _start(ctx, principal, sid, {"command": {"resume": {"approved": form.get("approved") == "1"}}})
        elif action == "resume":
            await _start(ctx, principal, sid, {})
        elif action == "fork":
            await run_in_threadpool(runner.fork, sid, form.get("entry_id", ""), principal.tenant_id, principal.user_id)
        elif action == "pause":
            await run_in_threadpool(runner.pause, sid, principal.tenant_id, principal.user_id)
        elif action == "end":
            await run_in_threadpool(runner.end, sid, principal.tenant_id, principal.user_id)
        elif action == "switch-branch":
            await run_in_threadpool(runner.switch, sid, form.get("branch", ""), principal.tenant_id, principal.user_id)
        elif action == "rename-branch":
            branch, name = form.get("branch", ""), form.get("name", "").strip()
            await run_in_threadpool(runner.rename_branch, sid, branch, name, principal.tenant_id, principal.user_id)
        elif action == "delete-branch":
            branch = form.get("branch", "")
            await run_in_threadpool(runner.delete_branch, sid, branch, principal.tenant_id, principal.user_id)
        else:
            raise ConfigError(f"unknown action {quote_id(action)}")
    except (AgentrtError, CheckpointingError) as err:
        return _back(sid, str(as_agentrt_error(err) or err))
    return _back(sid)


def _progress(ev: RunEvent) -> str | None:
    d = ev.data
    if ev.kind in QUIET_KINDS:
        return None
    if ev.kind == "started":
        return f"run {d.get('run_id')} started"
    if ev.kind == "recovered":
        return f"run {d.get('run_id')} continued at {', '.join(d.get('next_nodes') or []) or 'its end'}"
    if ev.kind == "node":
        return f"{d.get('node')} done"
    if ev.kind == "tool_call":
        return f"tool {d.get('name')}({json.dumps(d.get('args'), ensure_ascii=False)[:200]})"
    if ev.kind == "tool_result":
        return f"  -> {d.get('name')}: {d.get('status')} ({d.get('size')} bytes)"
    if ev.kind == "interrupt":
        return "waiting for approval"
    if ev.kind == "model_call":
        return f"model call {d.get('call_index')}"
    return f"{ev.kind}: {json.dumps(d, ensure_ascii=False, default=str)[:200]}"


@router.get("/ui/sessions/{sid}/live")
async def live(sid: str, request: Request, ctx: ServeContext = Depends(get_ctx)) -> StreamingResponse:
    """The running turn's progress as server-sent events (`progress`, then `done`)."""
    principal = _principal(request, ctx)
    session = await run_in_threadpool(ctx.session, principal, sid)
    rec = ctx.engine.active(session.tenant_id, sid)

    async def events() -> AsyncIterator[bytes]:
        if rec is not None:
            async for ev in rec.follow(15.0):
                if ev is None:
                    yield b": heartbeat\n\n"
                    continue
                line = _progress(ev)
                if line:
                    yield sse("progress", {"kind": ev.kind, "text": printable(line)})  # shown as is: escaped here
        yield sse("done", {"status": rec.status.value if rec is not None else "none"})

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


@router.get("/ui/sessions/{sid}/tool-results/{call_id}")
def tool_result(
    sid: str, call_id: str, request: Request, offset: int = 0, limit: int = 4000, ctx: ServeContext = Depends(get_ctx)
) -> JSONResponse:
    """A page of a tool result: the archived one (what `read_tool_result` gives the model), else the
    tool message still in the state."""
    principal = _principal(request, ctx)
    session = ctx.session(principal, sid)
    limit = max(1, min(limit, 20000))
    try:
        sl = ctx.runner.tool_result(sid, call_id, offset, limit, principal.tenant_id, principal.user_id)
        return JSONResponse(
            {
                "tool_call_id": sl.tool_call_id,
                "name": sl.tool_name,
                "text": sl.text,
                "offset": sl.offset,
                "total": sl.total,
                "next_offset": sl.next_offset,
                "archived": True,
            }
        )
    except ToolError:
        for msg in (ctx.snapshot(session).values or {}).get("messages") or []:
            if getattr(msg, "type", "") == "tool" and getattr(msg, "tool_call_id", None) == call_id:
                text = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
                end = min(len(text), offset + limit)
                return JSONResponse(
                    {
                        "tool_call_id": call_id,
                        "name": getattr(msg, "name", ""),
                        "text": text[offset:end],
                        "offset": offset,
                        "total": len(text),
                        "next_offset": end if end < len(text) else None,
                        "archived": False,
                    }
                )
        raise


@router.get("/ui/sessions/{sid}/doctor", response_class=HTMLResponse)
def doctor(sid: str, request: Request, ctx: ServeContext = Depends(get_ctx)) -> HTMLResponse:
    """The doctor's checks on this session (read-only)."""
    principal = _principal(request, ctx)
    ctx.session(principal, sid)
    report = run_doctor(ctx.runner, sid, principal.tenant_id, principal.user_id)
    return HTMLResponse(page.doctor_fragment(report))
