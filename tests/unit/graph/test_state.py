"""The state schema: field registry in step with the TypedDict (seed §2 'add in step')."""

from __future__ import annotations

import typing

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from graph.state import FIELD_REGISTRY, SCHEMA_VERSION, TaskExecutionState, extend_list, merge_messages


def test_every_state_field_is_registered_and_nothing_else() -> None:
    """Adding a field to TaskExecutionState without registering it (or the reverse) fails here."""
    assert set(typing.get_type_hints(TaskExecutionState)) == set(FIELD_REGISTRY)


def test_registered_reducers_match_the_annotations() -> None:
    """Append fields and messages are DeltaChannels (messages with merge_messages), the rest replace."""
    hints = typing.get_type_hints(TaskExecutionState, include_extras=True)
    for name, (_, kind) in FIELD_REGISTRY.items():
        extras = getattr(hints[name], "__metadata__", ())
        if kind == "append":
            assert any(isinstance(x, DeltaChannel) for x in extras), name
        elif kind == "messages":
            assert any(isinstance(x, DeltaChannel) and x.reducer is merge_messages for x in extras), name
        else:
            assert not extras, name


def test_seed_groups_are_all_present() -> None:
    """Every seed §2 group has its key fields."""
    groups = {g for g, _ in FIELD_REGISTRY.values()}
    assert {"input", "plan", "loop", "protection", "context"} <= groups
    for f in ("user_input", "task_plan_text", "iteration_count", "consecutive_failures", "messages"):
        assert f in FIELD_REGISTRY
    assert SCHEMA_VERSION >= 1


def test_extend_list_is_batching_invariant() -> None:
    """The DeltaChannel reducer gives the same result for split or joined batches."""
    a, b = [["x"], "y"], [["z", "w"]]
    assert extend_list(extend_list(["s"], a), b) == extend_list(["s"], a + b) == ["s", "x", "y", "z", "w"]


def test_there_is_one_list_of_messages() -> None:
    """The state holds the model's context once: no second copy of the messages (issue 12 §2)."""
    assert "runtime_messages" not in FIELD_REGISTRY
    assert [n for n, (_, kind) in FIELD_REGISTRY.items() if kind == "messages"] == ["messages"]
    assert SCHEMA_VERSION >= 2


def _conversation() -> list:
    call = {"id": "c1", "name": "calc", "args": {"e": "1+1"}}
    return [
        HumanMessage("hi", id="h1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage("2", tool_call_id="c1", id="t1"),
        AIMessage("two", id="a2"),
    ]


def test_merge_messages_has_add_messages_semantics() -> None:
    """Append, replace by id, remove by id and remove-all give what LangGraph's add_messages gives."""
    msgs = _conversation()
    cases = [
        [msgs[:2], msgs[2:]],
        [msgs, [AIMessage("three", id="a2")]],
        [msgs, [RemoveMessage(id="a2")]],
        [msgs, [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("fresh", id="f1")]],
    ]
    for writes in cases:
        expected: list = []
        for w in writes:
            expected = add_messages(expected, w)
        assert merge_messages([], writes) == expected


def test_merge_messages_is_batching_invariant_and_deterministic() -> None:
    """Replaying stored writes in other batches rebuilds the same list, ids included (no uuid4)."""
    msgs = _conversation()
    writes = [
        [msgs[0], HumanMessage("no id")],
        [msgs[1]],
        [RemoveMessage(id="h1"), msgs[2]],
        [{"role": "user", "content": "a dict"}],
        [RemoveMessage(id=REMOVE_ALL_MESSAGES), msgs[3], HumanMessage("no id either")],
        [msgs[0]],
    ]
    whole = merge_messages([], writes)
    for cut in range(len(writes) + 1):
        assert merge_messages(merge_messages([], writes[:cut]), writes[cut:]) == whole
    stepwise: list = []
    for w in writes:
        stepwise = merge_messages(stepwise, [w])
    assert stepwise == whole == merge_messages([], writes)
    assert [m.content for m in whole] == ["two", "no id either", "hi"]
    assert all(m.id for m in whole)


def test_removing_an_unknown_message_is_an_error() -> None:
    """A RemoveMessage for an id the context does not hold fails (as add_messages does), never silently."""
    try:
        merge_messages(_conversation(), [[RemoveMessage(id="nope")]])
    except ValueError as err:
        assert "nope" in str(err)
    else:
        raise AssertionError("no error")


def test_merge_messages_matches_add_messages_step_by_step_on_random_histories() -> None:
    """Stepwise merges (the channel's path, which reuses the last id map) equal LangGraph's
    add_messages on random appends, replacements and removals, from fresh and from copied bases."""
    import copy
    import random

    rnd = random.Random(12)
    for _ in range(20):
        ours: list = []
        theirs: list = []
        ids: list[str] = []
        for step in range(60):
            kind = rnd.random()
            if kind < 0.6 or not ids:
                new_id = f"m{step}"
                ids.append(new_id)
                write: list = [HumanMessage(f"text {step}", id=new_id)]
            elif kind < 0.8:
                write = [AIMessage(f"replaced at {step}", id=rnd.choice(ids))]
            elif kind < 0.95:
                gone = ids.pop(rnd.randrange(len(ids)))
                write = [RemoveMessage(id=gone)]
            else:
                ids = [f"r{step}"]
                write = [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("fresh", id=ids[0])]
            base = copy.copy(ours) if rnd.random() < 0.5 else ours
            ours = merge_messages(base, [write])
            theirs = add_messages(theirs, write)
            assert ours == theirs


def test_merging_two_updates_into_one_base_from_two_threads_keeps_each_result_right() -> None:
    """LangGraph merges a node's writes into the channel's value from a worker thread (to route a
    conditional edge) and again when it applies them: each merge sees the base as it was, and a
    later replace-by-id lands on the right message of the result it is given."""
    import threading

    base = merge_messages([], [[HumanMessage("q", id="h"), AIMessage("a", id="a1")]])
    routed: list[list[typing.Any]] = []
    t = threading.Thread(target=lambda: routed.append(merge_messages(list(base), [AIMessage("x", id="x")])))
    t.start()
    t.join()
    applied = merge_messages(list(base), [ToolMessage("t", id="t1", tool_call_id="c1")])
    assert [m.id for m in routed[0]] == ["h", "a1", "x"]
    assert [m.id for m in applied] == ["h", "a1", "t1"]
    for result, replaced in ((routed[0], "x"), (applied, "t1"), (base, "a1")):
        again = merge_messages(list(result), [AIMessage("new", id=replaced)])
        assert [m.id for m in again] == [m.id for m in result]
        assert [m.content for m in again if m.id == replaced] == ["new"]
    grown = merge_messages(list(applied), [AIMessage("b", id="b"), RemoveMessage(id="a1")])
    assert [m.id for m in grown] == ["h", "t1", "b"]
