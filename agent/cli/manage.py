"""The small session commands: fork, end, pause, tool-result, doctor, db, worker."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent.cli.common import (
    common_options,
    drop_warnings_since,
    print_json,
    read,
    runner,
    say,
    session_argument,
    settings,
    warnings_mark,
)
from agent.core.text import printable

if TYPE_CHECKING:
    from agent.doctor.subject import DoctorContext


def args_fork(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt fork`."""
    common_options(p)
    session_argument(p)
    p.add_argument("--from", dest="from_entry", required=True, metavar="ENTRY", help="entry id (see `agentrt show`)")


def args_end(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt end`."""
    common_options(p)
    session_argument(p)


args_pause = args_end


def args_tool_result(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt tool-result`."""
    common_options(p)
    session_argument(p)
    p.add_argument("call_id", metavar="CALL_ID", help="the tool call id (see `agentrt show`)")
    p.add_argument("--offset", type=int, default=0, help="first character (default 0)")
    p.add_argument("--limit", type=int, default=2000, help="how many characters (default 2000)")


def args_doctor(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt doctor`."""
    common_options(p)
    p.add_argument(
        "session_id",
        metavar="ID",
        nargs="?",
        help="the session id (see `agentrt sessions`); without it, the store-wide checks (the session index)",
    )
    p.add_argument(
        "--repair",
        action="store_true",
        help="first cut torn tails (moved to <file>.broken) and replace a damaged outbox, only while "
        "holding the session lease; without ID: rebuild the session index from the session folders",
    )


def args_db(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt db` (tables are shared by every tenant: no --tenant / --user)."""
    common_options(p, identity=False)
    p.add_argument(
        "action",
        choices=["upgrade", "init"],
        help="upgrade: apply the schema migrations; init: also create the database if missing (safe twice)",
    )


def cmd_fork(args: argparse.Namespace) -> int:
    """agentrt fork ID --from ENTRY."""
    d = runner(args).fork(args.session_id, args.from_entry, args.tenant, args.user)
    if args.json:
        return print_json(d)
    say(
        printable(
            f"branch {d['branch_id']} starts at entry {d['from_entry_id']} (checkpoint {d['checkpoint_id']}); "
            f"the next `agentrt run --session {d['session_id']} ...` continues there"
        )
    )
    return 0


def _status_change(args: argparse.Namespace, action: str) -> int:
    r = runner(args)
    s = getattr(r, action)(args.session_id, args.tenant, args.user).to_dict()
    if args.json:
        return print_json(s)
    say(printable(f"session {s['session_id']} is {s['status']}"))
    return 0


def cmd_end(args: argparse.Namespace) -> int:
    """agentrt end ID."""
    return _status_change(args, "end")


def cmd_pause(args: argparse.Namespace) -> int:
    """agentrt pause ID."""
    return _status_change(args, "pause")


def cmd_tool_result(args: argparse.Namespace) -> int:
    """agentrt tool-result ID CALL_ID."""
    a = args
    piece = read(a, lambda r: r.tool_result(a.session_id, a.call_id, a.offset, a.limit, a.tenant, a.user))
    if args.json:
        return print_json(
            {
                "tool_call_id": args.call_id,
                "offset": piece.offset,
                "end": piece.end,
                "total": piece.total,
                "next_offset": piece.next_offset,
                "text": piece.text,
            }
        )
    text = printable(piece.text, keep="\n\t")  # exact with --json
    say(text, end="" if text.endswith("\n") else "\n")  # the page ends its line, as any output does
    say(f"chars {piece.offset}-{piece.end} of {piece.total}; next offset {piece.next_offset}", err=True)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """agentrt doctor [ID]: the report; exit 1 when a check FAILs.

    On the embedded default the report is made without LangGraph (`agent.doctor.light`); where
    only LangGraph reads the session exactly (`NeedsGraph`), or with `--repair` (it takes the
    session lease and writes), it is made with a runner, and says the same."""
    from agent.core.errors import InputError
    from checkpointing.exceptions import InvalidIdError
    from checkpointing.ids import validate_id
    from checkpointing.tail import NeedsGraph

    try:
        if args.session_id is not None:
            validate_id(args.session_id, "session id")
        if args.user:
            validate_id(args.user, "user id")
    except InvalidIdError as err:
        raise InputError(f"{err}; list the sessions with `agentrt sessions`") from None
    if not args.repair:
        from agent.doctor.light import LightContext

        light = LightContext.open(args.config)
        if light is not None:
            mark = warnings_mark()
            try:
                return _doctor(args, light)
            except NeedsGraph:
                drop_warnings_since(mark)  # the runner's report says them again, once
    from agent.doctor.subject import RunnerContext
    from agent.loop import surface_cache

    full = runner(args)
    surface_cache.remember(full.settings, full.pins)  # the next doctor needs no runner for them
    return _doctor(args, RunnerContext(full))


def _doctor(args: argparse.Namespace, ctx: DoctorContext) -> int:
    """The report of `agentrt doctor` through `ctx` (with `--repair`: a `RunnerContext`)."""
    from agent.cli.common import tenant_of
    from agent.core.errors import NotFound
    from agent.doctor import render, run_doctor
    from agent.session.record_store import session_streams
    from checkpointing.store.files import FileSessionStreams

    tenant = tenant_of(args, ctx.settings)
    if args.session_id is None:
        return _doctor_store(args, ctx, tenant)
    streams = session_streams(ctx.settings, tenant, args.session_id)
    on_pg = not isinstance(streams, FileSessionStreams)

    def nothing_on_disk() -> bool:  # asked only when it decides something (on PostgreSQL: a query)
        if on_pg:  # the PostgreSQL store's rows (psycopg is loaded already)
            from checkpointing.store.postgres import PostgresSessionStreams

            return isinstance(streams, PostgresSessionStreams) and not streams.has_rows()
        return not ctx.session_dir(tenant, args.session_id).exists()

    before_repair = nothing_on_disk() if args.repair else None  # what the repair found, as it found it
    if on_pg and before_repair:
        raise NotFound(f"no session {args.session_id} in tenant {tenant}; list the sessions with `agentrt sessions`")
    if args.repair:
        from agent.doctor.repair import repair_session
        from agent.doctor.subject import RunnerContext

        assert isinstance(ctx, RunnerContext)
        for _, done in repair_session(ctx.runner, args.session_id, tenant):
            say(printable(done), err=args.json)
    report = run_doctor(ctx, args.session_id, tenant_id=tenant, user_id=args.user)
    found = next((c for c in report.checks if c.name == "session_found"), None)
    if (
        found is not None
        and found.status == "FAIL"
        and (len(report.checks) == 1 or (before_repair if before_repair is not None else nothing_on_disk()))
    ):
        raise NotFound(f"{found.summary}; {found.next_step}" if found.next_step else found.summary)
    if args.json:
        print_json(report.to_json())
    else:
        say(render(report))
    return report.exit_code()


def _doctor_store(args: argparse.Namespace, ctx: DoctorContext, tenant: str) -> int:
    """`agentrt doctor` without an id: the store-wide checks; `--repair` rebuilds the session index
    and applies the missing migrations of LangGraph's store."""
    from agent.doctor import render
    from agent.doctor.index import repair_index, store_report

    if args.repair:  # one walk of the session folders; asked for, it is always done
        say(printable(repair_index(ctx)), err=args.json)
        from agent.doctor.items_check import repair_items

        done = repair_items(ctx.settings)
        if done:
            say(printable(done), err=args.json)
    report = store_report(ctx, tenant)
    if args.json:
        print_json(report.to_json())
    else:
        say(render(report))
    return report.exit_code()


def cmd_db(args: argparse.Namespace) -> int:
    """agentrt db upgrade | init."""
    from agent.session.db_cli import db_init, db_upgrade, render

    data = (db_init if args.action == "init" else db_upgrade)(settings(args))
    if args.json:
        return print_json(data)
    say(render(data))
    return 0


def cmd_serve(argv: Sequence[str]) -> Any:
    """agentrt serve ...: the server with its own options (agent/cli/serve.py)."""
    from agent.cli.serve import main as serve_main

    return serve_main(list(argv))
