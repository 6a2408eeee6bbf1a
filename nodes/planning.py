"""planning: ask the model for a plan and a todo list (skipped for a trivial intent in `auto` mode)."""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from graph.context import AgentContext, invoke_model, loop_runtime
from graph.state import TaskExecutionState
from nodes import _model_output as out
from nodes._util import context_messages, with_update

PLANNING_INSTRUCTIONS = (
    "Before acting, plan. Reply with JSON only: "
    '{"plan": "<one paragraph>", "todos": ["<step>", ...]} with 1-8 short, concrete steps.'
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*]|\d+[.)])\s+(.+)$")


def parse_plan(text: str) -> tuple[str, list[str], str | None]:
    """Extract (plan, todo titles, skill name) from the model's reply: JSON first, then a bulleted list."""
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        try:
            obj = json.loads(text[start : end + 1])
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            todos = obj.get("todos") or []
            titles = [str(t.get("title") if isinstance(t, dict) else t) for t in todos if t]
            skill = obj.get("skill")
            return str(obj.get("plan") or "").strip(), titles, skill if isinstance(skill, str) else None
    titles = [m.group(1).strip() for line in text.splitlines() if (m := _LIST_ITEM.match(line))]
    return text.strip(), titles, None


def make_todos(titles: list[str]) -> list[dict[str, Any]]:
    """Todo items with ids and statuses; the first one is in progress."""
    todos = [{"id": f"t{i + 1}", "title": t, "status": "pending"} for i, t in enumerate(titles)]
    if todos:
        todos[0]["status"] = "in_progress"
    return todos


def planning_node(state: TaskExecutionState, config: RunnableConfig, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Plan the task (or re-plan after failures/exhausted context)."""
    rt = loop_runtime(runtime, state, config)
    mode = rt.settings.loop.planning
    replanning = state.get("loop_signal") == "REPLAN"
    if not replanning and (mode == "never" or (mode == "auto" and state.get("user_intent") == "chat")):
        return {"loop_signal": None}
    pre: dict[str, Any] = {}
    if rt.compression_due(state):
        # The planner sees the history too: keep its prompt inside the window like reasoning's.
        pre = dict(rt.compress(state, reason="budget"))
        pre.pop("loop_signal", None)
        pre.pop("error", None)
        state = with_update(state, pre)  # type: ignore[assignment]
    call_index = int(state.get("model_call_count") or 0)
    history = [m for m in context_messages(state) if not isinstance(m, SystemMessage)]
    ask = PLANNING_INSTRUCTIONS + rt.skills_prompt()
    if replanning:
        ask += f" The previous approach failed ({state.get('error') or 'too many failures'}); plan differently."
    prompt = [SystemMessage(rt.system_prompt(state)), *history, HumanMessage(ask)]
    model = rt.chat_model(call_index, with_tools=False)
    reply = invoke_model(model, prompt, config, rt.session_id, call_index, rt.own_errors)
    text = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
    plan, titles, skill = parse_plan(text)
    plan, titles, issues = out.checked_plan(text, plan, titles, state.get("user_input"))
    active = rt.activate_skill(skill) if skill else state.get("active_skill")
    todos = make_todos(titles)
    um = getattr(reply, "usage_metadata", None)
    usage = dict(um) if um else None
    finish = (reply.response_metadata or {}).get("finish_reason")
    shown, source = out.usage_of(out.as_ai_message(reply), prompt)
    issues += [i for i in out.classify(out.as_ai_message(reply), finish, ()) if i["issue"] == out.Issue.NO_USAGE]
    rt.emit(
        "model_call",
        {
            "node": "planning",
            "call_index": call_index,
            "usage": shown,
            "usage_source": source.value,
            "finish_reason": finish,
            "issues": issues,
            "skill": active,
        },
    )
    history_lines = list(pre.pop("execution_history_text", []) or [])
    return {
        **pre,
        "active_skill": active,
        "task_plan_text": plan,
        "task_todo_list": todos,
        "current_task": todos[0]["title"] if todos else None,
        "model_call_count": call_index + 1,
        # The planning reply is not part of the context: keep the compression anchor the ledger counts from.
        "last_usage": {**(usage or {}), "context_anchor": (state.get("last_usage") or {}).get("context_anchor")},
        "loop_signal": None,
        "execution_history_text": [*history_lines, f"plan ({len(todos)} steps): {plan[:300]}"],
    }
