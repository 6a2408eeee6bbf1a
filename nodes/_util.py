"""Small helpers shared by the nodes (context access, prompt assembly)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from graph.state import merge_messages


def context_messages(state: Mapping[str, Any]) -> list[BaseMessage]:
    """The model's context (the `messages` channel; never None)."""
    return list(state.get("messages") or [])


def last_ai(state: Mapping[str, Any]) -> AIMessage | None:
    """The last message of the model's context if it is an AI message."""
    msgs = state.get("messages") or []
    if msgs and isinstance(msgs[-1], AIMessage):
        return msgs[-1]
    return None


def with_update(state: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """`state` with a node's update applied the way the graph will apply it (messages merged)."""
    merged = {**state, **update}
    if "messages" in update:
        merged["messages"] = merge_messages(state.get("messages") or [], [update["messages"]])
    return merged


def render_plan(state: Mapping[str, Any]) -> str:
    """The plan and todo list as a prompt section ('' when there is none)."""
    plan = state.get("task_plan_text") or ""
    todos = state.get("task_todo_list") or []
    if not plan and not todos:
        return ""
    lines = ["", "## Current plan", plan] if plan else ["", "## Current plan"]
    for t in todos:
        lines.append(f"- [{t.get('status', 'pending')}] {t.get('id')}: {t.get('title')}")
    if state.get("current_task"):
        lines.append(f"Current task: {state['current_task']}")
    return "\n".join(lines)


def prompt_messages(state: Mapping[str, Any], system_prompt: str) -> list[BaseMessage]:
    """The messages sent to the model: system prompt (with plan) + the rest of the context."""
    msgs = [m for m in context_messages(state) if not isinstance(m, SystemMessage)]
    return [SystemMessage(system_prompt + render_plan(state)), *msgs]
