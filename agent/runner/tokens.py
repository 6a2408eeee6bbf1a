"""Token streaming without LangGraph's `messages` stream mode.

LangGraph's `messages` mode handler looks through every node's whole input for message ids on each
node start, so with it one tool step costs more the longer the session's history. A run only needs
the model's tokens: `TokenStream` is a streaming callback handler (so chat models stream) that hands
each text token to the run's `custom` stream as `{"event": "token", "text", "node"}`, which
`agent.runner.chunks.translate` turns into the same `token` RunEvent the `messages` chunks gave.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessageChunk
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tracers._streaming import _StreamingCallbackHandler
from langgraph.config import get_stream_writer


class TokenStream(BaseCallbackHandler, _StreamingCallbackHandler):
    """Writes each text token a chat model streams to the graph's `custom` stream mode."""

    run_inline = True  # called in the model's own thread, where the node's stream writer is

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        """Nothing to do. Defined because a handler without it makes LangChain call `on_llm_start`
        instead, with the whole prompt rendered as one string: a cost growing with the history."""

    def on_llm_new_token(self, token: Any, *, chunk: Any = None, **kwargs: Any) -> None:
        """One streamed token: written as a `token` custom event when it is non-empty text."""
        msg = getattr(chunk, "message", None)
        text = msg.content if isinstance(msg, AIMessageChunk) else None
        if not isinstance(text, str) or not text:
            return
        conf = var_child_runnable_config.get() or {}
        node = (conf.get("metadata") or {}).get("langgraph_node")
        get_stream_writer()({"event": "token", "text": text, "node": node})

    def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
        """Async outputs pass through unchanged (tokens come from `on_llm_new_token`)."""
        return output

    def tap_output_iter(self, run_id: Any, output: Iterator[Any]) -> Iterator[Any]:
        """Outputs pass through unchanged (tokens come from `on_llm_new_token`)."""
        return output
