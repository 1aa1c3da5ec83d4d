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


# -- PostgreSQL test databases (temporary schemas in a transaction that is rolled back) ----------


@pytest.fixture
def pg_people(postgres_dsn):
    """Two tables with keys, a CHECK list and a foreign key, and a view; no one aged 30."""
    pytest.importorskip("psycopg", reason='PostgreSQL support needs `pip install "psycopg[binary]"`')
    import psycopg

    drop = ("DROP VIEW IF EXISTS evalharness_adults; "
            "DROP TABLE IF EXISTS evalharness_people, evalharness_city")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(
            "CREATE TABLE evalharness_city (id integer PRIMARY KEY, name varchar(20) NOT NULL "
            "UNIQUE, kind text CHECK (kind IN ('town', 'city')));"
            "CREATE TABLE evalharness_people (id integer PRIMARY KEY, name text NOT NULL, "
            "age integer, joined date, city_id integer REFERENCES evalharness_city (id));"
            "CREATE VIEW evalharness_adults AS SELECT id, name FROM evalharness_people "
            "WHERE age >= 18;"
            "INSERT INTO evalharness_city VALUES (1, 'Oslo', 'city'), (2, 'Lima', 'city'), "
            "(3, 'Ely', 'town');"
            "INSERT INTO evalharness_people VALUES (1, 'Ann', 25, '2020-01-05', 1), "
            "(2, 'Bob', 35, '2021-03-01', 2), (3, 'Cy', 40, NULL, 1), (4, 'Di', 50, "
            "'2019-07-07', NULL), (5, 'Eve', 12, '2022-02-02', 3)")
    yield postgres_dsn
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(drop)


