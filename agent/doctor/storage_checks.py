"""The doctor's checks of what lives beside the records: blobs and the sandbox room.

"File results vanished" (the troubleshooting table: sandbox checkpoint, workspace binding, blob
volume), read-only: blobs are read and hashed, the room is listed and hashed. The lease, the other
thing beside the records, is agent/doctor/lease_check.py.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent.doctor.facts import Check, SessionFacts
from agent.doctor.finding import finding
from checkpointing.blobs import BLOB_KEY, BlobStore, is_blob_ref
from checkpointing.exceptions import BlobCorruptError, BlobMissingError
from checkpointing.layout import EVENTS_FILE, JOURNAL_FILE, MAIN_BRANCH

MAX_REFERRERS = 8


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
