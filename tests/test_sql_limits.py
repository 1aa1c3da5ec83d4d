"""The SQL sandbox's size, memory and budget limits: a hostile prediction is stopped, and says why."""

from __future__ import annotations

import resource
import sqlite3
import time
from pathlib import Path

import pytest

from evalharness.context import Database, EvalContext
from evalharness.models import Case, Text2SQLStep
from evalharness_sql import (
    EquivalenceSettings,
    Options,
    check_equivalence,
    evaluate_text2sql,
)
from evalharness_sql.engines import open_engine
from evalharness_sql.memo import memo_for
from evalharness_sql.sandbox import Limits, lock_sqlite, open_sqlite_readonly, run
from evalharness_sql.taxonomy import CATEGORIES, error_category

MB = 1_000_000


@pytest.fixture
def database(tmp_path) -> Path:
    path = tmp_path / "db.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE t (id INTEGER PRIMARY KEY, x INT);"
                       "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30), (4, 40), (5, 50);")
    conn.commit()
    conn.close()
    return path


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- SQLite: the value cap --------------------------------------------------------------------


@pytest.mark.parametrize("sql", ["SELECT zeroblob(20000000) FROM t",
                                 "SELECT randomblob(20000000) FROM t",
                                 "SELECT length(replace(printf('%.*c', 6000000, 'x'), 'x', 'xxx'))",
                                 "SELECT group_concat(zeroblob(3000000)) FROM t"])
def test_a_value_past_the_value_cap_stops_the_query_at_once(sql, database):
    conn = open_sqlite_readonly(str(database))
    before = peak_rss_bytes()
    result = run(conn, sql, limits=Limits(max_value_bytes=10 * MB))
    assert result.status == "too_large", result
    assert "10 MB value cap (max_value_bytes)" in result.error
    assert result.rows == []
    assert peak_rss_bytes() - before < 15 * MB  # nothing near 5 × 20 MB was allocated
    assert run(conn, "SELECT COUNT(*) FROM t").rows == [(5,)]  # the connection still works
    conn.close()


def test_printf_past_the_value_cap_allocates_nothing_big(database):
    # SQLite's printf() gives NULL, not an error, when its output would pass the cap
    conn = open_sqlite_readonly(str(database))
    result = run(conn, "SELECT printf('%.*c', 20000000, 'x')", limits=Limits(max_value_bytes=MB))
    assert result.status == "too_large" or result.rows == [(None,)]
    conn.close()


def test_the_test_suite_databases_have_the_value_cap_too():
    from evalharness_sql.engines import SQLiteEngine

    engine = SQLiteEngine.from_ddl("CREATE TABLE t (x INT)")
    conn = engine.build({"t": [(1,), (2,)]})
    result = run(conn, "SELECT zeroblob(3000000) FROM t", limits=Limits(max_value_bytes=MB))
    assert result.status == "too_large" and "max_value_bytes" in result.error


def test_a_wide_row_cannot_add_up_values_below_the_cap(database):
    """Twenty 600 kB values in one row are 12 MB: past a 4 MB result cap, whatever the value
    cap — the row is never built."""
    conn = open_sqlite_readonly(str(database))
    sql = "SELECT " + ", ".join(["zeroblob(600000)"] * 20)
    before = peak_rss_bytes()
    result = run(conn, sql, limits=Limits(max_value_bytes=MB, max_result_bytes=4 * MB))
    assert result.status == "too_large", result
    assert "max_value_bytes" in result.error and "20 columns" in result.error
    assert peak_rss_bytes() - before < 8 * MB
    conn.close()


# -- all engines: the result byte cap ---------------------------------------------------------

MANY_ROWS = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
             "SELECT i, printf('%.*c', 1000, 'x') FROM n")


def test_the_result_byte_cap_on_sqlite(database):
    conn = open_sqlite_readonly(str(database))
    result = run(conn, MANY_ROWS, limits=Limits(max_result_bytes=MB))
    assert result.status == "too_large", result
    assert "1 MB result cap (max_result_bytes)" in result.error
    assert result.rows == []
    small = run(conn, MANY_ROWS, limits=Limits(max_result_bytes=10 * MB))
    assert small.ok and len(small.rows) == 5000
    conn.close()


