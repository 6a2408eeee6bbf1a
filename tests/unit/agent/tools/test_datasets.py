"""DatasetCatalog and the dataset tools: loading, stats, read-only SQL, and clear errors."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent.core.errors import ToolError
from agent.core.tool_spec import ToolContext
from agent.tools.dataset_tools import builtin_dataset_tools
from agent.tools.datasets.dataset_registry import DatasetCatalog

SAMPLES = Path(__file__).resolve().parents[4] / "agent" / "assets" / "datasets"


@pytest.fixture
def catalog() -> DatasetCatalog:
    """The shipped sample datasets (sales.csv, regions.json)."""
    return DatasetCatalog(
        [{"name": "sales", "path": "sales.csv"}, {"name": "regions", "path": "regions.json"}], base_dir=SAMPLES
    )


def _info(summary: dict[str, Any], name: str) -> dict[str, Any]:
    return next(d for d in summary["datasets"] if d["name"] == name)


def _columns(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in info["columns"]}


def test_sample_sales_schema_and_stats(catalog: DatasetCatalog) -> None:
    """Loading infers column types and computes row count, null counts and numeric min/max."""
    summary = catalog.load()
    json.dumps(summary)
    sales = _info(summary, "sales")
    assert (sales["status"], sales["row_count"], sales["format"]) == ("loaded", 200, "csv")
    cols = _columns(sales)
    assert {n: c["type"] for n, c in cols.items()} == {
        "order_id": "INTEGER",
        "order_date": "TEXT",
        "region": "TEXT",
        "product": "TEXT",
        "channel": "TEXT",
        "units": "INTEGER",
        "unit_price": "REAL",
        "discount": "REAL",
        "revenue": "REAL",
    }
    rows = list(csv.DictReader((SAMPLES / "sales.csv").open()))
    assert cols["discount"]["null_count"] == sum(1 for r in rows if r["discount"] == "") > 0
    assert (cols["units"]["min"], cols["units"]["max"]) == (
        min(int(r["units"]) for r in rows),
        max(int(r["units"]) for r in rows),
    )
    assert cols["region"]["min"] is None


def test_query_returns_correct_rows(catalog: DatasetCatalog) -> None:
    """A GROUP BY over the CSV matches the same aggregation computed in Python."""
    rows = list(csv.DictReader((SAMPLES / "sales.csv").open()))
    expected: Counter[str] = Counter()
    for r in rows:
        expected[r["region"]] += int(r["units"])
    result = catalog.query("SELECT region, SUM(units) AS units FROM sales GROUP BY region ORDER BY region")
    assert result["columns"] == ["region", "units"]
    assert result["rows"] == [[k, expected[k]] for k in sorted(expected)]
    assert result["truncated"] is False


def test_join_across_datasets(catalog: DatasetCatalog) -> None:
    """CSV and JSON datasets live in one engine and can be joined."""
    result = catalog.query(
        "SELECT r.manager, COUNT(*) FROM sales s JOIN regions r USING (region) GROUP BY 1 ORDER BY 1"
    )
    assert len(result["rows"]) == 4
    assert sum(n for _, n in result["rows"]) == 200


def test_row_limit_and_truncated_flag(catalog: DatasetCatalog) -> None:
    """At most max_rows rows come back, and truncated says whether more existed."""
    cut = catalog.query("SELECT * FROM sales ORDER BY order_id", max_rows=10)
    assert (cut["row_count"], cut["truncated"], cut["rows"][0][0]) == (10, True, 1001)
    whole = catalog.query("SELECT order_id FROM sales", max_rows=1000)
    assert (whole["row_count"], whole["truncated"]) == (200, False)
    for bad in (0, 1001):
        with pytest.raises(ToolError, match="max_rows"):
            catalog.query("SELECT 1", max_rows=bad)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC * FROM sales", "only a read-only SELECT"),
        ("SELECT * FROM", "SQL error"),
        ("SELECT nope FROM sales", "no such column"),
        ("SELECT * FROM missing_table", "tables: sales, regions"),
        ("", "empty"),
    ],
)
def test_bad_sql_is_a_clear_error(catalog: DatasetCatalog, sql: str, message: str) -> None:
    """Invalid SQL gives a ToolError saying what is wrong (and which tables exist)."""
    with pytest.raises(ToolError, match=message):
        catalog.query(sql)


WRITES = [
    "INSERT INTO sales (order_id) VALUES (1)",
    "UPDATE sales SET units = 0",
    "DELETE FROM sales",
    "REPLACE INTO sales (order_id) VALUES (1)",
    "DROP TABLE sales",
    "CREATE TABLE evil (x)",
    "CREATE TEMP TABLE evil (x)",
    "ALTER TABLE sales RENAME TO gone",
    "ATTACH DATABASE 'evil.db' AS evil",
    "DETACH DATABASE main",
    "PRAGMA writable_schema = ON",
    "PRAGMA query_only = OFF",
    "VACUUM",
    "BEGIN",
    "SELECT 1; DROP TABLE sales",
    "SELECT 1; INSERT INTO sales (order_id) VALUES (1)",
    "WITH x AS (SELECT 1) INSERT INTO sales (order_id) SELECT * FROM x",
    "WITH x AS (SELECT 1) UPDATE sales SET units = 0",
    "WITH x AS (SELECT 1) DELETE FROM sales",
    "/* SELECT */ DELETE FROM sales",
    "-- comment\nDROP TABLE sales",
    "SELECT load_extension('/tmp/evil.so')",
]


@pytest.mark.parametrize("sql", WRITES)
def test_write_attempts_are_refused(catalog: DatasetCatalog, sql: str, tmp_path: Path) -> None:
    """Every statement that could change data or the engine is refused, and the data stays as it was."""
    with pytest.raises(ToolError, match=r"refused|read-only|one statement"):
        catalog.query(sql)
    assert catalog.query("SELECT COUNT(*), SUM(units) FROM sales")["rows"][0][0] == 200
    assert catalog.query("SELECT name FROM sqlite_master ORDER BY name")["rows"] == [["regions"], ["sales"]]


def test_engine_guards_hold_without_the_keyword_check(catalog: DatasetCatalog) -> None:
    """Even a statement that slipped past the SELECT-only check is denied by the authorizer."""
    catalog.load()
    conn = catalog._conn
    assert conn is not None
    for sql in ("INSERT INTO sales (order_id) VALUES (1)", "PRAGMA query_only = OFF", "ATTACH ':memory:' AS x"):
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            conn.execute(sql)
    assert catalog.query("SELECT COUNT(*) FROM sales")["rows"] == [[200]]


def test_runaway_query_is_stopped(catalog: DatasetCatalog) -> None:
    """An endless recursive query is stopped by the work budget, and the engine stays usable."""
    with pytest.raises(ToolError, match="query stopped"):
        catalog.query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c")
    assert catalog.query(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT SUM(x) FROM c"
    )["rows"] == [[15]]


def test_second_load_is_cached(tmp_path: Path) -> None:
    """load() reads the files once; a second call (or a query) does not read them again."""
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,x\n2,y\n")
    catalog = DatasetCatalog([{"name": "d", "path": str(path)}])
    first = catalog.load()
    path.unlink()
    assert catalog.load() == first
    assert catalog.query("SELECT SUM(a) FROM d")["rows"] == [[3]]


def _load_one(tmp_path: Path, filename: str, content: str | bytes, **spec: Any) -> dict[str, Any]:
    path = tmp_path / filename
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    catalog = DatasetCatalog([{"name": "d", "path": filename, **spec}], base_dir=tmp_path)
    return _info(catalog.load(), "d")


def test_csv_typing_rules(tmp_path: Path) -> None:
    """Leading-zero codes stay text, empty fields are NULL, blank and duplicate headers get names."""
    info = _load_one(tmp_path, "c.csv", "zip,n,n,,x\n01234,1,2.5,a,\n98765,,3,b,\n")
    cols = info["columns"]
    assert [(c["name"], c["type"]) for c in cols] == [
        ("zip", "TEXT"),
        ("n", "INTEGER"),
        ("n_2", "REAL"),
        ("column_4", "TEXT"),
        ("x", "TEXT"),
    ]
    assert cols[1]["null_count"] == 1 and cols[4]["null_count"] == 2


def test_json_array_and_json_lines(tmp_path: Path) -> None:
    """A JSON array and JSON lines both load; nested values become JSON text, booleans 0/1."""
    records = [{"id": 1, "ok": True, "tags": ["a"], "v": 1.5}, {"id": 2, "ok": False, "extra": "x"}]
    arr = DatasetCatalog([{"name": "arr", "path": "a.json"}, {"name": "lines", "path": "l.jsonl"}], base_dir=tmp_path)
    (tmp_path / "a.json").write_text(json.dumps(records))
    (tmp_path / "l.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    arr.load()
    for table in ("arr", "lines"):
        result = arr.query(f"SELECT id, ok, tags, v, extra FROM {table} ORDER BY id")
        assert result["rows"] == [[1, 1, '["a"]', 1.5, None], [2, 0, None, None, "x"]]


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [
        ("bad.csv", "a,b\n1,2\n3\n", "line 3 has 1 fields"),
        ("empty.csv", "", "empty"),
        ("bin.csv", b"a,b\n\xff\xfe,1\n", "not UTF-8"),
        ("bad.json", '[{"a": 1},', "not valid JSON"),
        ("scalar.json", "[1, 2]", "not an object"),
        ("str.jsonl", '"just a string"\n', "record 1 .* not an object"),
        ("nan.json", '[{"a": NaN}]', "not valid JSON"),
        ("lines.jsonl", '{"a": 1}\n{oops}\n', "line 2 is not JSON"),
        ("empty.json", "  \n", "empty"),
        ("data.parquet", b"PAR1", "pyarrow"),
        ("data.xlsx", "x", "cannot tell the format"),
    ],
)
def test_malformed_dataset_is_a_clear_error(tmp_path: Path, filename: str, content: str | bytes, message: str) -> None:
    """A malformed file is reported with its reason in the summary and when queried, without a crash."""
    (tmp_path / filename).write_bytes(content if isinstance(content, bytes) else content.encode())
    catalog = DatasetCatalog([{"name": "d", "path": filename}], base_dir=tmp_path)
    info = _info(catalog.load(), "d")
    assert info["status"] == "error"
    assert re.search(message, info["error"]), info["error"]
    with pytest.raises(ToolError, match=message):
        catalog.query("SELECT * FROM d")


def test_missing_dataset_does_not_break_the_others(tmp_path: Path) -> None:
    """A missing file is an error for that dataset only; querying it says why it failed to load."""
    (tmp_path / "ok.csv").write_text("a\n1\n")
    catalog = DatasetCatalog(
        [{"name": "ok", "path": "ok.csv"}, {"name": "gone", "path": "gone.csv"}], base_dir=tmp_path
    )
    summary = catalog.load()
    assert _info(summary, "ok")["status"] == "loaded"
    assert "not found" in _info(summary, "gone")["error"]
    with pytest.raises(ToolError, match="failed to load: gone"):
        catalog.query("SELECT * FROM gone")
    assert catalog.query("SELECT a FROM ok")["rows"] == [[1]]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"name": "bad name", "path": "x.csv"}, "invalid"),
        ({"name": "n"}, "neither path nor url"),
        ({"name": "n", "path": "x.csv", "format": "xml"}, "not supported"),
        ("not a mapping", "mapping"),
    ],
)
def test_bad_dataset_spec_is_reported(spec: Any, message: str) -> None:
    """A spec without a usable name, source or format becomes an error entry, not an exception."""
    summary = DatasetCatalog([spec]).load()
    assert summary["datasets"][0]["status"] == "error"
    assert message in summary["datasets"][0]["error"]


def test_duplicate_names_are_reported(tmp_path: Path) -> None:
    """Two datasets with one name: the first loads, the second is an error."""
    (tmp_path / "a.csv").write_text("a\n1\n")
    summary = DatasetCatalog([{"name": "d", "path": "a.csv"}, {"name": "d", "path": "a.csv"}], base_dir=tmp_path).load()
    assert [d["status"] for d in summary["datasets"]] == ["loaded", "error"]
    assert "used twice" in summary["datasets"][1]["error"]


def test_sqlite_table_by_url(tmp_path: Path) -> None:
    """A table named by sqlite:///file#table is copied in (bounded) with its column types."""
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, amount REAL, note TEXT)")
        conn.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(i, i * 1.5, f"n{i}") for i in range(10)])
    conn.close()
    catalog = DatasetCatalog([{"name": "orders", "url": "sqlite:///shop.db#orders"}], base_dir=tmp_path, max_sql_rows=4)
    info = _info(catalog.load(), "orders")
    assert (info["status"], info["format"], info["row_count"], info["truncated"]) == ("loaded", "sql", 4, True)
    assert [c["type"] for c in info["columns"]] == ["INTEGER", "REAL", "TEXT"]
    assert catalog.query("SELECT MAX(id) FROM orders")["rows"] == [[3]]


