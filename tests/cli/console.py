"""Run the installed `agentrt` console script as a user would: a fresh directory, a real process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tests.support.shell_env import environ_copy

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Ran:
    """What one command did."""

    code: int
    out: str
    err: str

    @property
    def both(self) -> str:
        """stdout and stderr together."""
        return self.out + self.err

    def error_line(self) -> str:
        """The one `agentrt: error:` line of stderr (fails unless stderr is exactly that line)."""
        lines = [ln for ln in self.err.splitlines() if ln.strip()]
        assert len(lines) == 1, f"expected one stderr line, got {len(lines)}:\n{self.err}"
        assert lines[0].startswith("agentrt: error: "), self.err
        assert "Traceback" not in self.err
        return lines[0]


def script() -> str:
    """The installed console script: the one pip put beside this interpreter, else the first on PATH."""
    # Not `which` first: a version manager's shim on PATH (pyenv) re-resolves the interpreter in a
    # shell on every call, doubling the cost of each of the suite's many short commands.
    beside = Path(sysconfig.get_path("scripts")) / "agentrt"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("agentrt")
    assert found, "the agentrt console script is not installed (pip install -e '.[dev]')"
    return found


def env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell, importing this checkout's code."""
    out = {k: v for k, v in environ_copy().items() if not k.startswith(("AGENTRT_", "PYTEST_"))}
    out["PYTHONPATH"] = str(ROOT)
    out.update(extra)
    return out


def agentrt(
    *args: str, cwd: Path, extra_env: dict[str, str] | None = None, stdin: str = "", timeout: float = 300
) -> Ran:
    """`agentrt ARGS` in `cwd`, with no terminal (stdin from a pipe)."""
    proc = subprocess.run(
        [script(), *args],
        cwd=cwd,
        env=env(**(extra_env or {})),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Ran(proc.returncode, proc.stdout, proc.stderr)
