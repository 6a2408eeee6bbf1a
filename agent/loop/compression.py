"""Context compression tiers as pure functions: a list of LangChain messages in, a new list out.

Usage of the context window picks the tier (`choose_tier`); the memory node decides when to apply:

| usage      | tier          | what happens                                                        |
|------------|---------------|---------------------------------------------------------------------|
| < 50%      | `none`        | nothing                                                             |
| 50% - 80%  | `pointer`     | the last `keep_full_mid` (3) tool results stay whole; older ones     |
|            |               | become a pointer: tool, call id, size, a preview, how to read it     |
| 80% - 95%  | `placeholder` | only the last `keep_full_high` (1) stays whole; older ones become a  |
|            |               | one-line placeholder (still naming the call id and read_tool_result) |
| >= 95%     | `hard`        | the summarizer replaces older history with one summary message      |

Inputs are never mutated. Messages keep their ids (an archived ToolMessage keeps its id and
tool_call_id), so `add_messages`-style replacement by id works. Tool calls stay paired with their
results after every cut: hard compression cuts only between whole units (an AI message with
tool calls plus all its ToolMessages), which `assert_tool_pairs` checks. Archived results are
never lost: they stay in the ToolResultStore and `read_tool_result` pages through them.

Every function takes `counter` (a TokenCounter, or better the session's MessageTokenLedger, which
re-counts only the messages a tier rewrote) for `tokens_before` / `tokens_after`; without one the
estimator is used. Pass `tokens_before` when the caller already knows it (the ledger's estimate).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import BaseModel, Field, model_validator

from agent.core.errors import ConfigError, ModelCallFailed
from agent.loop.message_view import ARCHIVED_KEY as ARCHIVED_KEY  # re-exported
from agent.loop.token_count import MessageCounter, TokenCounter
from agent.loop.tool_pairs import ToolPairingError as ToolPairingError  # re-exported
from agent.loop.tool_pairs import assert_tool_pairs as assert_tool_pairs  # re-exported
from agent.loop.tool_pairs import split_units

SUMMARY_KEY = "agentrt_summary"  # additional_kwargs marker on the hard-compression summary message

Summarizer = Callable[[list[BaseMessage]], str]
AsyncSummarizer = Callable[[list[BaseMessage]], Awaitable[str]]


class CompressionTier(StrEnum):
    """What compression does at a given window usage."""

    NONE = "none"
    POINTER = "pointer"
    PLACEHOLDER = "placeholder"
    HARD = "hard"


class CompressionSettings(BaseModel):
    """Compression knobs (thresholds are fractions of the context window)."""

    enabled: bool = True
    tier_pointer: float = Field(default=0.5, gt=0, le=1)
    tier_placeholder: float = Field(default=0.8, gt=0, le=1)
    tier_hard: float = Field(default=0.95, gt=0, le=1)
    keep_full_mid: int = Field(default=3, ge=0, description="tool results kept whole in the pointer tier")
    keep_full_high: int = Field(default=1, ge=0, description="tool results kept whole in the placeholder/hard tiers")
    preview_chars: int = Field(default=200, ge=0, description="characters of a result a pointer shows")
    read_limit: int = Field(default=2000, ge=1, description="the `limit` pointers suggest to read_tool_result")
    max_hard_compressions: int = Field(default=2, ge=0, description="per run (context_compression_count)")
    hard_keep_recent: int = Field(default=2, ge=1, description="most recent units hard compression keeps verbatim")
    keep_first_user: bool = Field(default=True, description="hard compression keeps the task (first user message)")

    @classmethod
    def from_config(cls, config: Any) -> CompressionSettings:
        """Settings from `agent.core.config.CompressionConfig` (or any object with these attribute names)."""
        return cls(**{k: getattr(config, k) for k in cls.model_fields if hasattr(config, k)})

    @model_validator(mode="after")
    def _ordered(self) -> CompressionSettings:
        if not self.tier_pointer <= self.tier_placeholder <= self.tier_hard:
            raise ConfigError(
                "compression thresholds must satisfy pointer <= placeholder <= hard "
                f"(got {self.tier_pointer}, {self.tier_placeholder}, {self.tier_hard})"
            )
        return self


@dataclass(frozen=True)
class CompressionResult:
    """What one compression did; `event_payload()` is what the compression event records."""

    tier: CompressionTier
    messages: list[BaseMessage]
    original_count: int
    new_count: int
    tokens_before: int
    tokens_after: int
    summary: str | None = None
    archived_tool_call_ids: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the message list differs from the input."""
        return self.tier is not CompressionTier.NONE and (bool(self.archived_tool_call_ids) or self.summary is not None)

    def event_payload(self) -> dict[str, Any]:
        """JSON-ready fields for the compression event (no messages)."""
        return {
            "tier": self.tier.value,
            "original_count": self.original_count,
            "new_count": self.new_count,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summary": self.summary,
            "archived_tool_call_ids": list(self.archived_tool_call_ids),
        }


