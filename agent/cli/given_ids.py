"""The ids and names a command line gives, checked before anything is opened or created.

An id that can never be valid (empty, `../x`, one with a control character, 10,000 characters) is
bad input: exit 2 with one short line saying what an id looks like, before any store is opened,
so a refused command leaves nothing behind. A well-formed id that names nothing is the command's
own "not found" (exit 3).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from checkpointing.ids import UNSAFE_CATEGORIES, shown, validate_call_id, validate_id

MAX_NAME_CHARS = 128


def _name(value: str, what: str) -> str:
    import unicodedata

    if not value.strip():
        raise ValueError(f"{what} must not be empty")
    if len(value) > MAX_NAME_CHARS or any(unicodedata.category(c) in UNSAFE_CATEGORIES for c in value):
        raise ValueError(
            f"invalid {what} {shown(value)}: use at most {MAX_NAME_CHARS} characters, no control characters"
        )
    return value


# argparse destination -> (what it is, its check, where the user finds a valid one)
CHECKS: dict[str, tuple[str, Callable[[str, str], str], str]] = {
    "session_id": ("session id", validate_id, "`agentrt sessions` lists them"),
    "session": ("session id", validate_id, "`agentrt sessions` lists them"),
    "new_session": ("session id", validate_id, "or leave --new-session out for a fresh one"),
    "tenant": ("tenant id", validate_id, "or leave --tenant out for the config's"),
    "user": ("user id", validate_id, "or leave --user out for every user"),
    "erase_tenant": ("tenant id", validate_id, "`agentrt sessions --tenant T` lists a tenant's sessions"),
    "erase_user": ("user id", validate_id, "`agentrt sessions --tenant T --user U` lists a user's sessions"),
    "from_entry": ("entry id", validate_id, "`agentrt show ID` lists them"),
    "branch": ("branch id", validate_id, "`agentrt show ID` lists them"),
    "branch_name": ("branch name", validate_id, "e.g. east-only"),
    "interrupt": ("approval id", validate_id, "`agentrt show ID` prints the pending one"),
    "turn_id": ("turn id", validate_id, "`agentrt submit` prints it"),
    "call_id": ("call id", validate_call_id, "`agentrt show ID` lists them"),
    "operator": ("operator name", _name, "e.g. --operator alice"),
}


def check_ids(args: argparse.Namespace) -> None:
    """Raise `InputError` (exit 2) for the first id or name of `args` that can never be valid."""
    from agent.core.errors import InputError

    for dest, (what, check, hint) in CHECKS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        try:
            check(value, what)
        except ValueError as err:  # InvalidIdError is one
            raise InputError(f"{err}; {hint}") from None
