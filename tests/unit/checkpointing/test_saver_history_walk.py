"""Reading every state of a long DeltaChannel thread: one walk answers for the ancestors it passed,
each answer decoded afresh, and a walk is never reused once the session changed; on both stores
(a PostgreSQL saver made after another shares nothing with it but the database)."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver

from tests.support.savers import SaverKit
from tests.unit.checkpointing.test_saver_graph import add_message_batches, agent_loop

THREAD: RunnableConfig = {"configurable": {"thread_id": "long", "tenant_id": "acme"}}


def _forked_thread(kit: SaverKit, steps: int) -> list[str]:
    """A thread of `steps` supersteps, then a branch forked from an early state and run on; returns
    the checkpoint ids of the fork's head and of the main line's head."""
    graph = agent_loop(steps).compile(checkpointer=kit(fsync="batch"))
    graph.invoke({"messages": [HumanMessage("go", id="h0")], "i": 0}, THREAD)
    main_head = graph.get_state(THREAD).config
    early = list(graph.get_state_history(THREAD))[-9]
    forked = graph.update_state(early.config, {"messages": [HumanMessage("fork", id="f0")]})
    graph.invoke(None, forked)
    fork_head = graph.get_state(forked).config
    return [fork_head["configurable"]["checkpoint_id"], main_head["configurable"]["checkpoint_id"]]


def test_every_history_of_a_forked_thread_is_langgraphs_own_walk(saver_kit: SaverKit) -> None:
    """Newest first over both branches (the order that reuses walks), every checkpoint's history is
    what LangGraph's default walk (`get_tuple` up the parents) finds, and so is every state."""
    heads = _forked_thread(saver_kit, 70)
    saver = saver_kit()
    tuples = list(saver.list(THREAD))
    assert len(tuples) > 70 and set(heads) <= {t.config["configurable"]["checkpoint_id"] for t in tuples}
    for tup in tuples:
        fast = saver.get_delta_channel_history(config=tup.config, channels=["messages"])
        slow = BaseCheckpointSaver.get_delta_channel_history(saver, config=tup.config, channels=["messages"])
        assert fast == slow, tup.config
    states = list(agent_loop(70).compile(checkpointer=saver).get_state_history(THREAD))
    for state in states[::9]:
        alone = agent_loop(70).compile(checkpointer=saver_kit()).get_state(state.config)
        assert alone.values == state.values
    assert any(m.content == "fork" for m in states[0].values["messages"])


def test_each_state_gets_its_own_messages(saver_kit: SaverKit) -> None:
    """States read from one walk share no message object: changing one state's messages changes
    neither the other states nor the next read."""
    _forked_thread(saver_kit, 40)
    graph = agent_loop(40).compile(checkpointer=saver_kit())
    first = list(graph.get_state_history(THREAD, limit=5))
    newer, older = first[0].values["messages"], first[1].values["messages"]
    shared = [m for m in older if any(m is n for n in newer)]
    assert shared == [] and len(older) > 10
    before = [m.model_dump() for m in older]
    for m in newer:
        m.content = "changed"
        m.additional_kwargs["x"] = 1
    assert [m.model_dump() for m in older] == before
    again = list(graph.get_state_history(THREAD, limit=5))
    assert all(m.content != "changed" for s in again for m in s.values["messages"])


class _NoSnapshotState(TypedDict):
    messages: Annotated[list, DeltaChannel(add_message_batches, snapshot_frequency=1000)]
    i: int


def test_reading_every_state_costs_the_thread_not_its_square(saver_kit: SaverKit) -> None:
    """200 supersteps and no snapshot: each state's history goes back to the first checkpoint, yet
    reading all 201 states looks up fewer records (read or cached) than twice the records stored,
    where a walk per state would look up each ancestor again (~40,000 lookups)."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
    graph = agent_loop(200, state=_NoSnapshotState).compile(checkpointer=saver_kit(fsync="batch"))
    graph.invoke({"messages": [HumanMessage("go", id="h0")], "i": 0}, cfg)
    saver = saver_kit()
    store = saver._store(saver.default_tenant, "t")
    lookups: list[tuple[str, int]] = []
    read = store.read

    def counted(run: str, off: int, line: int, cache: bool = True) -> Any:
        lookups.append((run, off))
        return read(run, off, line, cache)

    store.read = counted  # type: ignore[method-assign]
    states = list(agent_loop(200, state=_NoSnapshotState).compile(checkpointer=saver).get_state_history(cfg))
    assert len(states) == 201 and len(states[0].values["messages"]) == 200
    assert [len(s.values.get("messages", [])) for s in states] == sorted(
        (len(s.values.get("messages", [])) for s in states), reverse=True
    )
    records = saver_kit.raw("t").count(b"\n")
    assert records > 400
    assert len(lookups) < 2 * records


def test_the_first_read_of_a_long_threads_head_reads_in_batches(saver_kit: SaverKit) -> None:
    """A new saver's first `get_state` of a 200-superstep thread with no snapshot rebuilds the head
    from every write since the first checkpoint: it reads the records (and the messages they
    reference) a batch at a time, a few dozen reads of the store, not one read per record."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "t"}}
    graph = agent_loop(200, state=_NoSnapshotState).compile(checkpointer=saver_kit(fsync="batch"))
    graph.invoke({"messages": [HumanMessage("go", id="h0")], "i": 0}, cfg)
    expected = graph.get_state(cfg).values
    saver = saver_kit()
    streams = saver._store(saver.default_tenant, "t").streams
    reads: list[int] = []
    read_at = streams.read_at

    def counted(run: str, offsets: list[int]) -> Any:
        reads.append(len(offsets))
        return read_at(run, offsets)

    streams.read_at = counted  # type: ignore[method-assign]
    state = agent_loop(200, state=_NoSnapshotState).compile(checkpointer=saver).get_state(cfg)
    assert state.values == expected and len(state.values["messages"]) == 200
    assert sum(reads) > 400 and len(reads) < 30, (len(reads), sum(reads))


def test_a_thread_deleted_by_another_saver_is_not_read_from_the_last_walk(saver_kit: SaverKit) -> None:
    """After another process deleted the thread, its former checkpoints have no history and no
    state, though this saver's last walk had passed them."""
    _forked_thread(saver_kit, 30)
    saver = saver_kit()
    graph = agent_loop(30).compile(checkpointer=saver)
    old = list(graph.get_state_history(THREAD))[3].config
    assert saver.get_delta_channel_history(config=old, channels=["messages"])["messages"]["writes"]
    saver_kit().delete_thread("long", tenant_id="acme")
    assert saver.get_delta_channel_history(config=old, channels=["messages"]) == {"messages": {"writes": []}}
    assert graph.get_state(old).values == {}
