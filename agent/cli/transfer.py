"""`agentrt export ID... > FILE` and `agentrt import FILE`: move sessions between machines.

Export writes the sessions (of `--tenant`, default the config's) as one JSON Lines file on stdout
(`agent.transfer.fileformat`), each read under its lease lock: a running session is refused
(exit 4). Import checks the whole file before it writes anything (a cut, changed or hostile file:
exit 2), refuses an id that already exists here (exit 4), then places every session atomically and
registers it (index of sessions, SQL row). Each session keeps the tenant and user it had.

With `persistence.store: postgres` both read and write the store's rows instead of base_dir's
folders (`agent.transfer.store`), the file being the same either way; `agentrt store migrate` moves
a files base_dir's sessions into the store.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from agent.cli.common import common_options, print_json, read_in, say, settings, tenant_of, write_out
from agent.core.text import printable

if TYPE_CHECKING:
    from agent.session.session import ChatSession
    from agent.transfer.fileformat import ExportFile


def args_export(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt export`."""
    common_options(p)
    p.add_argument("session_ids", nargs="+", metavar="ID", help="the sessions to export (see `agentrt sessions`)")
    p.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout (made only on success)")


def args_import(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt import`."""
    common_options(p, identity=False)
    p.add_argument("file", metavar="FILE", help="an export file (`agentrt export ID > FILE`); - reads stdin")


def cmd_export(args: argparse.Namespace) -> int:
    """agentrt export ID..."""
    import io

    from agent.core.errors import InputError
    from agent.session.record_store import pg_store
    from agent.transfer.exporter import read_image
    from agent.transfer.fileformat import ExportWriter
    from agent.transfer.guard import session_guard
    from agent.transfer.store import export_session
    from checkpointing.exceptions import InvalidIdError
    from checkpointing.ids import validate_id
    from checkpointing.layout import session_dir

    conf = settings(args)
    tenant = tenant_of(args, conf)
    try:
        ids = [validate_id(s, "session id") for s in args.session_ids]
    except InvalidIdError as err:
        raise InputError(f"{err}; `agentrt sessions` lists them") from None
    if len(set(ids)) != len(ids):
        raise InputError("a session id is given twice; name each session once")
    base = Path(conf.base_dir)
    store = pg_store(conf)
    buf = io.BytesIO()  # nothing reaches stdout or FILE unless every session was read
    writer = ExportWriter(buf, len(ids))
    for sid in ids:
        if store is not None:  # its rows (and this machine's rooms), read as a session folder
            writer.session(*export_session(conf, store, tenant, sid, args.user))
            continue
        folder = session_dir(base, tenant, sid)
        if not folder.is_dir():
            from agent.transfer.exporter import not_found

            raise not_found(sid, tenant, args.user)
        with session_guard(conf, tenant, sid, "exported"):
            image, blobs = read_image(base, tenant, sid, args.user)
        writer.session(image, blobs)
    writer.close()
    data = buf.getvalue()
    write_out(data, args.output, f"exported {len(ids)} session(s) to {{file}} ({len(data)} bytes)")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """agentrt import FILE."""
    from agent.runner.services import build_manager
    from agent.session.record_store import pg_store
    from agent.transfer.fileformat import read_export
    from agent.transfer.importer import check_targets, place, register
    from agent.transfer.store import import_sessions

    conf = settings(args)
    data, name = read_in(args.file, "agentrt export")
    export = read_export(data, name)
    store = pg_store(conf)
    if store is not None:  # uploaded as rows; registered in the session table
        placed, warnings = import_sessions(conf, store, build_manager(conf), export)
        return _imported(args, export, placed, warnings)
    base = Path(conf.base_dir)
    # Before anything is written, so a database that refuses (an old schema) stops the import. An
    # embedded database in a base_dir not made yet holds nothing: it is made only on success.
    url = conf.database_url() or "sqlite"
    early = base.exists() or not url.startswith("sqlite") or conf.persistence.mode == "JSONL_ONLY"
    manager = build_manager(conf) if early else None
    check_targets(conf, manager, export)
    placed = place(base, export, fsync=conf.persistence.fsync == "always")
    warnings = register(manager or build_manager(conf), placed)
    return _imported(args, export, placed, warnings)


def _imported(args: argparse.Namespace, export: ExportFile, placed: list[ChatSession], warnings: list[str]) -> int:
    for w in warnings:
        say(f"agentrt: warning: {w}", err=True)
    if args.json:
        return print_json(
            [{"session_id": s.session_id, "tenant_id": s.tenant_id, "user_id": s.user_id} for s in placed]
        )
    for s, image in zip(placed, export.images, strict=True):
        runs = sum(1 for name, _ in image.streams if name == "checkpoints")
        files = sum(1 for entries in image.rooms.values() for e in entries if e.data is not None)
        say(
            f"imported session {s.session_id}  tenant {s.tenant_id}  user {s.user_id}  "
            f"({len(image.streams[('events', None)])} events, {runs} runs, {files} room files)"
        )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """agentrt store migrate --from files --to postgres [--from-dir DIR] [--dry-run]."""
    from agent.core.errors import Conflict, InputError
    from agent.runner.services import build_manager
    from agent.session.record_store import pg_store
    from agent.transfer.store_migrate import Moved, migrate

    if args.from_store != "files" or args.to_store != "postgres":
        raise InputError("say what moves where: `agentrt store migrate --from files --to postgres --config FILE`")
    conf = settings(args)
    store = pg_store(conf)
    if store is None:
        raise InputError(
            "the config's persistence.store is files: `store migrate --to postgres` needs a config with "
            "store: postgres (and store_url or database_url); give it with --config"
        )
    from_dir = Path(args.from_dir) if args.from_dir else Path(conf.base_dir)
    if not from_dir.is_dir():
        raise InputError(f"no folder {printable(str(from_dir))}; give the files base_dir with --from-dir")

    def report(m: Moved) -> None:
        if not args.json:
            say(printable(f"{m.outcome} {m.tenant_id}/{m.session_id}: {m.detail}"))

    done = migrate(conf, store, build_manager(conf), from_dir, dry_run=args.dry_run, report=report)
    count = {k: sum(1 for m in done if m.outcome == k) for k in ("moved", "would move", "skipped", "not moved")}
    where = f"from {printable(str(from_dir))} to {store.name}"
    if args.json:
        print_json({"from": str(from_dir), "to": store.name, "sessions": [m.to_json() for m in done], **count})
    elif args.dry_run:
        n = count["would move"]
        say(f"would move {n} sessions, skip {count['skipped']}, {count['not moved']} not movable {where}")
    else:
        say(f"moved {count['moved']} sessions, skipped {count['skipped']}, {count['not moved']} not moved {where}")
    if count["not moved"] and not args.dry_run:
        raise Conflict(
            f"{count['not moved']} sessions were not moved (listed above, each saying why); "
            "`agentrt store migrate` run again skips the sessions already moved"
        )
    return 0
