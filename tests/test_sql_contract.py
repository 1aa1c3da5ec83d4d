"""The test-suite stage keeps the contract of docs/metrics/sql.md — "a database of the schema":
aggregate thresholds are reached, keys that are not declared are not assumed, values have their
declared types, and every counterexample is a valid database, shrunk to its fewest rows.

The pairs are the gaps measured on a held-out set (issue 14), rewritten on a schema of our own.
Its data is chosen so that the scenario's database separates none of them: no group reaches a
threshold, no id repeats, no value sits on a boundary.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import sqlglot

from evalharness_sql import check_many
from evalharness_sql.contract import violations
from evalharness_sql.engines import SQLiteEngine

SCHEMA = """
CREATE TABLE dept (dept_name TEXT PRIMARY KEY, building TEXT, budget REAL);
CREATE TABLE student (id TEXT, name TEXT, dept_name TEXT REFERENCES dept(dept_name),
                      tot_cred INTEGER);
CREATE TABLE course (course_id TEXT PRIMARY KEY, title TEXT,
                     dept_name TEXT REFERENCES dept(dept_name),
                     credits INTEGER CHECK (credits IN (1, 2, 3, 4, 5, 6)));
CREATE TABLE takes (id TEXT, course_id TEXT REFERENCES course(course_id), year INTEGER,
                    grade TEXT);
CREATE TABLE employee (emp_id INTEGER PRIMARY KEY, name TEXT NOT NULL, mgr INTEGER,
                       salary INTEGER, start_date INTEGER);
"""

DATA = """
INSERT INTO dept VALUES ('Physics', 'Watson', 70000), ('Music', 'Packard', 80000),
                        ('History', 'Painter', 50000);
INSERT INTO student VALUES ('S1', 'Ada', 'Physics', 32), ('S2', 'Bo', 'Music', 40),
                           ('S3', 'Cy', 'History', 12), ('S4', 'Di', 'Physics', 51);
INSERT INTO course VALUES ('P-101', 'Mechanics', 'Physics', 4), ('P-102', 'Optics', 'Physics', 3),
                          ('M-101', 'Harmony', 'Music', 3), ('H-101', 'Rome', 'History', 2);
INSERT INTO takes VALUES ('S1', 'P-101', 2019, 'A'), ('S1', 'P-102', 2020, 'B'),
                         ('S2', 'M-101', 2019, 'A'), ('S4', 'P-101', 2021, 'C'),
                         ('S3', 'H-101', 2018, 'B');
INSERT INTO employee VALUES (1, 'Kim', NULL, 9000, 2010), (2, 'Lee', 1, 4000, 2012),
                            (3, 'Max', 1, 4200, 2016), (4, 'Ned', 2, 3100, 2018);
