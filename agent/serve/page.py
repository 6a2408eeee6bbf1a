"""The page at `/`, rendered on the server: sessions, one session's conversation and branch tree,
tool calls and results, compression events, todo list, pending approval, doctor checks.

Every value is escaped here (`esc`); the page's JavaScript only adds the live run progress, archived
tool results and the doctor report on demand.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from string import Template
from typing import Any

from agent.core.text import printable
from agent.doctor.facts import DoctorReport
from agent.session.session import MAIN_BRANCH, ChatSession
from checkpointing.entry_log import Entry

TEMPLATES = Path(__file__).resolve().parent / "templates"
HIDDEN_TYPES = frozenset({"node_end"})


def esc(value: Any) -> str:
    """HTML-escaped text, every control, format or separator character first written as an escape
    (`printable`: HTML escaping leaves a bidi override such as U+202E working)."""
    return escape(printable(str(value if value is not None else ""), keep="\n\t"), quote=True)


def layout(title: str, tenant: str, body: str) -> str:
    """The page frame around `body` (already HTML)."""
    template = Template((TEMPLATES / "base.html").read_text(encoding="utf-8"))
    return template.substitute(title=esc(title), tenant=esc(tenant), body=body)


def _button(action: str, label: str, cls: str = "", fields: dict[str, str] | None = None) -> str:
    hidden = "".join(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">' for k, v in (fields or {}).items())
    return (
        f'<form class="inline" method="post" action="{esc(action)}">{hidden}'
        f'<button type="submit" class="{esc(cls)}">{esc(label)}</button></form>'
    )


def sessions_page(rows: list[tuple[ChatSession, str, str]], tenant: str, error: str | None = None) -> str:
    """The tenant's sessions: (session, thread status, first message)."""
    body = [f'<div class="error-box">{esc(error)}</div>' if error else ""]
    body.append(
        '<section><h2>New session</h2><form method="post" action="/ui/sessions">'
        '<textarea name="text" placeholder="What should the agent do?" required></textarea>'
        '<button type="submit" class="primary" id="start-session">Start</button></form></section>'
    )
    body.append(
        '<section><h2>Sessions</h2><table id="sessions"><thead><tr><th>session</th><th>status</th>'
        "<th>run</th><th>last activity</th><th>first message</th></tr></thead><tbody>"
    )
    for s, run_status, first in sorted(rows, key=lambda r: r[0].last_active_time, reverse=True):
        body.append(
            f'<tr class="session-row" data-session="{esc(s.session_id)}">'
            f'<td><a href="/ui/sessions/{esc(s.session_id)}">{esc(s.session_id)}</a></td>'
            f'<td><span class="status {esc(s.status.value)}">{esc(s.status.value)}</span></td>'
            f'<td><span class="status {esc(run_status)}">{esc(run_status)}</span></td>'
            f"<td>{esc(s.last_active_time.strftime('%Y-%m-%d %H:%M:%S'))}</td>"
            f"<td>{esc(first[:120])}</td></tr>"
        )
    if not rows:
        body.append('<tr><td colspan="5">No sessions yet.</td></tr>')
    body.append("</tbody></table></section>")
    return layout("sessions", tenant, "".join(body))


