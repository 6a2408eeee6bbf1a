"""FastAPI dependencies: the shared context and the caller's principal.

Both are `async` (no I/O, except an auth function's own): a sync dependency would cost each request
a hop to the thread pool.
"""

from __future__ import annotations

from fastapi import Request

from agent.serve.auth import Principal
from agent.serve.serve_context import ServeContext


async def get_ctx(request: Request) -> ServeContext:
    """The app's ServeContext."""
    ctx: ServeContext = request.app.state.ctx
    return ctx


async def get_principal(request: Request) -> Principal:
    """Who is calling (raises `Unauthorized`, answered with 401)."""
    ctx: ServeContext = request.app.state.ctx
    return ctx.auth.authenticate(request.headers, request.cookies)
