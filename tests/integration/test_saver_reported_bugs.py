"""Bugs users reported on LangGraph's own PostgreSQL saver, each checked on ours (files and postgres).

- langgraph #8448: a long thread's history silently empty past the first 1,024 rows. Here: 1,000
  invocations on one thread (3,000 checkpoints; 5,000 invocations with AGENTRT_FULL_DRILLS=1), read
  back from a new saver (a fresh process's view): every checkpoint, newest first, with its counter
  and list values, and `list(limit=, before=)` pages that cover the whole history with no empty tail.
- langgraph #8810: a cancelled or fenced-out run overwrote newer state with an older checkpoint.
  Here: a writer whose lease was taken over is refused (`StaleFencingTokenError`) and the latest
  state stays the new owner's; a run cut off by an error inside a node, after another node's writes
  of the same superstep were stored, leaves the last complete checkpoint latest, and invoking again
  continues from it with no list item lost or doubled.
- langgraph #8796: two processes running one thread at once interleaved their checkpoints. Here: two
  OS processes take lease tokens 1 and 2 and invoke the same thread concurrently; the one with token
  1 is refused once the other took over, and the thread's history is one chain (each checkpoint's
  parent is the one before it), the first writer's steps then the second's.

Each test runs on both backends (`saver_kit`, tests/conftest.py).
"""

from __future__ import annotations

import itertools
import multiprocessing
import operator
import threading
import traceback
from concurrent.futures import ProcessPoolExecutor
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from checkpointing.exceptions import StaleFencingTokenError
from checkpointing.saver import JsonlCheckpointSaver
from tests.support.drills import size
from tests.support.savers import DATABASE_URL, SaverKit

THREAD = "t1"
TENANT = "acme"
STEPS = size("AGENTRT_HISTORY_STEPS", sample=1_000, full=5_000)
"""Invocations of the long-history test (three pages of 1,000 checkpoints in the sample)."""
MILESTONE = 500
"""The long thread's list channel gets an item every this many steps (a list growing by one item
per step would make the test about storing 5,000 ever longer lists, not about reading them back)."""


class State(TypedDict):
    """A counter and a list that a reducer appends to."""

    n: int
    items: Annotated[list, operator.add]


def _config(token: int | None = None, **extra: Any) -> Any:
    conf: dict[str, Any] = {"thread_id": THREAD, "tenant_id": TENANT, **extra}
    if token is not None:
        conf["fencing_token"] = token
    return {"configurable": conf}


def _counter_graph(saver: JsonlCheckpointSaver, tag: str = "", every: int = 1) -> Any:
    """One node: count one up; every `every` steps append `<tag><n>` to the list."""

    def step(s: State) -> dict[str, Any]:
        n = s.get("n", 0) + 1
        return {"n": n, "items": [f"{tag}{n}"]} if n % every == 0 else {"n": n}

    b: Any = StateGraph(State)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_edge("step", END)
    return b.compile(checkpointer=saver)


def _chain(saver: JsonlCheckpointSaver) -> list[Any]:
    """Every checkpoint of the thread, newest first, checked to be one parent chain."""
    tuples = list(saver.list(_config()))
    for newer, older in itertools.pairwise(tuples):
        assert newer.parent_config is not None
        assert newer.parent_config["configurable"]["checkpoint_id"] == older.config["configurable"]["checkpoint_id"]
    assert tuples and tuples[-1].parent_config is None
    return tuples


# -- langgraph #8448: a long thread's history read back whole ----------------------------------------


