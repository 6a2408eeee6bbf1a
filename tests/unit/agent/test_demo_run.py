"""The six-node graph runs the shipped demo script end to end (plan, datasets, report, approval)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.runner import AgentRunner, RunEvent
from tests.support.runners import make_config


def _run_demo(tmp_path: Path) -> tuple[AgentRunner, list[RunEvent], dict[str, Any]]:
    runner = AgentRunner.from_config(make_config(tmp_path))
    events = list(runner.stream("please summarise the sales"))
    paused = events[-1].data
    assert paused["status"] == "PAUSED"
    events += list(runner.stream_resume(paused["session_id"], decision={"approved": True}))
    return runner, events, events[-1].data


def test_demo_pauses_for_approval_then_completes(tmp_path: Path) -> None:
    """The demo stops before the unsafe publish step and finishes once a human approves it."""
    runner, events, result = _run_demo(tmp_path)
    assert result["status"] == "COMPLETED"
    assert result["finish_reason"] == "completed"
    assert "45827.34" in result["answer"]
    assert result["iterations"] == 6
    assert result["model_calls"] == 7
    room = runner.session_dir("default", result["session_id"]) / "workspace"
    assert "| West | Edsger Dijkstra | 12088.64 |" in (room / "report.md").read_text()
    assert (room / "outbox" / "team-report.md").read_text() == (room / "report.md").read_text()
    assert all(t["status"] == "done" for t in result["todos"])
    interrupts = [e for e in events if e.kind == "interrupt"]
    assert interrupts[0].data["requests"][0]["name"] == "publish_report"


def test_demo_node_order(tmp_path: Path) -> None:
    """Nodes run in the wired order: init, planning, then reasoning/acting tool steps; refining
    decides the finish, and memory runs only when compression is due (never in the demo)."""
    _, events, _ = _run_demo(tmp_path)
    nodes = [e.data["node"] for e in events if e.kind == "node"]
    assert nodes[:5] == ["init", "planning", "reasoning", "acting", "reasoning"]
    assert nodes[-2:] == ["reasoning", "refining"]
    assert nodes.count("acting") == 5 and nodes.count("refining") == 1 and nodes.count("memory") == 0
    assert all(nodes[i + 1] == "reasoning" for i, node in enumerate(nodes) if node == "acting")
    kinds = [e.kind for e in events]
    assert "token" in kinds and kinds.count("tool_call") == 9 and kinds.count("tool_result") == 9


def test_demo_records_usage_and_finish_reasons(tmp_path: Path) -> None:
    """Each model call's usage and finish reason reach the stream and the AI messages."""
    runner, events, result = _run_demo(tmp_path)
    calls = [e.data for e in events if e.kind == "model_call"]
    assert [c["finish_reason"] for c in calls] == ["stop"] + ["tool_calls"] * 5 + ["stop"]
    assert calls[-1]["usage"]["input_tokens"] == 7530
    state = runner.state(result["session_id"])
    ai = [m for m in state["messages"] if m.type == "ai"]
    assert ai[-1].usage_metadata["output_tokens"] == 70
    assert state["active_skill"] == "data-analyst"
    assert [d["name"] for d in state["dataset_list"]] == ["sales", "regions"]
    session = runner.manager.get("default", result["session_id"])
    assert session.datasets_loaded and session.dataset_list == ["sales", "regions"]


def test_large_tool_result_goes_to_the_blob_store(tmp_path: Path) -> None:
    """The ~15 KB query result is stored whole, as a blob, in tool_result_store."""
    runner, _, result = _run_demo(tmp_path)
    state = runner.state(result["session_id"])
    big = [e for e in state["tool_result_store"] if e["size"] > 8192]
    assert len(big) == 1 and big[0]["tool_name"] == "query_dataset" and "blob" in big[0]
    assert runner.blobs.exists(big[0]["blob"]["$blob"])


def test_sandbox_manifest_follows_the_room(tmp_path: Path) -> None:
    """The checkpointed sandbox manifest lists exactly the room's files."""
    runner, _, result = _run_demo(tmp_path)
    manifest = runner.state(result["session_id"])["sandbox_manifest"]
    assert sorted(manifest) == ["outbox/team-report.md", "report.md"]


def test_demo_checkpoint_documents_carry_the_real_runtime_snapshot(tmp_path: Path) -> None:
    """Each checkpoint document's runtime snapshot holds the run's pins, skill and todo list as
    the state had them, and its next nodes are LangGraph's own."""
    runner, _, result = _run_demo(tmp_path)
    cfg = {"configurable": {"thread_id": result["session_id"], "tenant_id": "default"}}
    history = list(runner.graph.get_state_history(cfg))
    docs = [runner.saver.get_document(s.config) for s in history]  # type: ignore[attr-defined]
    snaps = [d["runtime_snapshot"] for d in docs if d is not None]
    # input, init, planning, two per tool step (reasoning, acting), the last reasoning, refining, the end
    assert len(snaps) == len(history) == 3 + 2 * 5 + 3
    newest = snaps[0]
    assert newest["active_skill"] == "data-analyst"
    assert [t["status"] for t in newest["todo"]] == ["done"] * len(newest["todo"]) and newest["todo"]
    assert newest["surface_digest"].startswith("sha256:") and newest["toolset_hash"].startswith("sha256:")
    assert any(any(t["status"] == "pending" for t in s["todo"]) for s in snaps)  # the list as it was then
    assert [d["next_nodes"] for d in docs if d] == [sorted(set(s.next)) for s in history]


def test_resume_of_a_finished_run_reports_the_run_it_finished(tmp_path: Path) -> None:
    """Resuming a finished session changes nothing and reports the run's own result, completed
    (read from the tail and the page) or failed (read from the state)."""
    calls = [{"tool_calls": [{"name": "calculator", "args": {"expression": "1+1"}}]} for _ in range(4)]
    (tmp_path / "f").mkdir()
    (tmp_path / "d").mkdir()
    failing = AgentRunner.from_config(
        make_config(tmp_path / "f", [*calls, {"content": "late"}], loop={"max_iterations": 2, "planning": "never"})
    )
    failed = failing.run("count", new_session_id="s-f")
    assert failed.status == "FAILED" and failed.finish_reason == "max_iterations"
    assert failing.resume("s-f").to_json() == failed.to_json()
    runner, _, done = _run_demo(tmp_path / "d")
    again = runner.resume(done["session_id"])
    assert again.to_json() == done and "45827.34" in again.answer
