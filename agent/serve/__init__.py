"""`agentrt serve`: the LangGraph Agent Server API over agentrt sessions (FastAPI), and a page at `/`.

Modules: `app` (the FastAPI app), `routes_*` (one resource each), `auth` (API keys / auth function),
`context` (threads read as sessions), `engine` (runs on a thread pool), `workers` (runs on the Celery
workers, followed through Redis), `streams` (stream modes),
`page` (the server-rendered page). The `agentrt serve` command itself is agent/cli/serve.py.
"""
