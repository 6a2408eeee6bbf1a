"""What every command shares: the common options, output streams, JSON output, the runner."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

_T = TypeVar("_T")

if TYPE_CHECKING:
    from agent.core.config import AgentSettings
    from agent.runner.agent_runner import AgentRunner


DONE_CODE: int | None = None
"""Set by a command once its result is printed: a Ctrl-C after that exits with this status (the
work was done), not 130 with "interrupted before a run started"."""


def common_options(p: argparse.ArgumentParser, identity: bool = True) -> None:
    """--config, --json, and (unless `identity` is false) --tenant, --user."""
    p.add_argument("--config", metavar="F", help="YAML config (default: built-in, same as configs/default.yaml)")
    p.add_argument("--json", action="store_true", help="print one JSON object for machines")
    if identity:
        p.add_argument("--tenant", metavar="T", help="tenant id (default: from config)")
        p.add_argument("--user", metavar="U", help="user id (default: from config)")


def session_argument(p: argparse.ArgumentParser) -> None:
    """The positional session id."""
    p.add_argument("session_id", metavar="ID", help="the session id (see `agentrt sessions`)")


def one_line(text: str) -> str:
    """`text` for one line of stderr: unsafe characters escaped (no raw `\\r`, ESC or U+202E of a
    hostile id reaches the terminal), then its lines and runs of blanks joined by single spaces."""
    from agent.core.text import printable

    return " ".join(printable(text, keep="\n\t").split())


class _Warnings(logging.Handler):
    """agentrt's warnings as `agentrt: warning: ...` lines: at once (live), or held until the command
    succeeds, so a failing command prints its one error line and nothing else."""

    def __init__(self, live: bool) -> None:
        super().__init__(logging.WARNING)
        self.live = live
        self.held: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = "agentrt: warning: " + one_line(record.getMessage())
        if self.live:
            sys.stderr.write(line + "\n")
        else:
            self.held.append(line)

    def flush_held(self) -> None:
        for line in self.held:
            sys.stderr.write(line + "\n")
        self.held.clear()


def configure_output(live_warnings: bool) -> _Warnings | None:
    """Logging from the environment (AGENTRT_LOG), else our warning lines; stdout/stderr that never
    fail on a character. Returns the warning handler when it is ours."""
    from agent.core.logs import configure_logging

    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    if os.environ.get("AGENTRT_LOG"):
        configure_logging()
        return None
    handler = _Warnings(live_warnings)
    logging.getLogger("agentrt").addHandler(handler)  # Python's last-resort stderr printer then stays quiet
    # The record store's pool logs each lost connection and reconnection attempt (Python's
    # last-resort printer shows them raw); a command that cannot go on says so in its error line.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    return handler


def _held() -> list[str] | None:
    """The warning lines held until the command succeeds (None: none are held, see `configure_output`)."""
    for handler in logging.getLogger("agentrt").handlers:
        if isinstance(handler, _Warnings) and not handler.live:
            return handler.held
    return None


def warnings_mark() -> int:
    """How many warning lines are held now (see `drop_warnings_since`)."""
    held = _held()
    return len(held) if held is not None else 0


def drop_warnings_since(mark: int) -> None:
    """Forget the warnings held since `warnings_mark` gave `mark`: a command that answers again
    another way (a runner after a reader) says them again itself."""
    held = _held()
    if held is not None:
        del held[mark:]


def settings(args: argparse.Namespace) -> AgentSettings:
    """The settings of `--config` (the built-in defaults without it)."""
    from agent.core.config import load_settings

    return load_settings(args.config)


def runner(args: argparse.Namespace) -> AgentRunner:
    """An AgentRunner for `--config`."""
    import gc

    from agent.runner.agent_runner import AgentRunner

    built = AgentRunner.from_config(args.config)
    # A command is one short process: what start-up loaded (LangGraph, pydantic, the graph) lives
    # until exit, so the cyclic collector's full passes need not walk it again and again while
    # the command reads a long session (each pass over those ~1M objects costs ~0.1 s).
    gc.freeze()
    return built


def read(args: argparse.Namespace, call: Callable[[Any], _T]) -> _T:
    """`call(reader)` for a read-only command: a `SessionReader` (no LangGraph, no SQL unless a read
    reaches it) when one answers for `--config`, else, or when the checkpoint needs LangGraph to be
    read exactly (`NeedsGraph`), an AgentRunner (`runner`). Both answer with the same methods."""
    from agent.runner.reader import NeedsGraph, SessionReader

    reader = SessionReader.open(args.config)
    if reader is not None:
        try:
            return call(reader)
        except NeedsGraph:
            pass
    full = runner(args)
    if reader is not None and reader.opened_manager is not None:
        full.manager = reader.opened_manager  # what it read (and replayed) is not read again
    return call(full)


def tenant_of(args: argparse.Namespace, conf: AgentSettings) -> str:
    """The tenant the command acts for, validated."""
    from agent.core.errors import InputError
    from checkpointing.exceptions import InvalidIdError
    from checkpointing.ids import validate_id

    try:
        return validate_id(args.tenant or conf.session.tenant_id, "tenant id")
    except InvalidIdError as err:
        raise InputError(str(err)) from None


def print_json(data: Any) -> int:
    """One JSON document on stdout: every id exact, no control or format character raw (`json_safe`)."""
    from agent.core.text import json_safe

    sys.stdout.write(json_safe(json.dumps(data, ensure_ascii=False, default=str, indent=2)) + "\n")
    return 0


def say(text: str = "", *, err: bool = False, end: str = "\n") -> None:
    """Print plain text (no markup is ever interpreted) to stdout or stderr."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + end)
    stream.flush()


