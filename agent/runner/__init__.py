"""The runner: one turn of a session, read top to bottom, and what drives it.

`AgentRunner` (`agent_runner.py`) is the Python API; it holds a `Runner` (`base_runner.py`) and
hands each call to one part:

agent_runner.py  `AgentRunner`: run / stream / resume / pause / end / fork, the documented facade
base_runner.py   `Runner`: ids, run config, and the parts every run of the process shares
services.py      the sessions service, the saver and the lease, built from the settings
builder.py       a session's LoopRuntime from the settings: model, tools, journal, sandbox, datasets
start.py         a new turn: checks, the session under the lease (a `Turn`), the run's first entries
turn.py          `Turn`: one run owning its lease, recorder and stream; the graph driven, the run closed
turns.py         the recorder a turn writes its entries through, and the turn's ids
chunks.py        the graph's chunks as the run's `RunEvent`s, and the sink a caller passes for raw chunks
streaming.py     the asyncio face (a worker thread pumps the run) and collecting `final`
resume.py        recovery: validate, then continue, re-run or close a stopped run
recovery.py      the recovery order's checks, shared with the doctor
blocked.py       recording RECOVERY_BLOCKED
unfinished.py    what a stopped run left behind (refuse a new turn, find a lost first turn)
options.py       what a run may ask beyond a plain turn (breakpoints, a turn over a stopped run)
overrides.py     an assistant's or a run's settings applied to one turn
approvals.py     the approvals a paused run waits for
run_lifecycle.py pause / end as session operations
branches.py, branch_ops.py   the entry tree's branches; fork and switch
reading.py, reader.py, readable.py, views.py   sessions / show / state / result / tool_result
tokens.py, sigint.py         token streaming; Ctrl-C during a run
studio_graph.py  the graph and saver LangGraph Studio serves (`graph/studio.py`)
submit.py        a turn handed to the Celery workers (the queue, its routing by graph version)
routing.py       which worker queue a session's turns go to
celery_app.py    the Celery application and its settings
drain.py         what a worker does with a session's queue: lease it, run its turns in order
live.py          a run's events published for other processes (serve's streams, the workers)

Importing this package imports none of them: `from agent.runner import AgentRunner` loads the
facade on first use, so a read command that needs only `reading` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.core.results import RunEvent, RunResult
    from agent.runner.agent_runner import AgentRunner
    from agent.runner.chunks import GRAPH_EVENT, GraphChunks, clean_stop

__all__ = ["GRAPH_EVENT", "AgentRunner", "GraphChunks", "RunEvent", "RunResult", "clean_stop"]


def __getattr__(name: str) -> Any:
    if name == "AgentRunner":
        from agent.runner.agent_runner import AgentRunner

        return AgentRunner
    if name in ("RunEvent", "RunResult"):
        from agent.core import results

        return getattr(results, name)
    if name in ("GRAPH_EVENT", "GraphChunks", "clean_stop"):
        from agent.runner import chunks

        return getattr(chunks, name)
    raise AttributeError(name)
