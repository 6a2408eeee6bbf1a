"""The unchanged head of a channel's message list, recognised without encoding it again.

With plain `add_messages` LangGraph hands a saver the channel's whole list at every put: a new
list object holding the very message objects of the previous put, plus the new ones. Per channel
(`(checkpoint_ns, channel)`), `ListMemo` keeps the leading messages of the last list stored, the
values of their fields and their stored references; a put whose list starts with those same
objects, none of whose fields was reassigned (every field value the same object as before, and no
field added or removed), reuses their references and the chunks made of them, and encodes only
the rest. The checks are single passes of C code over the list, not a Python step per message, so
a put costs the same at any history length but for that pass.

A field mutated in place (`msg.additional_kwargs["x"] = 1`) is not seen, as by the saver's
per-message memo (`_saver_spill`): LangGraph's state is replaced, not mutated, by its nodes.
References are reused only while the session's item index is the same object (a rewrite, a
retention pass or another process's replacement of a file starts a new one), and once every item
the previous put first referenced is in it (a put that failed before its append stored nothing).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, is_
from typing import Any

from langchain_core.messages import BaseMessage

LISTS = 64
"""Channels (per session) whose last list is remembered."""
_DICT = attrgetter("__dict__")


@dataclass(slots=True)
class ListMemo:
    """The leading messages of a channel's last stored list and what was stored for them."""

    items: list[Any]  # the message objects, in list order
    lens: list[int]  # the number of fields of each
    flat: list[Any]  # their field values, message after message
    refs: list[Any]  # their stored references (`ItemSpiller.encode_spill`), one per message
    chunks: list[Any]  # the chunk references of the full chunks the last stored list began with
    known: dict[str, Any]  # the session's item index these references were stored in
    pending: list[str]  # item hashes the last put referenced first: stored only if it was appended


def reusable(
    memos: dict[Hashable, ListMemo], key: Hashable, items: list[Any], known: dict[str, Any]
) -> ListMemo | None:
    """The memo of channel `key` when `items` starts with its messages, unchanged and stored; else None."""
    memo = memos.get(key)
    if memo is None or memo.known is not known or not memo.items:
        return None
    head = memo.items
    if len(head) > len(items) or not all(map(is_, head, items)):
        return None
    if not all(map(known.__contains__, memo.pending)):
        return None
    fields = list(map(_DICT, head))
    if list(map(len, fields)) != memo.lens:
        return None
    return memo if all(map(is_, chain.from_iterable(map(dict.values, fields)), memo.flat)) else None


def taken(items: list[Any], start: int) -> tuple[list[Any], list[int], list[Any]]:
    """The messages `items` holds from `start` on (up to the first that is not one), the number of
    fields of each and their values, taken before they are encoded: LangGraph's `add_messages`
    assigns a message's id in place, in another thread while a put encodes the same object, so
    fields read after encoding could claim an id the stored form does not have."""
    end = start
    for x in items[start:]:
        if not isinstance(x, BaseMessage):
            break
        end += 1
    tail = items[start:end]
    fields = list(map(_DICT, tail))
    return tail, list(map(len, fields)), list(chain.from_iterable(map(dict.values, fields)))


def remember(
    memos: dict[Hashable, ListMemo],
    key: Hashable,
    fields: tuple[list[Any], list[int], list[Any]],
    refs: list[Any],
    chunks: list[Any],
    reused: ListMemo | None,
    known: dict[str, Any],
    pending: list[str],
) -> None:
    """Remember what a put stored for channel `key`'s list (`fields`: what `taken` gave before the
    put encoded it; `refs`: one reference per item; `chunks`: the chunk references its stored form
    begins with; `reused`: the memo it started from, extended in place; `pending`: the item hashes
    this put referenced that the memo did not cover)."""
    tail, lens, flat = fields
    start = len(reused.items) if reused is not None else 0
    end = start + len(tail)
    if reused is None:
        memo = ListMemo(tail, lens, flat, [], [], known, [])
    else:
        memo = reused
        memo.items.extend(tail)
        memo.lens.extend(lens)
        memo.flat.extend(flat)
    memo.refs = refs[:end]
    memo.chunks = chunks
    memo.pending = pending
    memos.pop(key, None)
    memos[key] = memo
    while len(memos) > LISTS:
        memos.pop(next(iter(memos)))
