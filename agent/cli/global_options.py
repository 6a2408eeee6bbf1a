"""The options every command shares, accepted before the command as well as after it.

`agentrt --config F sessions` and `agentrt sessions --config F` mean the same. The options before
the command are moved to just after its name before parsing, so the command's own parser reads
them: a value given after the command wins over one given before it (argparse keeps the last), and
no subcommand default can overwrite a value given before the command. A command that does not take
an option given before it refuses it, as it would after it (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

GLOBAL_VALUES = ("--config", "--tenant", "--user")
"""Options before the command that take a value."""
GLOBAL_FLAGS = ("--json",)
"""Options before the command that take none."""
_TOP_ONLY = ("--help", "--version")


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """Show the shared options in the top-level help (`split_leading` handles them before parsing)."""
    group = parser.add_argument_group("options every command takes, before or after its name")
    group.add_argument("--config", metavar="F", default=argparse.SUPPRESS, help="YAML config")
    group.add_argument("--tenant", metavar="T", default=argparse.SUPPRESS, help="tenant id")
    group.add_argument("--user", metavar="U", default=argparse.SUPPRESS, help="user id")
    group.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="one JSON object")


def _resolve(option: str) -> str | None:
    """The full name of `option` (a unique prefix of it, as argparse accepts), or None."""
    if option in GLOBAL_VALUES + GLOBAL_FLAGS + _TOP_ONLY:
        return option
    matches = [o for o in GLOBAL_VALUES + GLOBAL_FLAGS + _TOP_ONLY if len(option) > 2 and o.startswith(option)]
    return matches[0] if len(matches) == 1 else None


def split_leading(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the shared options before the command, the rest from the command's name on).

    Stops at the first word that is not a shared option (the command, `-h`, `--version`, or an
    unknown option, which argparse then reports). Raises `ValueError` for a value-taking option
    given last with no value.
    """
    leading: list[str] = []
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        name, eq, value = argv[i].partition("=")
        option = _resolve(name)
        if option is None or option in _TOP_ONLY:
            break
        if option in GLOBAL_FLAGS:
            if eq:
                raise ValueError(f"{option} takes no value (got {argv[i]!r})")
            leading.append(option)
            i += 1
        elif eq:
            leading += [option, value]
            i += 1
        elif i + 1 < len(argv):
            leading += [option, argv[i + 1]]
            i += 2
        else:
            raise ValueError(f"{option} needs a value: agentrt {option} VALUE COMMAND ...")
    return leading, list(argv[i:])
