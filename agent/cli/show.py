"""`agentrt show ID`: a session's conversation as text, its branch tree and any pending approval.

The conversation is the current branch's path in the event log (root first): user turns, tool
calls with their call id, status and result size, approvals with the decision and who made it,
compressions, answers. `--json` prints the machine form (`AgentRunner.show`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from agent.cli.common import common_options, print_json, read, relative_time, say, session_argument, short, styled
from agent.core.text import printable, printable_all, shown

SHOWN = frozenset(
    {
        "user_turn",
        "assistant_message",
        "tool_call",
        "tool_result",
        "hitl_request",
        "hitl_decision",
        "compression",
        "run_fail",
        "recovery_blocked",
        "recovery_override",
    }
)


def args_show(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt show`."""
    common_options(p)
    session_argument(p)
    p.add_argument("--last", type=int, default=15, help="--json: how many raw entries (default 15)")
    p.add_argument("--branch", metavar="B", help="show this branch's conversation (default: the current one)")


def cmd_show(args: argparse.Namespace) -> int:
    """agentrt show ID."""
    return read(args, lambda r: _show(args, r))


def _show(args: argparse.Namespace, r: Any) -> int:
    """`agentrt show` with a reader or a runner (`common.read`): nothing is printed before all is read."""
    info = r.show(args.session_id, args.tenant, args.user, last=args.last)
    if args.json:
        return print_json(info)
    s = info["session"]
    log = r.manager.event_log(s["tenant_id"], s["session_id"])
    names = {name: b for b, name in info.get("branch_names", {}).items()}
    branch = names.get(args.branch, args.branch) if args.branch else s["current_branch_id"]
    pending = r.pending_approvals(s["session_id"], s["tenant_id"], branch) if branch in info["branches"] else []
    for line in render(info, log, branch, pending):
        say(line)
    return 0


def render(info: dict[str, Any], log: Any, branch: str, pending: list[dict[str, Any]]) -> list[str]:
    """The text of `agentrt show`."""
    from agent.cli.approval import describe
    from agent.core.errors import NotFound

    s = printable_all(info["session"])  # every id and name escaped: data, never terminal commands
    sid = s["session_id"]
    out = [
        styled(f"session {sid}", "bold") + f"  tenant {s['tenant_id']}  user {s['user_id']}  agent {s['agent_id']}",
        f"status {s['status']}  turns {s['loop_count']}  last run {s.get('last_run_id') or '-'} "
        f"{s.get('last_run_status') or ''}  last activity {relative_time(s.get('last_active_time'))}",
        "",
    ]
    leaf = info["branches"].get(branch)
    if leaf is None:
        known = ", ".join(printable_all(sorted(info["branches"])))
        raise NotFound(f"session {sid} has no branch {shown(branch)}; branches: {known}")
    out.append(styled(f"conversation (branch {branch})", "bold"))
    out.extend(conversation(log.projection(leaf, SHOWN)) or ["  (nothing yet)"])
    tree = branch_tree(log, info["branches"], s["current_branch_id"], info.get("branch_names"))
    out += ["", styled("branches", "bold"), *tree]
    if pending:
        out += ["", styled("pending approval", "yellow")]
        for req in pending:
            iid = req.get("interrupt_id")
            out.append(printable(f"  {describe(req)}  [call {req.get('tool_call_id')}]  approval id {iid}"))
        if branch == s["current_branch_id"]:
            for req in pending:
                iid = req.get("interrupt_id")
                out.append(printable(f"  approve: agentrt resume {sid} --approve --interrupt {iid}"))
                out.append(printable(f'  reject:  agentrt resume {sid} --reject --reason "..." --interrupt {iid}'))
        else:
            out.append(printable(f"  left on branch {branch}, which is not the current branch: it is never resumed"))
    return out


def conversation(entries: list[Any]) -> list[str]:
    """One line (or a few) per shown entry."""
    lines: list[str] = []
    asked: dict[str, Any] = {}
    for e in entries:
        raw = e.payload or {}
        p = printable_all(raw)  # ids, names, reasons: escaped; the texts below keep their lines
        text = printable(str(raw.get("content", "")), keep="\n\t")
        if e.type == "user_turn":
            lines += ["", f"  user> {text}", styled(f"        entry {e.id}", "dim")]
        elif e.type == "assistant_message":
            lines += [f"  answer> {text}", styled(f"        entry {e.id}", "dim")]
        elif e.type == "tool_call":
            args = short(json.dumps(raw.get("args"), ensure_ascii=False, default=str), 80)
            lines.append(f"    tool {p.get('name')} [{p.get('tool_call_id')}] {args}")
        elif e.type == "tool_result":
            tag = " (replayed from the journal)" if p.get("replayed") else ""
            size = p.get("size") if p.get("size") is not None else len(str(p.get("content", "")))
            lines.append(f"      -> {p.get('status', '?')}, {size} chars{tag}")
        elif e.type == "hitl_request":
            asked = p
            iid = f" (approval id {p['interrupt_id']})" if p.get("interrupt_id") else ""
            lines.append(styled(f"    approval asked: {p.get('name')} [{p.get('tool_call_id')}]{iid}", "yellow"))
        elif e.type == "hitl_decision":
            verdict = "approved" if p.get("approved") else "rejected"
            who = f" by {p['operator']}" if p.get("operator") else ""
            why = f" ({p['reason']})" if p.get("reason") else ""
            lines.append(
                f"    approval {verdict}{who}{why}: {asked.get('name', '?')} [{asked.get('tool_call_id', '?')}]"
            )
        elif e.type == "compression":
            lines.append(
                styled(
                    f"    compression {p.get('tier')}: {p.get('original_count', '?')} -> {p.get('new_count', '?')} "
                    f"messages, {p.get('tokens_before', '?')} -> {p.get('tokens_after', '?')} tokens",
                    "magenta",
                )
            )
        elif e.type == "run_fail":
            lines.append(styled(f"    run failed: {p.get('error') or p.get('finish_reason')}", "red"))
        elif e.type == "recovery_blocked":
            lines.append(styled(f"    recovery blocked: {p.get('reason') or p.get('step')}", "red"))
        elif e.type == "recovery_override":
            lines.append(f"    changes accepted by {p.get('operator')}: {', '.join(p.get('accepted') or [])}")
    return lines[1:] if lines and lines[0] == "" else lines


def branch_tree(log: Any, branches: dict[str, str], current: str, names: dict[str, str] | None = None) -> list[str]:
    """Each branch with the entry it forked from, its entry count and leaf (and its name, if it has
    one); the current one marked."""
    stats = log.branch_stats()  # first entry and count per branch: no entry is parsed
    lines = []
    width = max((len(b) for b in branches), default=4)
    for b in sorted(branches, key=lambda b: (b != "main", b)):
        first, count = stats.get(b, (None, 0))
        start = log.envelope(first)["parent_id"] if first else None
        origin = log.envelope(start)["branch_id"] if start else None
        fork = f"forked from {origin} at entry {start}" if origin and origin != b else "root"
        mark = "*" if b == current else " "
        named = f"  (named {names[b]})" if names and b in names else ""
        lines.append(printable(f"  {mark} {b:<{width}} {count:>4} entries  {fork}{named}"))
    return lines
