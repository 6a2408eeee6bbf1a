"""How fast hostile `query_dataset` calls end, and what memory they leave.

Runs each hostile query of tests/unit/agent/tools/test_dataset_limits.py in a fresh interpreter and prints the
seconds until the tool error, the error, and the process's peak RSS. Target: every query ends with
a ToolError within about `cpu_seconds` (2 s) of CPU, or `wall_seconds` (3 s) on a busy machine.

    PYTHONPATH=. python bench/dataset_limits.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit import test_dataset_limits as t


def main() -> None:
    """Print one line per hostile query."""
    queries = {
        "recursive CTE": t.RCTE,
        "printf 2 GB": t.PRINTF,
        "UNION of blobs": t.UNION_BLOBS,
        "sort of blobs": t.SORT_BLOBS,
        "big result": t.BIG_RESULT,
        "4-way cross join": t.CROSS_JOIN,
    }
    print(f"{'query':<18} {'seconds':>8} {'peak RSS MB':>12}  error")
    for name, sql in queries.items():
        got = t._probe(sql)
        print(f"{name:<18} {float(str(got['seconds'])):>8.2f} {got['max_rss_mb']!s:>12}  {got['error']}")


if __name__ == "__main__":
    main()
