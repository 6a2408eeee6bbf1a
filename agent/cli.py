"""The `agentrt` command. Every subcommand takes --config F and --json.

Errors in config or input print one line (`agentrt: error: ...`) and exit 2; no traceback
unless AGENTRT_DEBUG=1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console

from agent.errors import AgentRuntimeError
from agent.logs import configure_logging
from checkpointing.errors import CheckpointingError

console = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="F", help="YAML config (default: built-in, same as configs/default.yaml)")
    p.add_argument("--json", action="store_true", help="print one JSON object for machines")
    p.add_argument("--tenant", metavar="T", help="tenant id (default: from config)")
    p.add_argument("--user", metavar="U", help="user id (default: from config)")


def _runner(args: argparse.Namespace) -> Any:
    from agent.runner import AgentRunner

    return AgentRunner.from_config(args.config)


class _Progress:
    """Renders streamed run events as compact progress lines."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.in_tokens = False

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if self.quiet:
            return
        if kind == "token":
            if not self.in_tokens:
                console.print("[dim]  model:[/dim] ", end="")
                self.in_tokens = True
            console.print(data["text"], end="", markup=False)
            return
        if self.in_tokens:
            console.print()
            self.in_tokens = False
        if kind == "started":
            console.print(f"[bold]session[/bold] {data['session_id']}  run {data['run_id']}")
        elif kind == "node":
            console.print(f"[cyan]▸ {data['node']}[/cyan]")
        elif kind == "model_call":
            usage = data.get("usage") or {}
            console.print(
                f"[dim]  model call #{data.get('call_index', 0) + 1}: in {usage.get('input_tokens', '?')} / "
                f"out {usage.get('output_tokens', '?')} tokens"
                f"{' (estimated)' if data.get('usage_source') == 'estimate' else ''}, "
                f"finish={data.get('finish_reason')}[/dim]"
            )
            for item in data.get("issues") or []:
                if item.get("issue") != "no_usage":  # already said by "(estimated)"
                    console.print(f"[yellow]  model output: {item.get('issue')} -> {item.get('outcome')}[/yellow]")
        elif kind == "tool_call":
            args = json.dumps(data.get("args"), ensure_ascii=False)
            console.print(f"[yellow]  tool {data.get('name')}[/yellow]({args[:100]}{'…' if len(args) > 100 else ''})")
        elif kind == "tool_result":
            tag = "replayed " if data.get("replayed") else ""
            console.print(f"[dim]    -> {tag}{data.get('status')} ({data.get('size')} chars)[/dim]")
        elif kind == "todo":
            done = sum(1 for t in data["todos"] if t.get("status") == "done")
            console.print(f"[green]  todo {done}/{len(data['todos'])} done[/green]")
        elif kind == "compression":
            console.print(f"[magenta]  compression tier {data.get('tier')}[/magenta]")


def _print_result(result: dict[str, Any], as_json: bool) -> int:
    if as_json:
        out.print_json(json.dumps(result, ensure_ascii=False, default=str))
    else:
        out.print()
        if result.get("status") == "PAUSED":
            out.print("(paused: waiting for a human decision)", markup=False)
        else:
            out.print(result.get("answer") or "(no answer)", markup=False)
        out.print()
        out.print(
            f"[bold]session[/bold] {result['session_id']}  [bold]status[/bold] {result['status']}  "
            f"[bold]finish[/bold] {result.get('finish_reason')}  iterations {result.get('iterations')}  "
            f"tokens {result.get('input_tokens')}/{result.get('output_tokens')}"
        )
        if result.get("error"):
            out.print(f"[red]{result['error']}[/red]", markup=True)
    return 0 if result.get("status") in ("COMPLETED", "PAUSED") else 1


