"""ContextManager: when and how the model's context is compressed (the memory node's policy).

The tiers themselves are pure functions in `agent.loop.compression`; this module measures the prompt
(real `input_tokens` of the last reply + estimates of what came after, via the session's
`MessageTokenLedger`), picks the tier, runs the summarizer model for the hard tier, enforces
`max_hard_compressions`, and turns the result into a state update plus a `compression` event.

The ledger's rebase point after a compression is kept in state (`last_usage.context_anchor`), so
a resumed process measures exactly like the one that crashed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from agent.core.config import AgentSettings
from agent.loop.compression import (
    CompressionSettings,
    CompressionTier,
    choose_tier,
    compress,
    hard_compression_allowed,
)
from agent.loop.token_count import MessageTokenLedger, TokenCounter

if TYPE_CHECKING:
    from agent.loop.runtime import LoopRuntime

_ORDER = [CompressionTier.NONE, CompressionTier.POINTER, CompressionTier.PLACEHOLDER, CompressionTier.HARD]
SUMMARY_INSTRUCTIONS = (
    "Summarize the conversation so far for your own later use: the task, what was done, every "
    "fact and number found, files written, and what remains. Tool call ids of archived results "
    "must be kept so they can be read back with read_tool_result."
)


class ContextManager:
    """The compression policy of one session's LoopRuntime."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = CompressionSettings.from_config(settings.compression)
        self.window = settings.model.context_window
        self.ledger = MessageTokenLedger(TokenCounter(settings.model.name))

    def _messages(self, state: Mapping[str, Any]) -> list[BaseMessage]:
        self.ledger.restore_anchor((state.get("last_usage") or {}).get("context_anchor"))
        return list(state.get("messages") or [])

    def prompt_tokens(self, state: Mapping[str, Any]) -> int:
        """Estimated prompt tokens of the next call."""
        return self.ledger.prompt_tokens(self._messages(state))

    def tier(self, state: Mapping[str, Any]) -> CompressionTier:
        """The tier the next call's prompt falls in."""
        if not self.settings.enabled:
            return CompressionTier.NONE
        return choose_tier(self.prompt_tokens(state), self.window, self.settings)

    def due(self, state: Mapping[str, Any]) -> bool:
        """Whether compression should run before the next model call."""
        return self.tier(state) is not CompressionTier.NONE

    def compress(self, runtime: LoopRuntime, state: Mapping[str, Any], *, reason: str) -> dict[str, Any]:
        """The state update of the compression due now (reason: `budget` or `length`)."""
        if not self.settings.enabled:
            return {}
        msgs = self._messages(state)
        tokens = self.ledger.prompt_tokens(msgs)
        tier = choose_tier(tokens, self.window, self.settings)
        if reason == "length":
            # A truncated reply means the window was tighter than measured: go one tier further.
            tier = _ORDER[min(_ORDER.index(tier) + 1, len(_ORDER) - 1)]
        if tier is CompressionTier.NONE:
            return {}
        update: dict[str, Any] = {}
        count = int(state.get("context_compression_count") or 0)
        summarizer = None
        called: list[int] = []
        call_index = int(state.get("model_call_count") or 0)
        if tier is CompressionTier.HARD:
            if hard_compression_allowed(count, self.settings):
                summarizer = self._summarizer(runtime, call_index, called)
            else:
                tier = CompressionTier.PLACEHOLDER
        result = compress(msgs, tier, self.settings, summarizer=summarizer, counter=self.ledger, tokens_before=tokens)
        if called:
            # Only a summary the model actually wrote uses up a hard compression (and a model call).
            count += 1
            update["model_call_count"] = call_index + 1
            update["context_compression_count"] = count
        new_msgs = result.messages
        # Whatever tier ran, a context still at the hard threshold cannot be sent: start afresh.
        exhausted = result.tokens_after >= self.settings.tier_hard * self.window
        if exhausted:
            new_msgs = self.fresh_context(state, new_msgs)
            update["loop_signal"] = "REPLAN"
            update["error"] = (
                f"context window exhausted: compression got the context down to {result.tokens_after} "
                f"tokens, over {self.settings.tier_hard:.0%} of the {self.window}-token window, after "
                f"{count} of max {self.settings.max_hard_compressions} hard compressions; raise "
                "model.context_window or make tool results smaller"
            )
        if result.changed or exhausted:
            after = self.ledger.rebase(new_msgs, None if exhausted else result.tokens_after)
            # One list: the compressed context replaces the whole `messages` channel.
            update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *new_msgs]
            update["last_usage"] = {**(state.get("last_usage") or {}), "context_anchor": self.ledger.anchor()}
            payload = {
                **result.event_payload(),
                "reason": reason,
                "new_count": len(new_msgs),
                "tokens_after": after,
                "exhausted": exhausted,
            }
            runtime.emit("compression", payload)
            update["execution_history_text"] = [
                f"compression {result.tier.value}: {result.original_count} -> {len(new_msgs)} messages, "
                f"{result.tokens_before} -> {after} tokens"
            ]
        return update

    def _summarizer(self, runtime: LoopRuntime, call_index: int, called: list[int]) -> Any:
        def summarize(older: list[BaseMessage]) -> str:
            called.append(call_index)
            model = runtime.chat_model(call_index, with_tools=False)
            reply = model.invoke([SystemMessage(SUMMARY_INSTRUCTIONS), *older, HumanMessage(SUMMARY_INSTRUCTIONS)])
            runtime.emit(
                "model_call",
                {
                    "node": "memory",
                    "call_index": call_index,
                    "usage": dict(reply.usage_metadata or {}) or None,
                    "finish_reason": (reply.response_metadata or {}).get("finish_reason"),
                },
            )
            return reply.content if isinstance(reply.content, str) else str(reply.content)

        return summarize

    def fresh_context(self, state: Mapping[str, Any], msgs: list[BaseMessage]) -> list[BaseMessage]:
        """A compact restart context for a replan: system, the task, and a progress note."""
        system = next((m for m in msgs if isinstance(m, SystemMessage)), None)
        task = next((m for m in msgs if isinstance(m, HumanMessage)), None)
        history = list(state.get("execution_history_text") or [])[-12:]
        note = HumanMessage(
            "The context was reset to fit the window. Progress so far:\n"
            + "\n".join(h[:200] for h in history)
            + "\nArchived tool results can be read with read_tool_result(tool_call_id=...).",
            id=f"fresh-{len(history)}-{int(state.get('replan_count') or 0)}",
        )
        kept: list[BaseMessage] = [m for m in (system, task) if m is not None]
        return [*kept, note]
