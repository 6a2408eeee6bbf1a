"""A session as an export carries it: its logical content, not the paths of one store.

Streams are the session's record logs, one framed record line each (bytes without the newline,
checksum included), so writing them back gives the identical file. Documents are the one-record
files (`session.json`, `pins.json`). Rooms are the sandbox folders by branch (`main` and each
fork's), as relative POSIX paths. Blobs are the content-addressed payloads the records reference
(kept beside the images: two sessions may share one).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from checkpointing.ids import UNSAFE_CATEGORIES, shown
from checkpointing.layout import EVENTS_FILE, INBOX_FILE, JOURNAL_FILE, OUTBOX_FILE, PINS_FILE, SESSION_FILE

STREAMS: dict[str, str] = {
    "events": EVENTS_FILE,
    "journal": JOURNAL_FILE,
    "outbox": OUTBOX_FILE,
    "inbox": INBOX_FILE,
}
"""Stream name -> its file in the session folder; `checkpoints` (one per run) lives under runs/<run>/."""
CHECKPOINTS = "checkpoints"
DOCUMENTS: dict[str, str] = {"session": SESSION_FILE, "pins": PINS_FILE}
"""Document name -> its file in the session folder."""

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255


@dataclass(frozen=True)
class RoomEntry:
    """One directory or regular file of a sandbox room."""

    path: str
    """Relative POSIX path inside the room (checked by `check_room_path`)."""
    mode: int
    """Permission bits (0o777 at most)."""
    data: bytes | None = None
    """The file's bytes; None for a directory."""


@dataclass
class SessionImage:
    """Everything an export carries of one session."""

    tenant_id: str
    session_id: str
    user_id: str
    fence: int
    """The highest fencing token the session ever had (fence, lease counter, records)."""
    index: dict[str, Any]
    """The session's index attributes (status, times, version, searchable values)."""
    documents: dict[str, bytes] = field(default_factory=dict)
    """Document name (`DOCUMENTS`) -> its framed record line (without the newline)."""
    streams: dict[tuple[str, str | None], list[bytes]] = field(default_factory=dict)
    """(stream name, run id for `checkpoints` else None) -> its record lines (without newlines)."""
    rooms: dict[str, list[RoomEntry]] = field(default_factory=dict)
    """Branch id -> its room's directories and files, sorted by path."""
    blob_refs: set[str] = field(default_factory=set)
    """Hex digests of the blobs this session needs (every one is carried)."""


class RoomPathError(ValueError):
    """A room path that could land outside its room or is not a plain relative path."""


def check_room_path(path: object) -> str:
    """`path` if it is a plain relative POSIX path (no `..`, `.`, empty or absolute part, no
    backslash, control or format character, no part over 255 bytes), else `RoomPathError`."""
    if not isinstance(path, str) or not path:
        raise RoomPathError(f"room path {shown(path)} is not a relative path")
    bad = (
        path.startswith("/")
        or "\\" in path
        or len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES
        or any(unicodedata.category(c) in UNSAFE_CATEGORIES for c in path)
    )
    parts = path.split("/")
    if bad or any(p in ("", ".", "..") or len(p.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES for p in parts):
        raise RoomPathError(f"room path {shown(path)} leaves its room")
    return path


_HARD_REF = re.compile(rb'"\$blob":"sha256:([0-9a-f]{64})"')
_ANY_REF = re.compile(rb"sha256:([0-9a-f]{64})")


def blob_digests(data: bytes) -> tuple[set[str], set[str]]:
    """(digests `data` references as `{"$blob": ...}` objects, every `sha256:<hex>` it names).

    The first set must be in the blob store; the second also holds sandbox manifests' file
    digests (blobs too) and digests of other things (arguments, texts), which are not blobs."""
    hard = {m.decode("ascii") for m in _HARD_REF.findall(data)}
    return hard, {m.decode("ascii") for m in _ANY_REF.findall(data)}