def _stream_to_result(events: Any, as_json: bool) -> dict[str, Any]:
    progress = _Progress(quiet=as_json)
    final: dict[str, Any] = {}
    for ev in events:
        if ev.kind == "final":
            final = ev.data
        elif ev.kind == "recovered" and not as_json:
            if ev.data.get("finished"):
                console.print("[dim]the last run had already finished; its result:[/dim]")
            else:
                console.print(
                    f"[bold]recovered[/bold] checkpoint {ev.data.get('checkpoint_id')} run {ev.data.get('run_id')}, "
                    f"next {', '.join(ev.data.get('next_nodes') or [])}, "
                    f"{ev.data.get('journal_completed', 0)} tool calls already completed "
                    "(the journal replays them, never re-runs)"
                )
                if ev.data.get("accepted"):
                    console.print(f"[yellow]accepted changes: {', '.join(ev.data['accepted'])}[/yellow]")
        elif ev.kind == "interrupt" and not as_json:
            for req in ev.data.get("requests") or []:
                args_text = json.dumps(req.get("args"), ensure_ascii=False) if isinstance(req, dict) else repr(req)
                name = req.get("name") if isinstance(req, dict) else "?"
                console.print(f"[bold yellow]approval needed[/bold yellow]: {name}({args_text[:300]})")
        else:
            progress(ev.kind, ev.data)
    return final


def _decide(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any] | None:
    """The human's decision on one approval request: --approve-all, a prompt on a terminal, or None."""
    if getattr(args, "approve_all", False):
        return {"approved": True, "reason": "approved with --approve-all"}
    if args.json or not sys.stdin.isatty():
        return None
    answer = console.input(f"Approve {request.get('name')}? [y/N] ").strip().lower()
    if answer in ("y", "yes"):
        return {"approved": True}
    reason = console.input("Reason for rejecting (optional): ").strip()
    return {"approved": False, "reason": reason or "rejected at the prompt"}


def _until_done(args: argparse.Namespace, runner: Any, final: dict[str, Any]) -> dict[str, Any]:
    """Answer approval requests as they come (see `_decide`), resuming until the run stops otherwise."""
    while final.get("status") == "PAUSED" and final.get("pending_approval"):
        decision = _decide(args, final["pending_approval"][0])
        if decision is None:
            sid = final["session_id"]
            console.print(
                f"[yellow]paused for approval[/yellow]: continue with `agentrt resume {sid} --approve` "
                f"or `agentrt resume {sid} --reject --reason ...`",
                markup=True,
            )
            return final
        events = runner.stream_resume(final["session_id"], tenant_id=args.tenant, user_id=args.user, decision=decision)
        final = _stream_to_result(events, args.json)
    return final


def cmd_run(args: argparse.Namespace) -> int:
    """agentrt run TEXT."""
    runner = _runner(args)
    events = runner.stream(
        " ".join(args.text), session_id=args.session, tenant_id=args.tenant, user_id=args.user, skill=args.skill
    )
    final = _until_done(args, runner, _stream_to_result(events, args.json))
    return _print_result(final, args.json)


def cmd_resume(args: argparse.Namespace) -> int:
    """agentrt resume ID."""
    runner = _runner(args)
    decision: dict[str, Any] | None = None
    if args.approve:
        decision = {"approved": True}
    elif args.reject:
        decision = {"approved": False, "reason": args.reason or "rejected by the operator"}
    if decision is not None and runner.settings.workers.enabled:
        from agent.submit import cmd_queue_decision

        return cmd_queue_decision(args, decision)
    accept = [a for part in (args.accept_changes or []) for a in part.split(",") if a]
    events = runner.stream_resume(
        args.session_id,
        tenant_id=args.tenant,
        user_id=args.user,
        decision=decision,
        accept_changes=accept,
        operator=args.user,
        reason=args.reason,
    )
    return _print_result(_stream_to_result(events, args.json), args.json)


def _emit(data: Any, as_json: bool, render: Callable[[Any], None]) -> int:
    if as_json:
        out.print_json(json.dumps(data, ensure_ascii=False, default=str))
    else:
        render(data)
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    """agentrt sessions."""
    rows = [s.to_dict() for s in _runner(args).sessions(args.tenant, args.user)]

    def render(items: list[dict[str, Any]]) -> None:
        if not items:
            out.print("no sessions")
        for s in items:
            out.print(
                f"{s['session_id']}  {s['status']:<8} turns {s['loop_count']}/{s['max_loops']}  "
                f"last run {s.get('last_run_status') or '-'}  branch {s['current_branch_id']}  user {s['user_id']}"
            )

    return _emit(rows, args.json, render)


