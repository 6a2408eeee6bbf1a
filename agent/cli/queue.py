"""`agentrt submit` / `agentrt wait`: turns for the Celery workers (the work is in agent.runner.submit).

Only the arguments live here, so `agentrt --help` does not import Celery.
"""

from __future__ import annotations

import argparse

from agent.cli.common import common_options


def args_submit(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt submit`."""
    common_options(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--session", metavar="ID", help="an existing session")
    which.add_argument("--new-session", metavar="ID", help="a new session with this id (its first turn creates it)")
    p.add_argument("--turn-id", metavar="ID", help="your own unique id for this turn (default: a new UUID)")
    p.add_argument("text", nargs="+", help="what the agent should do")


def args_wait(p: argparse.ArgumentParser) -> None:
    """Options of `agentrt wait`."""
    common_options(p)
    p.add_argument("turn_id", metavar="TURN_ID")
    p.add_argument("--timeout", type=float, help="give up after this many seconds (exit code 3)")


def cmd_submit(args: argparse.Namespace) -> int:
    """agentrt submit --session ID "text": prints the turn id."""
    from agent.runner.submit import cmd_submit as submit

    return submit(args)


def cmd_wait(args: argparse.Namespace) -> int:
    """agentrt wait TURN_ID: 0 when COMPLETED or PAUSED, 1 when FAILED, 3 on --timeout."""
    from agent.runner.submit import cmd_wait as wait

    return wait(args)
