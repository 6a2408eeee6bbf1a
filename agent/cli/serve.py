"""`agentrt serve [--host 127.0.0.1] [--port 2024] [--config F]`: run the server with uvicorn."""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from collections.abc import Sequence

from agent.core.config import load_settings
from agent.core.errors import AgentrtError, ConfigError
from agent.serve.auth import Authenticator, check_bind


def build_parser() -> argparse.ArgumentParser:
    """Options of `agentrt serve`: no --tenant/--user (each request's caller is found by `serve.api_keys`
    or `serve.auth`, one server serves many tenants) and no --json (it prints one line, then serves)."""
    from agent.cli.commands import find

    serve = find("serve")
    assert serve is not None
    p = argparse.ArgumentParser(
        prog="agentrt serve",
        description="Serve the LangGraph Agent Server API and the page at / over sessions. Who a request acts "
        "as comes from the config (serve.api_keys, serve.auth); without either: loopback only, default tenant.",
        epilog=f"example:\n  {serve.example}\n  agentrt serve --config configs/production.yaml --host 0.0.0.0 "
        "--port 8080   # needs serve.api_keys or serve.auth",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=2024, help="port (default 2024, as `langgraph dev`)")
    p.add_argument("--config", metavar="F", help="agentrt config (default: built-in defaults)")
    p.add_argument("--log-level", default="warning", help="uvicorn log level (default warning)")
    return p


def check_free(host: str, port: int) -> None:
    """Refuse, before anything is opened, an address another process already listens on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            why = "address already in use" if err.errno == errno.EADDRINUSE else (err.strerror or str(err)).lower()
            raise ConfigError(
                f"cannot listen on {host}:{port}: {why}; stop what holds it or choose another port with --port"
            ) from None


def freeze_start_up() -> None:
    """Keep what start-up loaded (modules, the app) out of the collector's full passes, as a CLI
    command does once its runner is built: each full pass over those objects costs ~0.1 s, and a
    server makes many. Collected first, so that no garbage of start-up is kept frozen for good."""
    import gc

    gc.collect()
    gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, check the bind address against the auth settings, and serve until stopped."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        settings = load_settings(args.config)
        check_bind(args.host, Authenticator(settings))
        check_free(args.host, args.port)
        import uvicorn

        from agent.serve.app import create_app

        app = create_app(settings)
    except AgentrtError as err:
        print(f"agentrt serve: error: {err}", file=sys.stderr)
        return 2
    print(f"agentrt serve: http://{args.host}:{args.port}  (API docs at /docs, sessions page at /)", flush=True)
    freeze_start_up()
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=5)
    return 0