def cmd_show(args: argparse.Namespace) -> int:
    """agentrt show ID."""
    info = _runner(args).show(args.session_id, args.tenant, args.user, last=args.last)

    def render(d: dict[str, Any]) -> None:
        s = d["session"]
        out.print(
            f"[bold]{s['session_id']}[/bold]  tenant {s['tenant_id']}  user {s['user_id']}  agent {s['agent_id']}"
        )
        out.print(
            f"status {s['status']}  last run {s.get('last_run_id')} {s.get('last_run_status')}  turns {s['loop_count']}"
        )
        out.print(f"branch {s['current_branch_id']}  leaf {s['current_leaf_entry_id']}")
        out.print(f"checkpoint {d['checkpoint']['checkpoint_id']}  next {d['checkpoint']['next'] or '-'}")
        out.print("branches: " + ", ".join(f"{b} -> {leaf}" for b, leaf in d["branches"].items()))
        for e in d["entries"]:
            out.print(f"  {e['id']}  {e['type']:<17} {e['summary']}", markup=False)

    return _emit(info, args.json, render)


def cmd_fork(args: argparse.Namespace) -> int:
    """agentrt fork ID --from ENTRY."""
    info = _runner(args).fork(args.session_id, args.from_entry, args.tenant, args.user)
    return _emit(
        info,
        args.json,
        lambda d: out.print(
            f"branch {d['branch_id']} starts at entry {d['from_entry_id']} (checkpoint {d['checkpoint_id']}); "
            f"the next `agentrt run --session {d['session_id']} ...` continues there"
        ),
    )


def cmd_end(args: argparse.Namespace) -> int:
    """agentrt end ID."""
    s = _runner(args).end(args.session_id, args.tenant, args.user)
    return _emit(s.to_dict(), args.json, lambda d: out.print(f"session {d['session_id']} is {d['status']}"))


def cmd_pause(args: argparse.Namespace) -> int:
    """agentrt pause ID."""
    s = _runner(args).pause(args.session_id, args.tenant, args.user)
    return _emit(s.to_dict(), args.json, lambda d: out.print(f"session {d['session_id']} is {d['status']}"))


def cmd_tool_result(args: argparse.Namespace) -> int:
    """agentrt tool-result ID CALL_ID."""
    piece = _runner(args).tool_result(args.session_id, args.call_id, args.offset, args.limit, args.tenant, args.user)
    data = {
        "tool_call_id": args.call_id,
        "offset": piece.offset,
        "end": piece.end,
        "total": piece.total,
        "next_offset": piece.next_offset,
        "text": piece.text,
    }
    if args.json:
        return _emit(data, True, lambda d: None)
    sys.stdout.write(piece.text)
    sys.stdout.flush()
    console.print(f"\n[dim]chars {piece.offset}-{piece.end} of {piece.total}; next offset {piece.next_offset}[/dim]")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """agentrt doctor ID."""
    from agent.doctor import render, run_doctor

    report = run_doctor(_runner(args), args.session_id, tenant_id=args.tenant, user_id=args.user)
    if args.json:
        out.print_json(json.dumps(report.to_json(), ensure_ascii=False, default=str))
    else:
        out.print(render(report), markup=False, highlight=False)
    return report.exit_code()


def cmd_db(args: argparse.Namespace) -> int:
    """agentrt db upgrade | init."""
    from agent.config import load_settings
    from agent.session.db_cli import db_init, db_upgrade, render

    data = (db_init if args.action == "init" else db_upgrade)(load_settings(args.config))
    return _emit(data, args.json, lambda d: out.print(render(d), markup=False))