def choose_tier(prompt_tokens: int, context_window: int, settings: CompressionSettings) -> CompressionTier:
    """The tier for a prompt of `prompt_tokens` in a window of `context_window` tokens."""
    if context_window <= 0:
        raise ConfigError(f"context_window must be a positive token count, got {context_window}")
    if not settings.enabled:
        return CompressionTier.NONE
    usage = prompt_tokens / context_window
    if usage >= settings.tier_hard:
        return CompressionTier.HARD
    if usage >= settings.tier_placeholder:
        return CompressionTier.PLACEHOLDER
    if usage >= settings.tier_pointer:
        return CompressionTier.POINTER
    return CompressionTier.NONE


def hard_compression_allowed(context_compression_count: int, settings: CompressionSettings) -> bool:
    """Whether another hard compression is allowed in this run."""
    return context_compression_count < settings.max_hard_compressions


def is_archived(msg: BaseMessage) -> bool:
    """Whether `msg` is a pointer or placeholder left by compression."""
    return isinstance(msg, ToolMessage) and ARCHIVED_KEY in msg.additional_kwargs


def is_summary(msg: BaseMessage) -> bool:
    """Whether `msg` is a hard-compression summary."""
    return SUMMARY_KEY in msg.additional_kwargs


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content if b)


def _read_hint(call_id: str, limit: int) -> str:
    return f'read_tool_result(tool_call_id="{call_id}", offset=0, limit={limit})'


def pointer_text(tool_name: str, call_id: str, size: int, preview: str, read_limit: int) -> str:
    """The content of a pointer: what the result was, its beginning, and how to read it all."""
    return (
        f"[archived tool result] tool={tool_name} call_id={call_id} size={size} chars\n"
        f"preview (first {len(preview)} of {size} chars):\n{preview}\n"
        f"[read the full result with {_read_hint(call_id, read_limit)}; continue with offset=next_offset]"
    )


def placeholder_text(tool_name: str, call_id: str, size: int, read_limit: int) -> str:
    """The content of a placeholder: one line naming the result and how to read it."""
    return (
        f"[archived tool result] tool={tool_name} call_id={call_id} size={size} chars; "
        f"read it with {_read_hint(call_id, read_limit)}"
    )


def _tool_names(messages: Sequence[BaseMessage]) -> dict[str, str]:
    return {
        tc_id: tc["name"]
        for m in messages
        if isinstance(m, AIMessage)
        for tc in m.tool_calls
        if (tc_id := tc.get("id"))
    }


READ_BACK_TOOL = "read_tool_result"
"""The tool whose results show part of an archived result (agent/tools/read_tool_result.py): never archived,
since only the results it reads are kept in the ToolResultStore."""


