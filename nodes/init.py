"""init: create the session's LoopRuntime and open the turn (system prompt + user input)."""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from checkpointing.messages import message_to_dto
from graph.runtime import create_runtime
from graph.state import TaskExecutionState

_TRIVIAL = {"hi", "hello", "hey", "thanks", "thank you", "ok", "okay", "bye"}


def classify_intent(text: str) -> str:
    """`chat` for a greeting or thanks (planning may be skipped), else `task`."""
    return "chat" if text.strip().lower().strip("!.?") in _TRIVIAL else "task"


def _user_input(state: TaskExecutionState) -> tuple[str, bool]:
    """The turn's text, and whether it already arrived as a message (Studio's chat input)."""
    text = (state.get("user_input") or "").strip()
    msgs = state.get("messages") or []
    if msgs and msgs[-1].type == "human":
        last = msgs[-1]
        content = last.content if isinstance(last.content, str) else str(last.content)
        runtime_tail = (state.get("runtime_messages") or [{}])[-1]
        if runtime_tail.get("id") != last.id and (not text or text == content.strip()):
            return content.strip(), True
    return text, False


def init_node(state: TaskExecutionState, config: RunnableConfig) -> dict[str, Any]:
    """Build the LoopRuntime (never in state) and append this turn's messages."""
    runtime = create_runtime(state, config)
    text, already_in_messages = _user_input(state)
    if not text:
        raise ValueError("empty user input: send a non-empty `user_input` or a human message")
    context = list(state.get("runtime_messages") or [])
    new_msgs = []
    if not context:
        system = SystemMessage(runtime.system_prompt(state), id=f"sys-{uuid.uuid4().hex[:12]}")
        context.append(message_to_dto(system))
    if already_in_messages:
        human = state["messages"][-1]
    else:
        human = HumanMessage(text, id=f"user-{uuid.uuid4().hex[:12]}")
        new_msgs.append(human)
    context.append(message_to_dto(human))
    turn = int(state.get("turn") or 0) + 1
    runtime.emit("user_turn", {"text": text, "turn": turn})
    update: dict[str, Any] = {
        "user_input": text,
        "user_intent": classify_intent(text),
        "runtime_messages": context,
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
    if runtime.dataset_info:
        update["dataset_list"] = runtime.dataset_info
    return update
