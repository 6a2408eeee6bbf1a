"""The state schema: field registry in step with the TypedDict (seed §2 'add in step')."""

from __future__ import annotations

import typing

from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import add_messages

from graph.state import FIELD_REGISTRY, SCHEMA_VERSION, TaskExecutionState, extend_list


def test_every_state_field_is_registered_and_nothing_else() -> None:
    """Adding a field to TaskExecutionState without registering it (or the reverse) fails here."""
    assert set(typing.get_type_hints(TaskExecutionState)) == set(FIELD_REGISTRY)


def test_registered_reducers_match_the_annotations() -> None:
    """Append fields are DeltaChannels, messages uses add_messages, the rest replace."""
    hints = typing.get_type_hints(TaskExecutionState, include_extras=True)
    for name, (_, kind) in FIELD_REGISTRY.items():
        extras = getattr(hints[name], "__metadata__", ())
        if kind == "append":
            assert any(isinstance(x, DeltaChannel) for x in extras), name
        elif kind == "messages":
            assert any(x is add_messages for x in extras), name
        else:
            assert not extras, name


def test_seed_groups_are_all_present() -> None:
    """Every seed §2 group has its key fields."""
    groups = {g for g, _ in FIELD_REGISTRY.values()}
    assert {"input", "plan", "loop", "protection", "context"} <= groups
    for f in ("user_input", "task_plan_text", "iteration_count", "consecutive_failures", "runtime_messages"):
        assert f in FIELD_REGISTRY
    assert SCHEMA_VERSION >= 1


def test_extend_list_is_batching_invariant() -> None:
    """The DeltaChannel reducer gives the same result for split or joined batches."""
    a, b = [["x"], "y"], [["z", "w"]]
    assert extend_list(extend_list(["s"], a), b) == extend_list(["s"], a + b) == ["s", "x", "y", "z", "w"]
