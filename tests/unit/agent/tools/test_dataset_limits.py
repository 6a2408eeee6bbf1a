"""query_dataset limits: hostile queries end with a clear tool error, and the next query works.

Each hostile query runs in a fresh interpreter through the real `query_dataset` tool, so the test
also sees what the process is left with (its peak memory, and a normal query right after).
The bounds asserted here are generous (a loaded CI machine); bench/dataset_limits.py prints the
measured times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.core.errors import ToolError
from agent.tools.datasets.dataset_registry import DatasetCatalog
from agent.tools.datasets.limits import QueryLimits, check_format

ROOT = Path(__file__).resolve().parents[4]
SAMPLES = ROOT / "agent" / "assets" / "datasets"

RCTE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"
PRINTF = "SELECT printf('%.*c', 2000000000, 'x')"
UNION_BLOBS = (
    "WITH RECURSIVE c(x, b) AS (SELECT 1, randomblob(900000) UNION SELECT x + 1, randomblob(900000) FROM c) "
    "SELECT count(*) FROM c"
)
SORT_BLOBS = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000) "
    "SELECT x FROM c ORDER BY randomblob(900000)"
)
BIG_RESULT = "SELECT zeroblob(900000) FROM sales"
CROSS_JOIN = "SELECT count(*) FROM sales a, sales b, sales c, sales d"

_PROBE = r"""
import json, sys, time
from agent.core.errors import ToolError
from agent.core.tool_spec import ToolContext
from agent.tools.dataset_tools import builtin_dataset_tools
from agent.tools.datasets.dataset_registry import DatasetCatalog
catalog = DatasetCatalog([{"name": "sales", "path": "sales.csv"}], base_dir=sys.argv[1])
ctx = ToolContext(session_id="s1", tenant_id="t1", run_id="r1", datasets=catalog)
tool = {t.name: t for t in builtin_dataset_tools()}["query_dataset"]
catalog.load()
t0 = time.monotonic()
try:
    tool.invoke(ctx, {"sql": sys.argv[2], "max_rows": 1000})
    error = None
except ToolError as err:
    error = str(err)
seconds = time.monotonic() - t0
after = json.loads(tool.invoke(ctx, {"sql": "SELECT count(*) FROM sales"}))
# VmHWM is this process's own peak: ru_maxrss carries the parent's peak across exec on Linux.
hwm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"error": error, "seconds": seconds, "after": after["rows"], "max_rss_mb": hwm_kb // 1024}))
"""


def _probe(sql: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(SAMPLES), sql], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (RCTE, "query stopped: it "),
        (PRINTF, r"refused: printf\(\) widths and precisions add up to more than 100,000"),
        (UNION_BLOBS, "query stopped: it "),
        (SORT_BLOBS, "query stopped: it "),
        (BIG_RESULT, "query result too large: more than 1,000,000 bytes"),
        (CROSS_JOIN, "query stopped: it "),
    ],
    ids=["recursive-cte", "printf-2GB", "union-of-blobs", "sort-of-blobs", "big-result", "cross-join"],
)
def test_hostile_query_is_a_tool_error_and_the_process_stays_healthy(sql: str, message: str) -> None:
    """The query fails with a clear ToolError in seconds, memory stays bounded, the next query works."""
    import re

    got = _probe(sql)
    assert got["error"] is not None and re.search(message, str(got["error"])), got
    assert float(str(got["seconds"])) < 15, got  # unguarded, these run for minutes or exhaust memory
    assert int(str(got["max_rss_mb"])) < 400, got
    assert got["after"] == [[200]], got


def test_limits_are_configurable() -> None:
    """A tighter CPU budget and result size apply to the catalog built with them."""
    catalog = DatasetCatalog(
        [{"name": "sales", "path": "sales.csv"}],
        base_dir=SAMPLES,
        limits=QueryLimits(cpu_seconds=0.2, max_result_bytes=100),
    )
    with pytest.raises(ToolError, match=r"more than 0\.2 s of CPU|SQLite steps"):
        catalog.query(RCTE)
    with pytest.raises(ToolError, match="more than 100 bytes"):
        catalog.query("SELECT * FROM sales")
    assert catalog.query("SELECT region FROM sales LIMIT 1")["row_count"] == 1


def test_printf_and_format_still_work_within_limits() -> None:
    """The checked printf/format give SQLite's own output for ordinary formats."""
    catalog = DatasetCatalog([{"name": "sales", "path": "sales.csv"}], base_dir=SAMPLES)
    got = catalog.query("SELECT printf('%.2f|%5d|%-3s|%%|%s', 3.14159, 42, 'a', NULL), format('%x', 255)")
    assert got["rows"] == [["3.14|   42|a  |%|", "ff"]]
    with pytest.raises(ToolError, match="smaller width"):
        catalog.query("SELECT printf('%200000d', 1)")


def test_check_format_counts_star_arguments() -> None:
    """`*` widths and precisions take their value from the arguments, in order."""
    check_format("%*.*f", (10, 2, 1.5), 100)
    with pytest.raises(ValueError, match="more than 100"):
        check_format("%s %*d", ("a", 500, 1), 100)
