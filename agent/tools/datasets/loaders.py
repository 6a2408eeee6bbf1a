"""Readers that turn one dataset source into a typed table (columns, SQLite types, rows).

CSV values are typed by inference over the whole column (INTEGER if every non-empty value is an
integer, REAL if every one is a number, else TEXT; values with leading zeros stay TEXT so codes
like zip "01234" survive). JSON values keep their JSON types; objects and arrays become JSON text.
Every problem is a `ToolError` that names the dataset and what to fix.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core.errors import ToolError
from agent.core.text import display_url

SqlValue = int | float | str | None
MAX_COLUMNS = 500
_INT_RE = re.compile(r"^[+-]?(0|[1-9]\d*)$")
_REAL_RE = re.compile(r"^[+-]?((0|[1-9]\d*)(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_INT64 = (-(2**63), 2**63 - 1)


@dataclass
class Table:
    """A dataset read into memory: column names, their SQLite types, rows, and whether rows were cut."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[SqlValue, ...]]
    truncated: bool = False


def unique_columns(names: Iterable[str]) -> list[str]:
    """Column names made non-empty and unique (`column_3`, `name_2`), in order."""
    out: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(names, start=1):
        base = raw.strip() or f"column_{i}"
        name, n = base, 1
        while name.lower() in seen:
            n += 1
            name = f"{base}_{n}"
        seen.add(name.lower())
        out.append(name)
    if len(out) > MAX_COLUMNS:
        raise ToolError(f"{len(out)} columns is more than the {MAX_COLUMNS} supported; select fewer columns")
    return out


def _infer_text_column(values: list[str | None]) -> str:
    present = [v for v in values if v is not None]
    if present and all(_INT_RE.match(v) and _INT64[0] <= int(v) <= _INT64[1] for v in present):
        return "INTEGER"
    if present and all(_REAL_RE.match(v) for v in present):
        return "REAL"
    return "TEXT"


def _convert_text(value: str | None, kind: str) -> SqlValue:
    if value is None or kind == "TEXT":
        return value
    return int(value) if kind == "INTEGER" else float(value)


