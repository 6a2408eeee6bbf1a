"""Fixtures of the doctor tests (`tests.support.doctor_sessions`)."""

from tests.support.doctor_sessions import redis_tenant, runner

__all__ = ["redis_tenant", "runner"]
