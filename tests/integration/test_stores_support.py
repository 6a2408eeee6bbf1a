"""Helpers shared by the store/manager integration tests (no tests here).

Real services only: the shared Redis and PostgreSQL (env AGENTRT_REDIS_URL / AGENTRT_DATABASE_URL),
a Redis server owned by one test (own port, killed by its pid), and a TCP relay in front of
PostgreSQL that a test can cut and restore to make the database unreachable and come back.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import uuid
from pathlib import Path

import redis

from agent.session.manager import ChatSessionManager, Mode
from agent.session.session import SessionStore
from agent.session.stores.jsonl import JsonlSessionStore
from agent.session.stores.memory_cache import MemorySessionStore
from agent.session.stores.redis import RedisSessionStore
from agent.session.stores.sql import SqlSessionStore
from checkpointing.store import Store

REDIS_URL = os.environ.get("AGENTRT_REDIS_URL", "redis://127.0.0.1:6379")
DATABASE_URL = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


def unique(prefix: str = "t") -> str:
    """A name no concurrent test run uses."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def drop_redis_prefix(client: redis.Redis, prefix: str) -> None:
    """Delete every key under `prefix:` (test cleanup)."""
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        client.delete(*keys)


def sql_store(url: str = DATABASE_URL, create: bool = True) -> SqlSessionStore:
    """A SQL store on its own table prefix (drop it with `.drop()`)."""
    return SqlSessionStore(url, table_prefix=unique("agentrt_test_") + "_", create=create, connect_timeout=2)


def build_manager(
    mode: Mode,
    base_dir: Path,
    l2: SessionStore | None,
    sql: SqlSessionStore | None,
    fsync: str = "always",
    store: Store | None = None,
) -> ChatSessionManager:
    """A manager over the given layers with retries on every call (no waiting in tests); `store`:
    the record store of its JSONL layer (None: the files under `base_dir`)."""
    return ChatSessionManager(
        mode,
        MemorySessionStore(max_entries=100_000),
        l2,
        sql,
        JsonlSessionStore(base_dir, fsync=fsync, store=store),  # type: ignore[arg-type]
        retry_interval_s=0,
    )


class OwnedRedis:
    """A redis-server on a free port, started and killed by pid by the test that owns it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Its URL."""
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--bind",
                "127.0.0.1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        for _ in range(500):
            try:
                if client.ping():
                    return
            except redis.exceptions.ConnectionError:
                if self.proc.poll() is not None:
                    raise RuntimeError("redis-server exited at start") from None
                threading.Event().wait(0.02)
        raise RuntimeError(f"redis-server on port {self.port} did not answer")

    def kill(self) -> None:
        """SIGKILL the server by its pid and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, 9)
            self.proc.wait()
        self.proc = None


class Relay:
    """A TCP relay 127.0.0.1:port -> target; `cut()` drops it and every connection, `restore()` reopens."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def restore(self) -> None:
        """Listen again (the database becomes reachable)."""
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(64)
        self._server = srv
        threading.Thread(target=self._accept, args=(srv,), daemon=True).start()

    def _accept(self, srv: socket.socket) -> None:
        while True:
            try:
                client, _ = srv.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Stop listening and break every open connection (the database becomes unreachable)."""
        if self._server is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would leave it listening.
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def url_for(self, database_url: str) -> str:
        """`database_url` rewritten to go through this relay."""
        host = f"{self.target[0]}:{self.target[1]}"
        assert host in database_url, database_url
        return database_url.replace(host, f"127.0.0.1:{self.port}")


def pg_host_port(url: str = DATABASE_URL) -> tuple[str, int]:
    """Host and port of the PostgreSQL URL."""
    rest = url.split("@", 1)[-1].split("/", 1)[0]
    host, _, port = rest.partition(":")
    return host, int(port or 5432)


def redis_store(url: str = REDIS_URL, prefix: str | None = None) -> RedisSessionStore:
    """A Redis store on its own key prefix."""
    return RedisSessionStore(url, key_prefix=prefix or unique("agentrt-test-"), socket_timeout=2)


def jsonl_store(base: Path) -> JsonlSessionStore:
    """A JSONL store under base."""
    return JsonlSessionStore(base)
