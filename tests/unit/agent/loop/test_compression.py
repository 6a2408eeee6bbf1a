"""Compression tiers on constructed histories: what stays whole, what becomes a pointer/placeholder."""

from __future__ import annotations

import copy

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import ValidationError

from agent.core.config import CompressionConfig
from agent.core.errors import ConfigError, ModelCallFailed
from agent.loop.compression import (
    CompressionSettings,
    CompressionTier,
    ToolPairingError,
    acompress_hard,
    assert_tool_pairs,
    choose_tier,
    compress,
    compress_hard,
    compress_placeholder,
    compress_pointer,
    hard_compression_allowed,
    is_archived,
    is_summary,
)
from agent.loop.token_count import MessageTokenLedger, TokenCounter
from checkpointing.messages import dto_to_message, message_to_dto


def result_text(i: int) -> str:
    """A large, recognisable tool result."""
    return f"RESULT-{i}:" + "".join(f"line {j} of result {i}\n" for j in range(80))


def history(n_steps: int, parallel: int = 1) -> list[BaseMessage]:
    """system, task, then `n_steps` AI steps each calling `parallel` tools, then a final answer."""
    msgs: list[BaseMessage] = [
        SystemMessage("You are helpful.", id="sys"),
        HumanMessage("Do the task", id="task"),
    ]
    k = 0
    for i in range(n_steps):
        calls = [{"id": f"call_{k + p}", "name": f"tool{(k + p) % 3}", "args": {"n": k + p}} for p in range(parallel)]
        msgs.append(AIMessage(f"step {i}", id=f"ai_{i}", tool_calls=calls))
        for p in range(parallel):
            msgs.append(ToolMessage(result_text(k + p), tool_call_id=f"call_{k + p}", id=f"tm_{k + p}"))
        k += parallel
    msgs.append(AIMessage("done", id="final"))
    return msgs


def tools(msgs: list[BaseMessage]) -> list[ToolMessage]:
    """The tool messages of a history."""
    return [m for m in msgs if isinstance(m, ToolMessage)]


def test_choose_tier_boundaries() -> None:
    """Usage below 50% does nothing; 50/80/95% switch to pointer/placeholder/hard."""
    s = CompressionSettings()
    assert choose_tier(499, 1000, s) is CompressionTier.NONE
    assert choose_tier(500, 1000, s) is CompressionTier.POINTER
    assert choose_tier(799, 1000, s) is CompressionTier.POINTER
    assert choose_tier(800, 1000, s) is CompressionTier.PLACEHOLDER
    assert choose_tier(949, 1000, s) is CompressionTier.PLACEHOLDER
    assert choose_tier(950, 1000, s) is CompressionTier.HARD
    assert choose_tier(5000, 1000, s) is CompressionTier.HARD
    assert choose_tier(990, 1000, CompressionSettings(enabled=False)) is CompressionTier.NONE


def test_thresholds_are_configurable_and_checked() -> None:
    """Custom thresholds move the tiers; out-of-order ones and a zero window are refused."""
    s = CompressionSettings(tier_pointer=0.3, tier_placeholder=0.4, tier_hard=0.6)
    assert choose_tier(350, 1000, s) is CompressionTier.POINTER
    assert choose_tier(600, 1000, s) is CompressionTier.HARD
    with pytest.raises(ValidationError, match="pointer <= placeholder <= hard"):
        CompressionSettings(tier_pointer=0.9, tier_placeholder=0.8)
    with pytest.raises(ConfigError, match="context_window"):
        choose_tier(10, 0, s)


def test_settings_from_runtime_config() -> None:
    """CompressionSettings takes the values of the runtime's `compression:` config section."""
    cfg = CompressionConfig(tier_pointer=0.4, keep_full_mid=5, preview_chars=50, max_hard_compressions=1)
    s = CompressionSettings.from_config(cfg)
    assert (s.tier_pointer, s.keep_full_mid, s.preview_chars, s.max_hard_compressions) == (0.4, 5, 50, 1)
    assert hard_compression_allowed(0, s) and not hard_compression_allowed(1, s)


