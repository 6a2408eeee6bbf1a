"""`agentrt erase` (a tenant's or one user's sessions, for good), `agentrt store gc` (retention),
`agentrt store converge` (replay what SQL / Redis missed, agent/session/sweep.py) and
`agentrt store migrate` (files -> postgres, `agent.cli.transfer.cmd_migrate`).

Besides the sessions, erase deletes the tenant's crons (only the user's with `--user`) and, for a
whole tenant, its assistants and store items (`agent.session.erase_shared`).

Erase is careful: without `--yes` it only lists what it would delete and exits 2, so a typo in a
tenant id costs nothing; `--dry-run` lists and exits 0. A tenant with nothing stored answers
"nothing to erase" and exit 0 (erasing twice succeeds). A session a run holds is skipped, named
with what to do, and the command exits 4 (conflict) after erasing the rest.
"""

from __future__ import annotations

import argparse

from agent.cli.common import common_options, print_json, runner, say
from agent.core.text import printable


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
        choices=["gc", "converge", "migrate"],
        help="gc: delete the sessions past session.retention_days; converge: replay now what the SQL and "
        "Redis layers missed in an outage, for every session that owes them; migrate: move every session "
        "of a files base_dir into the configured PostgreSQL store (--from files --to postgres)",
    )
    p.add_argument(
        "--tenant",
        dest="store_tenant",
        metavar="T",
        help="converge: only this tenant's sessions (default: every tenant)",
    )
    p.add_argument(
        "--limit", type=int, metavar="N", help="converge: at most N sessions (the rest are counted, left for later)"
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
    from agent.core.errors import Conflict, InputError
    from agent.session.erase import erase

    r = runner(args)
    dry = args.dry_run or not args.yes
    tenant, user = args.erase_tenant, args.erase_user
    out = erase(r.runner, tenant, user, dry_run=dry)
    who = f"tenant {tenant}" + (f" user {user}" if user else "")
    if out.empty():
        if args.json:
            print_json({**out.to_json(), "nothing_to_erase": True})
        else:
            say(printable(f"nothing to erase for {who}"))
        return 0
    _report(out, args.json)
    if dry and not args.dry_run:
        raise InputError(f"nothing was erased: add --yes to erase what is listed above for {who}")
    if out.skipped and not dry:
        raise Conflict(
            f"{len(out.skipped)} sessions of {who} were not erased (listed above); "
            "when their runs have ended, run the same erase again"
        )
    return 0


def cmd_store(args: argparse.Namespace) -> int:
    """agentrt store gc [--dry-run] | agentrt store converge [--tenant T] [--limit N] |
    agentrt store migrate --from files --to postgres."""
    from agent.core.errors import InputError
    from agent.session.retention import collect

    if args.action != "converge" and (args.store_tenant is not None or args.limit is not None):
        raise InputError(f"--tenant and --limit are options of `agentrt store converge`, not of `store {args.action}`")
    if args.action == "migrate":
        from agent.cli.transfer import cmd_migrate

        return cmd_migrate(args)
    if args.from_store or args.to_store or args.from_dir:
        raise InputError(
            f"--from, --to and --from-dir are options of `agentrt store migrate`, not of `store {args.action}`"
        )
    if args.action == "converge":
        return _converge(args)

    out = collect(runner(args).runner, dry_run=args.dry_run)
    _report(out, args.json)
    return 4 if out.skipped and not args.dry_run else 0


def _converge(args: argparse.Namespace) -> int:
    """`agentrt store converge`: exit 0 when nothing is owed any more, 4 when a run holds a debtor,
    6 when a layer still does not answer."""
    from agent.core.errors import BackendUnavailable, InputError
    from agent.session.sweep import sweep
    from checkpointing.exceptions import InvalidIdError
    from checkpointing.ids import validate_id

    if args.dry_run:
        raise InputError("--dry-run is an option of `store gc` and `store migrate`; `agentrt doctor` lists the debts")
    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit {args.limit}: give a number of sessions, 1 or more")
    tenants = None
    if args.store_tenant is not None:
        try:
            tenants = [validate_id(args.store_tenant, "tenant id")]
        except InvalidIdError as err:
            raise InputError(str(err)) from err
    out = sweep(runner(args).runner, tenants, args.limit)
    if args.json:
        print_json(out.to_json())
    else:
        for d in out.sessions:
            who = f"{d.tenant_id}/{d.session_id}"
            if d.replayed:
                said = ", ".join(f"{layer} ({n} change(s))" for layer, n in d.replayed.items())
                say(printable(f"replayed {who}: {said}"))
            if d.skipped:
                say(printable(f"skipped {who}: {d.skipped}"))
            elif d.owed:
                said = ", ".join(f"{layer} ({n} change(s))" for layer, n in d.owed.items())
                say(printable(f"still owed {who}: {said}; the layer did not answer, run this again when it does"))
        say(printable(out.summary()))
    if any(d.owed and not d.skipped for d in out.sessions):
        if args.json:
            return 6
        raise BackendUnavailable("a layer did not answer: the sessions listed above still owe it; run this again")
    return 4 if any(d.skipped for d in out.sessions) else 0
