"""TodoManager: the plan's todo list with statuses, updated by the model through `update_todo`.

The list lives in graph state (`task_todo_list`); the manager is seeded from state before each
acting step and its changes flow back as a state update, so a resume rebuilds it exactly.
"""

from __future__ import annotations

import copy
from typing import Any

from agent.core.errors import ToolError

TODO_STATUSES = ("pending", "in_progress", "done", "failed")


class TodoManager:
    """A mutable view of the todo list for one acting step."""

    def __init__(self, todos: list[dict[str, Any]] | None = None) -> None:
        self.todos: list[dict[str, Any]] = copy.deepcopy(todos or [])
        self.changed = False

    def seed(self, todos: list[dict[str, Any]] | None) -> None:
        """Reset to the list held in state."""
        self.todos = copy.deepcopy(todos or [])
        self.changed = False

    def update(self, todo_id: str, status: str, note: str | None = None) -> dict[str, Any]:
        """Set one item's status; returns the item."""
        if status not in TODO_STATUSES:
            raise ToolError(f"unknown todo status {status!r}; use one of {', '.join(TODO_STATUSES)}")
        for item in self.todos:
            if item.get("id") == todo_id:
                item["status"] = status
                if note:
                    item["note"] = note
                self.changed = True
                return item
        ids = ", ".join(str(t.get("id")) for t in self.todos) or "none"
        raise ToolError(f"no todo with id {todo_id!r}; the ids are: {ids}")

    def add(self, title: str) -> dict[str, Any]:
        """Append a new pending item."""
        item = {"id": f"t{len(self.todos) + 1}", "title": title, "status": "pending"}
        self.todos.append(item)
        self.changed = True
        return item

    def current_task(self) -> str | None:
        """The title of the first item in progress, else the first pending one."""
        for wanted in ("in_progress", "pending"):
            for item in self.todos:
                if item.get("status") == wanted:
                    return str(item.get("title"))
        return None

    def finish_all(self) -> None:
        """Mark items still open as done (the run completed)."""
        for item in self.todos:
            if item.get("status") in ("pending", "in_progress"):
                item["status"] = "done"
                self.changed = True

    def render(self) -> str:
        """One line per item."""
        return "\n".join(f"[{t.get('status')}] {t.get('id')}: {t.get('title')}" for t in self.todos)
