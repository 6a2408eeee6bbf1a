"""The JSONL saver under real LangGraph graphs: resume, interrupts, Send, DeltaChannel, storage growth."""

from __future__ import annotations

import math
import operator
import random
import string
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt

from checkpointing.codec import CheckpointStateCodec
from checkpointing.records import canonical_json
from checkpointing.saver import JsonlCheckpointSaver


class ChatState(TypedDict):
    messages: Annotated[list, add_messages]
    i: int


def add_message_batches(state: list, writes: Any) -> list:
    """add_messages over a batch of writes: the DeltaChannel form of LangGraph's message reducer."""
    out = list(state or [])
    for w in writes:
        out = add_messages(out, w)
    return out


class DeltaChatState(TypedDict):
    messages: Annotated[list, DeltaChannel(add_message_batches, snapshot_frequency=50)]
    i: int


def _payload(rnd: random.Random, n: int) -> str:
    return "".join(rnd.choices(string.ascii_letters, k=n))


def agent_loop(steps: int, seed: int = 1, state: Any = DeltaChatState) -> StateGraph:
    """agent -> tools -> agent ... for `steps` supersteps; tool results 2 KB, every tenth 50 KB."""
    rnd = random.Random(seed)

    def agent(s: Any) -> dict[str, Any]:
        call = {"id": f"c{s['i']}", "name": "search", "args": {"q": s["i"]}}
        return {"messages": [AIMessage("", tool_calls=[call])], "i": s["i"] + 1}

    def tools(s: Any) -> dict[str, Any]:
        size = 50_000 if s["i"] % 10 == 0 else 2_000
        return {"messages": [ToolMessage(_payload(rnd, size), tool_call_id=f"c{s['i'] - 1}")]}

    b: Any = StateGraph(state)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["i"] < steps // 2 else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b


def _bytes_on_disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _chat_graph(saver: BaseCheckpointSaver) -> Any:
    def reply(s: ChatState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"reply {s['i']}")], "i": s["i"] + 1}

    b: Any = StateGraph(ChatState)
    b.add_node("reply", reply)
    b.add_edge(START, "reply")
    b.add_edge("reply", END)
    return b.compile(checkpointer=saver)