def _entry_html(sid: str, e: Entry, forkable: bool) -> str:
    p = e.payload or {}
    head = f'<div class="meta">{esc(e.type)} · {esc(e.ts)} · <code>{esc(e.id)}</code> '
    if forkable:  # only where `agentrt fork --from` would accept it
        head += _button(f"/ui/sessions/{sid}/fork", "fork here", "small", {"entry_id": e.id})
    head += "</div>"
    if e.type in ("user_turn", "assistant_message"):
        inner = f"<pre>{esc(p.get('content'))}</pre>"
    elif e.type == "tool_call":
        inner = f"<pre>{esc(p.get('name'))}({esc(json.dumps(p.get('args'), ensure_ascii=False))})</pre>"
    elif e.type == "tool_result":
        call = str(p.get("tool_call_id") or "")
        inner = (
            f"<div>{esc(p.get('name'))}: {esc(p.get('status'))}, {esc(p.get('size'))} bytes"
            + (" (replayed from the journal)" if p.get("replayed") else "")
            + f' <button class="small" data-tool-result="{esc(call)}" '
            f'data-url="/ui/sessions/{esc(sid)}/tool-results/{esc(call)}">show result</button></div>'
            f'<div class="result" id="result-{esc(call)}"></div>'
        )
    elif e.type == "compression":
        inner = f"<pre>{esc(json.dumps(p, ensure_ascii=False, default=str)[:600])}</pre>"
    else:
        summary = {k: v for k, v in p.items() if k not in ("pins", "tools")}
        inner = f'<div class="meta">{esc(json.dumps(summary, ensure_ascii=False, default=str)[:300])}</div>'
    return f'<div class="entry {esc(e.type)}" data-entry="{esc(e.id)}">{head}{inner}</div>'


def _branch_table(sid: str, rows: list[dict[str, Any]]) -> str:
    """The rows of `agentrt branches` (current marked `*`), each with switch, rename and delete."""
    head = (
        '<table id="branches"><thead><tr><th></th><th>branch</th><th>name</th><th>from entry</th>'
        "<th>head entry</th><th>turns</th><th></th></tr></thead><tbody>"
    )
    body = []
    for r in rows:
        b = str(r["branch_id"])
        origin = (
            f"<code>{esc(r['from_entry_id'])}</code> (on {esc(r['from_branch_id'])})" if r["from_entry_id"] else "-"
        )
        actions = "" if r["current"] else _button(f"/ui/sessions/{sid}/switch-branch", "switch", "small", {"branch": b})
        if not r["current"] and b != MAIN_BRANCH:  # only where `agentrt branch delete` would accept it
            actions += " " + _button(f"/ui/sessions/{sid}/delete-branch", "delete", "small danger", {"branch": b})
        rename = (
            f'<form class="inline" method="post" action="/ui/sessions/{esc(sid)}/rename-branch">'
            f'<input type="hidden" name="branch" value="{esc(b)}">'
            '<input type="text" name="name" size="10" placeholder="new name" required>'
            '<button type="submit" class="small">rename</button></form>'
        )
        body.append(
            f'<tr class="branch-row{" current" if r["current"] else ""}" data-branch="{esc(b)}">'
            f'<td class="marker">{"*" if r["current"] else ""}</td><td><code>{esc(b)}</code></td>'
            f'<td class="name">{esc(r["name"] or "-")}</td><td>{origin}</td>'
            f"<td><code>{esc(r['head_entry_id'])}</code></td><td>{esc(r['turns'])}</td>"
            f"<td>{actions} {rename}</td></tr>"
        )
    return head + "".join(body) + "</tbody></table>"


