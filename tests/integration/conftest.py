"""Fixtures shared by the integration tests."""

from tests.support.pgbouncer import pgbouncer

__all__ = ["pgbouncer"]