def _redact(url: str) -> str:
    from agent.tools.datasets.loaders import display_url

    return display_url(url)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run,
    "resume": cmd_resume,
    "sessions": cmd_sessions,
    "show": cmd_show,
    "fork": cmd_fork,
    "end": cmd_end,
    "pause": cmd_pause,
    "tool-result": cmd_tool_result,
    "doctor": cmd_doctor,
    "db": cmd_db,
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `agentrt`."""
    parser = argparse.ArgumentParser(prog="agentrt", description="A crash-safe agent runtime on LangGraph.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run one agent turn")
    _common(p)
    p.add_argument("--session", metavar="ID", help="continue this session (default: a new one)")
    p.add_argument("--skill", metavar="NAME", help="activate a skill from the skills folder for this turn")
    p.add_argument("--approve-all", action="store_true", help="approve every tool call that asks for approval")
    p.add_argument("text", nargs="+", help="what the agent should do")
    p = sub.add_parser("resume", help="recover and continue a crashed, paused or interrupted run")
    _common(p)
    p.add_argument("session_id", metavar="ID")
    decision = p.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve the pending tool call")
    decision.add_argument("--reject", action="store_true", help="reject the pending tool call")
    p.add_argument("--reason", help="why (recorded with --reject or --accept-changes)")
    p.add_argument("--operator", help="who accepts the changes (recorded; default: --user, else the session's user)")
    p.add_argument(
        "--accept-changes",
        nargs="?",
        const="all",
        action="append",
        metavar="PINS",
        help="re-pin changed digests explicitly (all, or a comma list of: graph_version, tool_shape_hash, "
        "toolset_hash, permissions_hash, projection_digest, surface_digest, state_schema_version); "
        "recorded in an event",
    )
    p = sub.add_parser("sessions", help="list sessions")
    _common(p)
    p = sub.add_parser("show", help="header, status, branches and last entries of a session")
    _common(p)
    p.add_argument("session_id", metavar="ID")
    p.add_argument("--last", type=int, default=15, help="how many entries (default 15)")
    p = sub.add_parser("fork", help="start a branch at an earlier entry")
    _common(p)
    p.add_argument("session_id", metavar="ID")
    p.add_argument("--from", dest="from_entry", required=True, metavar="ENTRY")
    p = sub.add_parser("end", help="end a session")
    _common(p)
    p.add_argument("session_id", metavar="ID")
    p = sub.add_parser("pause", help="pause a session")
    _common(p)
    p.add_argument("session_id", metavar="ID")
    p = sub.add_parser("tool-result", help="page through an archived tool result")
    _common(p)
    p.add_argument("session_id", metavar="ID")
    p.add_argument("call_id", metavar="CALL_ID")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--limit", type=int, default=2000)
    p = sub.add_parser("doctor", help="run the troubleshooting checks on a session (read-only)")
    _common(p)
    p.add_argument("session_id", metavar="ID")
    from agent import submit  # `agentrt submit` / `agentrt wait`: turns for the Celery workers

    COMMANDS.update(submit.add_commands(sub, _common))
    sub.add_parser("serve", help="the LangGraph Agent Server API and a page over sessions (agentrt serve -h)")
    p = sub.add_parser("db", help="SQL schema: `db upgrade` migrates, `db init` also creates the database")
    _common(p)
    p.add_argument("action", choices=["upgrade", "init"])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:  # the server has its own options (see agent/serve/cli.py)
        from agent.serve.cli import main as serve_main

        return serve_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging()
    try:
        return COMMANDS[args.command](args)
    except (AgentRuntimeError, CheckpointingError) as err:
        if os.environ.get("AGENTRT_DEBUG"):
            raise
        console.print(f"agentrt: error: {err}", markup=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        console.print("agentrt: interrupted; resume with `agentrt resume ID`", markup=False)
        return 130
    except Exception as err:  # a bug or an unexpected backend error: one line, the traceback on request
        if os.environ.get("AGENTRT_DEBUG"):
            raise
        console.print(
            f"agentrt: error: {type(err).__name__}: {err} (set AGENTRT_DEBUG=1 for the traceback)",
            markup=False,
            soft_wrap=True,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