def session_page(view: dict[str, Any], tenant: str, error: str | None = None) -> str:
    """One session: controls, pending approval, live run, conversation, branches, todos, doctor."""
    s: ChatSession = view["session"]
    sid = s.session_id
    parts = [f'<div class="error-box">{esc(error)}</div>' if error else ""]
    parts.append(
        f'<h1>{esc(sid)} <span class="status {esc(s.status.value)}" id="session-status">{esc(s.status.value)}</span> '
        f'<span class="status {esc(view["run_status"])}" id="run-status">{esc(view["run_status"])}</span></h1>'
        f'<p class="meta">user {esc(s.user_id)} · branch {esc(s.current_branch_id)} · turns {s.loop_count} · '
        f"last run {esc(s.last_run_id)} {esc(s.last_run_status)}</p>"
        + _button(f"/ui/sessions/{sid}/pause", "Pause", "", None)
        + " "
        + _button(f"/ui/sessions/{sid}/end", "End", "danger", None)
        + (" " + _button(f"/ui/sessions/{sid}/resume", "Continue run", "primary", None) if view["resumable"] else "")
    )
    for req in view["approvals"]:
        parts.append(
            '<section class="approval" id="approval"><h2>Approval needed</h2>'
            f"<p>{esc(req.get('question'))}</p><pre>{esc(req.get('name'))}"
            f"({esc(json.dumps(req.get('args'), ensure_ascii=False))})</pre>"
            + _button(f"/ui/sessions/{sid}/decision", "Approve", "primary", {"approved": "1"})
            + " "
            + _button(f"/ui/sessions/{sid}/decision", "Reject", "danger", {"approved": "0"})
            + "</section>"
        )
    if view["live"]:
        parts.append(
            f'<section><h2 id="run-state">run in progress</h2><div id="live" '
            f'data-stream="/ui/sessions/{esc(sid)}/live"></div></section>'
        )
    forkable: set[str] = view["forkable"]
    convo = "".join(_entry_html(sid, e, e.id in forkable) for e in view["entries"] if e.type not in HIDDEN_TYPES)
    parts.append('<div class="cols"><div>')
    parts.append(
        f'<section><h2>Conversation (branch {esc(s.current_branch_id)})</h2><div id="conversation">'
        f"{convo or '<p>No entries yet.</p>'}</div></section>"
    )
    parts.append(
        f'<section><h2>Next turn</h2><form method="post" action="/ui/sessions/{esc(sid)}/turn">'
        '<textarea name="text" required></textarea><button type="submit" class="primary">Send</button></form></section>'
    )
    parts.append("</div><div>")
    parts.append(f"<section><h2>Branches</h2>{_branch_table(sid, view['branches'])}</section>")
    todos = "".join(
        f'<li class="todo {esc(t.get("status"))}">[{esc(t.get("status"))}] {esc(t.get("title"))}</li>'
        for t in view["todos"]
    )
    parts.append(f'<section><h2>Todo list</h2><ul id="todos">{todos or "<li>none</li>"}</ul></section>')
    comp = "".join(
        f"<li>{esc(e.ts)}: {esc(json.dumps(e.payload, default=str)[:200])}</li>" for e in view["compressions"]
    )
    parts.append(f'<section><h2>Compression</h2><ul id="compressions">{comp or "<li>none yet</li>"}</ul></section>')
    parts.append(
        f'<section><h2>Doctor</h2><button data-doctor="/ui/sessions/{esc(sid)}/doctor">Run checks</button>'
        '<div id="doctor" class="doctor"></div></section>'
    )
    parts.append("</div></div>")
    return layout(sid, tenant, "".join(parts))


def doctor_fragment(report: DoctorReport) -> str:
    """The doctor's checks as a table (loaded into the session page)."""
    rows = "".join(
        f'<tr><td class="{esc(c.status)}">{esc(c.status)}</td><td>{esc(c.name)}</td>'
        f"<td>{esc(c.summary)}</td><td>{esc(c.next_step)}</td></tr>"
        for c in report.checks
    )
    return f"<table><tr><th></th><th>check</th><th>finding</th><th>next step</th></tr>{rows}</table>"


def error_page(status: int, message: str) -> str:
    """An error for a browser (an unknown session, a refused key): what happened and a way back."""
    title = {401: "sign in needed", 404: "not found"}.get(status, "error")
    body = (
        f'<section><h2>{esc(title)}</h2><div class="error-box" id="error">{esc(message)}</div>'
        '<p><a href="/">all sessions</a></p></section>'
    )
    return layout(title, "?", body)


def login_page(error: str | None = None) -> str:
    """Where a browser gives its API key (kept in an HttpOnly, SameSite=Strict cookie)."""
    body = (f'<div class="error-box">{esc(error)}</div>' if error else "") + (
        '<section><h2>API key</h2><form method="post" action="/ui/login">'
        '<input type="password" name="key" autocomplete="off" required> '
        '<button type="submit" class="primary">Sign in</button></form></section>'
    )
    return layout("sign in", "?", body)
