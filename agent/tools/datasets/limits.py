"""Resource limits of one `query_dataset` call: CPU time, result size, value size, memory.

SQLite runs a query inside the calling thread, so the guards are SQLite's own hooks:
- CPU time: a progress handler, called every `check_every` VM instructions, stops the statement
  once the thread has used `cpu_seconds` of CPU (or `wall_seconds` have passed, for a query that
  waits on temp-file I/O); it also keeps the old instruction budget (`max_steps`).
- One VM instruction can still run long when a single function call loops over its arguments:
  `printf('%.*c', 2000000000, 'x')` spins ~13 s inside one call before it gives up. `printf` and
  `format` are therefore replaced by a checked wrapper that refuses widths and precisions over
  `max_format_width` and evaluates the call on a private, table-less connection (so the result is
  exactly SQLite's).
- Values: `SQLITE_LIMIT_LENGTH` caps any string or blob a query builds (`zeroblob(1e9)`).
- Result: rows are fetched one at a time and the call fails once their JSON-ish size passes
  `max_result_bytes` (a page of ten-megabyte blobs never reaches the model, or memory).
- Memory: sorts, DISTINCT/UNION sets and recursive-CTE queues spill to temp files
  (`temp_store=FILE`) past a bounded page cache (`cache_size_kib`), so a query's heap stays small;
  `heap_limit_bytes`, when set, is SQLite's hard heap limit, which is process-wide (it counts every
  SQLite connection of the process, the loaded datasets included), hence off by default.
"""

from __future__ import annotations

import re
import sqlite3
import time
from typing import Any

from agent.core.config import QueryLimits  # the settings' type: config sits below the tools
from agent.core.errors import ToolError

# A printf conversion: flags, width (digits or *), precision (digits or *), then the type letter.
_SPEC = re.compile(r"%([-+ 0#!,]*)(\*|\d+)?(?:\.(\*|\d+))?(ll|l)?([a-zA-Z%])")


class QueryBudget:
    """The progress handler of one connection: armed per query, says stop when a budget is spent."""

    def __init__(self, limits: QueryLimits) -> None:
        self.limits = limits
        self.steps = 0
        self.reason: str | None = None
        """Why the progress handler stopped the statement (None: it did not)."""
        self.refused: str | None = None
        """The whole error message when a checked function refused its arguments."""
        self._cpu0 = 0.0
        self._wall0 = 0.0

    def arm(self) -> None:
        """Start the budgets of the next statement."""
        self.steps, self.reason, self.refused = 0, None, None
        self._cpu0, self._wall0 = time.thread_time(), time.monotonic()

    def __call__(self) -> int:
        lim = self.limits
        self.steps += lim.check_every
        if self.steps > lim.max_steps:
            self.reason = f"it ran more than {lim.max_steps:,} SQLite steps"
        elif time.thread_time() - self._cpu0 > lim.cpu_seconds:
            self.reason = f"it used more than {lim.cpu_seconds:g} s of CPU"
        elif time.monotonic() - self._wall0 > lim.wall_seconds:
            self.reason = f"it ran longer than {lim.wall_seconds:g} s"
        return 1 if self.reason else 0


def apply_limits(conn: sqlite3.Connection, limits: QueryLimits, budget: QueryBudget) -> None:
    """Install the limits on the query connection (call before `query_only` and the authorizer)."""
    conn.execute("PRAGMA temp_store=FILE")
    conn.execute(f"PRAGMA cache_size=-{int(limits.cache_size_kib)}")
    if limits.heap_limit_bytes:
        current = int(conn.execute("PRAGMA hard_heap_limit").fetchone()[0])
        if current == 0 or current > limits.heap_limit_bytes:
            conn.execute(f"PRAGMA hard_heap_limit={int(limits.heap_limit_bytes)}")
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)
    conn.set_progress_handler(budget, limits.check_every)
    _install_format(conn, limits, budget)


def _install_format(conn: sqlite3.Connection, limits: QueryLimits, budget: QueryBudget) -> None:
    helper = sqlite3.connect(":memory:", check_same_thread=False)
    helper.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.max_value_bytes)

    def make(name: str) -> Any:
        def checked(fmt: Any, *args: Any) -> Any:
            if fmt is None:
                return None
            try:
                check_format(str(fmt), args, limits.max_format_width, name)
            except ValueError as err:
                budget.refused = f"refused: {err}; use a smaller width or precision"  # sqlite3 hides the text
                raise
            marks = ", ".join("?" for _ in range(len(args) + 1))
            return helper.execute(f"SELECT {name}({marks})", (fmt, *args)).fetchone()[0]

        return checked

    for name in ("printf", "format"):
        conn.create_function(name, -1, make(name), deterministic=True)


def check_format(fmt: str, args: tuple[Any, ...], max_width: int, name: str = "printf") -> None:
    """Refuse a printf format whose widths and precisions add up to more than `max_width`."""
    total, i = 0, 0
    for m in _SPEC.finditer(fmt):
        if m.group(5) == "%":
            continue
        for part in (m.group(2), m.group(3)):
            if part is None:
                continue
            if part == "*":
                value = args[i] if i < len(args) else 0
                i += 1
                try:
                    total += abs(int(value or 0))
                except (TypeError, ValueError):
                    pass
            else:
                total += int(part)
        i += 1  # the conversion's own argument
        if total > max_width:
            raise ValueError(f"{name}() widths and precisions add up to more than {max_width:,} characters")


def cell_size(value: Any) -> int:
    """Bytes a returned cell costs in the tool result (blobs are rendered as hex)."""
    if value is None:
        return 4
    if isinstance(value, bytes):
        return 2 * len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return 24


def stopped_error(reason: str) -> ToolError:
    """The tool error of a statement its budget stopped."""
    return ToolError(f"query stopped: {reason}; add WHERE/LIMIT, aggregate, or simplify the joins")
