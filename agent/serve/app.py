"""The FastAPI app of `agentrt serve`: the LangGraph Agent Server API over sessions, and the page at `/`.

While the app runs, a `Sweeper` thread replays, every `session.converge_every_s`, what the SQL and
Redis layers missed for sessions whose own process died (agent/session/sweep.py), and the cron
scheduler starts the runs of the crons that are due, every `serve.cron_poll_s`
(agent/serve/cron_scheduler.py); the runs in flight whose assistant was deleted, on any server over
the store, and those another server was asked to cancel, are cancelled (agent/serve/run_watch.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline

from agent.core.config import AgentSettings
from agent.core.errors import (
    AgentrtError,
    BackendUnavailable,
    ConfigError,
    Conflict,
    LeaseHeld,
    NotFound,
    RecoveryBlocked,
    ToolError,
    as_agentrt_error,
)
from agent.serve import (
    page,
    routes_agent_protocol,
    routes_assistants,
    routes_batch,
    routes_crons,
    routes_page,
    routes_protocol,
    routes_protocol_ws,
    routes_runs,
    routes_stateless,
    routes_store,
    routes_thread_stream,
    routes_threads,
)
from agent.serve.agent_protocol import PREFIX
from agent.serve.auth import Unauthorized
from agent.serve.cron_scheduler import CronScheduler
from agent.serve.run_watch import watch as watch_cancels
from agent.serve.serve_context import ServeContext
from agent.session.item_store import start_sweeper, stop_sweeper
from agent.session.sweep import Sweeper
from checkpointing.exceptions import CheckpointingError

STATIC_DIR = Path(__file__).resolve().parent / "static"


def _status(err: Exception) -> int:
    if isinstance(err, Unauthorized):
        return 401
    if isinstance(err, NotFound):  # a session, an approval, a tool result
        return 404
    if isinstance(err, ConfigError | ToolError):
        return 422
    if isinstance(err, Conflict | LeaseHeld | RecoveryBlocked):
        return 409
    if isinstance(err, BackendUnavailable):
        return 503
    return 500


def wants_html(request: Request) -> bool:
    """Whether the caller is a browser: its Accept header puts text/html before any JSON type.

    API clients (langgraph_sdk, curl) send `application/json` or `*/*` and keep getting JSON errors.
    """
    kinds = [part.split(";", 1)[0].strip().lower() for part in request.headers.get("accept", "").split(",")]
    html = kinds.index("text/html") if "text/html" in kinds else None
    json_at = next((i for i, k in enumerate(kinds) if k == "application/json" or k.endswith("+json")), None)
    return html is not None and (json_at is None or html < json_at)


def create_app(settings: AgentSettings) -> FastAPI:
    """Build the app (the runner opens its stores here, once)."""
    ctx = ServeContext(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # While it serves, it also replays what SQL / Redis missed for sessions whose process died.
        every = settings.session.converge_every_s
        sweeper = Sweeper(lambda: ctx.parts, every).start() if every is not None else None
        start_sweeper(ctx.items)  # LangGraph's store: expired items deleted now and then
        poll = settings.serve.cron_poll_s
        crons = asyncio.create_task(CronScheduler(ctx, poll).run()) if poll is not None else None
        watched = asyncio.create_task(watch_cancels(ctx))  # cancels asked of other servers
        yield
        for task in (crons, watched):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        stop_sweeper(ctx.items)
        if sweeper is not None:
            sweeper.stop()
        ctx.engine.shutdown()

    # Swagger UI served from the package (fastapi-offline), not from a CDN: /docs works offline.
    app = FastAPIOffline(
        title="agentrt serve",
        description="The LangGraph Agent Server API over agentrt sessions (threads = sessions, runs = turns).",
        version=_version(),
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    if settings.serve.cors_origins:
        # Browser apps on other origins (a `useStream` page on its dev server) call the API directly;
        # the SDK reads a run's id from the stream's Content-Location.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.serve.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["content-location", "location"],
        )

    async def on_error(request: Request, err: Exception) -> Response:
        # A checkpointing error's own text names no agentrt command: the mapped one adds it.
        shown = as_agentrt_error(err) if isinstance(err, CheckpointingError) else None
        if wants_html(request):
            return HTMLResponse(page.error_page(_status(err), str(shown or err)), status_code=_status(err))
        return JSONResponse({"detail": str(shown or err)}, status_code=_status(err))

    for exc in (Unauthorized, AgentrtError, CheckpointingError):
        app.add_exception_handler(exc, on_error)
    app.add_exception_handler(RequestValidationError, on_invalid)

    @app.get("/ok", tags=["system"])
    def ok() -> dict[str, Any]:
        """Liveness."""
        return {"ok": True}

    @app.get("/info", tags=["system"])
    def info() -> dict[str, Any]:
        """Server version and the features it offers (read by langgraph_sdk and Studio)."""
        return {
            "version": _version(),
            "langgraph_py_version": _version("langgraph"),
            "flags": {"assistants": True, "crons": True, "langsmith": False, "thread_ttl": False},
            "host": {"kind": "agentrt", "project_id": None, "revision_id": None, "tenant_id": None},
            "metadata": {"server": "agentrt serve", "auth": "open (loopback)" if ctx.auth.open else "api keys"},
        }

    app.include_router(routes_assistants.router)
    app.include_router(routes_crons.router)  # before the runs: `/runs/crons` is no run id
    app.include_router(routes_threads.router)
    app.include_router(routes_runs.router)
    app.include_router(routes_stateless.router)
    app.include_router(routes_store.router)
    app.include_router(routes_page.router)
    app.include_router(routes_batch.router)
    app.include_router(routes_thread_stream.router)
    app.include_router(routes_protocol.router)
    app.include_router(routes_protocol_ws.router)
    # The open Agent Protocol: its own routes, and the threads and store routes it shares with LangGraph's API.
    app.include_router(routes_agent_protocol.router)
    app.include_router(routes_threads.router, prefix=PREFIX, include_in_schema=False)
    app.include_router(routes_store.router, prefix=PREFIX, include_in_schema=False)
    app.include_router(routes_protocol.router, prefix=PREFIX, include_in_schema=False)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


async def on_invalid(request: Request, err: Exception) -> Response:
    """FastAPI's 422; when an input cannot be echoed as JSON (NaN, Infinity), the errors without inputs."""
    assert isinstance(err, RequestValidationError)
    try:
        return await request_validation_exception_handler(request, err)
    except ValueError:
        errors = [{k: v for k, v in e.items() if k not in ("input", "ctx")} for e in err.errors()]
        return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)


def _version(dist: str = "agentrt") -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "0"
