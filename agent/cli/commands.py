"""The table of `agentrt` commands. Adding a command is one `Command(...)` entry here plus a module.

`handler` and `arguments` are "module:function" names inside agent.cli (this table is the only
place they come from; nothing is imported by a name read from disk). `arguments(parser)` adds the
command's options; `handler(args) -> int` runs it and returns the exit status. They are imported
only when needed and must import nothing heavy at their module's top (LangGraph, SQLAlchemy,
Redis, the runner), so `agentrt --help` stays fast. A `passthrough` command has no `arguments`:
its handler gets the raw argument list (a tool with its own parser).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One subcommand of `agentrt`."""

    name: str
    handler: str
    arguments: str | None
    help: str
    example: str
    passthrough: bool = False
    live_warnings: bool = False  # warnings printed as they happen (long commands), else only on success


COMMANDS: tuple[Command, ...] = (
    Command(
        "run",
        "agent.cli.run:cmd_run",
        "agent.cli.run:args_run",
        "run one agent turn",
        'agentrt run "Summarise the 2026 sales by region"',
        live_warnings=True,
    ),
    Command(
        "resume",
        "agent.cli.run:cmd_resume",
        "agent.cli.run:args_resume",
        "recover and continue a crashed, paused or interrupted run",
        "agentrt resume s-1a2b3c4d5e6f7a8b --approve --interrupt 95c6a0d8bc93f745f2ca4d24f255a248",
        live_warnings=True,
    ),
    Command(
        "sessions",
        "agent.cli.sessions:cmd_sessions",
        "agent.cli.sessions:args_sessions",
        "list sessions, newest first",
        "agentrt sessions --status PAUSED --limit 5",
    ),
    Command(
        "show",
        "agent.cli.show:cmd_show",
        "agent.cli.show:args_show",
        "a session's conversation, branches and pending approval",
        "agentrt show s-1a2b3c4d5e6f7a8b",
    ),
    Command(
        "fork",
        "agent.cli.manage:cmd_fork",
        "agent.cli.manage:args_fork",
        "start a branch at an earlier entry",
        "agentrt fork ID --from ENTRY",
    ),
    Command(
        "branches",
        "agent.cli.branch_commands:cmd_branches",
        "agent.cli.branch_commands:args_branches",
        "a session's branches: fork point, head entry, turns; the current one marked",
        "agentrt branches s-1a2b3c4d5e6f7a8b --json",
    ),
    Command(
        "switch",
        "agent.cli.branch_commands:cmd_switch",
        "agent.cli.branch_commands:args_switch",
        "continue another branch: the next turn runs on its leaf, room and checkpoints",
        "agentrt switch s-1a2b3c4d5e6f7a8b east-only",
    ),
    Command(
        "branch",
        "agent.cli.branch_commands:cmd_branch",
        "agent.cli.branch_commands:args_branch",
        "`branch rename ID BRANCH NAME` names a branch; `branch delete ID BRANCH` drops it from listings",
        "agentrt branch rename s-1a2b3c4d5e6f7a8b 01a23b16-8769-7913-83ef-5bf40ee4a0c4 east-only",
    ),
    Command(
        "end",
        "agent.cli.manage:cmd_end",
        "agent.cli.manage:args_end",
        "end a session",
        "agentrt end s-1a2b3c4d5e6f7a8b",
    ),
    Command(
        "pause",
        "agent.cli.manage:cmd_pause",
        "agent.cli.manage:args_pause",
        "pause a session",
        "agentrt pause s-1a2b3c4d5e6f7a8b",
    ),
    Command(
        "tool-result",
        "agent.cli.manage:cmd_tool_result",
        "agent.cli.manage:args_tool_result",
        "page through an archived tool result",
        "agentrt tool-result s-1a2b3c4d5e6f7a8b call_3_1 --offset 0 --limit 500",
    ),
    Command(
        "doctor",
        "agent.cli.manage:cmd_doctor",
        "agent.cli.manage:args_doctor",
        "run the troubleshooting checks on a session (read-only unless --repair)",
        "agentrt doctor s-1a2b3c4d5e6f7a8b",
    ),
    Command(
        "export",
        "agent.cli.transfer:cmd_export",
        "agent.cli.transfer:args_export",
        "write sessions to one file (stdout) for `agentrt import` on another machine",
        "agentrt export s-1a2b3c4d5e6f7a8b > session.jsonl",
    ),
    Command(
        "import",
        "agent.cli.transfer:cmd_import",
        "agent.cli.transfer:args_import",
        "add the sessions of an `agentrt export` file to this base_dir",
        "agentrt import session.jsonl",
    ),
    Command(
        "items",
        "agent.cli.items_commands:cmd_items",
        "agent.cli.items_commands:args_items",
        "a tenant's items of the store API (long-term memory): `items export` to one file, `items import` it",
        "agentrt items export --tenant acme -o acme-items.jsonl",
    ),
    Command(
        "db",
        "agent.cli.manage:cmd_db",
        "agent.cli.manage:args_db",
        "SQL schema: `db upgrade` migrates, `db init` also creates the database",
        "agentrt db init --config configs/production.yaml",
    ),
    Command(
        "erase",
        "agent.cli.erase_commands:cmd_erase",
        "agent.cli.erase_commands:args_erase",
        "delete every session of a tenant (or of one user in it) on every layer, for good",
        "agentrt erase --tenant acme --user u-17 --yes",
    ),
    Command(
        "store",
        "agent.cli.erase_commands:cmd_store",
        "agent.cli.erase_commands:args_store",
        "storage upkeep: `store gc` deletes the sessions past session.retention_days; "
        "`store converge` replays what SQL / Redis missed in an outage; "
        "`store migrate --from files --to postgres` moves sessions into the PostgreSQL store",
        "agentrt store gc --dry-run",
    ),
    Command(
        "submit",
        "agent.cli.queue:cmd_submit",
        "agent.cli.queue:args_submit",
        "queue a turn for the Celery workers; prints its turn id",
        'agentrt submit --config configs/production.yaml --session s-42 "Summarise the sales"',
    ),
    Command(
        "wait",
        "agent.cli.queue:cmd_wait",
        "agent.cli.queue:args_wait",
        "wait for a submitted turn to finish or pause; prints its result",
        "agentrt wait --config configs/production.yaml TURN_ID --timeout 60",
        live_warnings=True,
    ),
    Command(
        "completion",
        "agent.cli.completion:cmd_completion",
        "agent.cli.completion:args_completion",
        "print a shell completion script (bash, zsh or tcsh)",
        "agentrt completion bash",
    ),
    Command(
        "serve",
        "agent.cli.manage:cmd_serve",
        None,
        "the LangGraph Agent Server API and a page over sessions (agentrt serve -h)",
        "agentrt serve --config configs/default.yaml --port 8123",
        passthrough=True,
        live_warnings=True,
    ),
)


def find(name: str) -> Command | None:
    """The command called `name`, if any."""
    return next((c for c in COMMANDS if c.name == name), None)
