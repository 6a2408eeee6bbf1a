"""Dataset tools over the session's `DatasetCatalog` (`ctx.datasets`): list and read-only SQL."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agent.core.errors import ToolError
from agent.core.tool_spec import ToolContext, ToolSpec
from agent.tools.datasets.dataset_registry import HARD_MAX_ROWS, DatasetCatalog


def _catalog(ctx: ToolContext) -> DatasetCatalog:
    if not isinstance(ctx.datasets, DatasetCatalog):
        raise ToolError("this session has no datasets; start it with a dataset list to query data")
    return ctx.datasets


class ListDatasetsArgs(BaseModel):
    """list_datasets takes no arguments."""


class QueryDatasetArgs(BaseModel):
    """Arguments of query_dataset."""

    sql: str = Field(description="one SQLite SELECT (or WITH ... SELECT); each dataset is a table of its name")
    max_rows: int = Field(100, ge=1, le=HARD_MAX_ROWS, description="maximum rows to return")


def list_datasets(ctx: ToolContext) -> dict[str, Any]:
    """Every dataset with its table name, columns (type, nulls, min/max), row count, or load error."""
    return _catalog(ctx).load()


def query_dataset(ctx: ToolContext, sql: str, max_rows: int = 100) -> dict[str, Any]:
    """Rows of a read-only query: {columns, rows, row_count, truncated}."""
    return _catalog(ctx).query(sql, max_rows=max_rows)


def builtin_dataset_tools() -> list[ToolSpec]:
    """The dataset tools every session with datasets gets."""
    return [
        ToolSpec(
            "list_datasets",
            "List the session's datasets: table names, columns with types and stats, row counts.",
            ListDatasetsArgs,
            list_datasets,
            effect="read_only",
        ),
        ToolSpec(
            "query_dataset",
            "Run one read-only SQLite SELECT over the datasets (each is a table named after it).",
            QueryDatasetArgs,
            query_dataset,
            effect="read_only",
        ),
    ]
