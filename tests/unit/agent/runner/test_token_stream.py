"""TokenStream, the run's token callback: the prompt is never rendered for it, however long."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent.loop.models import ModelScript, ScriptedChatModel
from agent.runner.tokens import TokenStream


class _Recording(TokenStream):
    """TokenStream that records the prompts LangChain hands to `on_llm_start` (its fallback)."""

    def __init__(self) -> None:
        super().__init__()
        self.rendered: list[Any] = []

    def on_llm_start(self, serialized: Any, prompts: list[str], **kwargs: Any) -> None:
        self.rendered.append(prompts)


def test_a_long_prompt_is_not_rendered_into_a_string_for_the_callback() -> None:
    """LangChain renders the whole prompt for a handler without `on_chat_model_start`; ours has it."""
    model = ScriptedChatModel(script=ModelScript.model_validate({"responses": [{"content": "ok"}] * 2}))
    history: list[Any] = [HumanMessage("go")]
    for i in range(300):
        call = {"id": f"c{i}", "name": "t", "args": {}}
        history += [AIMessage("", tool_calls=[call]), ToolMessage("r" * 200, tool_call_id=f"c{i}")]
    handler = _Recording()
    reply = model.invoke(history, config={"callbacks": [handler]})
    assert reply.content == "ok"
    assert handler.rendered == []
