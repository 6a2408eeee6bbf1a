"""The forms of a session's records on disk: schema versions, the item record's bytes, and the
compact checkpoint form (`disk_form`) read back to plain pairs (`checked_record`).

Every record is one JSON line framed by `checkpointing.records`; see `_saver_docs` for the fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from checkpointing.exceptions import CorruptCheckpointError, UnknownSchemaError
from checkpointing.records import frame

SCHEMA_VERSION = 4
"""The schema version records are written with, but for a checkpoint record that holds
`histories` (retention kept its DeltaChannel history in it): `HISTORIES_SCHEMA_VERSION`, so that a
saver from before cannot misread it as a checkpoint whose history starts at its missing parent.
4: a checkpoint record lists the distinct homes of its channels once (`homes`) and `task_state`
maps a channel to an index into that list, and `parent_writes` holds one `[task_id, idx, ...]` per
task (each checkpoint repeated an 18-channel map of 36-character ids, and a task id per write: a
quarter of its bytes). 3: `task_state` maps a channel to its home id; 2: `[version, home]` pairs.
All three are read, and every form reads back as pairs (and `[task_id, idx]` pairs)."""
HISTORIES_SCHEMA_VERSION = 5
"""5: a checkpoint record may hold `histories` (see `_saver_docs.HISTORIES`); otherwise as 4."""
READABLE_SCHEMA_VERSIONS = frozenset({2, 3, SCHEMA_VERSION, HISTORIES_SCHEMA_VERSION})
ITEM_SCHEMA_VERSION = 3
"""The schema version item records are written with (their form has not changed since 3)."""


def item_frame(h: str, raw: bytes) -> bytes:
    """The framed item record holding JSON `raw` under its content hash `h`.

    The item record's body is built here from the value's JSON bytes as stored (no re-encoding of
    a large value); its framing is `records.frame`'s. `_item_hash` reads the hash back from a
    verified body of this form: the two are the one place that knows the item body's byte order."""
    return frame(b'{"k":"i","schema_version":%d,"h":"%s","v":%s}' % (ITEM_SCHEMA_VERSION, h.encode(), raw))


ITEM_HEAD = b'{"k":"i","schema_version":%d,"h":"' % ITEM_SCHEMA_VERSION


def item_hash(body: bytes) -> str | None:
    """The hash of an item record as `item_frame` writes it (None for any other record)."""
    if not body.startswith(ITEM_HEAD):
        return None
    end = body.find(b'","v":', len(ITEM_HEAD))
    return body[len(ITEM_HEAD) : end].decode("ascii") if end != -1 else None


def task_pairs(rec: dict[str, Any]) -> dict[str, list[Any]]:
    """A checkpoint record's `task_state` as {channel: [version, home]}, from any on-disk form."""
    versions = rec.get("channel_versions") or {}
    homes = rec.get("homes") or []
    out: dict[str, list[Any]] = {}
    for ch, v in (rec.get("task_state") or {}).items():
        if type(v) is int:
            out[ch] = [versions.get(ch), homes[v]]
        elif isinstance(v, str):
            out[ch] = [versions.get(ch), v]
        else:
            out[ch] = v
    return out


def write_pairs(rec: dict[str, Any]) -> list[list[Any]]:
    """A checkpoint record's `parent_writes` as `[task_id, idx]` pairs, from either on-disk form."""
    return [[w[0], i] for w in rec.get("parent_writes") or [] for i in w[1:]]


def disk_form(rec: dict[str, Any]) -> dict[str, Any]:
    """The record as written (schema 4): a checkpoint's `task_state` maps a channel whose version is
    the one in `channel_versions` (every channel, as the saver writes them) to the index of its
    home in `homes`, and `parent_writes` groups the indexes of each task."""
    if rec.get("k") != "c":
        return rec
    versions = rec.get("channel_versions") or {}
    homes: list[str] = []
    at: dict[str, int] = {}
    compact: dict[str, Any] = {}
    for ch, v in rec["task_state"].items():
        if type(v) is list and len(v) == 2 and isinstance(v[1], str) and ch in versions and v[0] == versions[ch]:
            if v[1] not in at:
                at[v[1]] = len(homes)
                homes.append(v[1])
            compact[ch] = at[v[1]]
        else:
            compact[ch] = v
    grouped: dict[str, list[Any]] = {}
    for task, idx in rec.get("parent_writes") or []:
        grouped.setdefault(task, [task]).append(idx)
    return {
        **rec,
        "task_state": compact,
        "homes": homes,
        "parent_writes": list(grouped.values()),
        "schema_version": HISTORIES_SCHEMA_VERSION if rec.get("histories") else SCHEMA_VERSION,
    }


def parse_record(body: bytes, path: Path, line: int) -> dict[str, Any]:
    return checked_record(orjson.loads(body), path, line)


def checked_record(rec: Any, path: Path, line: int) -> dict[str, Any]:
    version = rec.get("schema_version") if isinstance(rec, dict) else None
    if version not in READABLE_SCHEMA_VERSIONS:
        raise UnknownSchemaError(
            f"{path}:{line}: checkpoint record has schema_version {version!r}; this saver reads "
            f"{sorted(READABLE_SCHEMA_VERSIONS)}. Read the thread with the version of the saver that wrote "
            "it; nothing was changed on disk."
        )
    if rec.get("k") == "c":
        try:
            rec["task_state"] = task_pairs(rec)
            rec["parent_writes"] = write_pairs(rec)
        except (IndexError, TypeError, KeyError) as err:
            raise CorruptCheckpointError(str(path), line, f"checkpoint record is malformed ({err!r})") from err
        rec.pop("homes", None)
    return rec