def styled(text: str, style: str, stream: Any = None) -> str:
    """`text` (escaped: `printable`) in an ANSI style when `stream` (default stdout) is a terminal
    and the environment sets no `NO_COLOR` (no-color.org)."""
    from agent.core.text import printable

    text = printable(text, keep="\n\t")
    target = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR") or not getattr(target, "isatty", lambda: False)() or style not in _ANSI:
        return text
    return f"\033[{_ANSI[style]}m{text}\033[0m"


_ANSI = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}


def relative_time(iso: str | None, now: float | None = None) -> str:
    """'3 min ago' for an ISO timestamp ('-' when missing)."""
    import time
    from datetime import datetime

    if not iso:
        return "-"
    try:
        then = datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return str(iso)
    secs = max(0.0, (time.time() if now is None else now) - then)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if secs >= size:
            return f"{int(secs // size)} {unit} ago"
    return f"{int(secs)} s ago"


def short(text: str, width: int) -> str:
    """`text` on one line (`one_line`), cut to `width` characters with an ellipsis."""
    one = one_line(str(text))
    return one if len(one) <= width else one[: max(0, width - 1)] + "…"


def write_out(data: bytes, output: str | None, done: str) -> None:
    """Bytes a command exports: to `output` whole or not at all (a temp file renamed), saying `done`
    (with the file's name) on stderr, or to stdout."""
    if output:
        from pathlib import Path

        from agent.core.text import printable

        out = Path(output)
        temp = out.with_name(f".{out.name}.part-{os.getpid()}")
        temp.write_bytes(data)
        os.replace(temp, out)
        say(done.format(file=printable(str(out))), err=True)
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def read_in(file: str, wrote_by: str) -> tuple[bytes, str]:
    """The bytes of `file` (`-`: stdin) and the name to show for it; `InputError` naming `wrote_by`
    (the command that writes such a file) when there is no such file or it is a folder."""
    from pathlib import Path

    from agent.core.errors import InputError
    from agent.core.text import printable

    if file == "-":
        return sys.stdin.buffer.read(), "stdin"
    try:
        return Path(file).read_bytes(), printable(file)
    except FileNotFoundError:
        raise InputError(f"no file {printable(file)}; give the file `{wrote_by}` wrote") from None
    except IsADirectoryError:
        raise InputError(f"{printable(file)} is a folder; give the file `{wrote_by}` wrote") from None
