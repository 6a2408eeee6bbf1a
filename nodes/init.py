"""init: create the session's LoopRuntime and open the turn (system prompt + user input)."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import HumanMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from graph.context import AgentContext, loop_runtime
from graph.state import TaskExecutionState

_TRIVIAL = {"hi", "hello", "hey", "thanks", "thank you", "ok", "okay", "bye"}


def classify_intent(text: str) -> str:
    """`chat` for a greeting or thanks (planning may be skipped), else `task`."""
    return "chat" if text.strip().lower().strip("!.?") in _TRIVIAL else "task"


USER_ID_PREFIX = "user-"
"""Ids of the human messages init writes itself (from `user_input`)."""


def _user_input(state: TaskExecutionState) -> tuple[str, bool]:
    """The turn's text, and whether it already arrived as a message (Studio's chat input).

    A human message at the end of `messages` that init did not write is this turn's input (the
    chat sends `{"messages": [...]}`); init's own (`user-...`) ones belong to an earlier turn.
    """
    text = (state.get("user_input") or "").strip()
    msgs = state.get("messages") or []
    if msgs and msgs[-1].type == "human":
        last = msgs[-1]
        content = last.content if isinstance(last.content, str) else str(last.content)
        if not str(last.id or "").startswith(USER_ID_PREFIX) and (not text or text == content.strip()):
            return content.strip(), True
    return text, False


def init_node(state: TaskExecutionState, config: RunnableConfig, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Build the run's LoopRuntime (never in state) and append this turn's messages."""
    rt = loop_runtime(runtime, state, config, fresh=True)
    text, already_in_messages = _user_input(state)
    if not text:
        raise ValueError("empty user input: send a non-empty `user_input` or a human message")
    msgs = state.get("messages") or []
    new_msgs: list[Any] = []
    if not any(isinstance(m, SystemMessage) for m in msgs):
        if already_in_messages:  # the chat's message came first: put the system prompt before it
            new_msgs.append(RemoveMessage(id=str(msgs[-1].id)))
        new_msgs.append(SystemMessage(rt.system_prompt(state), id=f"sys-{uuid.uuid4().hex[:12]}"))
        if already_in_messages:
            new_msgs.append(msgs[-1])
    if not already_in_messages:
        new_msgs.append(HumanMessage(text, id=f"{USER_ID_PREFIX}{uuid.uuid4().hex[:12]}"))
    turn = int(state.get("turn") or 0) + 1
    rt.emit("user_turn", {"text": text, "turn": turn})
    update: dict[str, Any] = {
        "user_input": text,
        "user_intent": classify_intent(text),
        "iteration_count": 0,
        "finish_reason": None,
        "loop_signal": None,
        "last_iteration_result": None,
        "consecutive_failures": 0,
        "replan_count": 0,
        "context_compression_count": 0,
        "hitl_request": None,
        "hitl_decision": None,
        "error": None,
        "turn": turn,
        "model_call_count": int(state.get("model_call_count") or 0),
        "execution_history_text": [f"turn {turn}: user asked: {text[:200]}"],
    }
    if new_msgs:
        update["messages"] = new_msgs
    if rt.dataset_info:
        update["dataset_list"] = rt.dataset_info
    return update
