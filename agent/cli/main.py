"""Parsing, dispatch and the one error boundary of `agentrt`.

Every error ends here: one line on stderr (`agentrt: error: ...`) and the exit status of its class
in `agent.core.errors` (docs/reference/exit-codes.md); the traceback only with AGENTRT_DEBUG=1. The line stays
under `MAX_ERROR_CHARS`: a longer message keeps its start (what happened) and its next step
(`brief`), and says that AGENTRT_DEBUG=1 shows it whole.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from agent.cli.commands import COMMANDS, Command, find
from agent.cli.global_options import add_global_options, split_leading

MAX_ERROR_CHARS = 300
"""The longest `agentrt: error: ...` line a human is shown."""
_CUT_NOTE = " (shortened: AGENTRT_DEBUG=1 shows all)"

EXIT_TABLE = """exit status:
  0 done (COMPLETED, or PAUSED for an approval)   1 the run failed / a doctor check failed
  2 bad usage, config or input   3 not found   4 conflict (lease held, session not active)
  5 recovery blocked   6 backend unavailable   7 model call failed   8 corrupt data
  70 a bug (AGENTRT_DEBUG=1 shows the traceback)   130 interrupted"""


def _load(ref: str) -> Callable[..., Any]:
    module, _, name = ref.partition(":")
    if not module.startswith("agent.cli."):
        raise ValueError(f"command handler outside agent.cli: {ref}")
    func: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return func


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"agentrt {version('agentrt')}"
    except PackageNotFoundError:
        return "agentrt (not installed)"


class _Version(argparse.Action):
    """`--version`: the installed version, looked up only when asked (reading the package metadata
    costs every other command ~20 ms of its start)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        sys.stdout.write(_version() + "\n")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of `agentrt` (the options of `only`'s command, or of every command)."""
    return _build(only)[0]


def _build(only: str | None) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    examples = "\n".join(f"  {c.example}" for c in COMMANDS)
    parser = argparse.ArgumentParser(
        prog="agentrt",
        description="A crash-safe agent runtime on LangGraph.",
        epilog=f"examples:\n{examples}\n\n{EXIT_TABLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show program's version number and exit")
    add_global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    subs: dict[str, argparse.ArgumentParser] = {}
    for cmd in COMMANDS:
        p = subs[cmd.name] = sub.add_parser(
            cmd.name,
            help=cmd.help,
            description=cmd.help,
            epilog=f"example:\n  {cmd.example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
            add_help=not cmd.passthrough,
        )
        if cmd.arguments and (only is None or only == cmd.name):
            _load(cmd.arguments)(p)
    return parser, subs


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        leading, rest = split_leading(argv)
    except ValueError as err:
        build_parser(only="").error(str(err))
    cmd = find(rest[0]) if rest else None
    if cmd is not None and cmd.passthrough:
        return _guarded(cmd, lambda: _load(cmd.handler)([*leading, *rest[1:]]))
    parser, subs = _build(only=cmd.name if cmd else None)
    if cmd is not None:
        # The shared options given before the command go just after its name: the command's parser
        # reads them, and one given again after the command wins (argparse keeps the last).
        known = subs[cmd.name]._option_string_actions
        for option in (o for o in leading if o.startswith("--")):
            if option not in known:
                subs[cmd.name].error(f"{option} does not apply to this command (see agentrt {cmd.name} -h)")
        argv = [rest[0], *leading, *rest[1:]]
    args = parser.parse_args(argv)
    chosen = find(args.command)
    assert chosen is not None  # argparse accepted only names from the table
    return _guarded(chosen, lambda: _checked(chosen, args))


def _checked(cmd: Command, args: argparse.Namespace) -> Any:
    from agent.cli.given_ids import check_ids

    check_ids(args)  # before anything is opened: a refused id leaves nothing behind
    return _load(cmd.handler)(args)


def _guarded(cmd: Command, call: Callable[[], Any]) -> int:
    from agent.cli.common import configure_output

    warnings = configure_output(live_warnings=cmd.live_warnings)
    try:
        code = int(call() or 0)
        if warnings is not None:
            warnings.flush_held()
        return code
    except KeyboardInterrupt as err:
        from agent.cli import common
        from agent.core.errors import RunInterrupted

        _wake_orphan_workers()
        if common.DONE_CODE is not None and not isinstance(err, RunInterrupted):
            return common.DONE_CODE  # the Ctrl-C came after the result was printed
        said = str(err) if isinstance(err, RunInterrupted) else "interrupted before a run started"
        print(f"agentrt: {common.one_line(said)}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:
        if os.environ.get("AGENTRT_DEBUG"):
            raise
        return _report(err)
    finally:
        if warnings is not None:
            logging.getLogger("agentrt").removeHandler(warnings)


def _wake_orphan_workers() -> None:
    """Let the interpreter stop the pool threads a Ctrl-C orphaned, so the process can exit.

    `ThreadPoolExecutor` starts a worker, then registers it for the shutdown wake-up; a
    `KeyboardInterrupt` landing in the main thread between the two (`Thread.start` waits for the new
    thread) leaves a non-daemon worker that nothing wakes, and the exit hangs joining it.
    """
    import concurrent.futures.thread as pool
    import threading

    registered: Any = getattr(pool, "_threads_queues", None)  # CPython's private registry (3.9-3.13)
    if registered is None:
        return
    for t in threading.enumerate():
        args: Any = getattr(t, "_args", ())
        if getattr(t, "_target", None) is pool._worker and t not in registered and len(args) > 1:
            registered[t] = args[1]  # its work queue: at exit it gets the stop marker


def _report(err: Exception) -> int:
    from agent.cli.common import one_line
    from agent.core.errors import EXIT_BUG, as_agentrt_error

    mapped = as_agentrt_error(err)
    if mapped is None:
        line = f"{type(err).__name__}: {err} (a bug: run again with AGENTRT_DEBUG=1 for the traceback)"
        code = EXIT_BUG
    else:
        line, code = str(mapped), mapped.exit_code
    print(f"agentrt: error: {brief(one_line(line))}", file=sys.stderr)
    return code


def brief(line: str, limit: int = MAX_ERROR_CHARS - len("agentrt: error: ") - 1) -> str:
    """`line` if it has at most `limit` characters; else its start, an ellipsis and its next step
    (what follows its last `; `, or its closing parenthesis, when that is short), then a note that
    AGENTRT_DEBUG=1 shows the whole message. Messages put what to do last: it must survive the cut."""
    if len(line) <= limit:
        return line
    line = _short_paths(line)
    if len(line) <= limit:
        return line
    step = ""
    _, sep, after = line.rpartition("; ")
    opened = line.rfind(" (")
    if sep and len(after) <= limit // 2:
        step = "; " + after
    elif line.endswith(")") and opened > 0 and len(line) - opened <= limit // 2:
        step = line[opened:]
    room = limit - len(_CUT_NOTE) - len(step) - 1
    return line[:room].rstrip() + "…" + step + _CUT_NOTE


_PATH = re.compile(r"/[^\s:;,()'\"`]+")


def _short_paths(line: str, keep: int = 4) -> str:
    """`line` with each long absolute path shortened, so a cut spares the file's name: relative to
    the working directory when under it, else its last `keep` components after `…/`."""
    cwd = os.getcwd().rstrip("/") + "/"

    def one(m: re.Match[str]) -> str:
        path = m.group(0)
        if len(path) <= 40 or path.count("/") < 3:
            return path
        if path.startswith(cwd):
            return path[len(cwd) :]
        parts = path.split("/")
        return path if len(parts) <= keep + 1 else "…/" + "/".join(parts[-keep:])

    return _PATH.sub(one, line)
