"""A copy of this process's environment that is safe to take from any thread."""

from __future__ import annotations

import os


def environ_copy() -> dict[str, str]:
    """`os.environ` as a dict, taken again when pytest set or removed a variable in another thread
    meanwhile (it sets PYTEST_CURRENT_TEST per test phase; tests start commands from threads)."""
    while True:
        try:
            return dict(os.environ)
        except (KeyError, RuntimeError):
            continue
