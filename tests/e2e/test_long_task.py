"""The long scripted run of configs/long-task.yaml: 60 large tool results in a 5,000-token window."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from agent.core.tool_spec import digest_text
from agent.loop.compression import CompressionSettings, assert_tool_pairs, choose_tier, is_archived, is_summary
from agent.loop.context_manager import SUMMARY_INSTRUCTIONS
from agent.loop.models import ScriptedChatModel
from agent.loop.token_count import TokenCounter
from agent.runner import AgentRunner, RunEvent
from agent.tools.tool_results import ToolResultStore
from tests.support.runners import ROOT, make_config

TASK = "Read the sensor log back in slices and report."
SESSION = "s-long-task"


@dataclass
class LongRun:
    """One finished long run: the runner, its stream events, the final state and the model's prompts."""

    runner: AgentRunner
    events: list[RunEvent]
    state: dict[str, Any]
    calls: list[list[BaseMessage]]

    @property
    def result(self) -> dict[str, Any]:
        """The `final` event's RunResult."""
        return self.events[-1].data

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Payloads of the stream events of `kind`, in order."""
        return [e.data for e in self.events if e.kind == kind]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> LongRun:
    """Run configs/long-task.yaml once through the real AgentRunner (JSONL saver from the config)."""
    tmp = tmp_path_factory.mktemp("long")
    runner = AgentRunner.from_config(make_config(tmp, base="long-task.yaml"))
    events = list(runner.stream(TASK, new_session_id=SESSION))
    model = runner.builder.last_runtime(SESSION).model  # type: ignore[attr-defined]
    assert isinstance(model, ScriptedChatModel)
    return LongRun(runner, events, runner.state(SESSION), model.calls)


def _window(run: LongRun) -> int:
    return run.runner.settings.model.context_window


def _is_summarizer_prompt(prompt: list[BaseMessage]) -> bool:
    return prompt[0].content == SUMMARY_INSTRUCTIONS


def test_long_run_finishes_completed_after_sixty_tool_calls(run: LongRun) -> None:
    """The run completes with its answer after 60 tool calls and every scripted response used."""
    assert run.result["status"] == "COMPLETED", run.result["error"]
    assert run.result["finish_reason"] == "completed"
    assert run.result["tool_calls"] == 60
    assert "59 slices" in run.result["answer"]
    script = yaml.safe_load((ROOT / "agent" / "assets" / "scripts" / "long-task.yaml").read_text())
    assert run.result["model_calls"] == len(script["responses"]) == len(run.calls)


def test_no_prompt_reaches_95_percent_of_the_window(run: LongRun) -> None:
    """Every request the model received (reasoning and summaries) stays under 95% of the window."""
    limit = 0.95 * _window(run)
    counter = TokenCounter(run.runner.settings.model.name)
    sizes = [counter.count_messages(p) for p in run.calls]
    assert max(sizes) < limit, (max(sizes), limit)
    assert max(count_tokens_approximately(p) for p in run.calls) < limit
    # without compression the same history would have needed several windows
    store = ToolResultStore.from_entries(run.state["tool_result_store"], run.runner.blobs)
    assert sum(len(str(store.get(i))) for i in store.ids()) / 4 > 8 * _window(run)


def test_scripted_usage_matches_the_real_prompts(run: LongRun) -> None:
    """The usage the script reports is the size of the prompt the model really got (within 1%)."""
    for ev in run.of_kind("model_call"):
        actual = count_tokens_approximately(run.calls[ev["call_index"]])
        assert abs(ev["usage"]["input_tokens"] - actual) <= max(2, actual // 100), ev


def test_at_most_two_hard_compressions_with_the_scripted_summaries(run: LongRun) -> None:
    """Hard compression runs exactly twice (the max); each uses the model's summary at its script slot."""
    hard = [c for c in run.of_kind("compression") if c["tier"] == "hard"]
    assert len(hard) == 2
    assert run.state["context_compression_count"] == 2
    summarizer_calls = [e["call_index"] for e in run.of_kind("model_call") if e["node"] == "memory"]
    assert summarizer_calls == [19, 56]
    assert [i for i, p in enumerate(run.calls) if _is_summarizer_prompt(p)] == [19, 56]
    for n, (event, call_index) in enumerate(zip(hard, summarizer_calls, strict=True), start=1):
        assert event["summary"].startswith(f"SUMMARY {n}:")
        next_prompt = run.calls[call_index + 1]
        summaries = [m for m in next_prompt if is_summary(m)]
        assert len(summaries) == 1 and event["summary"] in str(summaries[0].content)


