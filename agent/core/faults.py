"""Fault injection for crash drills: hard-exit the process at a named point.

Set `AGENTRT_CRASH_AT=<point>:<n>[,<point>:<n>...]` and the process calls `os._exit(137)` (the
exit status of a SIGKILL, with no cleanup, no flush, no `finally`) the n-th time (1-based, counted per
process) it reaches `<point>`. `:<n>` may be left out (means 1). Off unless the variable is set:
`crash_point()` is then one dict lookup.

`AGENTRT_INTERRUPT_AT=<point>[:<n>]` (same format) instead sends the process a real SIGINT there,
as a user's Ctrl-C would (Python raises `KeyboardInterrupt` in the main thread).

Points: `after_tool_execute`, `before_checkpoint_put`, `after_checkpoint_put`,
`before_journal_append`, `after_journal_append`, `turn_recorded` (a new turn's run and user text
are recorded, its graph has not started), `result_printed` (the CLI printed a run's result),
`mid_room_write` (a write in a sandbox room: its temp file is written and synced, not yet renamed
over the target), `mid_import` (`agentrt import`: before each session is renamed into place; on
the PostgreSQL store, `import` and `store migrate`: after each session's streams are uploaded,
before its documents), `mid_event_write` (crash only). The last one is not called by
code: `install()` hooks `checkpointing.record_log.write_hook`, so the n-th framed-record append of the
process (event log, checkpoints, writes or journal: whatever comes n-th) writes only the first half
of its bytes, fsyncs them and exits; the file is left with a torn last line.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Mapping

from agent.core.errors import ConfigError
from checkpointing import record_log

ENV_VAR = "AGENTRT_CRASH_AT"
INTERRUPT_ENV_VAR = "AGENTRT_INTERRUPT_AT"
CRASH_EXIT_CODE = 137
CRASH_POINTS: tuple[str, ...] = (
    "after_tool_execute",
    "before_checkpoint_put",
    "after_checkpoint_put",
    "before_journal_append",
    "after_journal_append",
    "turn_recorded",
    "result_printed",
    "mid_room_write",
    "mid_import",
    "mid_event_write",
)

_targets: dict[str, frozenset[int]] = {}
_interrupts: dict[str, frozenset[int]] = {}
_counts: dict[str, int] = {}
_lock = threading.Lock()
_installed = False


def parse_crash_spec(spec: str, var: str = ENV_VAR) -> dict[str, frozenset[int]]:
    """Parse `point:n[,point:n...]` into {point: {n, ...}}; raises `ConfigError` when malformed."""
    out: dict[str, set[int]] = {}
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        point, sep, count = item.partition(":")
        point = point.strip()
        if point not in CRASH_POINTS:
            raise ConfigError(
                f"{var}: unknown crash point {point!r}; valid points are {', '.join(CRASH_POINTS)} "
                f"(format <point>:<n>, comma-separated)"
            )
        n = 1
        if sep:
            try:
                n = int(count.strip())
            except ValueError:
                n = 0
            if n < 1:
                raise ConfigError(
                    f"{var}: {item!r} needs a count >= 1 after ':' (e.g. {point}:1 for the first arrival)"
                )
        out.setdefault(point, set()).add(n)
    return {p: frozenset(ns) for p, ns in out.items()}


def install(environ: Mapping[str, str] | None = None) -> None:
    """Read `AGENTRT_CRASH_AT` once and arm the crash points (idempotent; later calls do nothing).

    Raises `ConfigError` naming the valid points when the variable names an unknown one.
    """
    global _installed
    if _installed:
        return
    env = os.environ if environ is None else environ
    targets = parse_crash_spec(env.get(ENV_VAR, ""))
    interrupts = parse_crash_spec(env.get(INTERRUPT_ENV_VAR, ""), INTERRUPT_ENV_VAR)
    with _lock:
        if _installed:
            return
        _targets.clear()
        _targets.update(targets)
        _interrupts.clear()
        _interrupts.update(interrupts)
        _counts.clear()
        if "mid_event_write" in _targets:
            record_log.write_hook = _mid_write_hook
        _installed = True


def reset() -> None:
    """Disarm every point and forget counts, so `install()` reads the environment again (tests)."""
    global _installed
    with _lock:
        _targets.clear()
        _interrupts.clear()
        _counts.clear()
        if record_log.write_hook is _mid_write_hook:
            record_log.write_hook = None
        _installed = False


def armed() -> dict[str, frozenset[int]]:
    """The armed points (crash or interrupt) and their counts (empty when fault injection is off)."""
    return {**_interrupts, **_targets}


def _reached(name: str, targets: Mapping[str, frozenset[int]] | None = None) -> bool:
    """Count one arrival at `name`; True when this arrival is one that must crash (or be interrupted)."""
    with _lock:
        n = _counts.get(name, 0) + 1
        _counts[name] = n
    return n in (_targets if targets is None else targets).get(name, frozenset())


def crash_point(name: str) -> None:
    """Hard-exit with status 137 (or send SIGINT, for `AGENTRT_INTERRUPT_AT`) when `name` is armed
    and this is its n-th arrival; else nothing."""
    if not _installed:
        install()
    if name in _targets:
        if _reached(name):
            os._exit(CRASH_EXIT_CODE)
    elif name in _interrupts and _reached(name, _interrupts):
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            # Started as a shell's background job: the SIGINT would vanish and the drill pass unseen.
            os.write(
                2,
                f"agentrt: {INTERRUPT_ENV_VAR}={name}: SIGINT is ignored in this process "
                "(started in the background?); nothing was interrupted\n".encode(),
            )
        os.kill(os.getpid(), signal.SIGINT)


def _mid_write_hook(fd: int, data: bytes) -> None:
    """`record_log.write_hook`: on the armed append, leave half a record on disk and die."""
    if _reached("mid_event_write"):
        cut = max(1, len(data) // 2)
        if data[cut - 1 : cut] == b"\n":
            cut -= 1  # several frames in one write: still end inside a record, never on a boundary
        os.write(fd, data[:cut])
        os.fsync(fd)
        os._exit(CRASH_EXIT_CODE)
