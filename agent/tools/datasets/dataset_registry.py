"""The session's datasets: loaded once into an in-memory SQLite database, queried read-only.

A dataset is `{name, path | url, format?, description?}`: a CSV file, JSON (an array of objects or
JSON lines), Parquet (needs pyarrow), or a SQL table as `<SQLAlchemy URL>#<table>` (rows copied, at
most `max_sql_rows`). Each becomes a table named after the dataset.

Why SQLite: it ships with Python (DuckDB is not installed here, and a new dependency needs a better
reason than speed on tables an agent explores), an in-memory database per session costs nothing,
and `sqlite3` gives two independent read-only guards: an authorizer that sees every action a
compiled statement would take (only SELECT, READ, FUNCTION and RECURSIVE are allowed) and
`PRAGMA query_only=ON`. CPU time, result size, value size and memory are limited per query
(`limits.QueryLimits`: a progress handler, a checked printf, SQLITE_LIMIT_LENGTH, temp files), so
a hostile query ends with a `ToolError` within about `cpu_seconds`; the sqlite3 module itself
refuses more than one statement per call.

Dataset files are read with the process's rights; pass `allowed_roots` to confine them (and SQLite
database files) to some folders when dataset lists come from less trusted users.

`load()` runs once (a second call returns the cached summary); a missing or malformed dataset does
not fail the others: it is reported in `to_summary()` with its error, and querying it raises a
`ToolError` with that error.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.core.errors import ToolError
from agent.tools.datasets.limits import QueryBudget, QueryLimits, apply_limits, cell_size, stopped_error
from agent.tools.datasets.loaders import Table, display_url, read_csv, read_json, read_parquet, read_sql

FORMATS = ("csv", "json", "jsonl", "parquet", "sql")
HARD_MAX_ROWS = 1_000
MAX_SQL_CHARS = 20_000
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_SUFFIXES = {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
_LEADING_COMMENTS = re.compile(r"^(\s+|--[^\n]*(\n|$)|/\*.*?\*/)*", re.S)
_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
_DENIED_FUNCTIONS = {"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"}


@dataclass
class ColumnInfo:
    """One column: its SQLite type and stats (min/max only for numeric columns)."""

    name: str
    type: str
    null_count: int = 0
    min: int | float | None = None
    max: int | float | None = None


@dataclass
class DatasetInfo:
    """What the init node records about a dataset: source, schema, stats, or why it failed."""

    name: str
    format: str
    source: str  # path, or URL with the password masked
    description: str = ""
    status: str = "pending"  # pending | loaded | error
    error: str | None = None
    row_count: int = 0
    truncated: bool = False  # more rows than the load limit; only the first ones are queryable
    columns: list[ColumnInfo] = field(default_factory=list)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _spec_format(spec: Mapping[str, Any], source: str) -> str:
    fmt = spec.get("format")
    if fmt is not None:
        if fmt not in FORMATS:
            raise ToolError(f"format {fmt!r} is not supported; use one of {', '.join(FORMATS)}")
        return str(fmt)
    if "://" in source:
        return "sql"
    suffix = Path(source).suffix.lower()
    if suffix not in _SUFFIXES:
        raise ToolError(f"cannot tell the format of {source!r}; add format: one of {', '.join(FORMATS)}")
    return _SUFFIXES[suffix]


class DatasetCatalog:
    """A session's datasets and their SQLite query engine (thread-safe; one per LoopRuntime)."""

    def __init__(
        self,
        datasets: Iterable[Any] = (),  # mappings, or models with model_dump()
        base_dir: Path | str | None = None,
        max_load_rows: int = 1_000_000,
        max_sql_rows: int = 100_000,
        allowed_roots: Iterable[Path | str] | None = None,
        limits: QueryLimits | None = None,
    ) -> None:
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self.allowed_roots = None if allowed_roots is None else [os.path.realpath(r) for r in allowed_roots]
        self.max_load_rows = max_load_rows
        self.max_sql_rows = max_sql_rows
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._loaded = False
        self.limits = limits or QueryLimits()
        self._budget = QueryBudget(self.limits)
        self._denied: list[str] = []
        self._specs: dict[str, tuple[DatasetInfo, str]] = {}
        for i, spec in enumerate(datasets, start=1):
            self._add(i, spec.model_dump() if hasattr(spec, "model_dump") else spec)

    def _add(self, index: int, spec: Mapping[str, Any]) -> None:
        raw_name = spec.get("name") if isinstance(spec, Mapping) else None
        name = raw_name if isinstance(raw_name, str) and _NAME_RE.match(raw_name) else f"dataset_{index}"
        source = ""
        info = DatasetInfo(name=name, format="?", source="")
        try:
            if not isinstance(spec, Mapping):
                raise ToolError("a dataset must be a mapping like {name: sales, path: sales.csv}")
            if name != raw_name:
                raise ToolError(f"dataset name {raw_name!r} is invalid; use letters, digits and _ (max 64)")
            if name in self._specs:
                raise ToolError(f"dataset name {name!r} is used twice; give each dataset its own name")
            source = str(spec.get("url") or spec.get("path") or "")
            if not source:
                raise ToolError(f"dataset {name} has neither path nor url")
            info.format = _spec_format(spec, source)
            info.description = str(spec.get("description") or "")
        except ToolError as err:
            info.status, info.error = "error", str(err)
            name = name if name not in self._specs else f"{name}_{index}"
            info.name = name
        info.source = display_url(source) if "://" in source else source
        self._specs[name] = (info, source)

    # ----- loading ------------------------------------------------------------------------------

    def _read(self, info: DatasetInfo, source: str) -> Table:
        if info.format == "sql":
            return read_sql(info.name, source, self.base_dir, self.max_sql_rows, self._check_allowed)
        path = Path(source).expanduser()
        if not path.is_absolute() and self.base_dir is not None:
            path = self.base_dir / path
        self._check_allowed(info.name, path)
        if not path.is_file():
            raise ToolError(f"dataset {info.name}: file {path} not found; check the dataset path")
        if info.format == "csv":
            return read_csv(info.name, path, self.max_load_rows)
        if info.format == "parquet":
            return read_parquet(info.name, path, self.max_load_rows)
        return read_json(info.name, path, self.max_load_rows)

    def _check_allowed(self, name: str, path: Path) -> None:
        if self.allowed_roots is None:
            return
        real = os.path.realpath(path)
        if not any(os.path.commonpath([root, real]) == root for root in self.allowed_roots):
            raise ToolError(f"dataset {name}: {path} is outside the allowed dataset folders; move it there")

    def _store(self, conn: sqlite3.Connection, info: DatasetInfo, table: Table) -> None:
        cols = ", ".join(f"{_quote(c)} {t}" for c, t in zip(table.columns, table.types, strict=True))
        conn.execute(f"CREATE TABLE {_quote(info.name)} ({cols})")
        if table.columns and table.rows:
            marks = ", ".join("?" for _ in table.columns)
            conn.executemany(f"INSERT INTO {_quote(info.name)} VALUES ({marks})", table.rows)
        stats = ["COUNT(*)"]
        for col, kind in zip(table.columns, table.types, strict=True):
            stats.append(f"SUM({_quote(col)} IS NULL)")
            numeric = kind in ("INTEGER", "REAL")
            stats += [f"MIN({_quote(col)})", f"MAX({_quote(col)})"] if numeric else ["NULL", "NULL"]
        row = conn.execute(f"SELECT {', '.join(stats)} FROM {_quote(info.name)}").fetchone()
        info.row_count, info.truncated = int(row[0]), table.truncated
        info.columns = [
            ColumnInfo(col, kind, int(row[1 + 3 * i] or 0), row[2 + 3 * i], row[3 + 3 * i])
            for i, (col, kind) in enumerate(zip(table.columns, table.types, strict=True))
        ]
        info.status = "loaded"

    def load(self) -> dict[str, Any]:
        """Load every dataset (once); returns `to_summary()`. Failed datasets carry their error."""
        with self._lock:
            if self._loaded:
                return self.to_summary()
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            for info, source in self._specs.values():
                if info.status == "error":
                    continue
                try:
                    self._store(conn, info, self._read(info, source))
                except ToolError as err:
                    info.status, info.error = "error", str(err)
                except (OSError, sqlite3.Error) as err:
                    info.status, info.error = "error", f"dataset {info.name}: cannot load it ({err})"
                if info.status == "error":
                    conn.execute(f"DROP TABLE IF EXISTS {_quote(info.name)}")
            conn.commit()
            apply_limits(conn, self.limits, self._budget)
            conn.execute("PRAGMA query_only=ON")
            conn.set_authorizer(self._authorize)
            self._conn, self._loaded = conn, True
            return self.to_summary()

    def to_summary(self) -> dict[str, Any]:
        """JSON-safe schema and stats of every dataset (what init puts in state and the prompt)."""
        return {"engine": "sqlite", "datasets": [asdict(info) for info, _ in self._specs.values()]}

    def names(self) -> list[str]:
        """The dataset (= table) names."""
        return list(self._specs)

    # ----- querying -----------------------------------------------------------------------------

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None) -> int:
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
            self._denied.append(f"call {arg2}()")
            return sqlite3.SQLITE_DENY
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        self._denied.append(_ACTION_NAMES.get(action, f"action {action}"))
        return sqlite3.SQLITE_DENY

    def _check_sql(self, sql: str) -> str:
        if not isinstance(sql, str) or not sql.strip():
            raise ToolError("sql is empty; write one SELECT statement")
        if len(sql) > MAX_SQL_CHARS:
            raise ToolError(f"sql is longer than {MAX_SQL_CHARS} characters; simplify the query")
        body = _LEADING_COMMENTS.sub("", sql, count=1)
        first = re.match(r"[A-Za-z]+", body)
        keyword = first.group(0).upper() if first else ""
        if keyword not in ("SELECT", "WITH"):
            raise ToolError(
                f"only a read-only SELECT (or WITH ... SELECT) is allowed; {keyword or 'this'} statements are refused"
            )
        return sql

    def _failed_hint(self) -> str:
        failed = [f"{i.name} ({i.error})" for i, _ in self._specs.values() if i.status == "error"]
        loaded = [i.name for i, _ in self._specs.values() if i.status == "loaded"]
        hint = f"tables: {', '.join(loaded) or 'none'}"
        return hint + (f"; failed to load: {'; '.join(failed)}" if failed else "")

    def query(self, sql: str, max_rows: int = 200) -> dict[str, Any]:
        """Run one read-only SELECT; {columns, rows, row_count, truncated} with at most `max_rows` rows."""
        if not 1 <= max_rows <= HARD_MAX_ROWS:
            raise ToolError(f"max_rows must be between 1 and {HARD_MAX_ROWS}")
        sql = self._check_sql(sql)
        self.load()
        with self._lock:
            if self._conn is None:
                raise ToolError("the dataset catalog was closed; start a new session")
            self._denied = []
            self._budget.arm()
            try:
                cur = self._conn.execute(sql)
                rows = self._fetch(cur, max_rows + 1)
            except sqlite3.ProgrammingError as err:
                if "one statement" in str(err):
                    raise ToolError("only one statement per query; remove the ';' and what follows") from None
                raise ToolError(f"SQL error: {err}") from None
            except sqlite3.Error as err:
                raise self._query_error(err) from None
            columns = [d[0] for d in cur.description or ()]
        out = [[v.hex() if isinstance(v, bytes) else v for v in r] for r in rows[:max_rows]]
        return {"columns": columns, "rows": out, "row_count": len(out), "truncated": len(rows) > max_rows}

    def _fetch(self, cur: sqlite3.Cursor, limit: int) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        size, cap = 0, self.limits.max_result_bytes
        try:
            while len(rows) < limit:
                row = cur.fetchone()
                if row is None:
                    break
                size += sum(cell_size(v) for v in row)
                if size > cap:
                    raise ToolError(
                        f"query result too large: more than {cap:,} bytes in {len(rows) + 1} rows; "
                        "select fewer or shorter columns (substr, length) or fewer rows"
                    )
                rows.append(row)
        finally:
            cur.close()
        return rows

    def _query_error(self, err: sqlite3.Error) -> ToolError:
        if self._denied:
            return ToolError(f"refused: the query tried to {self._denied[0]}; datasets are read-only")
        if self._budget.refused:
            return ToolError(self._budget.refused)
        if self._budget.reason:
            return stopped_error(self._budget.reason)
        text = str(err)
        if "string or blob too big" in text:
            return ToolError(
                f"query stopped: a value would exceed {self.limits.max_value_bytes:,} bytes; build smaller strings"
            )
        if "no such table" in text:
            return ToolError(f"SQL error: {text}; {self._failed_hint()}")
        if "readonly" in text or "query_only" in text:
            return ToolError("refused: datasets are read-only; write a SELECT")
        return ToolError(f"SQL error: {text}; fix the query ({self._failed_hint()})")

    def close(self) -> None:
        """Drop the in-memory database (a later query loads again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn, self._loaded = None, False


_ACTION_NAMES = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").lower().replace("_", " ")
    for name in dir(sqlite3)
    if name.startswith("SQLITE_")
    and name.split("_", 1)[1]
    in {
        "INSERT",
        "UPDATE",
        "DELETE",
        "ATTACH",
        "DETACH",
        "PRAGMA",
        "TRANSACTION",
        "SAVEPOINT",
        "ALTER_TABLE",
        "ANALYZE",
        "REINDEX",
        "CREATE_TABLE",
        "CREATE_TEMP_TABLE",
        "CREATE_VIEW",
        "CREATE_TEMP_VIEW",
        "CREATE_INDEX",
        "CREATE_TRIGGER",
        "CREATE_VTABLE",
        "DROP_TABLE",
        "DROP_VIEW",
        "DROP_INDEX",
        "DROP_TRIGGER",
        "DROP_TEMP_TABLE",
        "DROP_VTABLE",
    }
}
