"""Small helpers shared by the nodes (message DTO access, prompt assembly)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from checkpointing.messages import dtos_to_messages


def runtime_messages(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The model's context as DTOs (never None)."""
    return list(state.get("runtime_messages") or [])


def last_ai_dto(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The last message of the model's context if it is an AI message."""
    msgs = runtime_messages(state)
    if msgs and msgs[-1].get("role") == "ai":
        return msgs[-1]
    return None


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
    msgs = dtos_to_messages([d for d in runtime_messages(state) if d.get("role") != "system"])
    return [SystemMessage(system_prompt + render_plan(state)), *msgs]