def test_graph_resumes_after_saver_is_thrown_away(tmp_path: Path) -> None:
    """A new process-like saver on the same base_dir continues the conversation where it stopped."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "s1"}}
    g = _chat_graph(JsonlCheckpointSaver(tmp_path))
    for n in range(5):
        g.invoke({"messages": [HumanMessage(f"hi {n}")], "i": n}, cfg)
    before = g.get_state(cfg)
    del g

    g2 = _chat_graph(JsonlCheckpointSaver(tmp_path))
    assert g2.get_state(cfg).values == before.values
    out = g2.invoke({"messages": [HumanMessage("again")], "i": 5}, cfg)
    assert [m.content for m in out["messages"]][-3:] == ["reply 4", "again", "reply 5"]
    assert len(out["messages"]) == 12


def test_interrupt_and_resume_across_savers(tmp_path: Path) -> None:
    """An interrupt (Interrupt in __interrupt__ writes) survives a restart and resumes with Command."""

    def ask(s: ChatState) -> dict[str, Any]:
        answer = interrupt({"question": "approve?"})
        return {"messages": [AIMessage(f"answer={answer}")], "i": s["i"] + 1}

    def build(saver: BaseCheckpointSaver) -> Any:
        b: Any = StateGraph(ChatState)
        b.add_node("ask", ask)
        b.add_edge(START, "ask")
        b.add_edge("ask", END)
        return b.compile(checkpointer=saver)

    cfg: RunnableConfig = {"configurable": {"thread_id": "hitl"}}
    first = build(JsonlCheckpointSaver(tmp_path)).invoke({"messages": [HumanMessage("go")], "i": 0}, cfg)
    assert first["__interrupt__"][0].value == {"question": "approve?"}

    g = build(JsonlCheckpointSaver(tmp_path))
    assert g.get_state(cfg).next == ("ask",)
    done = g.invoke(Command(resume="yes"), cfg)
    assert done["messages"][-1].content == "answer=yes"


class FanState(TypedDict):
    items: list[int]
    results: Annotated[list, operator.add]


def test_send_fan_out_resumes_after_failure(tmp_path: Path) -> None:
    """Send packets are stored as JSON; after a failed branch, a fresh saver resumes only what failed."""
    calls: list[int] = []
    fail = {"on": True}
    others_done = threading.Semaphore(0)

    def work(arg: dict[str, int]) -> dict[str, Any]:
        calls.append(arg["x"])
        if arg["x"] == 2 and fail["on"]:
            # Fail only once the two other branches finished (their writes saved), as the test means.
            assert others_done.acquire(timeout=10) and others_done.acquire(timeout=10)
            raise RuntimeError("boom")
        if fail["on"]:
            others_done.release()
        return {"results": [arg["x"] * 10]}

    def build(saver: BaseCheckpointSaver) -> Any:
        b: Any = StateGraph(FanState)
        b.add_node("start", lambda s: {})
        b.add_node("work", work)
        b.add_edge(START, "start")
        b.add_conditional_edges("start", lambda s: [Send("work", {"x": x}) for x in s["items"]], ["work"])
        b.add_edge("work", END)
        return b.compile(checkpointer=saver)

    cfg: RunnableConfig = {"configurable": {"thread_id": "fan"}}
    try:
        build(JsonlCheckpointSaver(tmp_path)).invoke({"items": [1, 2, 3], "results": []}, cfg)
    except RuntimeError:
        pass
    fail["on"] = False
    calls.clear()
    out = build(JsonlCheckpointSaver(tmp_path)).invoke(None, cfg)
    assert sorted(out["results"]) == [10, 20, 30]
    assert calls == [2]


def _append(left: list, right: list) -> list:
    out = list(left)
    for batch in right:
        out.extend(batch if isinstance(batch, list) else [batch])
    return out


class DeltaState(TypedDict):
    log: Annotated[list, DeltaChannel(_append, snapshot_frequency=5)]


def test_delta_channel_graph_uses_history_fast_path(tmp_path: Path) -> None:
    """A DeltaChannel graph resumes from the saver; the fast path equals LangGraph's default walk."""

    def build(saver: BaseCheckpointSaver) -> Any:
        b: Any = StateGraph(DeltaState)
        b.add_node("add", lambda s: {"log": [len(s["log"])]})
        b.add_edge(START, "add")
        b.add_edge("add", END)
        return b.compile(checkpointer=saver)

    cfg: RunnableConfig = {"configurable": {"thread_id": "delta"}}
    g = build(JsonlCheckpointSaver(tmp_path))
    for _ in range(12):
        g.invoke({"log": []}, cfg)
    saver = JsonlCheckpointSaver(tmp_path)
    assert build(saver).get_state(cfg).values["log"] == list(range(12))
    latest = saver.get_tuple(cfg)
    assert latest is not None
    fast = saver.get_delta_channel_history(config=latest.config, channels=["log"])
    slow = BaseCheckpointSaver.get_delta_channel_history(saver, config=latest.config, channels=["log"])
    assert fast == slow


async def test_async_graph_run_and_resume(tmp_path: Path) -> None:
    """ainvoke works on the saver (async methods) and a fresh saver sees the same state."""
    cfg: RunnableConfig = {"configurable": {"thread_id": "async1", "tenant_id": "acme"}}
    g = _chat_graph(JsonlCheckpointSaver(tmp_path))
    await g.ainvoke({"messages": [HumanMessage("a")], "i": 0}, cfg)
    await g.ainvoke({"messages": [HumanMessage("b")], "i": 1}, cfg)
    state = await _chat_graph(JsonlCheckpointSaver(tmp_path)).aget_state(cfg)
    assert [m.content for m in state.values["messages"]] == ["a", "reply 0", "b", "reply 1"]
    assert (tmp_path / "tenants" / "acme" / "sessions" / "async1" / "runs" / "main" / "checkpoints.jsonl").exists()