def test_pointer_tier_keeps_last_three_whole_and_points_to_older() -> None:
    """50-80%: the last three results are untouched; older ones show tool, id, size, preview, read hint."""
    msgs = history(6)
    snapshot = copy.deepcopy(msgs)
    res = compress_pointer(msgs, CompressionSettings(preview_chars=40))
    assert msgs == snapshot  # input not mutated
    out = tools(res.messages)
    assert [t.content for t in out[3:]] == [result_text(i) for i in (3, 4, 5)]
    for i, t in enumerate(out[:3]):
        assert is_archived(t)
        text = str(t.content)
        assert f"call_id=call_{i}" in text and f"tool=tool{i % 3}" in text
        assert f"size={len(result_text(i))} chars" in text
        assert result_text(i)[:40] in text and result_text(i)[:41] not in text
        assert f'read_tool_result(tool_call_id="call_{i}", offset=0, limit=2000)' in text
    assert [m.id for m in res.messages] == [m.id for m in msgs]
    assert [t.tool_call_id for t in out] == [f"call_{i}" for i in range(6)]
    assert res.archived_tool_call_ids == ["call_0", "call_1", "call_2"]
    assert res.tier is CompressionTier.POINTER and res.original_count == res.new_count == len(msgs)
    assert res.tokens_after < res.tokens_before
    assert_tool_pairs(res.messages)


def test_pointer_tier_is_idempotent() -> None:
    """Compressing an already compressed history at the same tier changes nothing more."""
    first = compress_pointer(history(6))
    second = compress_pointer(first.messages)
    assert second.messages == first.messages
    assert second.archived_tool_call_ids == []


def test_placeholder_tier_keeps_only_last_result_whole() -> None:
    """80-95%: only the newest result is whole; older ones (pointers too) become one-line placeholders."""
    pointed = compress_pointer(history(5)).messages
    res = compress_placeholder(pointed)
    out = tools(res.messages)
    assert out[-1].content == result_text(4)
    for i, t in enumerate(out[:-1]):
        text = str(t.content)
        assert is_archived(t) and "\n" not in text
        assert f"call_id=call_{i}" in text and f'read_tool_result(tool_call_id="call_{i}"' in text
        assert f"size={len(result_text(i))} chars" in text
        assert "line 0 of result" not in text
    assert res.archived_tool_call_ids == ["call_0", "call_1", "call_2", "call_3"]
    assert_tool_pairs(res.messages)


def test_small_results_stay_whole() -> None:
    """A result shorter than its pointer would be is never replaced."""
    msgs: list[BaseMessage] = [HumanMessage("go", id="h")]
    for i in range(5):
        msgs += [
            AIMessage("", id=f"a{i}", tool_calls=[{"id": f"c{i}", "name": "ok", "args": {}}]),
            ToolMessage("ok", tool_call_id=f"c{i}", id=f"t{i}"),
        ]
    res = compress_placeholder(msgs)
    assert [t.content for t in tools(res.messages)] == ["ok"] * 5
    assert res.archived_tool_call_ids == []


def test_archived_message_survives_the_checkpoint_codec() -> None:
    """A pointer round-trips through the canonical DTO and is still recognised as archived."""
    pointer = tools(compress_placeholder(history(3)).messages)[0]
    back = dto_to_message(message_to_dto(pointer))
    assert back == pointer and is_archived(back)


class FakeSummarizer:
    """Records what it was asked to summarize."""

    def __init__(self, text: str = "SUMMARY: did steps") -> None:
        self.text = text
        self.calls: list[list[BaseMessage]] = []

    def __call__(self, messages: list[BaseMessage]) -> str:
        self.calls.append(messages)
        return self.text