def test_every_tier_runs_and_events_name_their_reason(run: LongRun) -> None:
    """The run goes through pointer, placeholder and hard tiers, all on the token budget."""
    comps = run.of_kind("compression")
    assert {c["tier"] for c in comps} == {"pointer", "placeholder", "hard"}
    assert all(c["reason"] == "budget" and not c["exhausted"] for c in comps)
    settings = CompressionSettings.from_config(run.runner.settings.compression)
    for c in comps:
        assert choose_tier(c["tokens_before"], _window(run), settings).value == c["tier"]
        assert c["tokens_after"] < c["tokens_before"]


def _around(run: LongRun) -> list[tuple[dict[str, Any], int, int]]:
    """(compression event, call index of the reasoning call before it, of the call after it)."""
    out: list[tuple[dict[str, Any], int, int]] = []
    before = -1
    pending: list[dict[str, Any]] = []
    for ev in run.events:
        if ev.kind == "compression":
            pending.append(ev.data)
        elif ev.kind == "model_call" and ev.data["node"] == "reasoning":
            out.extend((c, before, ev.data["call_index"]) for c in pending)
            pending, before = [], ev.data["call_index"]
    assert not pending
    return out


def test_compression_events_record_the_right_counts(run: LongRun) -> None:
    """Each event's counts and tokens match the prompts the model got just before and just after it."""
    counter = TokenCounter(run.runner.settings.model.name)
    system = SystemMessage(run.runner.settings.loop.system_prompt)
    around = _around(run)
    assert len(around) == len(run.of_kind("compression")) > 30
    for event, before, after in around:
        # the context grew by the reply that asked for a tool and the tool's result since `before`
        assert event["original_count"] == len(run.calls[before]) + 2
        prompt = run.calls[after]
        assert event["new_count"] == len(prompt)
        # tokens_after: the context as kept in state (system message without the rendered plan)
        assert event["tokens_after"] == counter.count_messages([system, *prompt[1:]])
        tool_msgs = {m.tool_call_id: m for m in prompt if isinstance(m, ToolMessage)}
        for call_id in event["archived_tool_call_ids"]:
            if call_id in tool_msgs:
                assert is_archived(tool_msgs[call_id]), call_id
            else:
                assert event["tier"] == "hard", call_id  # summarized away, still in the store
        if event["tier"] == "hard":
            assert event["new_count"] == 7  # system, task, summary, two recent tool-call units


def test_tool_pairs_stay_intact_in_every_prompt(run: LongRun) -> None:
    """No request pairs a tool call without its result or the reverse, before or after any cut."""
    for prompt in run.calls:
        assert_tool_pairs(prompt)
    assert_tool_pairs(run.state["messages"])


def test_every_full_result_stays_readable(run: LongRun) -> None:
    """All 60 results are in tool_result_store in full, equal to what the tools returned."""
    store = ToolResultStore.from_entries(run.state["tool_result_store"], run.runner.blobs)
    log = run.runner.session_dir("default", SESSION) / "events.jsonl"
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    # the event log keeps each result's digest (the result itself is stored once, in the state)
    digests = {e["payload"]["tool_call_id"]: e["payload"]["digest"] for e in entries if e.get("type") == "tool_result"}
    assert len(store) == len(digests) == 60
    for call_id, digest in digests.items():
        assert digest_text(str(store.get(call_id))) == digest
    archived = {i for c in run.of_kind("compression") for i in c["archived_tool_call_ids"]}
    assert len(archived) >= 55 and archived <= set(store.ids())


def test_compression_events_are_written_to_the_session_event_log(run: LongRun) -> None:
    """The session's events.jsonl holds one compression entry per streamed event, same payload."""
    log = run.runner.session_dir("default", SESSION) / "events.jsonl"
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    logged = [e["payload"] for e in entries if e.get("type") == "compression"]
    streamed = run.of_kind("compression")
    assert len(logged) == len(streamed)
    for on_disk, live in zip(logged, streamed, strict=True):
        assert {k: on_disk[k] for k in live} == live
