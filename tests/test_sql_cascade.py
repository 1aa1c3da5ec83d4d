"""The equivalence cascade's public API: verdicts, stages, counterexamples, the judge stage."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from evalharness_sql import STAGES, check_equivalence, check_many
from evalharness_sql.compare import Ordering, compare, expected

SCHEMA = """
CREATE TABLE players (player_id INTEGER PRIMARY KEY, name TEXT, country TEXT, born DATE);
CREATE TABLE matches (match_id INTEGER PRIMARY KEY,
                      winner_id INTEGER NOT NULL REFERENCES players(player_id),
                      year INTEGER, minutes INTEGER);
"""


@pytest.fixture
def database(tmp_path) -> Path:
    path = tmp_path / "tennis.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA + """
        INSERT INTO players VALUES (1, 'Ana', 'ESP', '1990-01-02'), (2, 'Bea', 'USA', '1992-05-06'),
                                   (3, 'Cleo', 'USA', '1988-03-04');
        INSERT INTO matches VALUES (1, 1, 2013, 90), (2, 2, 2016, 120), (3, 2, 2013, 75);""")
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def empty(tmp_path) -> Path:
    path = tmp_path / "empty.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    conn.close()
    return path


def test_the_stages_run_in_order():
    assert [s.__name__ for s in STAGES] == ["parse", "normalise", "execute", "test_suite",
                                            "judge"]


def test_every_verdict_says_how_it_was_reached(database):
    pairs = [
        ("SELECT name FROM players", "select NAME from PLAYERS"),                  # normalise
        ("SELECT name FROM players", "SELECT name FROM players WHERE country = 'USA'"),  # execute
        ("SELECT name FROM players WHERE player_id > 1",
         "SELECT name FROM players WHERE player_id >= 2"),                         # test suite
        ("SELECT name FROM players", "SELEC name FROM players"),                   # parse
    ]
    verdicts = check_many(pairs, database)
    assert [(v.equivalent, v.stage) for v in verdicts] == [
        (True, "normalise"), (False, "execute"), (True, "test_suite"), (False, "parse")]
    for v in verdicts:
        assert v.reason
        json.dumps(v.to_dict())  # results.jsonl can store it
        if v.equivalent is False:
            assert v.counterexample and v.category


def test_execute_counterexample_shows_the_differing_rows(database):
    v = check_equivalence("SELECT name FROM players WHERE country = 'USA'",
                          "SELECT name FROM players", database)
    assert v.stage == "execute" and v.category == "wrong_filter"
    assert v.counterexample["only_in_predicted"] == [["Ana"]]
    assert v.counterexample["only_in_gold"] == []


def test_a_difference_the_database_does_not_show_is_found_with_a_recipe(database):
    # on the data both return the same; a player from 'usa' (lower case) tells them apart
    gold = "SELECT name FROM players WHERE country = 'USA'"
    pred = "SELECT name FROM players WHERE upper(country) = 'USA'"
    v = check_equivalence(gold, pred, database)
    assert v.equivalent is False and v.stage == "test_suite"
    recipe = v.counterexample["database"]
    assert recipe["steps"] and recipe["seed"] is not None and "players" in recipe["tables"]
    assert v.counterexample["only_in_predicted"] or v.counterexample["only_in_gold"]


def test_verdicts_are_deterministic(database):
    gold = "SELECT name FROM players ORDER BY born LIMIT 1"
    pred = "SELECT name FROM players WHERE born = (SELECT MIN(born) FROM players)"
    first = check_equivalence(gold, pred, database)
    again = check_equivalence(gold, pred, database)
    assert first.to_dict() == again.to_dict()
    assert first.equivalent is False


def test_an_empty_database_is_filled_by_the_test_suite(empty):
    pairs = [("SELECT COUNT(*) FROM matches WHERE year = 2013 OR year = 2016",
              "SELECT COUNT(*) FROM matches WHERE year IN (2016, 2013)"),
             ("SELECT COUNT(*) FROM matches WHERE year = 2013 OR year = 2016",
              "SELECT COUNT(*) FROM matches WHERE year BETWEEN 2013 AND 2016"),
             ("SELECT MIN(minutes) FROM matches",
              "SELECT minutes FROM matches ORDER BY minutes LIMIT 1")]
    verdicts = check_many(pairs, empty)
    assert [v.equivalent for v in verdicts] == [True, False, False]


def test_no_database_but_a_schema(tmp_path):
    v = check_equivalence("SELECT name FROM players WHERE country = 'USA'",
                          "SELECT name FROM players WHERE country LIKE 'USA'", schema=SCHEMA)
    assert v.equivalent is False and v.stage == "test_suite"


def test_undecided_without_database_or_judge():
    v = check_equivalence("SELECT a FROM t WHERE b > 1", "SELECT a FROM t WHERE 1 < b + 0")
    assert v.equivalent is None and v.stage == "undecided"
    assert v.reason.startswith("undecided:") and "no database" in v.reason
    assert "no judge" in v.reason


def test_the_gold_query_failing_leaves_the_pair_undecided(database):
    v = check_equivalence("SELECT nope FROM players", "SELECT name FROM players", database)
    assert v.equivalent is None and "gold" in v.reason


def test_a_prediction_in_another_dialect_is_transpiled(database):
    v = check_equivalence("SELECT name FROM players ORDER BY name LIMIT 2",
                          "SELECT TOP 2 name FROM players ORDER BY name", database,
                          predicted_dialect="tsql")
    assert v.equivalent is True


def test_unknown_tables_and_columns_are_categorised(database):
    assert check_equivalence("SELECT name FROM players", "SELECT name FROM player",
                             database).category == "unknown_table"
    assert check_equivalence("SELECT name FROM players", "SELECT nme FROM players",
                             database).category == "unknown_column"


# -- the judge stage ---------------------------------------------------------------------------


class FakeJudgment:
    def __init__(self, equivalent=None, error=None):
        from evalharness.judge import SQLEquivalenceOutput

        self.backend, self.model = "fake", "fake-1"
        self.error = error
        self.output = None if error else SQLEquivalenceOutput(equivalent=equivalent,
                                                              reason="looked at it")

    def record(self):
        return {"task": "sql_equivalence", "backend": self.backend, "error": self.error}


class FakeJudge:
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def run_many(self, task, inputs, *, metric="", rounds_after=0):
        self.calls.append((task.id, list(inputs), metric))
        return [self.answers(i) for i in inputs]


def test_the_judge_decides_what_execution_cannot_in_one_batch():
    judge = FakeJudge(lambda i: FakeJudgment(equivalent="+ 0" in i.predicted))
    pairs = [("SELECT a FROM t", "SELECT a + 0 FROM t"), ("SELECT a FROM t", "SELECT b FROM t"),
             ("SELECT a FROM t", "select A from T")]
    verdicts = check_many(pairs, judge=judge)
    assert len(judge.calls) == 1 and len(judge.calls[0][1]) == 2  # one call, undecided only
    task, inputs, metric = judge.calls[0]
    assert task == "sql_equivalence" and metric == "equivalent"
    assert [(v.equivalent, v.stage) for v in verdicts] == [
        (True, "judge"), (False, "judge"), (True, "normalise")]
    assert "LLM judgment" in verdicts[0].reason
    assert verdicts[1].counterexample == {"kind": "judge", "reason": "looked at it"}
    assert verdicts[0].details["judge"]["backend"] == "fake"


def test_a_judge_that_cannot_decide_leaves_the_pair_undecided():
    judge = FakeJudge(lambda i: FakeJudgment(error="the heuristic judge cannot decide"))
    v = check_equivalence("SELECT a FROM t", "SELECT b FROM t", judge=judge)
    assert v.equivalent is None and v.stage == "judge"
    assert "cannot decide" in v.reason


def test_the_heuristic_judge_answers_undecided():
    from evalharness.judge.base import JudgeConfig

    try:
        from evalharness.judge.heuristic import HeuristicJudge
    except ImportError:  # pragma: no cover - older judge module layout
        from evalharness.judge.base import HeuristicJudge
    judge = HeuristicJudge(JudgeConfig())
    v = check_equivalence("SELECT a FROM t", "SELECT b FROM t", judge=judge)
    assert v.equivalent is None and v.stage == "judge"


# -- result comparison -------------------------------------------------------------------------


def test_ties_may_come_in_any_order_and_fill_a_limit():
    # gold: ORDER BY score LIMIT 2 over rows whose scores tie at the cut
    rows = [("a", 1), ("b", 2), ("c", 2), ("d", 3)]
    gold = expected(rows, Ordering(visible=1, keys=[1], limit=2))
    assert compare(gold, [("a",), ("c",)], 1, 1).equal  # c ties with b
    assert not compare(gold, [("c",), ("a",)], 1, 1).equal  # a must come first
    assert not compare(gold, [("a",), ("d",)], 1, 1).equal


def test_floats_within_tolerance_nulls_equal_columns_matched_by_content():
    gold = expected([(1.0000000001, None, "x")], None)
    assert compare(gold, [("x", None, 1.0)], 3, 3).equal
    assert not compare(gold, [("x", None, 1.01)], 3, 3).equal
