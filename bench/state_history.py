"""Benchmark: reading back every state of a long thread, as Studio and agent-chat-ui do.

Workload: the agent loop of `bench/checkpointers.py` (one AI message with a tool call, then a 2 KB
tool result, per step; every tenth result 50 KB) with its messages in LangGraph's `DeltaChannel`
(a snapshot every `--snapshot-every` updates, 500 as agentrt's own graph), run for N steps, then
read back in the same process:

- history: `graph.get_state_history(thread)`, every state newest first (what
  `/threads/{id}/history` answers a client asking for the whole thread);
- parent walk: `graph.get_state` of the head, then of each state's parent in turn (what
  `agentrt serve` does to answer the same request a page at a time);
- head: `graph.get_state` of the newest checkpoint alone.

Each state's messages are rebuilt from stored writes since the last snapshot, as fresh objects
(LangGraph's contract: a caller may change what it got back). The anchor is the same graph on
LangGraph's InMemorySaver (no disk, its own `get_delta_channel_history`); printed: ms per state,
and agentrt's JSONL saver / InMemorySaver. The floor below both is decoding each state's
messages from their stored bytes once, with LangGraph's serializer (`decode floor`).

Then the same reads of an agentrt turn of `--agentrt-steps` tool steps (agentrt's own graph, whose
state holds three DeltaChannels), beside the decode floor of its messages.

    python bench/state_history.py [--steps 300] [--snapshot-every 500] [--agentrt-steps 260] [--postgres]

`--postgres` adds the JSONL saver over PostgreSQL (AGENTRT_DATABASE_URL, default the local `test`
database; a schema of its own, dropped at the end), read by a saver with a store of its own.

Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkpointers import _delta_add_messages, build_graph

from checkpointing.saver import JsonlCheckpointSaver

THREAD: RunnableConfig = {"configurable": {"thread_id": "long"}}


def build(checkpointer: Any, steps: int, snapshot_every: int) -> Any:
    """`bench/checkpointers.py`'s loop graph: `steps` tool steps, then the end."""
    messages = Annotated[list, DeltaChannel(_delta_add_messages, snapshot_frequency=snapshot_every)]
    # Functional form: under `from __future__ import annotations` a class body could not see the local.
    state = TypedDict("state", {"messages": messages, "i": int})  # type: ignore[misc]  # noqa: UP013
    return build_graph("delta", checkpointer, {"n": steps}, state=state)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _savers(name: str, work: Path) -> tuple[Callable[[], Any], Callable[[], None]]:
    """(a new saver over the same data, close): `name` is jsonl (files), jsonl-pg (the JSONL saver
    over PostgreSQL, a schema of its own dropped at the end) or memory (one InMemorySaver)."""
    if name == "memory":
        mem = InMemorySaver()
        return lambda: mem, lambda: None
    if name == "jsonl":
        return lambda: JsonlCheckpointSaver(work / "jsonl", fsync="batch"), lambda: None
    from checkpointing.store.postgres import PostgresStore

    url = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    stores = [PostgresStore(url, schema=schema)]
    stores[0].setup()

    def new() -> JsonlCheckpointSaver:  # a store of its own: nothing shared but the database
        stores.append(PostgresStore(url, schema=schema))
        return JsonlCheckpointSaver(store=stores[-1], fsync="batch")

    def close() -> None:
        with stores[0].connection("dropping the bench schema") as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        for store in stores:
            store.close()

    return new, close


def measure(name: str, work: Path, steps: int, snapshot_every: int) -> dict[str, Any]:
    """Run the loop on saver `name`, then time the three reads (seconds, and what they read) on
    a new saver over the same data (as a new process would read it)."""
    new, close = _savers(name, work)
    try:
        return _measure(new, steps, snapshot_every)
    finally:
        close()


def _measure(new: Callable[[], Any], steps: int, snapshot_every: int) -> dict[str, Any]:
    saver = new()
    graph = build(saver, steps, snapshot_every)
    graph.invoke({"messages": [HumanMessage("go", id="h0")], "i": 0}, THREAD, durability="sync")
    if hasattr(saver, "flush"):
        saver.flush()
    graph = build(new(), steps, snapshot_every)
    history_s, history = _timed(lambda: list(graph.get_state_history(THREAD)))

    def walk() -> int:
        n, state = 0, graph.get_state(THREAD)
        while state is not None and state.parent_config is not None:
            n += 1
            state = graph.get_state(state.parent_config)
        return n + 1

    walk_s, walked = _timed(walk)
    head_s, _ = _timed(lambda: graph.get_state(THREAD))
    return {"history": history, "history_s": history_s, "walk_s": walk_s, "walked": walked, "head_s": head_s}


