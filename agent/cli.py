"""The `agentrt` command. Every subcommand takes --config F and --json.

Errors in config or input print one line (`agentrt: error: ...`) and exit 2; no traceback
unless AGENTRT_DEBUG=1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console

from agent.errors import AgentRuntimeError

console = Console(stderr=True, highlight=False)
out = Console(highlight=False)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="F", help="YAML config (default: built-in, same as configs/default.yaml)")
    p.add_argument("--json", action="store_true", help="print one JSON object for machines")
    p.add_argument("--tenant", metavar="T", help="tenant id (default: from config)")
    p.add_argument("--user", metavar="U", help="user id (default: from config)")


def _runner(args: argparse.Namespace) -> Any:
    from agent.runner import AgentRunner

    return AgentRunner.from_config(args.config)


class _Progress:
    """Renders streamed run events as compact progress lines."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.in_tokens = False

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if self.quiet:
            return
        if kind == "token":
            if not self.in_tokens:
                console.print("[dim]  model:[/dim] ", end="")
                self.in_tokens = True
            console.print(data["text"], end="", markup=False)
            return
        if self.in_tokens:
            console.print()
            self.in_tokens = False
        if kind == "node":
            console.print(f"[cyan]▸ {data['node']}[/cyan]")
        elif kind == "model_call":
            usage = data.get("usage") or {}
            console.print(
                f"[dim]  model call #{data.get('call_index', 0) + 1}: in {usage.get('input_tokens', '?')} / "
                f"out {usage.get('output_tokens', '?')} tokens, finish={data.get('finish_reason')}[/dim]"
            )
        elif kind == "tool_call":
            args = json.dumps(data.get("args"), ensure_ascii=False)
            console.print(f"[yellow]  tool {data.get('name')}[/yellow]({args[:100]}{'…' if len(args) > 100 else ''})")
        elif kind == "tool_result":
            tag = "replayed " if data.get("replayed") else ""
            console.print(f"[dim]    -> {tag}{data.get('status')} ({data.get('size')} chars)[/dim]")
        elif kind == "todo":
            done = sum(1 for t in data["todos"] if t.get("status") == "done")
            console.print(f"[green]  todo {done}/{len(data['todos'])} done[/green]")
        elif kind == "compression":
            console.print(f"[magenta]  compression tier {data.get('tier')}[/magenta]")


def _print_result(result: dict[str, Any], as_json: bool) -> int:
    if as_json:
        out.print_json(json.dumps(result, ensure_ascii=False, default=str))
    else:
        out.print()
        out.print(result.get("answer") or "(no answer)", markup=False)
        out.print()
        out.print(
            f"[bold]session[/bold] {result['session_id']}  [bold]status[/bold] {result['status']}  "
            f"[bold]finish[/bold] {result.get('finish_reason')}  iterations {result.get('iterations')}  "
            f"tokens {result.get('input_tokens')}/{result.get('output_tokens')}"
        )
        if result.get("error"):
            out.print(f"[red]{result['error']}[/red]", markup=True)
    return 0 if result.get("status") in ("COMPLETED", "PAUSED") else 1


def cmd_run(args: argparse.Namespace) -> int:
    """agentrt run TEXT."""
    runner = _runner(args)
    progress = _Progress(quiet=args.json)
    final: dict[str, Any] = {}
    for ev in runner.stream(" ".join(args.text), session_id=args.session, tenant_id=args.tenant, user_id=args.user):
        if ev.kind == "final":
            final = ev.data
        else:
            progress(ev.kind, ev.data)
    return _print_result(final, args.json)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"run": cmd_run}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `agentrt`."""
    parser = argparse.ArgumentParser(prog="agentrt", description="A crash-safe agent runtime on LangGraph.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run one agent turn")
    _common(p)
    p.add_argument("--session", metavar="ID", help="continue this session (default: a new one)")
    p.add_argument("text", nargs="+", help="what the agent should do")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except AgentRuntimeError as err:
        if os.environ.get("AGENTRT_DEBUG"):
            raise
        console.print(f"agentrt: error: {err}", markup=False)
        return 2
    except KeyboardInterrupt:
        console.print("agentrt: interrupted; resume with `agentrt resume ID`", markup=False)
        return 130


if __name__ == "__main__":
    sys.exit(main())
