"""DuckDB and PostgreSQL support (optional extras): skipped, with the reason, when missing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from evalharness_sql import Options, check_equivalence, check_many
from evalharness_sql.engines import DuckDBEngine, open_engine
from evalharness_sql.sandbox import run


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def duck(tmp_path) -> Path:
    duckdb = pytest.importorskip("duckdb", reason="DuckDB support needs `pip install duckdb`")
    path = tmp_path / "shop.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE brands (brand_id INTEGER PRIMARY KEY, name VARCHAR NOT NULL)")
    conn.execute("CREATE TABLE products (product_id INTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
                 " brand_id INTEGER REFERENCES brands(brand_id), price DOUBLE, added DATE)")
    conn.execute("INSERT INTO brands VALUES (1, 'Northvale'), (2, 'Alba')")
    conn.execute("INSERT INTO products VALUES (1, 'Coat', 1, 120.0, DATE '2026-01-02'), "
                 "(2, 'Tee', 2, 25.0, DATE '2026-03-04'), (3, 'Scarf', NULL, 40.0, NULL)")
    conn.close()
    return path


def test_duckdb_is_chosen_by_file_name(duck):
    engine = open_engine(str(duck))
    assert isinstance(engine, DuckDBEngine)
    schema = engine.schema()
    assert schema.table("products").primary_key == ("product_id",)
    assert schema.table("products").foreign_keys[0].table == "brands"


def test_duckdb_cascade(duck):
    before = sha256(duck)
    pairs = [
        ("SELECT name FROM products WHERE price < 100", "select NAME from PRODUCTS where price<100"),
        ("SELECT name FROM products WHERE price < 100", "SELECT name FROM products WHERE price < 30"),
        ("SELECT p.name FROM products p JOIN brands b ON b.brand_id = p.brand_id",
         "SELECT name FROM products"),
        ("SELECT name FROM products WHERE price > 30", "SELECT name FROM products WHERE price >= 30"),
    ]
    verdicts = check_many(pairs, duck, "duckdb")
    assert [(v.equivalent, v.stage) for v in verdicts] == [
        (True, "normalise"), (False, "execute"), (False, "execute"), (False, "test_suite")]
    assert sha256(duck) == before


@pytest.mark.parametrize("sql", ["DROP TABLE products", "DELETE FROM products",
                                 "SELECT * FROM read_csv('/etc/passwd')",
                                 "COPY products TO 'out.csv'", "INSTALL httpfs",
                                 "SET enable_external_access = true", "SELECT 1; SELECT 2"])
def test_duckdb_sandbox_refuses(sql, duck):
    before = sha256(duck)
    verdict = check_equivalence("SELECT name FROM products", sql, duck, "duckdb")
    assert verdict.equivalent is False and verdict.category in ("refused", "invalid_sql")
    assert sha256(duck) == before


def test_duckdb_connection_is_read_only_even_without_the_statement_check(duck):
    from evalharness_sql.sandbox import Limits

    conn = open_engine(str(duck)).connect()  # in its sandbox process
    for sql in ("DELETE FROM products", "SELECT * FROM read_csv('/etc/passwd')",
                "SET enable_external_access = true", "SET memory_limit = '100GB'"):
        assert conn.run(sql, 2, Limits(max_rows=10)).status in ("refused", "error")
    conn.close()


def test_duckdb_runaway_query_is_interrupted(duck):
    conn = open_engine(str(duck)).connect()
    runaway = ("SELECT COUNT(*) FROM range(100000000) a, range(100000000) b "
               "WHERE a.range + b.range = -1")
    assert run(conn, runaway, dialect="duckdb", timeout_s=0.3).status == "timeout"
    conn.close()


def test_duckdb_prediction_may_be_transpiled_from_sqlite(duck):
    v = check_equivalence("SELECT name FROM products ORDER BY price LIMIT 1",
                          "SELECT name FROM products ORDER BY price LIMIT 1", duck, "duckdb",
                          predicted_dialect="sqlite", options=Options(test_suite_size=4))
    assert v.equivalent is True


# -- PostgreSQL ----------------------------------------------------------------------------------



@pytest.fixture
def pg(postgres_dsn):
    pytest.importorskip("psycopg", reason='PostgreSQL support needs `pip install "psycopg[binary]"`')
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS evalharness_t")
        conn.execute("CREATE TABLE evalharness_t (id INTEGER PRIMARY KEY, x INTEGER)")
        conn.execute("INSERT INTO evalharness_t SELECT g, g * 10 FROM generate_series(1, 10) g")
    yield postgres_dsn
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS evalharness_t")


def test_postgres_cascade_and_sandbox(pg):
    import psycopg

    verdicts = check_many([("SELECT x FROM evalharness_t WHERE x > 50",
                            "SELECT x FROM evalharness_t WHERE x >= 50"),
                           ("SELECT x FROM evalharness_t", "DROP TABLE evalharness_t"),
                           ("SELECT x FROM evalharness_t", "SELECT pg_sleep(10)")],
                          pg, "postgres", options=Options(timeout_s=0.5))
    assert [v.equivalent for v in verdicts] == [False, False, False]
    with psycopg.connect(pg) as conn:
        assert conn.execute("SELECT COUNT(*) FROM evalharness_t").fetchone() == (10,)


def test_postgres_statement_timeout(pg):
    conn = open_engine(pg).connect()
    result = run(conn, "SELECT COUNT(*) FROM generate_series(1, 1000000000)",
                 dialect="postgres", timeout_s=0.3)
    assert result.status == "timeout"
    conn.close()


def test_postgres_database_in_a_scenario(pg, tmp_path):
    """`database: {engine: postgresql, dsn: ...}` end to end through the CLI."""
    import json

    from conftest import run_cli, write, write_jsonl

    write_jsonl(tmp_path / "traces.jsonl", [
        {"case_id": "a", "text2sql": {"sql": "SELECT x FROM evalharness_t WHERE x > 50"}},
        {"case_id": "b", "text2sql": {"sql": "SELECT x FROM evalharness_t WHERE 50 < x"}}])
    scenario = write(tmp_path / "pg.yaml", f"""
        name: pg
        cases:
          - {{id: a, question: q, gold: {{sql: "SELECT x FROM evalharness_t WHERE x >= 50"}}}}
          - {{id: b, question: q, gold: {{sql: "SELECT x FROM evalharness_t WHERE x > 50"}}}}
        traces: traces.jsonl
        database: {{engine: postgresql, dsn: "{pg}"}}
        pipeline: {{text2sql: {{}}}}
        evaluators:
          text2sql: [equivalence]
    """)
    res = run_cli("scenario", scenario, "--out", tmp_path / "o", "-q")
    assert res.code == 0, res
    results = [json.loads(x) for x in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    equivalent = {r["case"]["id"]: r["components"]["text2sql"]["metrics"]["equivalent"]
                  for r in results}
    assert equivalent["a"]["value"] == 0.0 and equivalent["a"]["details"]["stage"] == "execute"
    assert equivalent["b"]["value"] == 1.0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["scenario"].get("database_sha256") is None