"""

THRESHOLDS = [
    ("SELECT s.name FROM student AS s JOIN takes AS t ON s.id = t.id WHERE t.year >= 2019 "
     "AND s.dept_name = 'Physics' GROUP BY s.id HAVING count(*) > 4",
     "SELECT s.name FROM student AS s JOIN takes AS t ON s.id = t.id WHERE t.year >= 2019 "
     "AND s.dept_name = 'Physics' GROUP BY s.id HAVING count(*) > 5"),
    ("SELECT course.dept_name FROM takes JOIN course ON takes.course_id = course.course_id "
     "GROUP BY course.dept_name HAVING count(DISTINCT takes.id) > 5",
     "SELECT course.dept_name FROM takes JOIN course ON takes.course_id = course.course_id "
     "GROUP BY course.dept_name HAVING count(DISTINCT takes.id) > 8"),
    ("SELECT dept_name FROM course WHERE title <> 'Rome' GROUP BY dept_name "
     "HAVING sum(credits) > 20",
     "SELECT dept_name FROM course WHERE title <> 'Rome' GROUP BY dept_name "
     "HAVING sum(credits) >= 20"),
    ("SELECT t.course_id FROM takes AS t JOIN course AS c ON t.course_id = c.course_id "
     "WHERE c.dept_name = 'Physics' AND t.grade = 'A' GROUP BY t.course_id HAVING count(*) = 7",
     "SELECT t.course_id FROM takes AS t JOIN course AS c ON t.course_id = c.course_id "
     "WHERE c.dept_name = 'Physics' AND t.grade = 'A' GROUP BY t.course_id HAVING count(*) > 7"),
    ("SELECT id, dept_name FROM student WHERE tot_cred > 30 GROUP BY id, dept_name "
     "HAVING count(dept_name) >= 3",
     "SELECT id, dept_name FROM student WHERE tot_cred > 30 GROUP BY id, dept_name "
     "HAVING count(*) > 3"),
    ("SELECT e.mgr FROM employee AS e JOIN employee AS m ON e.mgr = m.emp_id "
     "WHERE m.start_date < 2015 GROUP BY e.mgr HAVING sum(e.salary) > 9000",
     "SELECT e.mgr FROM employee AS e JOIN employee AS m ON e.mgr = m.emp_id "
     "WHERE m.start_date < 2015 GROUP BY e.mgr HAVING sum(e.salary) >= 9000"),
    ("SELECT d.building FROM dept AS d JOIN student AS s ON s.dept_name = d.dept_name "
     "GROUP BY d.building HAVING count(DISTINCT s.name) >= 6",
     "SELECT d.building FROM dept AS d JOIN student AS s ON s.dept_name = d.dept_name "
     "GROUP BY d.building HAVING count(DISTINCT s.name) > 6"),
]
"""Seven pairs that differ only on a group at its threshold (not equivalent)."""

CONTRADICTION = (
    "SELECT a.name FROM employee AS a JOIN employee AS b ON a.mgr = b.mgr WHERE a.mgr IS NULL",
    "SELECT a.name FROM employee AS a JOIN employee AS b ON a.mgr = b.mgr "
    "WHERE a.mgr IS NULL AND a.salary > 10")
"""Both queries can never return a row: equivalent."""

UNDECLARED_KEY = (
    "SELECT student.id, count(*) FROM student JOIN takes ON student.id = takes.id "
    "GROUP BY student.id, student.dept_name",
    "SELECT student.id, count(*) FROM student JOIN takes ON student.id = takes.id "
    "GROUP BY student.id")
"""No key is declared on student: two rows with one id and two departments separate them."""

TYPED = [
    ("SELECT name FROM employee WHERE start_date = 2014",
     "SELECT name FROM employee WHERE start_date = '2014'"),
    ("SELECT name FROM employee WHERE typeof(start_date) = 'integer'",
     "SELECT name FROM employee WHERE start_date IS NOT NULL"),
]
"""Equivalent because an INTEGER column holds integers, even one named like a date: text there
would separate them."""


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("contract") / "university.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA + DATA)
    conn.commit()
    conn.close()
    return path


@pytest.fixture(scope="module")
def verdicts(database):
    pairs = [*THRESHOLDS, CONTRADICTION, UNDECLARED_KEY, *TYPED]
    return dict(zip(pairs, check_many(pairs, database), strict=True))


def test_the_scenario_database_separates_none_of_the_pairs(database):
    conn = sqlite3.connect(database)
    for gold, pred in [*THRESHOLDS, UNDECLARED_KEY, *TYPED]:
        assert sorted(conn.execute(gold).fetchall()) == sorted(conn.execute(pred).fetchall())
    conn.close()


@pytest.mark.parametrize("pair", THRESHOLDS, ids=[f"threshold-{i}" for i in range(7)])
def test_a_group_at_the_threshold_separates_the_queries(verdicts, pair):
    verdict = verdicts[pair]
    assert verdict.equivalent is False, verdict.reason
    assert verdict.stage == "test_suite"


def test_queries_that_can_never_return_a_row_are_equivalent(verdicts):
    verdict = verdicts[CONTRADICTION]
    assert verdict.equivalent is True, verdict.reason
    assert "never" in verdict.reason


def test_a_value_the_check_list_forbids_makes_a_query_empty(database):
    """credits may only be 1..6: neither query can return a row, so they are equivalent; a
    value that may match under another affinity ('6') is not taken for a contradiction."""
    empty, maybe = check_many([
        ("SELECT title FROM course WHERE credits = 9",
         "SELECT title FROM course WHERE credits IN (7, 8) AND dept_name = 'Music'"),
        ("SELECT title FROM course WHERE credits = 9",
         "SELECT title FROM course WHERE credits = '6'")], database)
    assert empty.equivalent is True and empty.stage == "normalise", empty.reason
    assert "CHECK constraint" in empty.reason
    assert maybe.stage != "normalise"


def test_a_key_that_is_not_declared_is_not_assumed(verdicts):
    verdict = verdicts[UNDECLARED_KEY]
    assert verdict.equivalent is False, verdict.reason
    tables = verdict.counterexample["database"]["tables"]
    ids = [row[0] for row in tables["student"]["rows"]]
    assert len(ids) > len(set(ids))  # one id twice, with two departments


@pytest.mark.parametrize("pair", TYPED, ids=["integer-literal", "typeof"])
def test_values_have_their_declared_type(verdicts, pair):
    verdict = verdicts[pair]
    assert verdict.equivalent is True, (verdict.reason, verdict.counterexample)


def test_every_counterexample_is_a_database_of_the_schema(verdicts, database):
    schema = SQLiteEngine(database).schema()
    for verdict in verdicts.values():
        if verdict.equivalent is False and "database" in (verdict.counterexample or {}):
            tables = verdict.counterexample["database"]["tables"]
            data = {name.lower(): [tuple(r) for r in t["rows"]] for name, t in tables.items()}
            assert violations(schema, data) == []


def test_the_contract_check_names_what_is_wrong():
    schema = SQLiteEngine.from_ddl(SCHEMA).schema()
    data = {"dept": [("Physics", "W", 1.0), ("Physics", "X", 2.0)],
            "employee": [(1, "Kim", None, "a", 2010), (2, None, 1, 10, 2.5)],
            "course": [("C1", "t", "Music", 3)], "student": [("S1", "n", None, 4)]}
    found = violations(schema, data)
    assert any("dept" in v and "primary key" in v for v in found)
    assert any("employee.salary" in v and "'a'" in v and "INTEGER" in v for v in found)
    assert any("employee.start_date" in v and "2.5" in v for v in found)
    assert any("employee.name" in v and "NULL" in v for v in found)
    assert any(v.startswith("course row 1: (dept_name)") and "no parent row in dept" in v
               for v in found)
    assert not any("student" in v for v in found)  # a NULL foreign key is fine
    assert violations(schema, {"dept": [("Physics", "W", 1)]}) == []  # an int is a REAL



def test_dirty_real_data_never_reaches_a_test_database(tmp_path):
    """Real data may break its own schema (text in an INTEGER column, as in some Spider
    databases); perturbed copies of it convert or drop such values, so that no counterexample
    holds one."""
    from evalharness_sql.generate import hints, recipes

    path = tmp_path / "dirty.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA + DATA + """
        INSERT INTO employee VALUES (5, 'Oz', 1, 'a', '2014 '), (6, 'Pia', 1, 5000, 'soon');""")
    conn.commit()
    conn.close()
    engine = SQLiteEngine(path)
    assert violations(engine.schema(), {"employee": engine.rows("employee", 100)})  # dirty
    gold, pred = TYPED[1]
    h = hints([sqlglot.parse_one(gold, read="sqlite"), sqlglot.parse_one(pred, read="sqlite")],
              engine.schema())
    made = list(recipes(engine, h, 32, 0, gold + pred))
    assert any(r.kind.startswith("perturbed") for r in made)
    for recipe in made:
        assert violations(engine.schema(), recipe.data) == [], recipe.describe()
    verdicts = check_many(TYPED, path)
    # the real database itself separates the typeof pair (it holds text): that difference is
    # real and found by execution; no test database adds a forbidden one
    assert verdicts[0].equivalent is True, verdicts[0].reason
    assert verdicts[1].stage == "execute"


def test_the_report_shows_the_smallest_counterexamples(shop_cli_run):
    _, out = shop_cli_run
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "### Minimal counterexamples" in md
    section = md.split("### Minimal counterexamples", 1)[1]
    assert "**gold result**" in section and "**predicted result**" in section
    assert "shrunk from" in section
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Minimal counterexamples" in html and "predicted result" in html
    found = 0
    for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for component in record["components"].values():
            value = component["metrics"].get("equivalent") or {}
            minimal = ((value.get("details") or {}).get("counterexample") or {}).get("minimal")
            if minimal:
                found += 1
                assert minimal["rows"] <= minimal["rows_before"]
                assert set(minimal) >= {"tables", "gold", "predicted", "queries", "runs"}
                assert minimal["gold"]["rows"] != minimal["predicted"]["rows"] or \
                    minimal["gold"]["columns"] != minimal["predicted"]["columns"]
    assert found >= 1