def test_a_memory_error_has_a_reason_never_an_empty_one():
    conn = lock_sqlite(sqlite3.connect(":memory:"))

    def boom() -> None:
        raise MemoryError

    conn.create_function("boom", 0, boom)
    result = run(conn, "SELECT boom()")
    assert result.status == "too_large", result
    assert result.error and "memory" in result.error


# -- the cascade: reasons and categories --------------------------------------------------------


def test_a_prediction_past_the_value_cap_is_not_equivalent_with_a_reason_naming_the_cap(database):
    v = check_equivalence("SELECT x FROM t", "SELECT zeroblob(20000000) FROM t", database,
                          options=Options(max_value_bytes=10 * MB, test_suite_size=0))
    assert v.equivalent is False and v.category == "too_large"
    assert v.stage == "execute"
    assert "the predicted query's value exceeds the 10 MB value cap (max_value_bytes)" in v.reason
    assert v.counterexample["kind"] == "too_large"
    assert v.counterexample["limit"] == "max_value_bytes"


def test_a_prediction_past_the_row_cap_is_too_large_not_a_wrong_join(database):
    v = check_equivalence("SELECT x FROM t WHERE id = 1",
                          "SELECT a.x FROM t a, t b, t c", database,
                          options=Options(max_rows=50, test_suite_size=0))
    assert v.equivalent is False and v.category == "too_large"
    assert "row cap of 50 rows (max_rows)" in v.reason


def test_a_prediction_past_the_result_cap_in_the_test_suite_is_too_large():
    schema = "CREATE TABLE t (id INTEGER PRIMARY KEY, x INT)"
    # the same (no rows) on the empty database; 800 kB a row on the test databases
    v = check_equivalence("SELECT x FROM t",
                          "SELECT CASE WHEN x IS NULL THEN x ELSE hex(zeroblob(400000)) END FROM t",
                          schema=schema, options=Options(max_result_bytes=MB))
    assert v.equivalent is False and v.category == "too_large", v
    assert v.stage == "test_suite" and "max_result_bytes" in v.reason
    assert v.counterexample["database"]["recipe"]


def test_the_evaluator_reports_a_prediction_past_a_cap(database):
    batch = [(Case(id="c", question="q", gold={"sql": "SELECT x FROM t"}),
              Text2SQLStep(sql="SELECT a.x FROM t a, t b, t c"))]
    (row,) = evaluate_text2sql("equivalence", batch, EquivalenceSettings(max_rows=50),
                               EvalContext(database=Database(path=database)))
    assert row["equivalent"].value == 0.0
    assert row["equivalent"].details["category"] == "too_large"
    assert "(max_rows)" in row["equivalent"].details["reason"]
    assert row["valid_sql"].value == 1.0 and row["execution_accuracy"].value == 0.0
    assert row["exec_time_ratio"].error


def test_the_taxonomy_has_too_large_and_never_an_empty_invalid_sql():
    assert "too_large" in CATEGORIES
    assert error_category("") != "invalid_sql"
    assert error_category("string or blob too big") == "too_large"


# -- DuckDB ---------------------------------------------------------------------------------------


@pytest.fixture
def duck(tmp_path) -> Path:
    duckdb = pytest.importorskip("duckdb", reason="DuckDB support needs `pip install duckdb`")
    path = tmp_path / "shop.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE products (id INTEGER PRIMARY KEY, name VARCHAR)")
    conn.execute("INSERT INTO products VALUES (1, 'Coat'), (2, 'Tee')")
    conn.close()
    return path


def test_duckdb_generate_series_is_stopped_by_the_memory_cap_or_the_time_limit(duck):
    """One call of generate_series() builds a whole list: DuckDB's interrupt is not checked
    inside it and its memory_limit does not count it. 60 million elements took ~15 s and
    ~4 GB in the evaluator's process; in the sandbox process it stops at the cap."""
    from evalharness_sql.engines import open_engine

    limits = Limits(max_memory_bytes=256 * MB)
    conn = open_engine(str(duck)).connect(limits=limits)
    before = peak_rss_bytes()
    start = time.monotonic()
    result = run(conn, "SELECT unnest(generate_series(1, 60000000))", dialect="duckdb",
                 timeout_s=1.0, limits=limits)
    elapsed = time.monotonic() - start
    assert result.status in ("too_large", "timeout"), result
    assert elapsed < 6, elapsed  # 1 s limit; before: ~15 s
    assert result.error and ("max_memory_bytes" in result.error or "time limit" in result.error)
    assert peak_rss_bytes() - before < 200 * MB  # the evaluator's own process stays small
    assert run(conn, "SELECT count(*) FROM products", dialect="duckdb", limits=limits).rows \
        == [(2,)]  # and the connection works again
    conn.close()