def test_hard_compression_replaces_older_history_with_one_summary() -> None:
    """>=95%: system + task + summary + the last two steps; the summarizer saw only older history."""
    msgs = history(6)
    snapshot = copy.deepcopy(msgs)
    fake = FakeSummarizer()
    res = compress_hard(msgs, fake, CompressionSettings(hard_keep_recent=2))
    assert msgs == snapshot
    out = res.messages
    assert [m.id for m in out[:2]] == ["sys", "task"]
    assert is_summary(out[2]) and "SUMMARY: did steps" in str(out[2].content)
    assert [m.id for m in out[3:]] == ["ai_5", "tm_5", "final"]
    assert out[4].content == result_text(5)
    assert res.summary == "SUMMARY: did steps" and res.tier is CompressionTier.HARD
    assert res.original_count == len(msgs) and res.new_count == len(out) == 6
    assert res.archived_tool_call_ids == [f"call_{i}" for i in range(5)]
    (seen,) = fake.calls
    assert seen[0].id == "ai_0" and "ai_5" not in [m.id for m in seen]
    assert all(is_archived(t) for t in tools(seen))  # the summarizer gets pointers, not full results
    assert_tool_pairs(out)
    assert res.tokens_after < res.tokens_before


@pytest.mark.parametrize("keep", [1, 2, 3, 4, 5, 9])
def test_hard_compression_never_splits_parallel_tool_calls(keep: int) -> None:
    """With three parallel calls per step, every cut keeps AI calls and their results together."""
    msgs = history(4, parallel=3)
    res = compress_hard(msgs, FakeSummarizer(), CompressionSettings(hard_keep_recent=keep))
    assert_tool_pairs(res.messages)
    kept_calls = {t.tool_call_id for t in tools(res.messages)}
    for m in res.messages:
        if isinstance(m, AIMessage):
            assert {tc["id"] for tc in m.tool_calls} <= kept_calls


def test_hard_compression_twice_folds_the_previous_summary() -> None:
    """A second hard compression summarizes the first summary too, leaving a single summary."""
    first = compress_hard(history(6), FakeSummarizer("first summary"))
    grown = [*first.messages[:-1]]
    for i in range(6, 9):
        grown += [
            AIMessage("", id=f"ai_{i}", tool_calls=[{"id": f"call_{i}", "name": "t", "args": {}}]),
            ToolMessage(result_text(i), tool_call_id=f"call_{i}", id=f"tm_{i}"),
        ]
    fake = FakeSummarizer("second summary")
    second = compress_hard(grown, fake)
    assert any("first summary" in str(m.content) for m in fake.calls[0])
    summaries = [m for m in second.messages if is_summary(m)]
    assert len(summaries) == 1 and "second summary" in str(summaries[0].content)
    assert [m.id for m in second.messages[:2]] == ["sys", "task"]
    assert_tool_pairs(second.messages)


def test_hard_compression_with_nothing_older_does_not_call_the_model() -> None:
    """A history of one step has nothing to summarize: no summarizer call, no summary."""
    msgs: list[BaseMessage] = [SystemMessage("s", id="s"), HumanMessage("t", id="t"), AIMessage("hi", id="a")]
    fake = FakeSummarizer()
    res = compress_hard(msgs, fake)
    assert fake.calls == [] and res.summary is None and res.messages == msgs


def test_empty_summary_is_a_model_error() -> None:
    """A summarizer that returns nothing is reported, not silently used."""
    with pytest.raises(ModelCallFailed, match="empty summary"):
        compress_hard(history(4), FakeSummarizer("  "))


async def test_async_hard_compression_matches_sync() -> None:
    """acompress_hard with an async summarizer gives the same messages as compress_hard."""

    async def summarize(messages: list[BaseMessage]) -> str:
        return "SUMMARY: did steps"

    sync = compress_hard(history(5), FakeSummarizer())
    res = await acompress_hard(history(5), summarize)
    assert res.messages == sync.messages and res.summary == sync.summary


