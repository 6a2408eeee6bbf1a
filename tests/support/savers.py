"""The saver over each store backend, for tests parametrized over `files` and `postgres`.

`SaverKit.open(kind, tmp_path)` gives a factory of savers over one store: for `files` a folder
in `tmp_path`, for `postgres` a schema of its own in the test database (dropped by `close`). Each
call makes a new saver (a fresh process's view of the same data: nothing of it in memory). The
helpers read and change a run stream's raw lines, whichever backend holds them, with real file
writes or real SQL.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

import orjson
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from checkpointing.layout import checkpoints_file, thread_dir
from checkpointing.records import verify_line
from checkpointing.saver import JsonlCheckpointSaver
from checkpointing.store import FileStore, Store

DATABASE_URL = os.environ.get("AGENTRT_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
KINDS = ("files", "postgres")


def _connect() -> Any:
    import psycopg

    return psycopg.connect(DATABASE_URL, autocommit=True, prepare_threshold=None)


@dataclass
class SaverKit:
    """Savers over one store of kind `kind`, and raw access to its run streams."""

    kind: str
    base: Path
    schema: str = ""
    stores: list[Any] = field(default_factory=list)
    shared: Any = None

    @classmethod
    def open(cls, kind: str, tmp_path: Path) -> SaverKit:
        """A kit over a fresh store of `kind` (a folder, or a new PostgreSQL schema)."""
        kit = cls(kind, tmp_path / "state")
        if kind == "postgres":
            kit.schema = f"t_{uuid.uuid4().hex[:16]}"
            kit.store().setup()  # type: ignore[attr-defined]
        return kit

    def store(self) -> Store:
        """A new store object over this kit's data."""
        if self.kind == "files":
            return FileStore(self.base)
        from checkpointing.store.postgres import PostgresStore

        store = PostgresStore(DATABASE_URL, schema=self.schema, max_connections=2)
        self.stores.append(store)
        return store

    def __call__(self, **kwargs: Any) -> JsonlCheckpointSaver:
        """A new saver over this kit's data."""
        if self.kind == "files":
            return JsonlCheckpointSaver(self.base, **kwargs)
        # One pool for the kit's savers: a new saver starts with nothing in memory, like a new process.
        if self.shared is None:
            self.shared = self.store()
        return JsonlCheckpointSaver(store=self.shared, **kwargs)

    def close(self) -> None:
        """Close the stores and drop the test schema."""
        for s in self.stores:
            s.close()
        if self.kind == "postgres":
            with _connect() as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run `query` (with `{s}` for this kit's schema) on a connection of its own."""
        with _connect() as conn:
            cur = conn.execute(query.replace("{s}", f'"{self.schema}"'), params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    # -- raw lines of a run stream ----------------------------------------------------------------

    def path(self, thread: str = "t1", run: str = "main", tenant: str = "default") -> Path:
        """The run's file (files only)."""
        return checkpoints_file(thread_dir(self.base, tenant, thread), run)

    def raw(self, thread: str = "t1", run: str = "main", tenant: str = "default") -> bytes:
        """The run stream's bytes: its file, or its rows concatenated in order (b"" when none)."""
        if self.kind == "files":
            path = self.path(thread, run, tenant)
            return path.read_bytes() if path.exists() else b""
        rows = self.sql(
            "SELECT r.line FROM {s}.jsonl_records r JOIN {s}.jsonl_streams s ON s.id = r.stream"
            " WHERE s.tenant = %s AND s.thread = %s AND s.run = %s ORDER BY r.pos",
            (tenant, thread, run),
        )
        return b"".join(bytes(r[0]) for r in rows)

    def records(self, thread: str = "t1", run: str = "main", tenant: str = "default") -> list[dict[str, Any]]:
        """The run stream's records, verified."""
        return [orjson.loads(verify_line(line)) for line in self.raw(thread, run, tenant).splitlines()]

    def has_run(self, thread: str = "t1", run: str = "main", tenant: str = "default") -> bool:
        """Whether the run stream exists."""
        if self.kind == "files":
            return self.path(thread, run, tenant).parent.exists()
        return bool(self.sql("SELECT 1 FROM {s}.jsonl_streams WHERE tenant = %s AND thread = %s AND run = %s",
                             (tenant, thread, run)))  # fmt: skip

    def append_line(self, line: bytes, thread: str = "t1", run: str = "main", tenant: str = "default") -> None:
        """Append a raw line to the run stream behind the saver's back (another writer, a tool)."""
        if self.kind == "files":
            with open(self.path(thread, run, tenant), "ab") as fh:
                fh.write(line)
            return
        self.sql(
            "INSERT INTO {s}.jsonl_records (stream, pos, line) SELECT s.id, coalesce((SELECT r.pos +"
            " octet_length(r.line) FROM {s}.jsonl_records r WHERE r.stream = s.id ORDER BY r.pos DESC LIMIT 1), 0),"
            " %s FROM {s}.jsonl_streams s WHERE s.tenant = %s AND s.thread = %s AND s.run = %s",
            (line, tenant, thread, run),
        )

    def change_line(
        self, n: int, change: Callable[[bytes], bytes], thread: str = "t1", run: str = "main", tenant: str = "default"
    ) -> None:
        """Replace line `n` (from 1) of the run stream by `change(line)` (same length: a damaged byte)."""
        if self.kind == "files":
            path = self.path(thread, run, tenant)
            lines = path.read_bytes().splitlines(keepends=True)
            lines[n - 1] = change(lines[n - 1])
            path.write_bytes(b"".join(lines))
            return
        rows = self.sql(
            "SELECT r.stream, r.pos, r.line FROM {s}.jsonl_records r JOIN {s}.jsonl_streams s ON s.id = r.stream"
            " WHERE s.tenant = %s AND s.thread = %s AND s.run = %s ORDER BY r.pos OFFSET %s LIMIT 1",
            (tenant, thread, run, n - 1),
        )
        stream, pos, line = rows[0]
        self.sql("UPDATE {s}.jsonl_records SET line = %s WHERE stream = %s AND pos = %s",
                 (change(bytes(line)), stream, pos))  # fmt: skip


# A small two-node graph with a DeltaChannel history (the saver tests drive it over each backend).
def add_batches(state: list, writes: Any) -> list:
    out = list(state or [])
    for w in writes:
        out = add_messages(out, w)
    return out


class State(TypedDict):
    messages: Annotated[list, DeltaChannel(add_batches, snapshot_frequency=3)]
    n: int


def delta_graph(saver: JsonlCheckpointSaver) -> Any:
    def agent(s: Any) -> dict[str, Any]:
        call = {"id": f"c{s['n']}", "name": "t", "args": {"n": s["n"]}}
        return {"messages": [AIMessage("", tool_calls=[call])], "n": s["n"] + 1}

    def tools(s: Any) -> dict[str, Any]:
        return {"messages": [ToolMessage("r" * 300 + str(s["n"]), tool_call_id=f"c{s['n'] - 1}")]}

    b: Any = StateGraph(State)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", lambda s: "tools" if s["n"] < 4 else END, ["tools", END])
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=saver)
