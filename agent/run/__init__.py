"""The parts `AgentRunner` composes, one responsibility a module.

core.py        ids, run config, the graph / saver / lease / manager wiring (`RunnerCore`)
builder.py     a session's LoopRuntime from the settings: model, tools, journal, sandbox, datasets
start.py       a new turn: checks, the session under the lease, the run's first entries
unfinished.py  what a stopped run left behind (refuse a new turn, find a lost first turn)
drive.py       driving the graph and turning its stream chunks into `RunEvent`s
options.py     what a run may ask beyond a plain turn (breakpoints, a turn over a stopped run)
resume.py      recovery: validate, then continue, re-run or close a stopped run
blocked.py     recording RECOVERY_BLOCKED
lifecycle.py   pause / end / fork as session operations
reading.py     sessions / show / state / result / tool_result
streaming.py   the asyncio face (a worker thread pumps the run) and collecting `final`
studio.py      the graph and saver LangGraph Studio serves (`graph/studio.py`)
"""
