"""Tenants, users and forks through a real compiled graph with a DeltaChannel messages channel."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from checkpointing.saver import JsonlCheckpointSaver


def add_batches(state: list, writes: Any) -> list:
    out = list(state or [])
    for w in writes:
        out = add_messages(out, w)
    return out


def merge(left: dict, right: dict) -> dict:
    return {**(left or {}), **(right or {})}


class State(TypedDict):
    messages: Annotated[list, DeltaChannel(add_batches, snapshot_frequency=4)]
    store: Annotated[dict, merge]
    n: int


def build(saver: BaseCheckpointSaver, label: str) -> Any:
    def agent(s: Any) -> dict[str, Any]:
        n = s.get("n", 0)
        call = {"id": f"{label}-c{n}", "name": "lookup", "args": {"n": n}}
        return {"messages": [AIMessage("", tool_calls=[call], id=f"{label}-a{n}")], "n": n + 1}

    def tools(s: Any) -> dict[str, Any]:
        n = s["n"] - 1
        result = f"{label} result {n} " + "x" * 400
        return {
            "messages": [ToolMessage(result, tool_call_id=f"{label}-c{n}", id=f"{label}-t{n}")],
            "store": {f"{label}-c{n}": result},
        }

    b: Any = StateGraph(State)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["n"] <= 6 else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=saver)


def _cfg(tenant: str | None, thread: str) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread}
    if tenant:
        conf["tenant_id"] = tenant
    return {"configurable": conf, "recursion_limit": 100}


def test_non_default_tenant_sees_all_of_its_state_and_never_another(tmp_path: Path) -> None:
    """Same thread id under three tenants: each get_state / history / delta history is its own, never empty."""
    saver = JsonlCheckpointSaver(tmp_path, default_tenant="default")
    runs = {"acme": "A", "globex": "G", None: "D"}
    for tenant, label in runs.items():
        build(saver, label).invoke(
            {"messages": [HumanMessage(f"go {label}", id=f"{label}-h")], "n": 0}, _cfg(tenant, "s1")
        )
    fresh = JsonlCheckpointSaver(tmp_path, default_tenant="default")
    for tenant, label in runs.items():
        cfg = _cfg(tenant, "s1")
        graph = build(fresh, label)
        state = graph.get_state(cfg)
        msgs = state.values["messages"]
        assert len(msgs) == 1 + 7 + 6 and all(m.id.startswith(f"{label}-") for m in msgs)
        assert len(state.values["store"]) == 6 and all(k.startswith(f"{label}-") for k in state.values["store"])
        history = list(graph.get_state_history(cfg))
        assert len(history) > 10
        for snap in history[:-2]:  # all but the input checkpoints hold messages, all of this tenant
            assert snap.values["messages"], snap.config
            assert {m.id.split("-")[0] for m in snap.values["messages"]} == {label}
        latest = fresh.get_tuple(cfg)
        assert latest is not None
        delta = fresh.get_delta_channel_history(
            config=latest.config | {"configurable": {**latest.config["configurable"], **cfg["configurable"]}},
            channels=["messages"],
        )
        written = [m for w in delta["messages"]["writes"] for m in (w[2] if isinstance(w[2], list) else [w[2]])]
        seed = delta["messages"].get("seed")
        ids = [m.id for m in written] + [m.id for m in (getattr(seed, "value", seed) or [])]
        assert ids and all(i.startswith(f"{label}-") for i in ids)
    assert (tmp_path / "tenants" / "acme" / "sessions" / "s1").is_dir()
    assert (tmp_path / "tenants" / "default" / "sessions" / "s1").is_dir()


def test_second_user_of_a_tenant_and_a_forked_branch_read_their_own_state(tmp_path: Path) -> None:
    """Another thread of the same tenant is separate; a fork from an old checkpoint continues from there."""
    saver = JsonlCheckpointSaver(tmp_path)
    graph = build(saver, "U")
    graph.invoke({"messages": [HumanMessage("first user", id="U-h")], "n": 0}, _cfg("acme", "user1"))
    build(saver, "V").invoke({"messages": [HumanMessage("second", id="V-h")], "n": 0}, _cfg("acme", "user2"))
    history = list(graph.get_state_history(_cfg("acme", "user1")))
    old = next(h for h in history if h.values.get("n") == 3 and h.next == ("agent",))
    fork_cfg = graph.update_state(old.config | {"configurable": {**old.config["configurable"], "tenant_id": "acme"}},
                                  {"messages": [HumanMessage("fork!", id="U-fork")]})  # fmt: skip
    forked = JsonlCheckpointSaver(tmp_path)
    fork_state = build(forked, "U").get_state(
        fork_cfg | {"configurable": {**fork_cfg["configurable"], "tenant_id": "acme"}}
    )
    assert [m.id for m in fork_state.values["messages"]][-1] == "U-fork"
    assert len(fork_state.values["messages"]) == len(old.values["messages"]) + 1
    head = {**history[0].config["configurable"], "tenant_id": "acme"}
    main = build(forked, "U").get_state({"configurable": head})
    assert main.values["messages"][-1].id != "U-fork" and len(main.values["messages"]) == 14
    other = build(forked, "V").get_state(_cfg("acme", "user2"))
    assert {m.id[0] for m in other.values["messages"]} == {"V"}
