"""Fixtures of the store tests: a saver kit over a fresh PostgreSQL schema (`tests.support.pg_saver_kit`)
and the private PostgreSQL server of the restart drills (`tests.support.pg_restart_site`)."""

from tests.support.pg_restart_site import site
from tests.support.pg_saver_kit import pg

__all__ = ["pg", "site"]