def test_storage_after_1000_steps_is_within_2x_of_unique_payloads(tmp_path: Path) -> None:
    """1,000 agent steps of a growing history use at most twice the bytes of the distinct messages."""
    g = agent_loop(1000).compile(checkpointer=JsonlCheckpointSaver(tmp_path, fsync="batch"))
    cfg: RunnableConfig = {"configurable": {"thread_id": "long"}, "recursion_limit": 5000}
    out = g.invoke({"messages": [HumanMessage("start")], "i": 0}, cfg)
    assert len(out["messages"]) == 1000
    codec = CheckpointStateCodec()
    unique = sum(len(canonical_json(codec.encode(m))) for m in out["messages"])
    on_disk = _bytes_on_disk(tmp_path)
    assert on_disk <= 2 * unique, (on_disk, unique)
    fresh = agent_loop(1000).compile(checkpointer=JsonlCheckpointSaver(tmp_path)).get_state(cfg)
    assert fresh.values["messages"] == out["messages"]


def test_storage_grows_linearly_with_a_delta_channel(tmp_path: Path) -> None:
    """An 8x longer session takes about 8x the bytes (growth exponent <= 1.1, not quadratic)."""
    sizes = []
    for steps in (100, 800):
        root = tmp_path / str(steps)
        g = agent_loop(steps).compile(checkpointer=JsonlCheckpointSaver(root, fsync="batch"))
        g.invoke({"messages": [], "i": 0}, {"configurable": {"thread_id": "t"}, "recursion_limit": 5000})
        sizes.append(_bytes_on_disk(root))
    assert math.log(sizes[1] / sizes[0]) / math.log(8) <= 1.1, sizes


def test_storage_grows_linearly_with_plain_add_messages(tmp_path: Path) -> None:
    """A plain add_messages list (the whole list in every checkpoint) still grows ~linearly on disk."""
    sizes = []
    for steps in (100, 800):
        root = tmp_path / str(steps)
        g = agent_loop(steps, state=ChatState).compile(checkpointer=JsonlCheckpointSaver(root, fsync="batch"))
        out = g.invoke({"messages": [], "i": 0}, {"configurable": {"thread_id": "t"}, "recursion_limit": 5000})
        sizes.append(_bytes_on_disk(root))
    assert math.log(sizes[1] / sizes[0]) / math.log(8) <= 1.1, sizes
    again = (
        agent_loop(800, state=ChatState)
        .compile(checkpointer=JsonlCheckpointSaver(root))
        .get_state({"configurable": {"thread_id": "t"}})
    )
    assert again.values["messages"] == out["messages"]


def test_keep_last_on_a_real_graph_keeps_state_and_drops_history(tmp_path: Path) -> None:
    """With keep_last, a long run keeps few checkpoints yet resumes with its whole history."""
    g = agent_loop(200).compile(checkpointer=JsonlCheckpointSaver(tmp_path, keep_last=5, fsync="batch"))
    cfg: RunnableConfig = {"configurable": {"thread_id": "kept"}, "recursion_limit": 5000}
    out = g.invoke({"messages": [HumanMessage("start")], "i": 0}, cfg)
    fresh = JsonlCheckpointSaver(tmp_path)
    assert len(list(fresh.list(cfg))) < 150
    state = agent_loop(200).compile(checkpointer=fresh).get_state(cfg)
    assert state.values["messages"] == out["messages"]
    history = list(agent_loop(200).compile(checkpointer=fresh).get_state_history(cfg))
    assert all(len(h.values.get("messages", [])) <= len(out["messages"]) for h in history)
