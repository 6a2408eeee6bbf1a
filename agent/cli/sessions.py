"""`agentrt sessions`: the tenant's sessions as a table, newest activity first, a page at a time.

The listing reads the index of sessions (`agent/session/stores/listing.py`), not every session's
folder: a page costs the same with a hundred sessions or a hundred thousand. `--after CURSOR`
continues after the last row of the previous page (the table ends with the command for the next
page; in `--json` every row carries the `cursor` that continues after it).

With the embedded set-up (PRIMARY on SQLite, or JSONL_ONLY) the listing reads the files store's
index (`base_dir/sessions.index.sqlite`) and the page's `session.json` files directly, without
building a runner: no LangGraph, no SQL engine, so it starts fast. With a server database (or
MIRROR) it goes through the manager, whose SQL session table is the index there, and which also
refuses a database whose schema is not current (`agentrt db upgrade`); on PostgreSQL the manager
checks and lists that table with psycopg, without SQLAlchemy (`stores/sql_lazy_pg.py`).
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from agent.cli.common import common_options, print_json, relative_time, say, settings, short, styled, tenant_of
from agent.core.statuses import SessionStatus
from agent.core.text import printable

STATUSES = tuple(s.value for s in SessionStatus)


def args_sessions(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt sessions`."""
    common_options(p)
    p.add_argument("--status", choices=STATUSES, type=str.upper, help="only sessions with this status")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N sessions (default 20; 0: all)")
    p.add_argument(
        "--after",
        metavar="CURSOR",
        help="the next page: the cursor the previous page printed (its last row's `cursor` in --json)",
    )
    p.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only sessions whose thread metadata has KEY equal to VALUE (repeatable)",
    )


def _page(args: argparse.Namespace) -> Any:
    from agent.core.errors import InputError
    from agent.session.stores.listing import meta_filters
    from checkpointing.exceptions import InvalidIdError
    from checkpointing.ids import validate_id
    from checkpointing.session_index import RowFilter

    conf = settings(args)
    tenant = tenant_of(args, conf)
    try:
        user = validate_id(args.user, "user id") if args.user else None
    except InvalidIdError as err:
        raise InputError(str(err)) from None
    where = RowFilter(user_id=user, status=args.status, meta=meta_filters(args.meta))
    limit = args.limit if args.limit and args.limit > 0 else None
    p = conf.persistence
    embedded = str(conf.database_url() or "sqlite").startswith("sqlite")
    if p.mode == "JSONL_ONLY" or (p.mode == "PRIMARY" and embedded):
        from agent.session.stores.jsonl import JsonlSessionStore
        from agent.session.stores.listing import page_sessions

        store = JsonlSessionStore(conf.base_dir, inline_payload_max_bytes=p.inline_payload_max_bytes, fsync=p.fsync)
        return page_sessions(store, tenant, where, after=args.after, limit=limit)
    from agent.runner.services import build_manager

    manager = build_manager(conf, lazy_sql=not embedded)  # PostgreSQL: listed with psycopg, no SQLAlchemy
    return manager.page(tenant, where, after=args.after, limit=limit)


def _row(item: Any) -> dict[str, Any]:
    s, row = item.session, item.row
    return {
        **s.to_dict(),
        "branch_count": int(row.meta.get("branch_count") or 1),
        "turns": s.loop_count,
        "last_activity": s.last_active_time.isoformat(),
        "first_message": str(row.meta.get("first_message") or ""),
        "cursor": item.cursor,
    }


def cmd_sessions(args: argparse.Namespace) -> int:
    """agentrt sessions."""
    page = _page(args)
    rows = [_row(item) for item in page.items]
    if args.json:
        return print_json(rows)
    rows = [{**r, "session_id": printable(str(r["session_id"]))} for r in rows]  # `short` escapes the message
    if not rows:
        say(
            "no sessions"
            + (f" with status {args.status}" if args.status else "")
            + ("" if args.after else '; start one with agentrt run "..."')
        )
        return 0
    head = ("SESSION", "STATUS", "BRANCHES", "TURNS", "LAST ACTIVITY", "FIRST MESSAGE")
    cells = [
        (
            str(r["session_id"]),
            str(r["status"]),
            str(r["branch_count"]),
            str(r["turns"]),
            relative_time(r["last_activity"]),
            short(r["first_message"], 60),
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in (head, *cells)) for i in range(len(head) - 1)]  # columns fit their content
    for i, line in enumerate((head, *cells)):
        text = _table_line(line, widths)
        say(styled(text, "bold") if i == 0 else text)
    if page.next_cursor:
        say(styled(f"more: agentrt sessions --after {page.next_cursor}" + _same_filters(args), "dim"))
    return 0


def _same_filters(args: argparse.Namespace) -> str:
    """The options of this listing a user repeats for its next page."""
    out = f" --limit {args.limit}" if args.limit != 20 else ""
    for flag, value in (("--config", args.config), ("--tenant", args.tenant), ("--user", args.user)):
        if value:
            out += f" {flag} {shlex.quote(str(value))}"
    if args.status:
        out += f" --status {args.status}"
    for pair in args.meta:
        out += f" --meta {shlex.quote(pair)}"
    return out


def _table_line(cells: tuple[str, ...], widths: list[int]) -> str:
    """One row: text columns left-aligned, the counts (BRANCHES, TURNS) right-aligned."""
    session, status, branches, turns, activity, first = cells
    w = widths
    return (
        f"{session:<{w[0]}}  {status:<{w[1]}}  {branches:>{w[2]}} {turns:>{w[3]}}  {activity:<{w[4]}}  {first}"
    ).rstrip()
