"""A private PostgreSQL 15 server that a test owns: it may crash, restart or stop it at will.

    with private_postgres() as pg:          # or the `pg_server` fixture
        url = pg.url("agentrt")             # postgresql://postgres@127.0.0.1:<port>/agentrt
        pg.restart("immediate")             # a crash restart (no shutdown checkpoint: WAL recovery)
        pg.stop(); ...; pg.start()          # an outage

`private_postgres(settings)` adds server settings to its postgresql.conf (every start uses them).
`env_of(pg)` names the server to a child process, `server_from_env()` finds it there (a tool
of a run under test that crashes the server at a known step: `tests.support.pg_tools`).

The server runs from the Debian binaries (`/usr/lib/postgresql/15/bin`, or `AGENTRT_PG_BIN`) on a
free port of 127.0.0.1 with its socket and data in a temporary folder, trust authentication, user
`postgres`. As root the binaries run as the `postgres` user (initdb refuses root). Never the shared
server on 5432: restarting that one would break every other test. Skipped when the binaries are
missing.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

PG_BIN = Path(os.environ.get("AGENTRT_PG_BIN", "/usr/lib/postgresql/15/bin"))
StopMode = Literal["smart", "fast", "immediate"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """One private server: its folder (`data`, `log`, the socket) and port."""

    root: Path
    port: int
    as_postgres: bool

    @property
    def data(self) -> Path:
        """The data directory."""
        return self.root / "data"

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL of database `dbname` on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        self._ctl("start", "-o", opts, "-l", str(self.root / "log"), "-w")

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop the server: `fast` disconnects clients and shuts down cleanly, `immediate` kills
        every server process (the next start recovers from the WAL, as after a crash)."""
        self._ctl("stop", "-m", mode, "-w")

    def restart(self, mode: StopMode = "fast") -> None:
        """Stop (in `mode`) and start again; returns once it accepts connections."""
        self.stop(mode)
        self.start()

    def log(self) -> str:
        """The server's log so far (for assertion messages)."""
        path = self.root / "log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _ctl(self, *args: str) -> None:
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), *args)

    def _run(self, *argv: str) -> None:
        cmd = ["runuser", "-u", "postgres", "--", *argv] if self.as_postgres else list(argv)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()}\n{self.log()}")


ROOT_ENV = "AGENTRT_TEST_PG_ROOT"
PORT_ENV = "AGENTRT_TEST_PG_PORT"


def env_of(server: PgServer) -> dict[str, str]:
    """The environment naming `server` to a child process (`server_from_env`)."""
    return {ROOT_ENV: str(server.root), PORT_ENV: str(server.port)}


def server_from_env() -> PgServer:
    """The private server a parent process named with `env_of`."""
    return PgServer(Path(os.environ[ROOT_ENV]), int(os.environ[PORT_ENV]), os.geteuid() == 0)


def _postgres_user() -> tuple[int, int] | None:
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


@contextmanager
def private_postgres(settings: dict[str, str] | None = None) -> Iterator[PgServer]:
    """A fresh server (initdb, `settings` added to its postgresql.conf, start); stopped and its
    folder removed afterwards. Skips the test when PostgreSQL's binaries (or, as root, the
    `postgres` user and `runuser`) are missing."""
    if not (PG_BIN / "initdb").exists() or not (PG_BIN / "pg_ctl").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN} (apt-get install postgresql-15)")
    as_postgres = os.geteuid() == 0
    ids = _postgres_user()
    if as_postgres and (ids is None or shutil.which("runuser") is None):
        pytest.skip("running as root needs the postgres user and runuser to start a private PostgreSQL")
    root = Path(tempfile.mkdtemp(prefix="agentrt-pg-"))
    if as_postgres and ids is not None:
        os.chown(root, *ids)
    server = PgServer(root, _free_port(), as_postgres)
    try:
        server._run(str(PG_BIN / "initdb"), "-A", "trust", "-U", "postgres", "-D", str(server.data), "-E", "UTF8")
        with (server.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = '{value}'\n" for name, value in (settings or {}).items())
        server.start()
        yield server
    finally:
        try:
            server.stop("immediate")
        except RuntimeError:
            pass  # never started, or already stopped
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_server() -> Iterator[PgServer]:
    """A private PostgreSQL server for this test (see `private_postgres`)."""
    with private_postgres() as server:
        yield server
