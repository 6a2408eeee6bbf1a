"""The export file: JSON Lines, one object a line, every line ASCII with sorted keys.

    {"kind":"agentrt-export","sessions":N,"version":1}
    per session:
      {"fence":F,"index":{...},"kind":"session","session":ID,"tenant":T,"user":U}
      {"kind":"document","line":"<framed record>","name":"session"|"pins"}
      {"kind":"stream","name":"events"|"journal"|"outbox"|"inbox"|"checkpoints","records":K,"run":RUN|null}
      K x {"kind":"record","line":"<framed record>"}
      {"branch":B,"kind":"dir","mode":M,"path":P}
      {"branch":B,"data":"<base64>","kind":"file","mode":M,"path":P}
      {"data":"<base64>","kind":"blob","sha256":HEX}      (each blob once, after its first session)
    {"kind":"end","lines":L,"sessions":N,"sha256":HEX}

A record line is carried as the string of its bytes, so an import writes the identical line
(checksum included). The last line counts the lines before it and holds the SHA-256 of their
bytes: a file cut short, or changed, is refused whole before anything is written. Nothing in the
file is trusted: every id is checked like a command-line id, every room path must stay in its
room, every record must verify, every blob must hash to its name, and nothing is unpickled.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from agent.core.errors import InputError
from agent.session.session import ChatSession
from agent.transfer.image import (
    CHECKPOINTS,
    DOCUMENTS,
    STREAMS,
    RoomEntry,
    RoomPathError,
    SessionImage,
    check_room_path,
)
from checkpointing.exceptions import InvalidIdError
from checkpointing.ids import shown, validate_id
from checkpointing.layout import MAIN_BRANCH
from checkpointing.records import decode_record, verify_line

KIND = "agentrt-export"
VERSION = 1
_HEX64 = frozenset("0123456789abcdef")


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii") + b"\n"


class ExportWriter:
    """Writes an export file to a binary stream and closes it with the counting, checksummed line."""

    def __init__(self, out: IO[bytes], sessions: int) -> None:
        self.out = out
        self.sessions = sessions
        self.lines = 0
        self.digest = hashlib.sha256()
        self.blobs_written: set[str] = set()
        self._put({"kind": KIND, "version": VERSION, "sessions": sessions})

    def _put(self, obj: dict[str, Any]) -> None:
        data = _line(obj)
        self.digest.update(data)
        self.out.write(data)
        self.lines += 1

    def session(self, image: SessionImage, blobs: dict[str, bytes]) -> None:
        """Write one session, then the blobs it needs that no earlier session carried."""
        self._put(
            {
                "kind": "session",
                "tenant": image.tenant_id,
                "session": image.session_id,
                "user": image.user_id,
                "fence": image.fence,
                "index": image.index,
            }
        )
        for name, doc in sorted(image.documents.items()):
            self._put({"kind": "document", "name": name, "line": doc.decode("utf-8")})
        for (name, run), lines in sorted(image.streams.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            self._put({"kind": "stream", "name": name, "run": run, "records": len(lines)})
            for rec in lines:
                self._put({"kind": "record", "line": rec.decode("utf-8")})
        for branch, entries in sorted(image.rooms.items()):
            for e in entries:
                if e.data is None:
                    self._put({"kind": "dir", "branch": branch, "path": e.path, "mode": e.mode})
                else:
                    data = base64.b64encode(e.data).decode("ascii")
                    self._put({"kind": "file", "branch": branch, "path": e.path, "mode": e.mode, "data": data})
        for hexdigest in sorted(image.blob_refs - self.blobs_written):
            self._put({"kind": "blob", "sha256": hexdigest, "data": base64.b64encode(blobs[hexdigest]).decode("ascii")})
            self.blobs_written.add(hexdigest)

    def close(self) -> None:
        """Write the last line (counts and checksum of every line before it)."""
        self.out.write(
            _line({"kind": "end", "sessions": self.sessions, "lines": self.lines, "sha256": self.digest.hexdigest()})
        )
        self.out.flush()


@dataclass
class ExportFile:
    """A checked export file: its sessions and the blobs they carry (hex digest -> bytes)."""

    images: list[SessionImage] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)


class _Bad(Exception):
    """A reason the file is refused (turned into one `InputError` naming the file and line)."""


def read_export(data: bytes, name: str) -> ExportFile:
    """Check the whole file `data` (named `name` in messages) and return its sessions; raise
    `InputError` (exit 2) for anything that is not a complete, intact export."""
    redo = "nothing was imported: export again with `agentrt export ID > FILE`"
    if not data.strip():
        raise InputError(f"{name} is empty, not an agentrt export file; {redo}")
    lines = data.split(b"\n")
    if lines[-1] != b"":
        raise InputError(f"{name} is cut short (its last line is incomplete); {redo}")
    lines.pop()
    n = 0
    try:
        _check_end(lines, data)
        out = ExportFile()
        image: SessionImage | None = None
        stream: list[bytes] | None = None
        left = 0
        for n, raw in enumerate(lines[:-1], start=1):
            rec = _object(raw)
            kind = rec.get("kind")
            if n == 1:
                _check_header(rec)
                continue
            if left and kind != "record":
                raise _Bad(f"stream ended after {len(stream or [])} records, {left} more expected")
            if kind == "session":
                image = _session(rec)
                out.images.append(image)
            elif kind == "blob":
                hexdigest, blob = _blob(rec)
                out.blobs[hexdigest] = blob
            elif image is None:
                raise _Bad(f"a {shown(kind)} line before any session line")
            elif kind == "document":
                _document(image, rec)
            elif kind == "stream":
                stream, left = _stream(image, rec)
            elif kind == "record":
                if stream is None or not left:
                    raise _Bad("a record line outside a stream")
                stream.append(_record(rec.get("line")))
                left -= 1
            elif kind in ("dir", "file"):
                _room_entry(image, rec)
            else:
                raise _Bad(f"unknown line kind {shown(kind)}")
        if left:
            raise _Bad(f"the last stream lacks {left} records")
        header = _object(lines[0])
        if header.get("sessions") != len(out.images):
            raise _Bad(f"the header announces {header.get('sessions')} sessions, the file holds {len(out.images)}")
        n = 0
        for image in out.images:
            _check_image(image, out.blobs)
    except _Bad as err:
        where = f" line {n}" if n else ""
        raise InputError(f"{name}{where}: not a valid agentrt export ({err}); {redo}") from None
    return out


def _object(raw: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise _Bad("not a JSON line") from None
    if not isinstance(obj, dict):
        raise _Bad("not a JSON object")
    return obj


def _check_end(lines: list[bytes], data: bytes) -> None:
    """The last line must count every line before it and hold the SHA-256 of their bytes."""
    if len(lines) < 2:
        raise _Bad("no end line: the file is cut short")
    try:
        end = json.loads(lines[-1])
    except (ValueError, UnicodeDecodeError):
        end = None
    if not isinstance(end, dict) or end.get("kind") != "end":
        raise _Bad("no end line: the file is cut short")
    body = data[: len(data) - len(lines[-1]) - 1]
    if end.get("lines") != len(lines) - 1 or end.get("sha256") != hashlib.sha256(body).hexdigest():
        raise _Bad("its checksum does not match: the file was cut or changed")


def _check_header(rec: dict[str, Any]) -> None:
    if rec.get("kind") != KIND:
        raise _Bad("the first line is not an agentrt-export header")
    if rec.get("version") != VERSION:
        raise _Bad(f"format version {shown(rec.get('version'))}, this agentrt reads version {VERSION}")


def _id(value: object, what: str) -> str:
    try:
        return validate_id(value, what)
    except InvalidIdError as err:
        raise _Bad(str(err)) from None


def _int(value: object, what: str, top: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or (top is not None and value > top):
        raise _Bad(f"{what} {shown(value)} is not a valid number")
    return value


def _session(rec: dict[str, Any]) -> SessionImage:
    index = rec.get("index")
    if not isinstance(index, dict):
        raise _Bad("a session line without its index attributes")
    return SessionImage(
        tenant_id=_id(rec.get("tenant"), "tenant id"),
        session_id=_id(rec.get("session"), "session id"),
        user_id=_id(rec.get("user"), "user id"),
        fence=_int(rec.get("fence"), "fencing token"),
        index=index,
    )


def _record(line: object) -> bytes:
    if not isinstance(line, str) or "\n" in line:
        raise _Bad("a record that is not one line of text")
    raw = line.encode("utf-8", "surrogatepass")
    try:
        verify_line(raw)
    except ValueError as err:
        raise _Bad(f"a record does not verify: {err}") from None
    return raw


def _document(image: SessionImage, rec: dict[str, Any]) -> None:
    name = rec.get("name")
    if name not in DOCUMENTS or name in image.documents:
        raise _Bad(f"unknown or repeated document {shown(name)}")
    image.documents[str(name)] = _record(rec.get("line"))


def _stream(image: SessionImage, rec: dict[str, Any]) -> tuple[list[bytes], int]:
    name, run = rec.get("name"), rec.get("run")
    key: tuple[str, str | None]
    if name == CHECKPOINTS:
        key = (CHECKPOINTS, _id(run, "run id"))
    elif name in STREAMS and run is None:
        key = (str(name), None)
    else:
        raise _Bad(f"unknown stream {shown(name)}")
    if key in image.streams:
        raise _Bad(f"stream {shown(name)} appears twice")
    lines: list[bytes] = []
    image.streams[key] = lines
    return lines, _int(rec.get("records"), "record count")


def _room_entry(image: SessionImage, rec: dict[str, Any]) -> None:
    branch = rec.get("branch")
    branch = MAIN_BRANCH if branch == MAIN_BRANCH else _id(branch, "branch id")
    try:
        path = check_room_path(rec.get("path"))
    except RoomPathError as err:
        raise _Bad(str(err)) from None
    mode = _int(rec.get("mode"), "file mode", 0o777)
    data = None
    if rec.get("kind") == "file":
        data = _base64(rec.get("data"))
    image.rooms.setdefault(branch, []).append(RoomEntry(path, mode, data))


def _base64(value: object) -> bytes:
    if not isinstance(value, str):
        raise _Bad("content that is not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _Bad("content that is not valid base64") from None


def _blob(rec: dict[str, Any]) -> tuple[str, bytes]:
    hexdigest = rec.get("sha256")
    if not isinstance(hexdigest, str) or len(hexdigest) != 64 or not set(hexdigest) <= _HEX64:
        raise _Bad(f"a blob named {shown(hexdigest)}, not 64 lowercase hex digits")
    data = _base64(rec.get("data"))
    if hashlib.sha256(data).hexdigest() != hexdigest:
        raise _Bad(f"blob {hexdigest} does not match its digest")
    return hexdigest, data


def _check_image(image: SessionImage, blobs: dict[str, bytes]) -> None:
    """What must hold across a session's lines: its documents name it, its rooms do not clash."""
    from agent.transfer.image import blob_digests

    sid = image.session_id
    if "session" not in image.documents or ("events", None) not in image.streams:
        raise _Bad(f"session {sid} lacks its session document or its event log")
    try:
        doc = ChatSession.from_json(decode_record(image.documents["session"]))
        head = decode_record(image.streams[("events", None)][0]) if image.streams[("events", None)] else {}
    except ValueError as err:
        raise _Bad(f"session {sid}: its session document does not read ({err})") from None
    if (doc.tenant_id, doc.session_id, doc.user_id) != (image.tenant_id, sid, image.user_id):
        raise _Bad(f"session {sid}: its session document names another session, tenant or user")
    if (head.get("tenant_id"), head.get("session_id")) != (image.tenant_id, sid):
        raise _Bad(f"session {sid}: its event log names another session or tenant")
    for branch, entries in image.rooms.items():
        files = {e.path for e in entries if e.data is not None}
        paths = [e.path for e in entries]
        if len(set(paths)) != len(paths):
            raise _Bad(f"session {sid}: room {branch} names a path twice")
        for path in paths:
            parents = path.split("/")[:-1]
            if any("/".join(parents[: i + 1]) in files for i in range(len(parents))):
                raise _Bad(f"session {sid}: room {branch} has {shown(path)} inside a file")
    needed: set[str] = set()
    for rec in _all_lines(image):
        needed |= blob_digests(rec)[0]
    image.blob_refs = needed | (_carried(image, blobs) & set(blobs))
    missing = needed - set(blobs)
    if missing:
        raise _Bad(f"session {sid} references blob {min(missing)}, which the file does not carry")


def _all_lines(image: SessionImage) -> Iterable[bytes]:
    yield from image.documents.values()
    for lines in image.streams.values():
        yield from lines


def _carried(image: SessionImage, blobs: dict[str, bytes]) -> set[str]:
    """Every digest the session's records name that the file carries (manifest files included)."""
    from agent.transfer.image import blob_digests

    out: set[str] = set()
    for rec in _all_lines(image):
        out |= blob_digests(rec)[1]
    queue = [d for d in out if d in blobs]
    while queue:  # a blob may itself reference blobs
        for inner in blob_digests(blobs[queue.pop()])[1]:
            if inner not in out:
                out.add(inner)
                if inner in blobs:
                    queue.append(inner)
    return out
