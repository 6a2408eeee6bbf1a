"""`agentrt items export > FILE` and `agentrt items import FILE`: a tenant's items of LangGraph's
store (the store API's long-term memory) moved between machines (`agent.transfer.items`).

Sessions move with `agentrt export` / `agentrt import`; items belong to the whole tenant, so they
move on their own. Export writes every live item of `--tenant` (default the config's); import puts
them into the store of its config, under the tenant the file names, after checking the whole file
and every item against what is there (nothing is written when one differs: exit 4).
"""

from __future__ import annotations

import argparse

from agent.cli.common import common_options, print_json, read_in, say, settings, tenant_of, write_out


def args_items(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt items`."""
    common_options(p, identity=False)
    p.add_argument("--tenant", metavar="T", help="export: whose items (default: from config)")
    p.add_argument(
        "action",
        choices=["export", "import"],
        help="export: write the tenant's items to one file (stdout); import: add the items of such a file",
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="import: the file `items export` wrote; - reads stdin")
    p.add_argument("--output", "-o", metavar="FILE", help="export: write to FILE instead of stdout")


def cmd_items(args: argparse.Namespace) -> int:
    """agentrt items export [--tenant T] [-o FILE] | agentrt items import FILE."""
    from agent.core.errors import InputError

    if args.action == "export":
        if args.file is not None:
            raise InputError("`items export` writes to stdout or --output FILE; it takes no FILE argument")
        return _export(args)
    if args.file is None:
        raise InputError("give the file to import: `agentrt items import FILE` (`-` reads stdin)")
    if args.output is not None or args.tenant is not None:
        raise InputError("`items import` keeps the tenant the file names; --output and --tenant are export's")
    return _import(args)


def _export(args: argparse.Namespace) -> int:

    from agent.transfer.items import export_items

    conf = settings(args)
    tenant = tenant_of(args, conf)
    data = export_items(conf, tenant)
    count = data.count(b"\n") - 2
    write_out(data, args.output, f"exported {count} item(s) of tenant {tenant} to {{file}}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from agent.session.item_store import item_store
    from agent.session.tenant_store import TenantStore
    from agent.transfer.items import import_items, read_items, store_errors

    conf = settings(args)
    data, name = read_in(args.file, "agentrt items export")
    found = read_items(data, name)
    with store_errors(conf):
        added, there = import_items(TenantStore(item_store(conf), found.tenant_id), found.items)
    if args.json:
        return print_json({"tenant_id": found.tenant_id, "imported": added, "already_there": there})
    say(f"imported {added} item(s) into tenant {found.tenant_id} ({there} already there with the same value)")
    return 0
