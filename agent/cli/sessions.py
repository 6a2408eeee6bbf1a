"""`agentrt sessions`: the tenant's sessions as a table, newest activity first.

With the embedded set-up (PRIMARY on SQLite, or JSONL_ONLY) the listing reads the JSONL store (the
source of truth) directly, without building a runner: no LangGraph, no SQL engine, so it starts
fast. With a server database (or MIRROR) it goes through the manager, which also refuses a database
whose schema is not current (`agentrt db upgrade`).
"""

from __future__ import annotations

import argparse
from typing import Any

from agent.cli.common import common_options, print_json, relative_time, say, settings, short, styled, tenant_of

STATUSES = ("ACTIVE", "PAUSED", "ENDED", "EXPIRED")


def args_sessions(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt sessions`."""
    common_options(p)
    p.add_argument("--status", choices=STATUSES, type=str.upper, help="only sessions with this status")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N sessions (default 20; 0: all)")


def _list(args: argparse.Namespace) -> tuple[list[Any], Any]:
    from agent.errors import InputError
    from checkpointing.errors import InvalidIdError
    from checkpointing.ids import validate_id

    conf = settings(args)
    tenant = tenant_of(args, conf)
    try:
        user = validate_id(args.user, "user id") if args.user else None
    except InvalidIdError as err:
        raise InputError(str(err)) from None
    p = conf.persistence
    embedded = str(conf.database_url() or "sqlite").startswith("sqlite")
    if p.mode == "JSONL_ONLY" or (p.mode == "PRIMARY" and embedded):
        from agent.session.stores.jsonl import JsonlSessionStore

        store = JsonlSessionStore(conf.base_dir, inline_payload_max_bytes=p.inline_payload_max_bytes, fsync=p.fsync)
        return store.list(tenant, user), store
    from agent.services import build_manager

    manager = build_manager(conf)
    return manager.list(tenant, user), manager.jsonl


def _row(s: Any, store: Any) -> dict[str, Any]:
    first = next((m.content for m in s.messages if m.role == "user"), None)
    branches = 1
    try:
        log = store.event_log(s.tenant_id, s.session_id)
        branches = max(1, len(log.branches()))
        if first is None:
            first = next((str(e.payload.get("content", "")) for e in log.entries(frozenset({"user_turn"}))), None)
    except Exception:  # a damaged log still lists the session; `agentrt doctor` explains it
        pass
    return {
        **s.to_dict(),
        "branch_count": branches,
        "turns": s.loop_count,
        "last_activity": s.last_active_time.isoformat(),
        "first_message": first or "",
    }


def cmd_sessions(args: argparse.Namespace) -> int:
    """agentrt sessions."""
    sessions, store = _list(args)
    if args.status:
        sessions = [s for s in sessions if str(s.status) == args.status]
    sessions.sort(key=lambda s: (s.last_active_time, s.session_id), reverse=True)
    if args.limit and args.limit > 0:
        sessions = sessions[: args.limit]
    rows = [_row(s, store) for s in sessions]
    if args.json:
        return print_json(rows)
    if not rows:
        say(
            "no sessions"
            + (f" with status {args.status}" if args.status else "")
            + '; start one with agentrt run "..."'
        )
        return 0
    head = f"{'SESSION':<20} {'STATUS':<8} {'BRANCHES':>8} {'TURNS':>5}  {'LAST ACTIVITY':<14} FIRST MESSAGE"
    say(styled(head, "bold"))
    for r in rows:
        say(
            f"{r['session_id']:<20} {r['status']:<8} {r['branch_count']:>8} {r['turns']:>5}  "
            f"{relative_time(r['last_activity']):<14} {short(r['first_message'], 60)}"
        )
    return 0
