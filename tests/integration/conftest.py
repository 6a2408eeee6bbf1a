"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.pgbouncer import pgbouncer
from tests.support.store_configs import KINDS, StoreSetup

__all__ = ["pgbouncer", "store"]


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest) -> Iterator[StoreSetup]:
    """Config files over a fresh store of each kind (`tests.support.store_configs`): the embedded
    files store, and the PostgreSQL store in a database of its own (dropped after the test)."""
    setup = StoreSetup(request.param)
    yield setup
    setup.close()