def read_csv(name: str, path: Path, max_rows: int) -> Table:
    """A CSV file with a header row; empty fields are NULL."""
    try:
        with path.open("r", encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise ToolError(f"dataset {name}: {path.name} is empty; a CSV needs a header row")
            columns = unique_columns(header)
            raw: list[list[str | None]] = []
            truncated = False
            for row in reader:
                if not row:
                    continue
                if len(row) != len(columns):
                    raise ToolError(
                        f"dataset {name}: {path.name} line {reader.line_num} has {len(row)} fields, "
                        f"the header has {len(columns)}; fix the file or quote fields containing commas"
                    )
                if len(raw) >= max_rows:
                    truncated = True
                    break
                raw.append([v if v != "" else None for v in row])
    except UnicodeDecodeError as err:
        raise ToolError(f"dataset {name}: {path.name} is not UTF-8 text ({err.reason}); re-save it as UTF-8") from None
    except csv.Error as err:
        raise ToolError(f"dataset {name}: {path.name} is not valid CSV ({err}); fix the file") from None
    types = [_infer_text_column([r[i] for r in raw]) for i in range(len(columns))]
    rows = [tuple(_convert_text(v, types[i]) for i, v in enumerate(r)) for r in raw]
    return Table(columns, types, rows, truncated)


def _json_objects(name: str, path: Path) -> Iterator[Any]:
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    if not stripped:
        raise ToolError(f"dataset {name}: {path.name} is empty; expected a JSON array of objects or JSON lines")

    def reject_constant(token: str) -> None:
        raise ValueError(f"{token} is not valid JSON")

    try:
        if stripped.startswith("["):
            data = json.loads(text, parse_constant=reject_constant)
            if not isinstance(data, list):
                raise ToolError(f"dataset {name}: {path.name} must be a JSON array of objects")
            yield from data
            return
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    yield json.loads(line, parse_constant=reject_constant)
                except ValueError as err:
                    raise ToolError(f"dataset {name}: {path.name} line {lineno} is not JSON ({err})") from None
    except json.JSONDecodeError as err:
        raise ToolError(
            f"dataset {name}: {path.name} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
        ) from None
    except ValueError as err:
        raise ToolError(f"dataset {name}: {path.name} is not valid JSON ({err})") from None


def plain_value(value: Any) -> SqlValue:
    """A Python / JSON / database value as something SQLite stores without loss of meaning."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if _INT64[0] <= value <= _INT64[1] else str(value)
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)


def _type_of_values(values: Iterable[SqlValue]) -> str:
    kinds = {type(v) for v in values if v is not None}
    if kinds and kinds <= {int}:
        return "INTEGER"
    if kinds and kinds <= {int, float}:
        return "REAL"
    return "TEXT"


def table_from_records(name: str, records: Iterable[Any], max_rows: int, where: str) -> Table:
    """A table from mapping records (JSON objects, Parquet rows); columns are the union of keys."""
    columns_seen: dict[str, None] = {}
    kept: list[Mapping[str, Any]] = []
    truncated = False
    for i, record in enumerate(records, start=1):
        if not isinstance(record, Mapping):
            raise ToolError(f"dataset {name}: record {i} in {where} is not an object; every row must be one")
        if len(kept) >= max_rows:
            truncated = True
            break
        for key in record:
            columns_seen.setdefault(str(key), None)
        kept.append(record)
    keys = list(columns_seen)
    columns = unique_columns(keys)
    rows = [tuple(plain_value(r.get(k)) for k in keys) for r in kept]
    types = [_type_of_values(r[i] for r in rows) for i in range(len(columns))]
    return Table(columns, types, rows, truncated)


def read_json(name: str, path: Path, max_rows: int) -> Table:
    """A JSON array of objects, or JSON lines (one object a line)."""
    try:
        return table_from_records(name, _json_objects(name, path), max_rows, path.name)
    except UnicodeDecodeError as err:
        raise ToolError(f"dataset {name}: {path.name} is not UTF-8 text ({err.reason}); re-save it as UTF-8") from None


def read_parquet(name: str, path: Path, max_rows: int) -> Table:
    """A Parquet file, through pyarrow when it is installed (it is an optional dependency)."""
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise ToolError(
            f"dataset {name}: reading Parquet needs pyarrow, which is not installed; "
            "`pip install pyarrow`, or convert the file to CSV or JSON"
        ) from None
    try:
        records = pq.read_table(path).slice(0, max_rows + 1).to_pylist()
    except Exception as err:  # pyarrow raises many unrelated types for a bad file
        raise ToolError(f"dataset {name}: {path.name} is not a readable Parquet file ({err})") from None
    return table_from_records(name, records, max_rows, path.name)


_TABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$")


def read_sql(
    name: str, url: str, base_dir: Path | None, max_rows: int, check_file: Callable[[str, Path], None]
) -> Table:
    """Copy at most `max_rows` rows of a table named by `<sqlalchemy url>#<table>`."""
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    shown = display_url(url)
    location, _, table_name = url.rpartition("#") if "#" in url else (url, "", "")
    if not _TABLE_RE.match(table_name):
        raise ToolError(f"dataset {name}: give the table after '#', e.g. sqlite:///sales.db#orders (got {shown})")
    try:
        parsed = make_url(location)
    except sa.exc.ArgumentError:
        raise ToolError(f"dataset {name}: {shown} is not a database URL") from None
    if parsed.drivername.startswith("sqlite"):
        db = Path(parsed.database or "")
        if not db.is_absolute() and base_dir is not None:
            db = base_dir / db
        check_file(name, db)
        if not parsed.database or not db.is_file():
            # SQLite would silently create an empty database file here.
            raise ToolError(f"dataset {name}: SQLite file {db} not found; check the dataset URL")
        parsed = parsed.set(database=str(db))
    schema, _, bare = table_name.rpartition(".")
    engine = sa.create_engine(parsed)
    try:
        with engine.connect() as conn:
            table = sa.Table(bare, sa.MetaData(), schema=schema or None, autoload_with=conn)
            result = conn.execute(sa.select(table).limit(max_rows + 1))
            fetched = [tuple(plain_value(v) for v in row) for row in result]
    except sa.exc.NoSuchTableError:
        raise ToolError(f"dataset {name}: table {table_name!r} not found at {shown}") from None
    except sa.exc.SQLAlchemyError as err:
        reason = str(getattr(err, "orig", None) or err).splitlines()[0]
        raise ToolError(f"dataset {name}: cannot read {table_name} from {shown} ({reason})") from None
    finally:
        engine.dispose()
    types = []
    for col in table.columns:
        if isinstance(col.type, sa.Integer | sa.Boolean):
            types.append("INTEGER")
        elif isinstance(col.type, sa.Float | sa.Numeric):
            types.append("REAL")
        else:
            types.append("TEXT")
    columns = unique_columns(col.name for col in table.columns)
    return Table(columns, types, fetched[:max_rows], len(fetched) > max_rows)
