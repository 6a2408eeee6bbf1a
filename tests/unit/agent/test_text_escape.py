"""`printable`, `shown` and `json_safe` over every code point of the categories a terminal acts on."""

from __future__ import annotations

import json
import sys
import unicodedata

from agent.core.errors import quote_id
from agent.core.text import json_safe, printable, printable_all, shown
from checkpointing.ids import UNSAFE_CATEGORIES, is_call_id

UNSAFE = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in UNSAFE_CATEGORIES]


def _raw(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in UNSAFE_CATEGORIES]


def test_the_unsafe_set_holds_what_the_issue_names() -> None:
    """C0, DEL, C1 (0x9B: a one-byte CSI), \\r, ESC, NUL, U+202E, U+2028, U+2029, a lone surrogate."""
    for ch in "\x00\x1b\r\n\x7f\x85\x9b\u200b\u202e\u2066\ufeff\u2028\u2029\udc9b\U000e0001":
        assert ch in UNSAFE, hex(ord(ch))


def test_printable_escapes_every_unsafe_character_and_nothing_else() -> None:
    """Each unsafe character becomes \\xNN, \\uNNNN or \\UNNNNNNNN; others pass unchanged."""
    for ch in UNSAFE:
        out = printable(f"a{ch}b")
        code = ord(ch)
        want = f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
        assert out == f"a{want}b"
    plain = "".join(chr(c) for c in range(0x20, 0x3000) if chr(c) not in set(UNSAFE))
    assert printable(plain) == plain
    assert printable("é 😀 中文 \\x1b") == "é 😀 中文 \\x1b"  # a backslash is text, not an escape


def test_printable_keeps_only_what_it_is_told_and_is_idempotent() -> None:
    """keep="\\n\\t" leaves a multi-line text its lines; a second pass changes nothing."""
    text = "line 1\n\tline 2\r\x1b[2J\u202e"
    once = printable(text, keep="\n\t")
    assert once == "line 1\n\tline 2\\x0d\\x1b[2J\\u202e"
    assert printable(once, keep="\n\t") == once
    assert printable_all({"k\x1b": ["v\x9b", 3]}) == {"k\\x1b": ["v\\x9b", 3]}


def test_shown_quotes_escapes_and_shortens() -> None:
    """No unsafe character survives `shown`; a long id is cut at 64 with its length said."""
    for ch in UNSAFE:
        assert not _raw(shown(f"id{ch}"))
    assert shown("a" * 10_000) == repr("a" * 64 + "…") + " (10000 characters)"
    assert shown("s-1") == "'s-1'"
    assert quote_id("s-1") == "s-1" and quote_id("a\x1bb") == "'a\\x1bb'"
    assert len(quote_id("b" * 10_000)) < 90


def test_json_safe_keeps_every_string_exact() -> None:
    """Every unsafe character written as a JSON escape; the document decodes to the same data."""
    data = {"ids": UNSAFE, "text": "é 😀\n"}
    doc = json_safe(json.dumps(data, ensure_ascii=False, indent=2))
    assert not [c for c in _raw(doc) if c != "\n"]
    assert json.loads(doc) == data


def test_call_ids_models_write_are_kept_and_others_refused() -> None:
    """What servers write passes; a control character, a slash, nothing or 129 characters does not."""
    for good in ("call_3_1", "toolu_01A09q90qw90lq917835lq9", "functions.add:0", "call-1-1", "x" * 128):
        assert is_call_id(good), good
    for bad in ("", "../x", "a\x1bb", "a b", "a\u202eb", "x" * 129, None):
        assert not is_call_id(bad), bad
