"""A mark of what the JSONL saver's `get_tuple` answers now, without loading the checkpoint.

Every write of the saver is an append to one of the thread's run files, and a file rewritten,
cut or replaced makes the saver's in-memory index of the thread start over. So (the checkpoint
`get_tuple` would load, the end and inode of every run file as indexed) changes whenever the
answer could: a reader that keeps what it built from a checkpoint tuple under this mark can answer
again from it while the mark is unchanged, after one look at the files' sizes (what `get_tuple`
does first anyway) instead of a load.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from checkpointing.saver import JsonlCheckpointSaver


def head_mark(saver: JsonlCheckpointSaver, config: RunnableConfig) -> tuple[Any, ...] | None:
    """The mark of `saver.get_tuple(config)` now (None: it would find no checkpoint). Taken before
    the load it stands for, a mark never claims more than the loaded tuple holds."""
    ids = saver._ids(config)
    with saver._lock:
        index = saver._store(ids["tenant"], ids["thread"]).index
        cp_id = ids["cp_id"] or index.latest.get(ids["ns"])
        if cp_id is None or (ids["ns"], cp_id) not in index.cps:
            return None
        return (ids["ns"], cp_id, tuple(sorted(index.ends.items())), tuple(sorted(index.inodes.items())))
