"""A user tool module, loaded by import path in tests."""

from __future__ import annotations


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()