def test_compress_dispatches_on_tier() -> None:
    """compress() applies the chosen tier; hard without a summarizer is a config error."""
    msgs = history(5)
    assert compress(msgs, CompressionTier.NONE).messages == msgs
    assert compress(msgs, CompressionTier.POINTER).archived_tool_call_ids == ["call_0", "call_1"]
    assert len(compress(msgs, CompressionTier.PLACEHOLDER).archived_tool_call_ids) == 4
    assert compress(msgs, CompressionTier.HARD, summarizer=FakeSummarizer()).summary
    with pytest.raises(ConfigError, match="summarizer"):
        compress(msgs, CompressionTier.HARD)


def test_event_payload_records_counts_tokens_summary_and_ids() -> None:
    """The payload for the compression event carries everything the seed asks to record."""
    res = compress_hard(history(4), FakeSummarizer("S"), counter=TokenCounter("gpt-4o"), tokens_before=9999)
    p = res.event_payload()
    assert p["tier"] == "hard" and p["summary"] == "S" and p["tokens_before"] == 9999
    assert p["original_count"] == 11 and p["new_count"] == len(res.messages)
    assert p["tokens_after"] == TokenCounter("gpt-4o").count_messages(res.messages)
    assert p["archived_tool_call_ids"] == res.archived_tool_call_ids


def test_assert_tool_pairs_detects_broken_histories() -> None:
    """Orphan results, unanswered calls and results after an unrelated message are all refused."""
    call = AIMessage(
        "", id="a", tool_calls=[{"id": "c1", "name": "t", "args": {}}, {"id": "c2", "name": "t", "args": {}}]
    )
    r1 = ToolMessage("1", tool_call_id="c1")
    r2 = ToolMessage("2", tool_call_id="c2")
    assert_tool_pairs([call, r2, r1])
    with pytest.raises(ToolPairingError, match="orphan"):
        assert_tool_pairs([HumanMessage("x"), r1])
    with pytest.raises(ToolPairingError, match="no result"):
        assert_tool_pairs([call, r1, HumanMessage("x")])
    with pytest.raises(ToolPairingError, match="orphan or duplicate"):
        assert_tool_pairs([call, r1, r1, r2])
    with pytest.raises(ToolPairingError, match="at the end"):
        assert_tool_pairs([call, r1])
    assert_tool_pairs([HumanMessage("x"), call], allow_pending_tail=True)


def test_compression_with_the_ledger_recounts_only_rewritten_messages() -> None:
    """Sizing a compressed history through the ledger tokenizes just the archived messages again."""
    calls: list[str] = []

    class Spy(TokenCounter):
        def count_message(self, msg: BaseMessage) -> int:
            calls.append(str(msg.id))
            return super().count_message(msg)

    ledger = MessageTokenLedger(Spy("gpt-4o"))
    msgs = history(10)
    ledger.count_messages(msgs)
    calls.clear()
    res = compress_pointer(msgs, counter=ledger)
    assert sorted(calls) == sorted(f"tm_{i}" for i in range(7))
    assert res.tokens_before == ledger.counter.count_messages(msgs)


def test_a_read_back_is_never_archived() -> None:
    """A `read_tool_result` output stays whole at every tier: it is not in the ToolResultStore, so a
    pointer to it would name a result the model cannot read; the result it read from is archived."""
    msgs = history(4)
    page = (
        "[read_tool_result tool_call_id=call_0 tool=tool0 offset=0 end=2000 total=2000 next_offset=none]\n" + "x" * 2000
    )
    msgs[-1:-1] = [
        AIMessage("", id="ai_read", tool_calls=[{"id": "call_read", "name": "read_tool_result", "args": {}}]),
        ToolMessage(page, tool_call_id="call_read", id="tm_read"),
        AIMessage("", id="ai_last", tool_calls=[{"id": "call_last", "name": "tool0", "args": {}}]),
        ToolMessage(result_text(9), tool_call_id="call_last", id="tm_last"),
    ]
    for res in (compress_pointer(msgs), compress_placeholder(msgs)):
        read = next(t for t in tools(res.messages) if t.tool_call_id == "call_read")
        assert read.content == page and not is_archived(read)
        assert "call_read" not in res.archived_tool_call_ids and "call_0" in res.archived_tool_call_ids
        assert_tool_pairs(res.messages)
