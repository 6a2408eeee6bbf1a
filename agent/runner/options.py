"""What a run may ask beyond a plain turn: LangGraph breakpoints, and a new turn over a stopped run.

The HTTP API's runs pass them (agent/serve/run_requests.py); the CLI passes none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Breakpoints = Literal["*"] | Sequence[str] | None
"""Node names (or "*": every node) to stop at, as `graph.stream(interrupt_before=...)` takes them."""


@dataclass(frozen=True)
class RunOptions:
    """Options of one run."""

    interrupt_before: Breakpoints = None
    """Stop before these nodes run (the run pauses there; a run without input continues it)."""
    interrupt_after: Breakpoints = None
    """Stop after these nodes ran."""
    discard_unfinished: bool = False
    """A new turn may start over a run that was stopped (cancelled) with a step left: that step is
    discarded, as LangGraph discards a thread's pending tasks on new input. Refused all the same
    while an approval is pending or the stop left a model's tool calls without results."""
    overrides: Mapping[str, Any] | None = None
    """The server settings this run changes (an assistant's: `agent.runner.overrides`)."""
    live_events: bool = True
    """Stream the nodes' events (tool calls, model calls, tokens) as they happen. A caller that takes
    only the result (`AgentRunner.run`, `resume`) sets False: LangGraph then runs each node in the
    calling thread instead of handing it to a pool thread at every step (what streaming events while
    a node runs needs). The events are recorded in the session's log either way."""
    from_fork_point: bool = False
    """A run without input on a branch that has not run yet continues from the branch's fork point,
    as LangGraph continues from a checkpoint: the nodes that checkpoint still has next run again
    (none: the run is reported finished). Without it such a branch has nothing to resume."""
