"""The parts `AgentRunner` composes, one responsibility a module.

runner.py      `Runner`: ids, run config, and the parts it composes (sessions, graph, saver, lease, chunk sink)
builder.py     a session's LoopRuntime from the settings: model, tools, journal, sandbox, datasets
start.py       a new turn: checks, the session under the lease (a `Turn`), the run's first entries
turn.py        `Turn`: one run owning its lease, recorder and stream; the graph driven, the run closed
chunks.py      the graph's chunks as the run's `RunEvent`s, and the sink a caller passes for raw chunks
unfinished.py  what a stopped run left behind (refuse a new turn, find a lost first turn)
options.py     what a run may ask beyond a plain turn (breakpoints, a turn over a stopped run)
resume.py      recovery: validate, then continue, re-run or close a stopped run
blocked.py     recording RECOVERY_BLOCKED
lifecycle.py   pause / end / fork as session operations
reading.py     sessions / show / state / result / tool_result
streaming.py   the asyncio face (a worker thread pumps the run) and collecting `final`
studio.py      the graph and saver LangGraph Studio serves (`graph/studio.py`)
"""