def test_sqlite_url_errors(tmp_path: Path) -> None:
    """A missing SQLite file (not created), a missing table and a URL without a table are clear errors."""
    with sqlite3.connect(tmp_path / "real.db") as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    catalog = DatasetCatalog(
        [
            {"name": "nofile", "url": "sqlite:///nofile.db#t"},
            {"name": "notable", "url": "sqlite:///real.db#nope"},
            {"name": "notname", "url": "sqlite:///real.db"},
        ],
        base_dir=tmp_path,
    )
    summary = catalog.load()
    assert "not found" in _info(summary, "nofile")["error"]
    assert not (tmp_path / "nofile.db").exists()
    assert "'nope' not found" in _info(summary, "notable")["error"]
    assert "after '#'" in _info(summary, "notname")["error"]


def test_url_password_never_shown(tmp_path: Path) -> None:
    """A database password stays out of the summary and the error text."""
    catalog = DatasetCatalog([{"name": "pg", "url": "postgresql://user:hunter2@127.0.0.1:1/db#t"}])
    text = json.dumps(catalog.load())
    assert "hunter2" not in text
    assert _info(catalog.to_summary(), "pg")["status"] == "error"


def test_dataset_tools(catalog: DatasetCatalog) -> None:
    """list_datasets and query_dataset are read_only tools returning JSON."""
    tools = {t.name: t for t in builtin_dataset_tools()}
    assert {t.effect for t in tools.values()} == {"read_only"}
    ctx = ToolContext(session_id="s1", tenant_id="t1", run_id="r1", datasets=catalog)
    listed = json.loads(tools["list_datasets"].invoke(ctx, {}))
    assert [d["name"] for d in listed["datasets"]] == ["sales", "regions"]
    result = json.loads(tools["query_dataset"].invoke(ctx, {"sql": "SELECT COUNT(*) AS n FROM sales", "max_rows": 5}))
    assert result == {"columns": ["n"], "rows": [[200]], "row_count": 1, "truncated": False}
    with pytest.raises(ToolError, match="no datasets"):
        tools["list_datasets"].invoke(ToolContext(session_id="s", tenant_id="t", run_id="r"), {})


def test_allowed_roots_confine_dataset_files(tmp_path: Path) -> None:
    """With allowed_roots, a dataset file (or SQLite file) outside those folders is refused."""
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "a.csv").write_text("a\n1\n")
    (tmp_path / "secret.csv").write_text("a\n2\n")
    catalog = DatasetCatalog(
        [
            {"name": "inside", "path": "ok/a.csv"},
            {"name": "escape", "path": "ok/../secret.csv"},
            {"name": "abs", "path": str(tmp_path / "secret.csv")},
            {"name": "db", "url": "sqlite:///secret.db#t"},
        ],
        base_dir=tmp_path,
        allowed_roots=[tmp_path / "ok"],
    )
    summary = catalog.load()
    assert _info(summary, "inside")["status"] == "loaded"
    for name in ("escape", "abs", "db"):
        assert "outside the allowed dataset folders" in _info(summary, name)["error"]


def test_huge_values_cannot_be_built(catalog: DatasetCatalog) -> None:
    """A query cannot allocate a gigantic blob or string."""
    with pytest.raises(ToolError, match="would exceed 1,000,000 bytes"):
        catalog.query("SELECT length(zeroblob(1000000000))")