def _archive(
    messages: Sequence[BaseMessage], keep_full: int, style: str, settings: CompressionSettings
) -> tuple[list[BaseMessage], list[str]]:
    """Turn every ToolMessage but the last `keep_full` into `style` ("pointer" | "placeholder")."""
    tool_positions = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
    to_archive = set(tool_positions[: max(0, len(tool_positions) - keep_full)])
    names = _tool_names(messages) if to_archive else {}
    out: list[BaseMessage] = list(messages)
    archived: list[str] = []
    for i in sorted(to_archive):
        msg = messages[i]
        assert isinstance(msg, ToolMessage)
        marker = msg.additional_kwargs.get(ARCHIVED_KEY)
        if marker is None and (msg.name or names.get(msg.tool_call_id)) == READ_BACK_TOOL:
            continue  # a read-back is not stored itself: a pointer to it would name nothing the model can read
        if isinstance(marker, dict) and (marker.get("style") == "placeholder" or style == "pointer"):
            continue  # never re-expand, never re-archive at the same level
        if isinstance(marker, dict):
            name, size, preview = str(marker.get("tool_name", "")), int(marker.get("size", 0)), ""
        else:
            text = _text(msg.content)
            name = msg.name or names.get(msg.tool_call_id, "unknown")
            size, preview = len(text), text[: settings.preview_chars]
        if style == "pointer":
            new_text = pointer_text(name, msg.tool_call_id, size, preview, settings.read_limit)
        else:
            new_text = placeholder_text(name, msg.tool_call_id, size, settings.read_limit)
        if marker is None and len(new_text) >= size:
            continue  # the result is already smaller than its replacement would be
        kwargs = {**msg.additional_kwargs, ARCHIVED_KEY: {"style": style, "tool_name": name, "size": size}}
        out[i] = msg.model_copy(update={"content": new_text, "additional_kwargs": kwargs, "artifact": None})
        archived.append(msg.tool_call_id)
    return out, archived


def _count(counter: MessageCounter | None, messages: Sequence[BaseMessage]) -> int:
    return (counter if counter is not None else TokenCounter(None)).count_messages(messages)


def _result(
    tier: CompressionTier,
    before: Sequence[BaseMessage],
    after: list[BaseMessage],
    counter: MessageCounter | None,
    tokens_before: int | None,
    archived: list[str],
    summary: str | None = None,
) -> CompressionResult:
    return CompressionResult(
        tier=tier,
        messages=after,
        original_count=len(before),
        new_count=len(after),
        tokens_before=tokens_before if tokens_before is not None else _count(counter, before),
        tokens_after=_count(counter, after),
        summary=summary,
        archived_tool_call_ids=archived,
    )


def compress_pointer(
    messages: Sequence[BaseMessage],
    settings: CompressionSettings | None = None,
    *,
    counter: MessageCounter | None = None,
    tokens_before: int | None = None,
) -> CompressionResult:
    """Tier 50-80%: the last `keep_full_mid` tool results whole, older ones pointer + preview."""
    settings = settings or CompressionSettings()
    out, archived = _archive(messages, settings.keep_full_mid, "pointer", settings)
    return _result(CompressionTier.POINTER, messages, out, counter, tokens_before, archived)


def compress_placeholder(
    messages: Sequence[BaseMessage],
    settings: CompressionSettings | None = None,
    *,
    counter: MessageCounter | None = None,
    tokens_before: int | None = None,
) -> CompressionResult:
    """Tier 80-95%: the last `keep_full_high` tool results whole, older ones a placeholder."""
    settings = settings or CompressionSettings()
    out, archived = _archive(messages, settings.keep_full_high, "placeholder", settings)
    return _result(CompressionTier.PLACEHOLDER, messages, out, counter, tokens_before, archived)


@dataclass(frozen=True)
class HardPlan:
    """Where hard compression cuts: `head` and `recent` are kept, `older` is summarized."""

    head: list[BaseMessage]
    older: list[BaseMessage]
    recent: list[BaseMessage]

    def summarizer_input(self, settings: CompressionSettings) -> list[BaseMessage]:
        """What the summarizer sees: `older`, its tool results shortened to pointers."""
        return _archive(self.older, 0, "pointer", settings)[0]


def plan_hard(messages: Sequence[BaseMessage], settings: CompressionSettings) -> HardPlan:
    """Split `messages` for hard compression, cutting only between whole units."""
    head_len = 0
    if messages and isinstance(messages[0], SystemMessage):
        head_len = 1
    if settings.keep_first_user:
        for i in range(head_len, len(messages)):
            if isinstance(messages[i], AIMessage):
                break
            if isinstance(messages[i], HumanMessage) and not is_summary(messages[i]):
                head_len = i + 1
                break
    units = split_units(messages[head_len:])
    keep = min(settings.hard_keep_recent, len(units))
    if keep == len(units) and len(units) > 1:
        keep = len(units) - 1  # keep fewer recent units rather than summarize nothing
    older = [m for u in units[: len(units) - keep] for m in u]
    recent = [m for u in units[len(units) - keep :] for m in u]
    return HardPlan(list(messages[:head_len]), older, recent)


