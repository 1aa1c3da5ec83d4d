"""The SQL sandbox: predicted SQL never writes, attaches, loads extensions or runs forever."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from evalharness_sql import check_equivalence, check_many
from evalharness_sql.engines import SQLiteEngine
from evalharness_sql.sandbox import (
    Limits,
    _run_sqlite,
    lock_sqlite,
    open_sqlite_readonly,
    refusal,
    run,
)


@pytest.fixture
def database(tmp_path) -> Path:
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE t (id INTEGER PRIMARY KEY, x INT);"
                       "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30), (4, 40), (5, 50),"
                       "(6, 60), (7, 70), (8, 80), (9, 90), (10, 100);")
    conn.commit()
    conn.close()
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


HOSTILE = [
    "DROP TABLE t",
    "UPDATE t SET x = 0",
    "DELETE FROM t",
    "INSERT INTO t VALUES (99, 99)",
    "REPLACE INTO t VALUES (1, 0)",
    "CREATE TABLE u (y INT)",
    "ALTER TABLE t ADD COLUMN y INT",
    "ATTACH DATABASE 'other.db' AS other",
    "DETACH DATABASE main",
    "PRAGMA writable_schema = 1",
    "PRAGMA journal_mode = DELETE",
    "VACUUM",
    "VACUUM INTO 'copy.db'",
    "BEGIN",
    "SELECT x FROM t; DROP TABLE t",
    "SELECT 1; SELECT 2",
    "SELECT load_extension('evil.so')",
    "SELECT writefile('x', 'y')",
    "WITH a AS (SELECT 1) DELETE FROM t",
    "SELECT * INTO u FROM t",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_statements_are_refused(sql, database):
    before = sha256(database)
    conn = open_sqlite_readonly(str(database))
    result = run(conn, sql)
    conn.close()
    assert result.status == "refused", result
    assert result.error.startswith("refused")
    assert sha256(database) == before


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_predictions_are_not_equivalent_and_change_nothing(sql, database):
    before = sha256(database)
    verdict = check_equivalence("SELECT x FROM t", sql, database)
    assert verdict.equivalent is False
    assert verdict.category in ("refused", "invalid_sql"), verdict
    assert verdict.counterexample
    assert sha256(database) == before


@pytest.mark.parametrize("sql", ["DELETE FROM t", "UPDATE t SET x = 0", "DROP TABLE t",
                                 "ATTACH DATABASE 'other.db' AS other", "PRAGMA query_only = 0",
                                 "SELECT load_extension('evil.so')", "CREATE TEMP TABLE u (y)"])
def test_the_engine_refuses_even_without_the_statement_check(sql, database):
    """Second lock: the authorizer and mode=ro stop what slips past the allow-list."""
    before = sha256(database)
    conn = open_sqlite_readonly(str(database))
    result = _run_sqlite(conn, sql, timeout_s=2, limits=Limits(max_rows=10))
    conn.close()
    assert result.status in ("refused", "error"), result
    assert sha256(database) == before
    assert sqlite3.connect(database).execute("SELECT COUNT(*) FROM t").fetchone() == (10,)


def test_extension_loading_is_off(database):
    conn = open_sqlite_readonly(str(database))
    if hasattr(conn, "load_extension"):
        with pytest.raises(sqlite3.Error):
            conn.load_extension("evil")
    conn.close()


def test_a_runaway_cross_join_is_stopped(database):
    runaway = "SELECT COUNT(*) FROM " + ", ".join(f"t AS t{i}" for i in range(10))
    conn = open_sqlite_readonly(str(database))
    result = run(conn, runaway, timeout_s=0.2)
    assert result.status == "timeout"
    assert run(conn, "SELECT COUNT(*) FROM t").rows == [(10,)]  # the connection still works
    conn.close()


def test_a_runaway_prediction_is_not_equivalent_with_reason(database):
    from evalharness_sql import Options

    runaway = "SELECT COUNT(*) FROM " + ", ".join(f"t AS t{i}" for i in range(10))
    before = sha256(database)
    verdict = check_equivalence("SELECT COUNT(*) FROM t", runaway, database,
                                options=Options(timeout_s=0.2, test_suite_size=0))
    assert verdict.equivalent is False and verdict.category == "timeout"
    assert verdict.stage == "execute" and "time limit" in verdict.reason
    assert sha256(database) == before


def test_an_infinite_recursive_query_is_stopped():
    conn = lock_sqlite(sqlite3.connect(":memory:"))
    sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n"
    assert run(conn, sql, timeout_s=0.1).status == "timeout"


def test_the_row_cap(database):
    conn = open_sqlite_readonly(str(database))
    assert run(conn, "SELECT * FROM t", max_rows=5).status == "too_many_rows"
    assert len(run(conn, "SELECT * FROM t", max_rows=10).rows) == 10
    conn.close()


def test_unparsable_sql_is_left_to_the_engine():
    assert refusal("SELEC x FRM t") is None
    assert refusal("DROPP TABLE t") is None
    assert refusal("DELETE FROM t WHERE (") is not None  # first keyword says it all


def test_checksum_unchanged_after_a_whole_batch(database):
    before = sha256(database)
    pairs = [("SELECT x FROM t", p) for p in HOSTILE] + [("SELECT x FROM t", "SELECT x FROM t")]
    verdicts = check_many(pairs, database)
    assert [v.equivalent for v in verdicts] == [False] * len(HOSTILE) + [True]
    assert sha256(database) == before


def test_test_suite_databases_are_locked_too():
    engine = SQLiteEngine.from_ddl("CREATE TABLE t (x INT)")
    conn = engine.build({"t": [(1,), (2,)]})
    assert _run_sqlite(conn, "DELETE FROM t", 1, 10).status in ("refused", "error")
    assert run(conn, "SELECT COUNT(*) FROM t").rows == [(2,)]
