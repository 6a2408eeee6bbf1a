"""Text that reaches a human (a terminal, a log line, the page): ids and names from the outside are
data, never terminal commands.

`printable` and `shown` (checkpointing.ids) escape and shorten; `json_safe` keeps JSON exact
(every string decodes to what it was) while no control, format or separator character is written
raw: it is written as a JSON `\\uNNNN` escape instead.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from checkpointing.ids import SHOWN_CHARS, UNSAFE_CATEGORIES, printable, shown

__all__ = [
    "SHOWN_CHARS",
    "SHOWN_PATH_CHARS",
    "display_url",
    "json_safe",
    "printable",
    "printable_all",
    "shown",
    "shown_path",
]

SHOWN_PATH_CHARS = 120
"""How much of a path a message echoes (`shown_path`)."""

_NOT_PLAIN_ASCII = re.compile(r"[^\n\x20-\x7e]")


def _json_escape(match: re.Match[str]) -> str:
    ch = match.group()
    if unicodedata.category(ch) not in UNSAFE_CATEGORIES:
        return ch
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # beyond the BMP: a surrogate pair, as JSON writes it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_safe(doc: str) -> str:
    """`doc`, a JSON text from `json.dumps` (which escapes only C0 controls in strings), with every
    other unsafe character as a JSON escape; a raw newline there is the layout (`indent`) and stays."""
    return _NOT_PLAIN_ASCII.sub(_json_escape, doc)


def printable_all(value: Any) -> Any:
    """`value` with every string in it (dict keys and values, list items) made `printable`."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_all(k): printable_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_all(v) for v in value]
    return value


def shown_path(path: object, limit: int = SHOWN_PATH_CHARS) -> str:
    """A file path as a message echoes it: escaped (`printable`), and when longer than `limit`
    characters its start and its end (the file's name) around an ellipsis, with its length."""
    text = printable(str(path))
    if len(text) <= limit:
        return text
    head = limit // 3
    return f"{text[:head]}…{text[-(limit - head) :]} ({len(text)} characters)"


def display_url(url: str) -> str:
    """The URL with any password masked, safe for summaries, events and error messages."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from checkpointing.digest import is_secret_key

    location = url.rpartition("#")[0] if "#" in url else url
    try:
        parsed = make_url(location)
    except (ArgumentError, ValueError):
        return "<unparseable url>"
    if parsed.query:
        parsed = parsed.set(
            query={k: ("***" if is_secret_key(k) or "pass" in k.lower() else v) for k, v in parsed.query.items()}
        )
    return parsed.render_as_string(hide_password=True)