def test_a_long_threads_history_reads_back_whole_from_a_new_saver(saver_kit: SaverKit) -> None:
    """STEPS invocations, then a new saver: every checkpoint in order with its values; pages agree."""
    graph = _counter_graph(saver_kit(), "m", every=MILESTONE)
    for _ in range(STEPS):
        graph.invoke({"items": []}, _config())

    fresh = saver_kit()
    history = list(_counter_graph(fresh).get_state_history(_config()))
    # each invocation: its input checkpoint, the one after the input was applied, the step's
    assert len(history) == 3 * STEPS
    ids = [h.config["configurable"]["checkpoint_id"] for h in history]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == len(ids)
    for i, snap in enumerate(history):
        invocation = STEPS - i // 3  # newest first: the step's checkpoint, then the two before it
        n = invocation if i % 3 == 0 else invocation - 1
        assert snap.values.get("n", 0) == n
        assert snap.values.get("items", []) == [f"m{k}" for k in range(MILESTONE, n + 1, MILESTONE)]
        parent = snap.parent_config["configurable"]["checkpoint_id"] if snap.parent_config else None
        assert parent == (ids[i + 1] if i + 1 < len(ids) else None)

    pages: list[list[str]] = []
    before: Any = None
    while True:
        page = [t.config["configurable"]["checkpoint_id"] for t in fresh.list(_config(), limit=1_000, before=before)]
        if not page:
            break
        pages.append(page)
        before = _config(checkpoint_id=page[-1])
    assert [len(p) for p in pages] == [1_000] * (3 * STEPS // 1_000)
    assert [i for p in pages for i in p] == ids
    assert len(list(fresh.list(_config(), limit=7, before=_config(checkpoint_id=ids[-8])))) == 7
    assert list(fresh.list(_config(), before=_config(checkpoint_id=ids[-1]))) == []


# -- langgraph #8810: no older checkpoint over newer state -------------------------------------------


def test_a_fenced_out_writer_never_overwrites_the_new_owners_state(saver_kit: SaverKit) -> None:
    """A (token 1) runs, B (token 2) takes over and runs; whatever A writes next is refused."""
    a_saver = saver_kit()
    a = _counter_graph(a_saver, "a")
    for _ in range(3):
        a.invoke({"items": []}, _config(1))
    stale = a_saver.get_tuple(_config(1))  # A's view of the thread, kept while it is paused
    assert stale is not None

    b_saver = saver_kit()
    b_saver.store.session(TENANT, THREAD, "always").advance_fence(2)  # what the lease does on a grant
    b = _counter_graph(b_saver, "b")
    for _ in range(2):
        b.invoke({"items": []}, _config(2))
    newest = b_saver.get_tuple(_config())
    assert newest is not None
    before = saver_kit.raw(THREAD, tenant=TENANT)

    with pytest.raises(StaleFencingTokenError):
        a.invoke({"items": []}, _config(1))  # A resumes as if nothing happened
    with pytest.raises(StaleFencingTokenError):
        a.update_state(_config(1, checkpoint_id=stale.checkpoint["id"]), {"n": 99})
    old_cp: Any = {**stale.checkpoint, "id": _newer_id(newest.checkpoint["id"])}
    old_cp["channel_values"] = {**stale.checkpoint["channel_values"], "n": 99}
    at_stale = _config(1, checkpoint_id=stale.checkpoint["id"])
    with pytest.raises(StaleFencingTokenError):
        a_saver.put(at_stale, old_cp, {"source": "loop", "step": 99}, {"n": a_saver.get_next_version(None)})
    with pytest.raises(StaleFencingTokenError):
        a_saver.put_writes(at_stale, [("n", 99), ("items", ["a99"])], "task-of-a")
    assert saver_kit.raw(THREAD, tenant=TENANT) == before  # nothing of A's reached the store

    latest = _counter_graph(saver_kit()).get_state(_config())
    assert latest.config["configurable"]["checkpoint_id"] == newest.checkpoint["id"]
    assert latest.values == {"n": 5, "items": ["a1", "a2", "a3", "b4", "b5"]}
    assert _chain(saver_kit())[0].config["configurable"]["checkpoint_id"] == newest.checkpoint["id"]


def _newer_id(cp_id: str) -> str:
    """A checkpoint id that sorts after `cp_id` (a stale writer's next checkpoint is a newer uuid6)."""
    from langgraph.checkpoint.base.id import uuid6

    new = str(uuid6(clock_seq=0))
    assert new > cp_id
    return new


def _fan_out_graph(saver: JsonlCheckpointSaver, calls: dict[str, int], fail_on: set[int]) -> Any:
    """Two nodes in one superstep: `a` appends `a<n>`; `b` counts up and appends `b<n>`, and on a
    count in `fail_on` (once each) raises after `a`'s writes were stored (a cancelled run)."""

    def a(s: State) -> dict[str, Any]:
        calls["a"] += 1
        return {"items": [f"a{s.get('n', 0) + 1}"]}

    def b(s: State) -> dict[str, Any]:
        calls["b"] += 1
        n = s.get("n", 0) + 1
        if n in fail_on:
            fail_on.discard(n)
            _wait_for_write_of_a(saver, f"a{n}")
            raise RuntimeError(f"run cancelled inside node b at step {n}")
        return {"n": n, "items": [f"b{n}"]}

    builder: Any = StateGraph(State)
    builder.add_node("a", a)
    builder.add_node("b", b)
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    builder.add_edge("a", END)
    builder.add_edge("b", END)
    return builder.compile(checkpointer=saver)


def _wait_for_write_of_a(saver: JsonlCheckpointSaver, item: str) -> None:
    """Until the superstep's pending writes hold `a`'s item (LangGraph stores them as `a` returns)."""
    done = threading.Event()
    for _ in range(2_000):
        tup = saver.get_tuple(_config())
        if tup is not None and any(c == "items" and v == [item] for _, c, v in tup.pending_writes or ()):
            return
        done.wait(0.005)
    raise AssertionError(f"the writes of node a ({item}) were never stored")


def test_a_run_cancelled_mid_superstep_keeps_the_last_complete_checkpoint(saver_kit: SaverKit) -> None:
    """Node b raises after a's writes were stored: the latest checkpoint is the one before that
    superstep, and invoking again runs only b, each item once."""
    calls = {"a": 0, "b": 0}
    graph = _fan_out_graph(saver_kit(), calls, fail_on={2})
    graph.invoke({"items": []}, _config())
    complete = saver_kit().get_tuple(_config())
    assert complete is not None

    with pytest.raises(RuntimeError, match="cancelled inside node b"):
        graph.invoke({"items": []}, _config())
    assert calls == {"a": 2, "b": 2}

    fresh = _fan_out_graph(saver_kit(), calls, fail_on=set())
    stored = saver_kit().get_tuple(_config())
    assert stored is not None and complete.checkpoint["id"] < stored.checkpoint["id"]
    values = stored.checkpoint["channel_values"]
    assert (values["n"], values["items"]) == (1, ["a1", "b1"])  # the superstep's start, nothing of it
    assert [(c, v) for _, c, v in stored.pending_writes or () if c == "items"] == [("items", ["a2"])]
    cut = fresh.get_state(_config())
    assert cut.next == ("b",) and [t.name for t in cut.tasks if t.error] == ["b"]  # only b left to run
    assert cut.values == {"n": 1, "items": ["a1", "b1", "a2"]}  # LangGraph shows a's stored write

    assert fresh.invoke(None, _config()) == {"n": 2, "items": ["a1", "b1", "a2", "b2"]}
    assert calls == {"a": 2, "b": 3}  # a's stored writes were used, not run again
    assert fresh.invoke({"items": []}, _config()) == {"n": 3, "items": ["a1", "b1", "a2", "b2", "a3", "b3"]}
    for tup in _chain(saver_kit()):
        items = tup.checkpoint["channel_values"].get("items", [])
        assert len(items) == len(set(items))


# -- langgraph #8796: two processes on one thread ----------------------------------------------------

SECOND_STEPS = 20
FIRST_CAP = 5_000


def _racer(kind: str, where: str, tag: str, token: int, steps: int) -> dict[str, Any]:
    """In a process of its own: hold lease token `token`, then invoke the thread `steps` times
    or until fenced out. Returns how many invocations completed and whether it was refused."""
    if kind == "files":
        saver = JsonlCheckpointSaver(where)
    else:
        from checkpointing.store.postgres import PostgresStore

        saver = JsonlCheckpointSaver(store=PostgresStore(DATABASE_URL, schema=where, max_connections=2))
    graph = _counter_graph(saver, tag)
    done = 0
    try:
        saver.store.session(TENANT, THREAD, "always").advance_fence(token)  # the grant, as the lease does
        while done < steps:
            graph.invoke({"items": []}, _config(token, writer=tag))
            done += 1
    except StaleFencingTokenError as err:
        calls = {"put", "put_writes", "advance_fence"}
        refused = [f.name for f in traceback.extract_tb(err.__traceback__) if f.name in calls][-1:]
        return {"done": done, "refused": refused}
    finally:
        saver.close()
    return {"done": done, "refused": []}


def _wait_for_a_checkpoint(kit: SaverKit, racer: Any) -> None:
    """Until the thread has a checkpoint (the racer started writing), or the racer ended."""
    pause = threading.Event()
    saver = kit()
    for _ in range(3_000):
        if racer.done() or saver.get_tuple(_config()) is not None:
            return
        pause.wait(0.01)
    raise AssertionError("the first process wrote no checkpoint")


def test_two_processes_on_one_thread_leave_one_chain(saver_kit: SaverKit) -> None:
    """Processes with tokens 1 and 2 invoke one thread at once (2 is started once 1 has written, and
    1 goes on writing until refused): 1 is fenced out, 2's run goes on from 1's last complete step,
    and the history is one chain, 1's checkpoints then 2's."""
    where = str(saver_kit.base) if saver_kit.kind == "files" else saver_kit.schema
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        first = pool.submit(_racer, saver_kit.kind, where, "a", 1, FIRST_CAP)
        _wait_for_a_checkpoint(saver_kit, first)  # so that the second finds the first running
        second = pool.submit(_racer, saver_kit.kind, where, "b", 2, SECOND_STEPS)
        one, two = first.result(timeout=300), second.result(timeout=300)
    assert one["refused"] and 0 < one["done"] < FIRST_CAP  # it ran, then was fenced out
    assert two == {"done": SECOND_STEPS, "refused": []}

    chain = _chain(saver_kit())
    latest = chain[0].checkpoint["channel_values"]
    k = sum(1 for item in latest["items"] if item.startswith("a"))
    # LangGraph stores a task's writes apart from the checkpoints that follow (durability "async"):
    # 1's last step may have landed whole and only its task's late writes been refused.
    assert k == one["done"] or (k == one["done"] + 1 and one["refused"] == ["put_writes"]), (k, one)
    assert latest["n"] == k + SECOND_STEPS
    assert latest["items"] == [f"a{i}" for i in range(1, k + 1)] + [f"b{i}" for i in range(k + 1, k + 1 + SECOND_STEPS)]
    writers = [t.metadata.get("writer") for t in reversed(chain)]
    split = writers.index("b")
    assert set(writers[:split]) <= {"a"} and set(writers[split:]) == {"b"}  # no interleaving
    assert writers.count("b") == 3 * SECOND_STEPS
    assert 3 * k <= split <= 3 * k + 2  # 1's complete steps, and at most the start of one more
