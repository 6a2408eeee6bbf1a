"""Channel versions: the next version of a channel, of the type the thread already uses."""

from __future__ import annotations

import random
from typing import Any

Version = str | int | float
"""A channel version: ours are strings; int and float ones come from threads other savers wrote
(LangGraph's `V` is a constrained type variable, so the saver stays typed `[str]` and
`get_next_version` returns `Any`)."""


def next_version(current: Version | None) -> Any:
    """The next channel version, of the type the thread already uses (LangGraph's rule).

    An int version gives `current + 1` and a float `current + 1.0`, as BaseCheckpointSaver
    does: a thread written by a saver with numeric versions keeps comparable versions (LangGraph
    compares a channel's versions with `>` and takes their `max`, which mixed types refuse).
    A string (or no version yet) gives `<counter, 12 digits>.<8 random hex digits>`.

    That string scheme is InMemorySaver / SqliteSaver / PostgresSaver's (`<32 digits>.<random
    float>`, 52 characters), shortened: every checkpoint stores every channel's version (twice,
    with `versions_seen`), so the version text was a third of a checkpoint's bytes. Still
    ordered as LangGraph compares them (as strings: fixed width), and still unique across forks
    (the random part: versions index stored values, `by_version`). A 32-digit version (an older
    file of ours, or a thread written by those savers) always sorts below every version made
    from it here.
    """
    if isinstance(current, float):
        return current + 1.0
    if isinstance(current, int):
        return current + 1
    current_v = 0 if current is None else int(str(current).split(".")[0])
    return f"{current_v + 1:012}.{random.getrandbits(32):08x}"