def test_duckdb_a_time_limit_stops_an_uninterruptible_call(duck):
    from evalharness_sql.engines import open_engine

    conn = open_engine(str(duck)).connect()
    start = time.monotonic()
    result = run(conn, "SELECT len(generate_series(1, 30000000))", dialect="duckdb",
                 timeout_s=0.3)
    assert result.status in ("timeout", "too_large"), result
    assert time.monotonic() - start < 4
    conn.close()


def test_duckdb_the_result_byte_cap_and_the_value_cap(duck):
    from evalharness_sql.engines import open_engine

    conn = open_engine(str(duck)).connect()
    result = run(conn, "SELECT i, repeat('x', 1000) FROM range(5000) r(i)", dialect="duckdb",
                 limits=Limits(max_result_bytes=MB))
    assert result.status == "too_large" and "max_result_bytes" in result.error
    result = run(conn, "SELECT repeat('x', 3000000)", dialect="duckdb",
                 limits=Limits(max_value_bytes=MB))
    assert result.status == "too_large" and "max_value_bytes" in result.error
    assert run(conn, "SELECT count(*) FROM products", dialect="duckdb").rows == [(2,)]
    conn.close()


def test_duckdb_huge_values_stay_out_of_the_evaluator_process(duck):
    v = check_equivalence("SELECT name FROM products",
                          "SELECT repeat('x', 5000000) FROM range(200)", duck, "duckdb",
                          options=Options(max_result_bytes=20 * MB, test_suite_size=2))
    assert v.equivalent is False and v.category == "too_large", v
    assert "max_result_bytes" in v.reason or "max_memory_bytes" in v.reason


def test_duckdb_test_suite_databases_are_sandboxed_too(duck):
    """Harmless on the scenario's database (2 products), hostile on a test database."""
    hostile = ("SELECT name FROM products WHERE id > 1 AND CASE WHEN (SELECT count(*) FROM "
               "products) <> 2 THEN len(generate_series(1, 60000000)) ELSE 1 END > 0")
    start = time.monotonic()
    v = check_equivalence("SELECT name FROM products WHERE id > 1", hostile, duck, "duckdb",
                          options=Options(max_memory_bytes=256 * MB, timeout_s=1))
    assert v.equivalent is False and v.stage == "test_suite", v
    assert v.category in ("too_large", "timeout"), v
    assert time.monotonic() - start < 10  # before: ~15 s for the one test database


# -- PostgreSQL -----------------------------------------------------------------------------------


@pytest.fixture
def pg(postgres_dsn):
    pytest.importorskip("psycopg", reason='PostgreSQL support needs `pip install "psycopg[binary]"`')
    return postgres_dsn


def test_postgres_the_result_byte_cap_and_the_value_cap(pg):
    from evalharness_sql.engines import open_engine

    conn = open_engine(pg).connect()
    result = run(conn, "SELECT i, repeat('x', 1000) FROM generate_series(1, 5000) i",
                 dialect="postgres", limits=Limits(max_result_bytes=MB))
    assert result.status == "too_large" and "max_result_bytes" in result.error, result
    result = run(conn, "SELECT repeat('x', 3000000)", dialect="postgres",
                 limits=Limits(max_value_bytes=MB))
    assert result.status == "too_large" and "max_value_bytes" in result.error, result
    ok = run(conn, "SELECT i FROM generate_series(1, 3000) i ORDER BY i DESC",
             dialect="postgres", limits=Limits(max_result_bytes=MB))
    assert ok.ok and len(ok.rows) == 3000 and ok.rows[0] == (3000,)
    conn.close()


