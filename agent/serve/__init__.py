"""`agentrt serve`: the LangGraph Agent Server API over agentrt sessions (FastAPI), and a page at `/`.

Modules: `app` (the FastAPI app), `routes_*` (one resource each; `routes_stateless`: runs without a
thread), `auth` (API keys / auth function), `context` (threads read as sessions), `engine` (runs on
a thread pool, one per thread at a time, by `multitask_strategy`), `run_record` (one run and its
events), `run_service` (starting a run and answering with it), `run_requests` (a run's request
read), `run_table` and `run_log` (a thread's runs: the server's table and the event log),
`rollback` (a run's writes undone), `workers` (runs on the Celery workers, followed through Redis),
`streams` (stream modes), `page` (the server-rendered page). The `agentrt serve` command itself is
agent/cli/serve.py.
"""
