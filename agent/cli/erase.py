"""`agentrt erase` (a tenant's or one user's sessions, for good), `agentrt store gc` (retention) and
`agentrt store migrate` (files -> postgres, `agent.cli.transfer.cmd_migrate`).

Erase is careful: without `--yes` it only lists what it would delete and exits 2, so a typo in a
tenant id costs nothing; `--dry-run` lists and exits 0. A tenant with nothing stored answers
"nothing to erase" and exit 0 (erasing twice succeeds). A session a run holds is skipped, named
with what to do, and the command exits 4 (conflict) after erasing the rest.
"""

from __future__ import annotations

import argparse

from agent.cli.common import common_options, print_json, runner, say
from agent.text import printable


def args_erase(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt erase`."""
    common_options(p, identity=False)
    p.add_argument("--tenant", dest="erase_tenant", metavar="T", required=True, help="the tenant whose sessions go")
    p.add_argument("--user", dest="erase_user", metavar="U", help="only this user's sessions in the tenant")
    p.add_argument("--yes", action="store_true", help="really delete (without it: list what would go, exit 2)")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing (exit 0)")


def args_store(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt store`."""
    common_options(p, identity=False)
    p.add_argument(
        "action",
        choices=["gc", "migrate"],
        help="gc: delete the sessions past session.retention_days; migrate: move every session of a files "
        "base_dir into the configured PostgreSQL store (--from files --to postgres)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted (or moved), change nothing")
    p.add_argument("--from", dest="from_store", choices=["files"], help="migrate: the store the sessions are in")
    p.add_argument(
        "--to", dest="to_store", choices=["postgres"], help="migrate: the store they go to (the config's store_url)"
    )
    p.add_argument(
        "--from-dir", metavar="DIR", help="migrate: the files base_dir to read (default persistence.base_dir)"
    )


def _report(out: object, as_json: bool) -> None:
    from agent.session.removal import Removal

    assert isinstance(out, Removal)
    if as_json:
        print_json(out.to_json())
        return
    for tenant, sid in out.sessions:
        say(printable(f"{'would delete' if out.dry_run else 'deleted'} {tenant}/{sid}"))
    for s in out.skipped:
        say(printable(f"skipped {s.tenant_id}/{s.session_id}: {s.reason}"))
    for note in out.notes:
        say(printable(f"note: {note}"))
    say(printable(out.summary()))


def cmd_erase(args: argparse.Namespace) -> int:
    """agentrt erase --tenant T [--user U] [--yes | --dry-run]."""
    from agent.errors import Conflict, InputError
    from agent.session.erase import erase

    r = runner(args)
    dry = args.dry_run or not args.yes
    tenant, user = args.erase_tenant, args.erase_user
    out = erase(r, tenant, user, dry_run=dry)
    who = f"tenant {tenant}" + (f" user {user}" if user else "")
    if not out.sessions and not out.skipped:
        if args.json:
            print_json({**out.to_json(), "nothing_to_erase": True})
        else:
            say(printable(f"nothing to erase for {who}"))
        return 0
    _report(out, args.json)
    if dry and not args.dry_run:
        raise InputError(f"nothing was erased: add --yes to erase the {len(out.sessions)} sessions of {who} listed")
    if out.skipped and not dry:
        raise Conflict(
            f"{len(out.skipped)} sessions of {who} were not erased (listed above); "
            "when their runs have ended, run the same erase again"
        )
    return 0


def cmd_store(args: argparse.Namespace) -> int:
    """agentrt store gc [--dry-run] | agentrt store migrate --from files --to postgres."""
    from agent.errors import InputError
    from agent.session.retention import collect

    if args.action == "migrate":
        from agent.cli.transfer import cmd_migrate

        return cmd_migrate(args)
    if args.from_store or args.to_store or args.from_dir:
        raise InputError("--from, --to and --from-dir are options of `agentrt store migrate`, not of `store gc`")

    out = collect(runner(args), dry_run=args.dry_run)
    _report(out, args.json)
    return 4 if out.skipped and not args.dry_run else 0
