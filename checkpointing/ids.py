"""Validation of ids that become path components."""

from __future__ import annotations

import re

from checkpointing.errors import InvalidIdError

_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def validate_id(value: object, what: str = "id") -> str:
    """Return `value` if it is safe as one path component, else raise `InvalidIdError`.

    Allowed: 1-64 characters of letters, digits, `_` and `-`, or a canonical UUID.
    """
    if not isinstance(value, str) or not (_ID_RE.fullmatch(value) or _UUID_RE.fullmatch(value)):
        shown = value if isinstance(value, str) and len(value) <= 80 else f"{str(value)[:80]}..."
        raise InvalidIdError(f"invalid {what} {shown!r}: use 1-64 letters, digits, '_' or '-' (or a UUID)")
    return value
