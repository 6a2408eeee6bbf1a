"""Ids that become path components: their validation, and how any id is echoed to a human.

An id from the outside is data, never a terminal command: `printable` escapes every character that
a terminal or a log reader would act on instead of showing, and `shown` is an id as a message
quotes it, escaped and cut to a length a one-line error can carry.
"""

from __future__ import annotations

import re
import unicodedata

from checkpointing.exceptions import InvalidIdError

_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_CALL_ID_RE = re.compile(r"^[A-Za-z0-9_.:@+=-]{1,128}$")

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories never echoed raw: controls (C0, DEL, C1 such as the one-byte CSI 0x9B), format
characters (bidi overrides such as U+202E, zero-width ones), lone surrogates (bytes that were not
UTF-8), and the line and paragraph separators U+2028 / U+2029."""

SHOWN_CHARS = 64
"""How much of an id a message echoes; a longer one is cut there, with its length said."""


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: str, keep: str = "") -> str:
    """`text` with every character of `UNSAFE_CATEGORIES` (except those in `keep`, e.g. "\\n\\t" for a
    multi-line text) written as `\\xNN`, `\\uNNNN` or `\\UNNNNNNNN`; everything else as it is.

    Applying it twice changes nothing more: its output holds no unsafe character.
    """
    if text.isprintable():  # the common case, at C speed: no control, format or separator character
        return text
    return "".join(
        _escape(c) if not c.isprintable() and c not in keep and unicodedata.category(c) in UNSAFE_CATEGORIES else c
        for c in text
    )


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """An id as a message echoes it: quoted and escaped as Python writes a string (every unsafe
    character as an escape), and when longer than `limit` characters its start, an ellipsis and its
    length, e.g. `'aaaa…' (10000 characters)`."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit] + '…'!r} ({len(text)} characters)"


def validate_id(value: object, what: str = "id") -> str:
    """Return `value` if it is safe as one path component, else raise `InvalidIdError`.

    Allowed: 1-64 characters of letters, digits, `_` and `-`, or a canonical UUID.
    """
    if value == "":
        raise InvalidIdError(f"{what} must not be empty")
    if not isinstance(value, str) or not (_ID_RE.fullmatch(value) or _UUID_RE.fullmatch(value)):
        raise InvalidIdError(f"invalid {what} {shown(value)}: use 1-64 letters, digits, '_' or '-' (or a UUID)")
    return value


def is_call_id(value: object) -> bool:
    """Whether `value` can be a tool call id: 1-128 letters, digits or `_ . : @ + = -` (what model
    servers write, e.g. `call_3_1`, `toolu_01A…`, `functions.add:0`); a reply's call id of any other
    form is replaced before it is stored."""
    return isinstance(value, str) and _CALL_ID_RE.fullmatch(value) is not None


def validate_call_id(value: object, what: str = "call id") -> str:
    """Return `value` if `is_call_id`, else raise `InvalidIdError`."""
    if value == "":
        raise InvalidIdError(f"{what} must not be empty")
    if not is_call_id(value):
        raise InvalidIdError(f"invalid {what} {shown(value)}: use 1-128 letters, digits or '_.:@+=-'")
    return str(value)