def _contents(history: list[Any]) -> list[list[tuple[str, Any]]]:
    """Each state's messages as (type, content): the ids `add_messages` draws differ between runs."""
    return [[(m.type, m.content) for m in s.values.get("messages", [])] for s in history]


def agentrt_turn(steps: int) -> None:
    """An agentrt turn of `steps` tool steps on the embedded default (retention off, so every
    checkpoint is kept), then its states read back by a fresh runner as Studio reads them."""
    import yaml
    from runtime import write_config

    from agent.runner import AgentRunner

    work = Path(tempfile.mkdtemp(prefix="bench-history-agentrt-"))
    try:
        config = write_config(work, steps)
        cfg = yaml.safe_load(config.read_text())
        cfg["persistence"]["keep_last"] = None
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        result = AgentRunner.from_config(config).run("Call the tool until done.", new_session_id="s-history")
        assert result.status == "COMPLETED", result
        graph = AgentRunner.from_config(config).graph
        thread: RunnableConfig = {"configurable": {"thread_id": "s-history"}}
        head_s, _ = _timed(lambda: graph.get_state(thread))
        history_s, history = _timed(lambda: list(graph.get_state_history(thread)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    floor = decode_floor(history)
    n = len(history)
    print(f"\nagentrt turn of {steps} tool steps: {n} states")
    print(f"first read of the head (a fresh process): {head_s * 1000:.1f} ms")
    print(f"history: {history_s * 1000 / n:.2f} ms/state; decode floor {floor * 1000 / n:.2f} ms/state")


def decode_floor(history: list[Any]) -> float:
    """Seconds to decode every state's messages from their serialized bytes, one message at a time."""
    serde = JsonPlusSerializer()
    stored = {id(m): serde.dumps_typed(m) for s in history for m in s.values.get("messages", [])}
    t0 = time.perf_counter()
    for s in history:
        for m in s.values.get("messages", []):
            serde.loads_typed(stored[id(m)])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300, help="tool steps of the thread (2 checkpoints each)")
    ap.add_argument("--snapshot-every", type=int, default=500, help="DeltaChannel snapshot_frequency")
    ap.add_argument(
        "--postgres", action="store_true", help="also the JSONL saver over PostgreSQL (AGENTRT_DATABASE_URL)"
    )
    ap.add_argument("--agentrt-steps", type=int, default=260, help="tool steps of the agentrt turn (0: none)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-history-"))
    names = ["jsonl", *(["jsonl-pg"] if args.postgres else []), "memory"]
    try:
        runs = {name: measure(name, work, args.steps, args.snapshot_every) for name in names}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    states = len(runs["jsonl"]["history"])
    same = all(_contents(runs[n]["history"]) == _contents(runs["memory"]["history"]) for n in names)
    floor = decode_floor(runs["memory"]["history"])
    print(f"{args.steps} steps, {states} states, snapshot every {args.snapshot_every} updates; same states: {same}")
    print(
        f"{'read':<14}"
        + "".join(f"{n + ' ms/state':>18}" for n in names)
        + "".join(f"{n + ' / memory':>20}" for n in names[:-1])
    )
    for key, label, n in (("history_s", "history", states), ("walk_s", "parent walk", states), ("head_s", "head", 1)):
        ms = [runs[name][key] * 1000 / n for name in names]
        print(f"{label:<14}" + "".join(f"{m:>18.2f}" for m in ms) + "".join(f"{m / ms[-1]:>19.2f}x" for m in ms[:-1]))
    print(f"{'decode floor':<14}{floor * 1000 / states:>18.2f}")
    if args.agentrt_steps:
        runs.clear()  # 600 states of messages alive would make each collector pass walk them all
        gc.collect()
        agentrt_turn(args.agentrt_steps)


if __name__ == "__main__":
    main()
