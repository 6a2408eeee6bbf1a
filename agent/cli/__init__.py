"""The `agentrt` command: parse, call the runner, render. `main` is the console-script entry.

The commands are a table (`agent.cli.commands.COMMANDS`); each names the module that defines its
arguments and its handler, so `agentrt --help` imports no LangGraph, no storage and no model.
"""

from __future__ import annotations

from agent.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
