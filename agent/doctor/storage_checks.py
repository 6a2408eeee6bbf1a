"""The doctor's checks of what lives beside the records: blobs, the sandbox room, the lease.

"File results vanished" (the troubleshooting table: sandbox checkpoint, workspace binding, blob volume) and "the
same session recovered concurrently" (the lease), all read-only: blobs are read and hashed, the
room is listed and hashed, the lease is read (lease.json plus the kernel's lock table, or the
Redis key), never taken.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.doctor.facts import Check, SessionFacts, Status
from agent.errors import AgentrtError, DataCorrupt
from agent.session.lease import FileLease, InProcessLease, RedisLease, read_lease_state
from checkpointing.blobs import BLOB_KEY, BlobStore, is_blob_ref
from checkpointing.exceptions import BlobCorruptError, BlobMissingError
from checkpointing.layout import EVENTS_FILE, JOURNAL_FILE, MAIN_BRANCH, lease_files

MAX_REFERRERS = 8


def finding(name: str, status: Status, summary: str, next_step: str, **evidence: Any) -> Check:
    """A `Check` whose evidence is `{"summary": summary, **evidence}`."""
    return Check(name, status, {"summary": summary, **evidence}, next_step)


# --- blobs -------------------------------------------------------------------------------------------


def _walk_refs(obj: Any) -> Iterator[str]:
    if is_blob_ref(obj):
        yield obj[BLOB_KEY]
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _walk_refs(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_refs(v)


def _label(name: str, rec: dict[str, Any]) -> str:
    if name == EVENTS_FILE:
        return f"event {rec.get('id')} ({rec.get('type')})"
    if name == JOURNAL_FILE:
        return f"journal {rec.get('kind')} record of {rec.get('tool_call_id')} (run {rec.get('run_id')})"
    if rec.get("k") == "c":
        return f"checkpoint {rec.get('checkpoint_id')} ({name})"
    if rec.get("k") == "w":
        return f"pending writes of checkpoint {rec.get('checkpoint_id')} ({name})"
    if rec.get("k") == "i":
        return f"stored item {rec.get('h')} ({name})"
    return f"{rec.get('kind') or 'record'} record ({name})"


def referenced_blobs(f: SessionFacts) -> dict[str, list[str]]:
    """Blob ref -> what references it (every record, tool_result_store entries, the sandbox manifest)."""
    refs: dict[str, list[str]] = {}

    def add(ref: str, who: str) -> None:
        holders = refs.setdefault(ref, [])
        if who not in holders:
            holders.append(who)

    for entry in (f.state or {}).get("tool_result_store") or []:
        if isinstance(entry, dict) and is_blob_ref(entry.get("blob")):
            add(entry["blob"][BLOB_KEY], f"tool_result_store {entry.get('tool_call_id')} ({entry.get('tool_name')})")
    for name, scan in f.files.items():
        for i in sorted(scan.may_ref_blobs):
            rec = scan.records[i][1]
            for ref in _walk_refs(rec):
                add(ref, _label(name, rec))
    manifest, where = sandbox_manifest(f)
    for path, ref in (manifest or {}).items():
        add(ref, f"{where} file {path}")
    return refs


def blobs(f: SessionFacts) -> Check:
    """Every blob the session references is on disk and matches its digest."""
    store = f.ctx.blobs
    refs = referenced_blobs(f)
    missing: dict[str, list[str]] = {}
    corrupt: dict[str, list[str]] = {}
    queue = list(refs)
    while queue:
        ref = queue.pop()
        try:
            data = store.get(ref)
        except BlobMissingError:
            missing[ref] = refs[ref][:MAX_REFERRERS]
            continue
        except BlobCorruptError:
            corrupt[ref] = refs[ref][:MAX_REFERRERS]
            continue
        for inner in _nested_refs(data):  # a spilled JSON subtree may itself reference blobs
            if inner not in refs:
                refs[inner] = [f"inside blob {ref}"]
                queue.append(inner)
    owner: Any = getattr(store, "store", None)  # the PostgreSQL store of a PostgresBlobStore
    where = str(store.root) if isinstance(store, BlobStore) else f"{getattr(owner, 'name', 'the store')} (jsonl_blobs)"
    ev: dict[str, Any] = {"blob_dir": where, "referenced": len(refs), "missing": missing, "corrupt": corrupt}
    if missing or corrupt:
        parts = [f"blob {r} is missing ({_path(f, r)}), referenced by {', '.join(w)}" for r, w in missing.items()]
        parts += [f"blob {r} does not match its digest, referenced by {', '.join(w)}" for r, w in corrupt.items()]
        return finding(
            "blobs",
            "FAIL",
            "; ".join(parts),
            "mount the complete blob volume (base_dir/blobs) or restore the named blobs from a backup; "
            "until then these results cannot be read",
            **ev,
        )
    return finding("blobs", "OK", f"all {len(refs)} referenced blobs present and digest-correct", "nothing to do", **ev)


def _path(f: SessionFacts, ref: str) -> str:
    blobs = f.ctx.blobs
    if not isinstance(blobs, BlobStore):
        return f"row {ref} of the record store"
    try:
        return str(blobs.path_for(ref))
    except BlobMissingError:
        return "not a valid blob reference"


def _nested_refs(data: bytes) -> list[str]:
    if data[:1] not in (b"{", b"["):
        return []
    try:
        return list(_walk_refs(json.loads(data)))
    except (ValueError, UnicodeDecodeError):
        return []


# --- sandbox -------------------------------------------------------------------------------------------


def sandbox_manifest(f: SessionFacts) -> tuple[dict[str, str] | None, str]:
    """The latest sandbox manifest (room path -> `sha256:<hex>`) and where it was found."""
    snapshot = (f.doc or {}).get("runtime_snapshot") or {}
    for where, value in (
        ("state sandbox_manifest", (f.state or {}).get("sandbox_manifest")),
        ("runtime_snapshot sandbox_manifest", snapshot.get("sandbox_manifest")),
    ):
        if isinstance(value, dict) and isinstance(value.get("files"), dict):
            value = value["files"]
        if isinstance(value, dict) and value:
            return {str(k): str(v) for k, v in value.items()}, where
    return None, ""


def sandbox(f: SessionFacts) -> Check:
    """Sandbox manifest vs the workspace files vs their blobs."""
    if f.base is not None:
        return _store_sandbox(f)
    branch = f.session.current_branch_id if f.session is not None else MAIN_BRANCH
    room = f.ctx.room_dir(f.tenant_id, f.session_id, branch)
    files = _room_files(room)
    manifest, where = sandbox_manifest(f)
    ev: dict[str, Any] = {"room": str(room), "room_files": None if files is None else len(files)}
    if manifest is None:
        wrote = any(
            r.get("kind") == "intent" and r.get("effect") not in ("read_only", None)
            for r in f.files[JOURNAL_FILE].recs()
        )
        if files is None and wrote:
            return finding(
                "sandbox",
                "WARN",
                "no sandbox checkpoint yet, and the room is gone although tools with side effects ran",
                "mount the base_dir volume the session ran on (persistence.base_dir in the config)",
                **ev,
            )
        return finding(
            "sandbox", "OK", "no sandbox checkpoint yet; nothing to compare the room with", "nothing to do", **ev
        )
    store = f.ctx.blobs
    lost: list[str] = []
    absent: list[str] = []
    changed: list[str] = []
    for path, ref in sorted(manifest.items()):
        on_disk = (files or {}).get(path)
        if not store.exists(ref):
            lost.append(path)
        elif on_disk is None:
            absent.append(path)
        elif on_disk != ref:
            changed.append(path)
    ev.update(
        manifest_at=where,
        manifest_files=len(manifest),
        lost=lost,
        missing_in_workspace=absent,
        changed_since_snapshot=changed,
        not_in_manifest=sorted(set(files or {}) - set(manifest)),
    )
    if lost:
        return finding(
            "sandbox",
            "FAIL",
            f"files of the sandbox checkpoint whose blobs are gone: {', '.join(lost)}",
            "restore base_dir/blobs from a backup; the room cannot be restored without them",
            **ev,
        )
    if absent and not files:
        return finding(
            "sandbox",
            "WARN",
            f"the room is empty while the sandbox checkpoint lists {len(manifest)} files (all blobs present)",
            "resume restores the room from the manifest",
            **ev,
        )
    if absent or changed:
        return finding(
            "sandbox",
            "WARN",
            f"the room differs from the sandbox checkpoint ({len(absent)} missing, {len(changed)} changed)",
            "a resume keeps a non-empty room as it is; if those files were "
            "lost rather than changed on purpose, move the room aside and resume: it is restored from "
            "the manifest",
            **ev,
        )
    return finding(
        "sandbox", "OK", f"the room matches the sandbox checkpoint ({len(manifest)} files)", "nothing to do", **ev
    )


def _store_sandbox(f: SessionFacts) -> Check:
    """On the PostgreSQL store a room is a machine's working copy: the manifest's blobs are the room."""
    manifest, where = sandbox_manifest(f)
    if manifest is None:
        return finding("sandbox", "OK", "no sandbox checkpoint yet; nothing to check", "nothing to do")
    lost = [path for path, ref in sorted(manifest.items()) if not f.ctx.blobs.exists(ref)]
    ev: dict[str, Any] = {"manifest_at": where, "manifest_files": len(manifest), "lost": lost}
    if lost:
        return finding(
            "sandbox",
            "FAIL",
            f"files of the sandbox checkpoint whose blobs are gone: {', '.join(lost)}",
            "restore the jsonl_blobs rows from a database backup; the room cannot be restored without them",
            **ev,
        )
    return finding(
        "sandbox",
        "OK",
        f"the sandbox checkpoint's {len(manifest)} files are in the store's blobs "
        "(a machine without the room restores it from them)",
        "nothing to do",
        **ev,
    )


def _room_files(room: Path) -> dict[str, str] | None:
    if not room.is_dir():
        return None
    out: dict[str, str] = {}
    for dirpath, _, names in os.walk(room):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            try:
                out[path.relative_to(room).as_posix()] = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                continue
    return out


# --- lease -----------------------------------------------------------------------------------------------


def lease(f: SessionFacts) -> Check:
    """The lease holder and expiry, read without acquiring it."""
    info = lease_info(f)
    kind, now = info.pop("kind"), time.time()
    if kind == "memory":
        return finding(
            "lease",
            "WARN",
            "in-process lease: it cannot stop a second process or host from resuming",
            "set persistence.lease: file (one host), or redis or postgres (several hosts)",
            **info,
        )
    holder, expires = info.get("holder"), info.get("expires_at")
    if info.get("error"):
        what = f"lease state unreadable: {info['error']}"
        return finding("lease", "WARN", what, "check Redis / PostgreSQL / base_dir", **info)
    if holder is None:
        return finding("lease", "OK", f"free ({kind} lease)", "nothing to do", **info)
    info["expires_in_s"] = round(expires - now, 1) if isinstance(expires, float) else None
    locked = info.get("lock_held")
    if locked is False:
        return finding(
            "lease",
            "WARN",
            f"stale lease.json of {holder}: its process is gone and the lock is free",
            "nothing to do: the next run or resume takes the lease over",
            **info,
        )
    if isinstance(expires, float) and expires < now and locked:
        return finding(
            "lease",
            "FAIL",
            f"held by {holder}, whose lease expired {now - expires:.0f}s ago while its "
            "lock is still held: that process is alive but stuck",
            f"stop the holder ({holder})",
            **info,
        )
    return finding(
        "lease",
        "WARN",
        f"held by {holder} until {_iso(expires)}: a run of this session is in progress",
        "wait for it to finish or expire, then resume; never start a second worker on it",
        **info,
    )


def _iso(ts: Any) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if isinstance(ts, float) else "unknown"


def lease_info(f: SessionFacts) -> dict[str, Any]:
    """The lease's kind, holder, expiry (unix time) and, for the file lease, whether the lock is held."""
    held = f.ctx.lease
    if isinstance(held, FileLease):
        return _file_lease(f.dir)
    if isinstance(held, RedisLease):
        key = held.lease_key(f.tenant_id, f.session_id)
        try:
            value, pttl = held.client.get(key), held.client.pttl(key)
        except Exception as err:
            return {"kind": "redis", "key": key, "error": f"{type(err).__name__}: {err}"}
        if value is None:
            return {"kind": "redis", "key": key}
        token, _, holder = (value.decode() if isinstance(value, bytes) else str(value)).partition("|")
        expires = time.time() + int(pttl) / 1000 if isinstance(pttl, int) and pttl >= 0 else None
        return {"kind": "redis", "key": key, "holder": holder, "token": token, "expires_at": expires, "lock_held": True}
    if isinstance(held, InProcessLease):
        slot = held._slots.get((f.tenant_id, f.session_id))
        grant = slot.grant if slot is not None else None
        return {
            "kind": "memory",
            "holder": grant.holder if grant else None,
            "expires_at": grant.expires_at if grant else None,
        }
    from agent.session.lease_postgres import PostgresLease  # psycopg: only for a lease of none of the kinds above

    if isinstance(held, PostgresLease):
        where = {"kind": "postgres", "table": held.table_name, "database": f"{held.where}/{held.dbname}"}
        try:
            row = held.state(f.tenant_id, f.session_id)
        except AgentrtError as err:
            return {**where, "error": str(err)}
        if row.get("holder") is None:
            return {**where, "token": row.get("token")}
        return {**where, **row, "lock_held": True}
    return {"kind": type(held).__name__, "error": "unknown lease type: cannot be inspected"}


def _file_lease(directory: Path) -> dict[str, Any]:
    files = lease_files(directory)
    info: dict[str, Any] = {"kind": "file", "path": str(files.state)}
    try:
        doc = read_lease_state(files.state)
    except DataCorrupt as err:
        return {**info, "error": str(err)}
    except OSError as err:
        return {**info, "error": f"lease.json unreadable ({err})"}
    if "holder" in doc:
        info.update(holder=doc["holder"], token=doc.get("token"), expires_at=doc.get("expires_at"))
    pid = _flock_pid(files.lock)
    info["lock_held"] = None if pid == -1 else pid is not None
    if pid not in (None, -1):
        info["lock_pid"] = pid
    return info


def _flock_pid(path: Path) -> int | None:
    """The pid holding a flock on `path` per /proc/locks; None when unlocked, -1 when unknown."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return -1
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        parts = line.split()
        if "->" in parts:  # a waiter, not the holder
            continue
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == want:
            return int(parts[4]) if parts[4].isdigit() else -1
    return None