def test_postgres_a_read_only_role_without_privileges_still_runs_queries(pg):
    import psycopg

    with psycopg.connect(pg, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS evalharness_reader")
        admin.execute("CREATE ROLE evalharness_reader LOGIN")
    try:
        dsn = pg.replace("postgres@", "evalharness_reader@", 1)
        from evalharness_sql.engines import open_engine

        conn = open_engine(dsn).connect()
        result = run(conn, "SELECT i FROM generate_series(1, 10) i ORDER BY i",
                     dialect="postgres", limits=Limits(max_memory_bytes=64 * MB))
        assert result.ok and len(result.rows) == 10, result
        conn.close()
    finally:
        with psycopg.connect(pg, autocommit=True) as admin:
            admin.execute("DROP ROLE IF EXISTS evalharness_reader")


# -- the per-case evaluation budget -----------------------------------------------------------------

SLOW = ("SELECT x FROM t WHERE x > 10 AND (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
        "SELECT i + 1 FROM n WHERE i < 1000000) SELECT count(*) FROM n) > 0")
"""About 0.3 s on any database, and the same rows as ``SELECT x FROM t WHERE x > 10``."""


def test_the_budget_stops_the_test_suite_early_and_says_so(database):
    start = time.monotonic()
    v = check_equivalence("SELECT x FROM t WHERE x > 10", SLOW, database, budget_s=1)
    elapsed = time.monotonic() - start
    assert v.equivalent is None, v
    assert "evaluation budget of 1 s exceeded in the test-suite stage after" in v.reason
    assert "of 32 databases" in v.reason
    assert elapsed < 4, elapsed  # 32 databases × 0.3 s would be ~10 s


def test_the_budget_in_the_evaluator_and_the_memo(database):
    db = Database(path=database)
    batch = [(Case(id="c", question="q", gold={"sql": "SELECT x FROM t WHERE x > 10"}),
              Text2SQLStep(sql=SLOW))]
    # 32 test databases: the slow query runs on those with rows past 10, far more than 0.8 s
    # (with 6 it could finish just inside the budget on a fast machine)
    settings = EquivalenceSettings(test_suite_size=32)
    (row,) = evaluate_text2sql("equivalence", batch, settings,
                               EvalContext(database=db, budget_s=0.8))
    assert row["equivalent"].error and "evaluation budget of 0.8 s exceeded" in \
        row["equivalent"].error
    # decided before the budget ran out: these stand
    assert row["execution_accuracy"].value == 1.0
    assert row["valid_sql"].value == 1.0
    assert row["clause_f1"].value is not None
    # a cut result is never kept for an identical pair to reuse; an uncut one is
    memo = memo_for(open_engine(db), "equivalence")
    assert len(memo) == 0
    fast = [(batch[0][0], Text2SQLStep(sql="SELECT x FROM t WHERE 10 < x"))]
    evaluate_text2sql("equivalence", fast, settings, EvalContext(database=db))
    assert len(memo) == 1


def test_a_budget_cut_is_never_a_timeout_verdict(database):
    """A query stopped because the budget ran out did not exceed the time limit."""
    v = check_equivalence("SELECT x FROM t WHERE x > 10", SLOW, database, budget_s=0.1,
                          options=Options(test_suite_size=4))
    assert v.equivalent is None and v.category is None
    assert "evaluation budget of 0.1 s exceeded in the execute stage" in v.reason


def test_postgres_temp_files_are_capped_where_the_role_may_set_it(pg):
    """The test server's role is a superuser, so temp_file_limit is set (to max_memory_bytes):
    a sort that spills more is stopped, with a reason naming the cap."""
    from evalharness_sql.engines import open_engine

    conn = open_engine(pg).connect()
    sql = ("SELECT count(*) FROM (SELECT g FROM generate_series(1, 500000) g "
           "ORDER BY md5(g::text)) s")
    result = run(conn, sql, dialect="postgres", timeout_s=20,
                 limits=Limits(max_memory_bytes=16 * MB))
    assert result.status == "too_large" and "max_memory_bytes" in result.error, result
    assert run(conn, sql, dialect="postgres", timeout_s=20).ok  # 2 GB: it fits
    conn.close()


@pytest.mark.parametrize("sql, rows", [
    ("SELECT 'a%b' LIKE '%b', '{x}'", [(True, "{x}")]),
    ("VALUES (1), (2)", [(1,), (2,)]),
    ("WITH a AS (SELECT 1 AS x) SELECT x FROM a;", [(1,)]),
])
def test_postgres_queries_run_through_a_server_side_cursor(pg, sql, rows):
    from evalharness_sql.engines import open_engine

    conn = open_engine(pg).connect()
    result = run(conn, sql, dialect="postgres")
    assert result.ok and result.rows == rows, result
    conn.close()
