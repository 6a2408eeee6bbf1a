"""Fixtures of the session-layer tests (`tests.support.isolation_world`)."""

from tests.support.isolation_world import world

__all__ = ["world"]
