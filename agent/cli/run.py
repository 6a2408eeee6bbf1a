"""`agentrt run` and `agentrt resume`: drive a turn, show its progress, answer approvals."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agent.cli import common
from agent.cli.common import common_options, print_json, runner, say, session_argument, styled
from agent.core.faults import crash_point
from agent.core.statuses import RunStatus


def args_run(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt run`."""
    common_options(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--session", metavar="ID", help="continue this existing session (default: a new one)")
    which.add_argument("--new-session", metavar="ID", help="start a new session with this id (refused if it exists)")
    p.add_argument("--skill", metavar="NAME", help="activate a skill from the skills folder for this turn")
    p.add_argument("--approve-all", action="store_true", help="approve every tool call that asks for approval")
    p.add_argument("--operator", metavar="NAME", help="who answers approvals (recorded; default: --user)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines, only the answer")
    p.add_argument("text", nargs="+", help="what the agent should do")


def args_resume(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt resume`."""
    common_options(p)
    session_argument(p)
    decision = p.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve the pending tool call")
    decision.add_argument("--reject", action="store_true", help="reject the pending tool call")
    decision.add_argument(
        "--approve-all",
        action="store_true",
        help="approve every tool call that asks for approval, the pending one included (as run's --approve-all)",
    )
    p.add_argument(
        "--interrupt",
        metavar="IID",
        help="the approval to answer (its id from `agentrt show` or the pause message); fails, changing "
        "nothing, when it is no longer pending",
    )
    p.add_argument("--reason", help="why (recorded with --reject or --accept-changes)")
    p.add_argument("--operator", metavar="NAME", help="who decides or accepts the changes (recorded; default: --user)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines, only the answer")
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


def _consume(events: Any, args: argparse.Namespace, progress: Any) -> dict[str, Any]:
    final: dict[str, Any] = {}
    try:
        for ev in events:
            if ev.kind == "final":
                final = ev.data
            elif progress is not None:
                progress(ev.kind, ev.data)
    except KeyboardInterrupt as err:
        from agent.core.errors import RunInterrupted

        # Ctrl-C while an event was being shown: hand it to the run (suspended at its yield), which
        # closes itself as INTERRUPTED and raises the message naming its session.
        if isinstance(err, RunInterrupted) or not hasattr(events, "throw"):
            raise
        events.throw(err)
        raise
    if progress is not None:
        progress.finish()
    return final


def _progress(args: argparse.Namespace) -> Any:
    if args.json:
        return None
    from agent.cli.progress import Progress

    return Progress(quiet=args.quiet)


def _operator(args: argparse.Namespace) -> str | None:
    return str(args.operator or args.user) if (args.operator or args.user) else None


def _decide(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any] | None:
    """--approve-all, a prompt on a terminal, or None (pause and say how to answer)."""
    if args.approve_all:
        decision: dict[str, Any] = {"approved": True, "reason": "approved with --approve-all"}
        if _operator(args):
            decision["operator"] = _operator(args)
        return decision
    if args.json or not sys.stdin.isatty():
        return None
    from agent.cli.approval import ask

    return ask(request, _operator(args))


def pause_lines(session_id: str, pending: list[dict[str, Any]]) -> list[str]:
    """The pause message: which approval is pending, and the exact commands that answer it (escaped)."""
    from agent.core.text import printable

    return [printable(line) for line in _pause_lines(session_id, pending)]


def _pause_lines(session_id: str, pending: list[dict[str, Any]]) -> list[str]:
    if not pending:
        return ["paused: waiting for a human decision", f"answer it with: agentrt resume {session_id} --approve"]
    req = pending[0]
    iid = req.get("interrupt_id")
    return [
        f"paused: approval {iid} pending for tool {req.get('name')}; "
        f"answer with `agentrt resume {session_id} --approve --interrupt {iid}`",
        f'(or reject it: agentrt resume {session_id} --reject --reason "..." --interrupt {iid})',
    ]


def _print_result(result: dict[str, Any], args: argparse.Namespace, streamed: str) -> int:
    code = 0 if result.get("status") in (RunStatus.COMPLETED, RunStatus.PAUSED) else 1
    # A Ctrl-C from here on comes after the run ended: the command exits with the run's own status.
    common.DONE_CODE = code
    if args.json:
        print_json(result)
    else:
        from agent.core.text import printable

        answer = result.get("answer") or ""
        shown = bool(streamed) and streamed.strip() == answer.strip() and sys.stdout.isatty() and not args.quiet
        if result.get("status") == RunStatus.PAUSED:
            first, *rest = pause_lines(result["session_id"], result.get("pending_approval") or [])
            say(first)
            for line in rest:
                say(line, err=True)
        elif not shown:
            say(printable(answer, keep="\n\t") or "(no answer)")
        summary = (
            f"session {result.get('session_id')}  status {result.get('status')}  finish {result.get('finish_reason')}  "
            f"iterations {result.get('iterations')}  tokens {result.get('input_tokens')}/{result.get('output_tokens')}"
        )
        say(styled(summary, "bold", sys.stderr), err=True)
        if result.get("error"):
            say(styled(f"error: {result['error']}", "red", sys.stderr), err=True)
    crash_point("result_printed")
    return code


def cmd_run(args: argparse.Namespace) -> int:
    """agentrt run TEXT."""
    r = runner(args)
    progress = _progress(args)
    events = r.stream(
        " ".join(args.text),
        session_id=args.session,
        tenant_id=args.tenant,
        user_id=args.user,
        skill=args.skill,
        new_session_id=args.new_session,
    )
    final = _consume(events, args, progress)
    while final.get("status") == RunStatus.PAUSED and final.get("pending_approval"):
        decision = _decide(args, final["pending_approval"][0])
        if decision is None:
            break
        if progress is not None:
            progress.continuing = True
        events = r.stream_resume(
            final["session_id"],
            tenant_id=args.tenant,
            user_id=args.user,
            decision=decision,
            operator=_operator(args),
            interrupt_id=final["pending_approval"][0].get("interrupt_id"),
        )
        final = _consume(events, args, progress)
    return _print_result(final, args, progress.streamed if progress is not None else "")


def cmd_resume(args: argparse.Namespace) -> int:
    """agentrt resume ID."""
    r = runner(args)
    decision: dict[str, Any] | None = None
    interrupt = args.interrupt
    if args.approve:
        decision = {"approved": True}
    elif args.reject:
        decision = {"approved": False, "reason": args.reason or "rejected by the operator"}
    elif args.approve_all:
        waiting = r.pending_approvals(args.session_id, args.tenant)
        if waiting:  # paused, or killed, at an approval: answer it; else resume as without the flag
            decision = _decide(args, waiting[0])
            interrupt = interrupt or waiting[0].get("interrupt_id")
    if decision is not None and _operator(args):
        decision["operator"] = _operator(args)
    if decision is not None and r.settings.workers.enabled:
        from agent.runner.submit import cmd_queue_decision, has_paused_turn

        # A submitted turn is continued by the workers; one started by `agentrt run` is resumed here.
        if has_paused_turn(r.settings, args.session_id, args.tenant):
            return cmd_queue_decision(args, decision, interrupt)
    accept = [a for part in (args.accept_changes or []) for a in part.split(",") if a]
    progress = _progress(args)

    def resume(decision: dict[str, Any] | None, interrupt: str | None) -> dict[str, Any]:
        events = r.stream_resume(
            args.session_id,
            tenant_id=args.tenant,
            user_id=args.user,
            decision=decision,
            accept_changes=accept,
            operator=_operator(args),
            reason=args.reason,
            interrupt_id=interrupt,
        )
        return _consume(events, args, progress)

    from agent.core.errors import ApprovalNotPending

    try:
        final = resume(decision, interrupt)
    except ApprovalNotPending as err:
        if not (args.approve_all and err.answered):
            raise
        final = resume(None, None)  # acted on before the kill: the run goes on without a new answer
    while args.approve_all and final.get("status") == RunStatus.PAUSED and final.get("pending_approval"):
        if progress is not None:
            progress.continuing = True
        request = final["pending_approval"][0]
        final = resume(_decide(args, request), request.get("interrupt_id"))
    return _print_result(final, args, progress.streamed if progress is not None else "")