def _pg_state(dsn: str) -> tuple[list, list, list]:
    """The real tables' rows, and the test schemas left on the server."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return (conn.execute("SELECT * FROM evalharness_city ORDER BY id").fetchall(),
                conn.execute("SELECT * FROM evalharness_people ORDER BY id").fetchall(),
                conn.execute("SELECT nspname FROM pg_namespace "
                             "WHERE nspname LIKE 'evalharness_test_%'").fetchall())


def test_postgres_schema_and_rows_from_the_catalogue(pg_people):
    from evalharness_sql.engines import ForeignKey, PostgresEngine

    engine = open_engine(pg_people)
    assert isinstance(engine, PostgresEngine) and engine.supports_test_suite
    schema = engine.schema()
    city, people = schema.table("evalharness_city"), schema.table("evalharness_people")
    assert city.primary_key == ("id",) and city.unique == [("name",)]
    assert city.column("name").type == "character varying(20)" and city.column("name").notnull
    assert city.column("kind").allowed == ("town", "city")
    assert people.foreign_keys == [ForeignKey(("city_id",), "evalharness_city", ("id",))]
    assert schema.table("evalharness_adults").is_view
    assert schema.order().index("evalharness_city") < schema.order().index("evalharness_people")
    for text in ("CREATE TABLE evalharness_city (id integer NOT NULL, name character varying(20)",
                 "FOREIGN KEY (city_id) REFERENCES evalharness_city (id)",
                 "CREATE VIEW evalharness_adults AS"):
        assert text in schema.ddl
    assert engine.rows("evalharness_city", 2) == [(1, "Oslo", "city"), (2, "Lima", "city")]
    assert engine.rows("evalharness_adults", 2) == []


def test_postgres_test_suite_decides_and_leaves_nothing_behind(pg_people):
    before = _pg_state(pg_people)
    assert before[2] == []
    verdicts = check_many([
        # the real data has no one aged 30: only a test database separates these
        ("SELECT name FROM evalharness_people WHERE age > 30",
         "SELECT name FROM evalharness_people WHERE age >= 30"),
        # equivalent, but not by normal form
        ("SELECT id, name FROM evalharness_people WHERE city_id IN "
         "(SELECT id FROM evalharness_city WHERE name = 'Oslo')",
         "SELECT DISTINCT p.id, p.name FROM evalharness_people p JOIN evalharness_city c "
         "ON c.id = p.city_id WHERE c.name = 'Oslo'"),
        # equivalent given the foreign key (the test databases' copies enforce it)
        ("SELECT p.name FROM evalharness_people p JOIN evalharness_city c ON p.city_id = c.id",
         "SELECT name FROM evalharness_people WHERE city_id IS NOT NULL"),
    ], pg_people, "postgres")
    assert [(v.equivalent, v.stage) for v in verdicts] == [
        (False, "test_suite"), (True, "test_suite"), (True, "test_suite")], verdicts
    database = verdicts[0].counterexample["database"]
    assert database["recipe"] and "evalharness_people" in database["tables"]
    assert "equivalent by test suite" in verdicts[1].reason
    assert _pg_state(pg_people) == before  # real rows unchanged, no test schema left


def test_postgres_test_database_is_read_only_and_survives_failed_queries(pg_people):
    import psycopg

    from evalharness_sql.sandbox import Limits, _run_postgres

    engine = open_engine(pg_people)
    conn = engine.build({"evalharness_city": [(1, "Oslo", "city")],
                         "evalharness_people": [(1, "Ann", 30, "2020-01-01", 1)]})
    try:
        assert run(conn, "CREATE TABLE evalharness_x (x int)", dialect="postgres").status \
            == "refused"
        # past the sandbox's statement check, the server still refuses to write
        write = ("WITH x AS (INSERT INTO evalharness_city VALUES (9, 'Rome', 'city') "
                 "RETURNING id) SELECT * FROM x")
        assert run(conn, write, dialect="postgres").status == "refused"
        assert _run_postgres(conn, write, 5.0, Limits()).status in ("refused", "error")
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), conn.transaction():
            conn.execute("INSERT INTO evalharness_city VALUES (9, 'Rome', 'city')")
        assert run(conn, "SELECT 1 / 0", dialect="postgres").status == "error"
        assert run(conn, "SELECT count(*) FROM generate_series(1, 1000000000)",
                   dialect="postgres", timeout_s=0.3).status == "timeout"
        assert run(conn, "SELECT generate_series(1, 200)", dialect="postgres",
                   limits=Limits(max_rows=100)).status == "too_many_rows"
        assert run(conn, "SELECT current_setting('statement_timeout'), "
                   "current_setting('transaction_read_only')", dialect="postgres",
                   timeout_s=2).rows == [("2s", "on")]
        # the test database is still there, unchanged
        assert run(conn, "SELECT c.name, p.name FROM evalharness_city c JOIN "
                   "evalharness_people p ON p.city_id = c.id", dialect="postgres").rows \
            == [("Oslo", "Ann")]
        # its transaction can only be rolled back
        with pytest.raises(psycopg.Error):
            conn.commit()
    finally:
        conn.close()
    assert _pg_state(pg_people)[2] == []


def test_postgres_test_database_sees_only_its_own_tables_and_rows(pg_people):
    import datetime

    engine = open_engine(pg_people)
    conn = engine.build({"evalharness_city": [], "evalharness_people": []})
    try:  # the real tables have rows; the test database's copies are empty
        for table in ("evalharness_city", "evalharness_people", "evalharness_adults"):
            assert run(conn, f"SELECT count(*) FROM {table}", dialect="postgres").rows == [(0,)]
    finally:
        conn.close()
    conn = engine.build({
        "evalharness_city": [(1, "Oslo", "city"), (1, "Dup", "town"),  # duplicate key
                             (2, "Ely", "village")],  # not in the CHECK list
        "evalharness_people": [
            (1, "Ann", 30, "2020-01-01", 1), (2, "Bob", 40, "2021-12-31 23:59:59", None),
            (3, "Cy", "old", None, None),  # not an integer
            (4, None, 20, None, None),  # NOT NULL
            (5, "Di", 50, "2020-13-45", None),  # not a date
            (6, "Ed", 60, None, 7)]})  # no city 7
    try:
        assert run(conn, "SELECT * FROM evalharness_city", dialect="postgres").rows \
            == [(1, "Oslo", "city")]
        assert run(conn, "SELECT id, joined FROM evalharness_people ORDER BY id",
                   dialect="postgres").rows == [(1, datetime.date(2020, 1, 1)),
                                                (2, datetime.date(2021, 12, 31))]
        assert run(conn, "SELECT name FROM evalharness_adults", dialect="postgres").rows \
            == [("Ann",), ("Bob",)]
    finally:
        conn.close()
    # a foreign key to a table the data leaves out (the queries do not read it) is not checked
    conn = engine.build({"evalharness_people": [(1, "Ann", 30, None, 7)]})
    try:
        assert run(conn, "SELECT count(*) FROM evalharness_people", dialect="postgres").rows \
            == [(1,)]
    finally:
        conn.close()
    assert _pg_state(pg_people)[2] == []


def test_postgres_test_databases_for_a_role_that_may_not_create_schemas(pg_people):
    """Such a role (by default, any but the database's owner and superusers) gets temporary
    tables: the test suite still runs."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from evalharness_sql.engines import PostgresEngine

    role = "evalharness_reader"
    try:
        with psycopg.connect(pg_people, autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
            conn.execute("GRANT SELECT ON evalharness_city, evalharness_people, "
                         f"evalharness_adults TO {role}")
            may_create = conn.execute("SELECT has_database_privilege(%s, current_database(), "
                                      "'CREATE')", [role]).fetchone()[0]
    except psycopg.Error as exc:
        pytest.skip(f"cannot create a role on this server: {exc}")
    try:
        engine = PostgresEngine(make_conninfo(pg_people, user=role))
        try:
            engine.schema()
        except psycopg.OperationalError as exc:
            pytest.skip(f"cannot log in as a new role on this server: {exc}")
        conn = engine.build({"evalharness_city": [(1, "Oslo", "city")],
                             "evalharness_people": [(1, "Ann", 30, "2020-01-01", 1)]})
        try:
            assert run(conn, "SELECT count(*) FROM evalharness_people", dialect="postgres").rows \
                == [(1,)]
        finally:
            conn.close()
        assert engine._temporary_tables is not may_create
        verdict = check_equivalence("SELECT name FROM evalharness_people WHERE age > 30",
                                    "SELECT name FROM evalharness_people WHERE age >= 30",
                                    engine, "postgres")
        assert (verdict.equivalent, verdict.stage) == (False, "test_suite")
    finally:
        with psycopg.connect(pg_people, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")
