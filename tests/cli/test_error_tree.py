"""The error tree: one root, an exit status per meaning, lower-level errors mapped at the boundary."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from agent.core import errors as e
from checkpointing import exceptions as ce


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (e.ConfigError, 2),
        (e.InputError, 2),
        (e.SessionNotFound, 3),
        (e.UnknownToolResult, 3),
        (e.SessionNotActive, 4),
        (e.SessionError, 4),
        (e.BackendUnavailable, 6),
        (e.ModelCallFailed, 7),
        (e.DataCorrupt, 8),
        (e.ToolError, 1),
    ],
)
def test_each_class_has_its_exit_status(cls: type[e.AgentrtError], code: int) -> None:
    """Every class descends from AgentrtError and carries its documented status (docs/reference/exit-codes.md)."""
    assert issubclass(cls, e.AgentrtError) and e.exit_code(cls("x")) == code


def test_special_constructors_and_old_names() -> None:
    """LeaseHeld and RecoveryBlocked keep their messages; the old names are the same classes."""
    assert e.exit_code(e.LeaseHeld("s1", "host:1", None)) == 4
    blocked = e.RecoveryBlocked("validate_graph", "graph version changed", "g1", "g2")
    assert e.exit_code(blocked) == 5 and "--accept-changes" in str(blocked)
    assert e.AgentrtError is e.AgentrtError
    assert e.BackendUnavailable is e.BackendUnavailable and e.ModelCallFailed is e.ModelCallFailed
    assert isinstance(e.UnknownToolResult("x"), e.ToolError)  # the model still reads it as a tool error


def test_checkpointing_errors_are_mapped_with_their_cause() -> None:
    """The checkpointing package keeps its root; the boundary maps it by meaning and keeps the cause."""
    corrupt = ce.CorruptRecordError("events.jsonl", 3, "checksum mismatch")
    mapped = e.as_agentrt_error(corrupt)
    assert isinstance(mapped, e.DataCorrupt) and mapped.__cause__ is corrupt and "events.jsonl:3" in str(mapped)
    assert "agentrt" not in str(corrupt) and "left untouched" in str(corrupt)
    assert "checksum mismatch" in str(mapped) and "`agentrt doctor`" in str(mapped)
    unknown = ce.UnknownSchemaError("runs/main/checkpoints.jsonl:1: checkpoint record has schema_version 99")
    assert "with the agentrt that wrote it" in str(e.as_agentrt_error(unknown))
    old = ce.OldFormatError("runs/main/checkpoints.jsonl", 2)
    assert "agentrt" not in str(old) and "older agentrt on-disk format" in str(e.as_agentrt_error(old))
    assert e.exit_code(old) == 8
    assert e.exit_code(ce.BlobMissingError("gone")) == 8
    assert e.exit_code(ce.InvalidIdError("bad id")) == 2
    assert e.exit_code(ce.StaleFencingTokenError("stale")) == 4
    assert e.exit_code(ce.DocumentMismatch("validate_graph", "changed", "a", "b")) == 5


def _look_alike(module: str, name: str) -> Exception:
    """An error whose class only has a library's module and name, not its class."""
    cls = type(name, (Exception,), {"__module__": module})
    err: Exception = cls("boom")
    return err


def test_library_errors_are_mapped_by_their_class() -> None:
    """Redis / SQLAlchemy / psycopg / SQLite -> backend unavailable, the OpenAI client and the graph's
    model call -> model call failed, else a bug."""
    import httpx
    import openai
    import redis
    import sqlalchemy.exc

    from graph.context import ModelCallError

    assert e.exit_code(redis.exceptions.ConnectionError("down")) == 6
    assert e.exit_code(sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("down"))) == 6
    assert e.exit_code(psycopg.OperationalError("down")) == 6
    assert e.exit_code(sqlite3.OperationalError("locked")) == 6
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    assert e.exit_code(openai.APIConnectionError(request=request)) == 7
    assert e.exit_code(httpx.ConnectError("refused", request=request)) == 7
    assert e.exit_code(ModelCallError("model call #1 failed")) == 7
    assert e.exit_code(OSError(28, "No space left on device")) == 6
    assert e.exit_code(ValueError("a bug")) == e.EXIT_BUG


def test_a_look_alike_of_a_library_error_is_a_bug() -> None:
    """Only the libraries' own classes are mapped: a class merely named like one is not."""
    assert e.exit_code(_look_alike("redis.exceptions", "ConnectionError")) == e.EXIT_BUG
    assert e.exit_code(_look_alike("openai", "APIConnectionError")) == e.EXIT_BUG
    assert e.exit_code(_look_alike("graph.context", "ModelCallError")) == e.EXIT_BUG
    assert not e.is_store_db_error(_look_alike("psycopg", "OperationalError"))


def test_store_database_errors_are_recognised_by_class() -> None:
    """What LangGraph's store's database raises (SQLite, psycopg, its pool) and nothing else."""
    import psycopg_pool

    assert e.is_store_db_error(sqlite3.OperationalError("database is locked"))
    assert e.is_store_db_error(psycopg.errors.UndefinedTable("no table"))
    assert e.is_store_db_error(psycopg_pool.PoolTimeout("no connection"))
    assert not e.is_store_db_error(ValueError("bad value"))
