"""`agentrt branches`, `agentrt switch` and `agentrt branch rename|delete`: a session's branches by hand."""

from __future__ import annotations

import argparse
from typing import Any

from agent.cli.common import common_options, print_json, runner, say, session_argument
from agent.core.text import printable


def args_branches(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt branches`."""
    common_options(p)
    session_argument(p)


def args_switch(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt switch`."""
    common_options(p)
    session_argument(p)
    p.add_argument("branch", metavar="BRANCH", help="branch id or name (see `agentrt branches ID`)")


def args_branch(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt branch`."""
    common_options(p)
    p.add_argument("action", choices=["rename", "delete"], help="rename: name a branch; delete: drop it from listings")
    session_argument(p)
    p.add_argument("branch", metavar="BRANCH", help="branch id or name (see `agentrt branches ID`)")
    p.add_argument(
        "branch_name", metavar="NAME", nargs="?", help="rename: the new name (1-64 letters, digits, '_' or '-')"
    )


def cmd_branches(args: argparse.Namespace) -> int:
    """agentrt branches ID: each live branch, the current one marked with `*`."""
    rows = runner(args).branches(args.session_id, args.tenant, args.user)
    if args.json:
        return print_json(rows)
    for line in render(rows):
        say(line)
    return 0


def render(rows: list[dict[str, Any]]) -> list[str]:
    """The table of `agentrt branches`."""
    cells = [["", "BRANCH", "NAME", "FROM ENTRY", "HEAD ENTRY", "TURNS", "STATUS"]]
    for r in rows:
        cells.append(
            [
                "*" if r["current"] else "",
                r["branch_id"],
                r["name"] or "-",
                r["from_entry_id"] or "-",
                r["head_entry_id"],
                str(r["turns"]),
                r["status"],
            ]
        )
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(cells[0]))]
    return [printable("  ".join(f"{c:<{w}}" for c, w in zip(row, widths, strict=True)).rstrip()) for row in cells]


def cmd_switch(args: argparse.Namespace) -> int:
    """agentrt switch ID BRANCH."""
    d = runner(args).switch(args.session_id, args.branch, args.tenant, args.user)
    if args.json:
        return print_json(d)
    say(
        printable(
            f"session {d['session_id']} is on branch {_named(d)}; the next "
            f"`agentrt run --session {d['session_id']} ...` continues there"
        )
    )
    return 0


def cmd_branch(args: argparse.Namespace) -> int:
    """agentrt branch rename ID BRANCH NAME | agentrt branch delete ID BRANCH."""
    from agent.core.errors import InputError

    r = runner(args)
    if args.action == "rename":
        if args.branch_name is None:
            raise InputError("rename needs the new name: `agentrt branch rename ID BRANCH NAME`")
        d = r.rename_branch(args.session_id, args.branch, args.branch_name, args.tenant, args.user)
        said = f"branch {d['branch_id']} is named {d['name']}"
    else:
        if args.branch_name is not None:
            raise InputError("delete takes no name: `agentrt branch delete ID BRANCH`")
        d = r.delete_branch(args.session_id, args.branch, args.tenant, args.user)
        said = f"branch {_named(d)} deleted; its entries stay in the event log as history"
    if args.json:
        return print_json(d)
    say(printable(said))
    return 0


def _named(d: dict[str, Any]) -> str:
    return f"{d['branch_id']} ({d['name']})" if d.get("name") else str(d["branch_id"])
