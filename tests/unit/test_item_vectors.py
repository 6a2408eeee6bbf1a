"""sqlite-vec's distance functions as the SQLite store registers them where Python's sqlite3 cannot
load extensions (`agent.session.item_store_sqlite`): the values sqlite-vec defines, in a real
SQLite connection."""

from __future__ import annotations

import sqlite3
from array import array

import pytest
import sqlite_vec

from agent.session.item_store_sqlite import CAN_LOAD_EXTENSIONS, VecConnection, cosine_distance


def _blob(*xs: float) -> bytes:
    return array("f", xs).tobytes()


def test_the_distances_answer_in_sql_as_sqlite_vec_defines_them() -> None:
    conn = sqlite3.connect(":memory:", factory=VecConnection)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    a, b, c = _blob(1, 0), _blob(0, 2), _blob(2, 0)
    row = conn.execute(
        "SELECT vec_distance_cosine(?, ?), vec_distance_cosine(?, ?), vec_distance_L2(?, ?), vec_distance_L1(?, ?)",
        (a, c, a, b, a, b, a, b),
    ).fetchone()
    assert row[0] == pytest.approx(0.0) and row[1] == pytest.approx(1.0)
    assert row[2] == pytest.approx(5**0.5) and row[3] == pytest.approx(3.0)


def test_vectors_of_different_lengths_are_an_error_not_a_score() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        cosine_distance(_blob(1, 0), _blob(1, 0, 0))
    assert cosine_distance(_blob(0, 0), _blob(1, 0)) is None


@pytest.mark.skipif(CAN_LOAD_EXTENSIONS, reason="this Python's sqlite3 loads extensions")
def test_only_sqlite_vec_is_stood_in_for() -> None:
    conn = sqlite3.connect(":memory:", factory=VecConnection)
    with pytest.raises(sqlite3.OperationalError, match="cannot load the extension"):
        conn.load_extension("/usr/lib/some-other-extension")
