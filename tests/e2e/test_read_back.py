"""The model reads an archived tool result back with read_tool_result and gets the original bytes."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from agent.loop.compression import is_archived
from agent.loop.models import ScriptedChatModel
from agent.runner import AgentRunner
from agent.tools.read_tool_result import parse_read_output
from agent.tools.tool_results import ToolResultStore
from tests.support.runners import make_config

SESSION = "s-read-back"
# varied lines, so a wrong offset cannot go unnoticed; non-ASCII so offsets are characters, not bytes
TABLE = "".join(f"{i:04d} | station-{i % 7} | temp={i * 1.5:7.2f} °C | note={'ab' * (i % 5)}\n" for i in range(70))
ARCHIVED = "call_3_1"  # the first read_file result (response 2 of the script)


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


RESPONSES: list[dict[str, Any]] = [
    {"content": '{"plan": "Write the table, read it several times, then check a range.", "todos": ["Write", "Check"]}'},
    _call("write_file", path="table.txt", content=TABLE),
    *[_call("read_file", path="table.txt") for _ in range(5)],
    # by now the first read is a pointer in the prompt: read parts of it back
    {
        **_call("read_tool_result", tool_call_id=ARCHIVED, offset=1234, limit=777),
        "expect_in_prompt": f"call_id={ARCHIVED}",
    },
    _call("read_tool_result", tool_call_id=ARCHIVED, offset=len(TABLE) - 100, limit=2000),
    _call("read_tool_result", tool_call_id="call_404_1", offset=0, limit=10),
    _call("read_tool_result", tool_call_id=ARCHIVED, offset=len(TABLE) + 1, limit=10),
    {"content": "Read back the archived table range; it matches."},
]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[AgentRunner, list[Any]]:
    """One run: small window (so results get archived), small inline limit (so they are blobs)."""
    tmp = tmp_path_factory.mktemp("readback")
    config = make_config(
        tmp,
        RESPONSES,
        model={"context_window": 6000, "name": "scripted-readback"},
        persistence={"inline_payload_max_bytes": 2048},
    )
    runner = AgentRunner.from_config(config)
    events = list(runner.stream("Write the table and check it.", new_session_id=SESSION))
    return runner, events


def _tool_messages(runner: AgentRunner, name: str) -> list[ToolMessage]:
    msgs = runner.state(SESSION)["messages"]
    return [m for m in msgs if isinstance(m, ToolMessage) and m.name == name]


def test_result_was_archived_before_it_was_read_back(run: tuple[AgentRunner, list[Any]]) -> None:
    """The model saw only a pointer for the first read when it asked for the range; the run completed."""
    runner, events = run
    assert events[-1].data["status"] == "COMPLETED"
    model = runner.builder.last_runtime(SESSION).model  # type: ignore[attr-defined]
    assert isinstance(model, ScriptedChatModel)
    prompt = model.calls[7]  # the call that answered with read_tool_result
    first = next(m for m in prompt if isinstance(m, ToolMessage) and m.tool_call_id == ARCHIVED)
    assert is_archived(first) and TABLE not in str(first.content)
    archived = {i for e in events if e.kind == "compression" for i in e.data["archived_tool_call_ids"]}
    assert ARCHIVED in archived


def test_read_tool_result_returns_the_exact_original_range(run: tuple[AgentRunner, list[Any]]) -> None:
    """The read-back gives exactly characters [1234, 2011) of the original result, and pages to the end."""
    runner, _ = run
    state = runner.state(SESSION)
    entry = next(e for e in state["tool_result_store"] if e["tool_call_id"] == ARCHIVED)
    assert "blob" in entry  # the full result lives in the blob store, not inline
    original = ToolResultStore.from_entries(state["tool_result_store"], runner.blobs).get(ARCHIVED)
    assert original == TABLE
    reads = _tool_messages(runner, "read_tool_result")
    header, text = parse_read_output(str(reads[0].content))
    assert text == original[1234:2011]
    assert header == {
        "tool_call_id": ARCHIVED,
        "tool": "read_file",
        "offset": "1234",
        "end": "2011",
        "total": str(len(original)),
        "next_offset": "2011",
    }
    header, text = parse_read_output(str(reads[1].content))
    assert text == original[-100:] and header["next_offset"] == "none"


def test_bad_read_backs_get_clear_errors(run: tuple[AgentRunner, list[Any]]) -> None:
    """An unknown call id and an offset past the end come back as error results naming what to do."""
    runner, _ = run
    unknown, past_end = _tool_messages(runner, "read_tool_result")[2:]
    assert unknown.status == "error" and "no archived tool result with tool_call_id 'call_404_1'" in unknown.content
    assert "call_id=" in str(unknown.content)
    assert past_end.status == "error" and "past the end" in str(past_end.content)
    # read-backs are views, not new archived results
    assert all(e["tool_name"] != "read_tool_result" for e in runner.state(SESSION)["tool_result_store"])
