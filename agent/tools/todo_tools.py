"""`update_todo`: lets the model move its plan's todo items through their statuses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agent.core.errors import ToolError
from agent.core.tool_spec import ToolContext, ToolSpec


class UpdateTodoArgs(BaseModel):
    """Arguments of update_todo."""

    todo_id: str = Field(description="the id of the todo item, e.g. t1")
    status: str = Field(description="pending, in_progress, done or failed")
    note: str | None = Field(default=None, description="optional short note")


def _update_todo(ctx: ToolContext, todo_id: str, status: str, note: str | None = None) -> dict[str, Any]:
    if ctx.todos is None:
        raise ToolError("this session has no todo list")
    item = ctx.todos.update(todo_id, status, note)
    return {"updated": item, "todos": ctx.todos.todos}


UPDATE_TODO = ToolSpec(
    name="update_todo",
    description="Set the status of one item of your plan's todo list (pending, in_progress, done, failed).",
    args_schema=UpdateTodoArgs,
    func=_update_todo,
    effect="idempotent",
    state_only=True,
)
