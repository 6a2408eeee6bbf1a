"""FastAPI dependencies: the shared context and the caller's principal."""

from __future__ import annotations

from fastapi import Request

from agent.serve.auth import Principal
from agent.serve.context import ServeContext


def get_ctx(request: Request) -> ServeContext:
    """The app's ServeContext."""
    ctx: ServeContext = request.app.state.ctx
    return ctx


def get_principal(request: Request) -> Principal:
    """Who is calling (raises `Unauthorized`, answered with 401)."""
    ctx = get_ctx(request)
    return ctx.auth.authenticate(request.headers, request.cookies)