def _summary_message(summary: str, replaced: list[BaseMessage]) -> HumanMessage:
    digest = hashlib.sha256("\0".join(str(m.id) for m in replaced).encode()).hexdigest()[:24]
    return HumanMessage(
        content=(
            f"[summary of {len(replaced)} earlier messages; their tool results stay readable with "
            f"read_tool_result]\n{summary}"
        ),
        id=f"summary-{digest}",
        additional_kwargs={SUMMARY_KEY: {"replaced_count": len(replaced)}},
    )


def finish_hard(
    messages: Sequence[BaseMessage],
    plan: HardPlan,
    summary: str | None,
    settings: CompressionSettings,
    *,
    counter: MessageCounter | None = None,
    tokens_before: int | None = None,
) -> CompressionResult:
    """Assemble head + summary + recent (older tool results archived) once the summary is known."""
    if not plan.older:
        out, archived = _archive(messages, settings.keep_full_high, "placeholder", settings)
        return _result(CompressionTier.HARD, messages, out, counter, tokens_before, archived)
    if summary is None or not summary.strip():
        raise ModelCallFailed("the summarizer returned an empty summary; retry, or replan with a fresh context")
    summarized = [m.tool_call_id for m in plan.older if isinstance(m, ToolMessage)]
    kept = [*plan.head, _summary_message(summary.strip(), plan.older), *plan.recent]
    out, archived = _archive(kept, settings.keep_full_high, "placeholder", settings)
    return _result(CompressionTier.HARD, messages, out, counter, tokens_before, summarized + archived, summary.strip())


def compress_hard(
    messages: Sequence[BaseMessage],
    summarizer: Summarizer,
    settings: CompressionSettings | None = None,
    *,
    counter: MessageCounter | None = None,
    tokens_before: int | None = None,
) -> CompressionResult:
    """Tier >= 95%: `summarizer(older messages)` replaces them with one summary message.

    Kept: the system message, the task (first user message, `keep_first_user`), and the last
    `hard_keep_recent` units whole; tool results among them but the last `keep_full_high` become
    placeholders. With nothing older to summarize the summarizer is not called and `summary` is None.
    """
    settings = settings or CompressionSettings()
    plan = plan_hard(messages, settings)
    summary = summarizer(plan.summarizer_input(settings)) if plan.older else None
    return finish_hard(messages, plan, summary, settings, counter=counter, tokens_before=tokens_before)


async def acompress_hard(
    messages: Sequence[BaseMessage],
    summarizer: AsyncSummarizer,
    settings: CompressionSettings | None = None,
    *,
    counter: MessageCounter | None = None,
    tokens_before: int | None = None,
) -> CompressionResult:
    """`compress_hard` with an async summarizer."""
    settings = settings or CompressionSettings()
    plan = plan_hard(messages, settings)
    summary = await summarizer(plan.summarizer_input(settings)) if plan.older else None
    return finish_hard(messages, plan, summary, settings, counter=counter, tokens_before=tokens_before)


def compress(
    messages: Sequence[BaseMessage],
    tier: CompressionTier,
    settings: CompressionSettings | None = None,
    *,
    summarizer: Summarizer | None = None,
    counter: MessageCounter | None = None,
    tokens_before: int | None = None,
) -> CompressionResult:
    """Apply `tier` (as chosen by `choose_tier`) to `messages`."""
    settings = settings or CompressionSettings()
    if tier is CompressionTier.POINTER:
        return compress_pointer(messages, settings, counter=counter, tokens_before=tokens_before)
    if tier is CompressionTier.PLACEHOLDER:
        return compress_placeholder(messages, settings, counter=counter, tokens_before=tokens_before)
    if tier is CompressionTier.HARD:
        if summarizer is None:
            raise ConfigError("hard compression needs a summarizer (messages -> summary text)")
        return compress_hard(messages, summarizer, settings, counter=counter, tokens_before=tokens_before)
    return _result(CompressionTier.NONE, messages, list(messages), counter, tokens_before, [])
