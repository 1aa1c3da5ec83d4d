"""The `equivalence` and `exact_match` evaluators through the plugin hooks, and the report."""

from __future__ import annotations

import json
import textwrap

import pytest

from evalharness.context import Database, EvalContext, build_sqlite
from evalharness.errors import ScenarioError
from evalharness.models import Case, CaseResult, ComponentResult, MetricValue, Text2SQLStep, Trace
from evalharness_sql import (
    EQUIVALENCE_METRICS,
    EquivalenceSettings,
    check_equivalence,
    evaluate_text2sql,
    report_sections,
)


class FakeJudgment:
    def __init__(self, equivalent=None, error=None):
        from evalharness.judge import SQLEquivalenceOutput

        self.backend, self.model, self.error = "fake", "fake-1", error
        self.output = None if error else SQLEquivalenceOutput(equivalent=equivalent,
                                                              reason="looked at it")

    def record(self):
        return {"task": "sql_equivalence", "backend": self.backend, "error": self.error}


class FakeJudge:
    """A judge with the real one's ``run_many`` signature; records its calls."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def run_many(self, task, inputs, *, metric="", rounds_after=0):
        self.calls.append((task.id, list(inputs), metric))
        return [self.answers(i) for i in inputs]


@pytest.fixture
def database(tmp_path):
    script = tmp_path / "db.sql"
    script.write_text(
        "CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, "
        "colour TEXT);"
        "INSERT INTO products VALUES (1, 'Coat', 120.0, 'navy'), (2, 'Tee', 25.0, 'white'),"
        "(3, 'Scarf', 40.0, 'navy');")
    build_sqlite(script, tmp_path / "db.sqlite")
    return Database(path=tmp_path / "db.sqlite")


def case(sql):
    return Case(id="c", question="q", gold={"sql": sql})


def test_every_metric_for_every_case_with_stage_reason_counterexample(database):
    batch = [
        (case("SELECT name FROM products WHERE colour = 'navy'"),
         Text2SQLStep(sql="select NAME from PRODUCTS where COLOUR='navy'")),
        (case("SELECT name FROM products WHERE price < 100"),
         Text2SQLStep(sql="SELECT name FROM products WHERE price <= 100")),
        (case("SELECT name FROM products WHERE price < 100"),
         Text2SQLStep(sql="SELECT name FROM products WHERE price < 30")),
        (case("SELECT name FROM products"), Text2SQLStep(sql="DROP TABLE products")),
        (case("SELECT name FROM products"), Text2SQLStep(sql=None, error="model timed out")),
        (Case(id="c", question="q"), Text2SQLStep(sql="SELECT 1")),
    ]
    rows = evaluate_text2sql("equivalence", batch, EquivalenceSettings(),
                             EvalContext(database=database))
    assert all(set(r) == set(EQUIVALENCE_METRICS) for r in rows)
    eq = [r["equivalent"] for r in rows]
    assert [v.value for v in eq[:5]] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert eq[0].details["stage"] == "normalise"
    assert eq[1].details["stage"] == "test_suite" and eq[1].details["counterexample"]
    assert eq[2].details["stage"] == "execute"
    assert eq[2].details["counterexample"]["only_in_gold"] == [["Scarf"]]
    assert eq[2].details["category"] == "wrong_filter"
    assert eq[3].details["category"] == "refused"
    assert "no SQL was produced (model timed out)" == eq[4].details["reason"]
    assert eq[5].error == "the case has no gold SQL (gold.sql)"
    for r in rows[:5]:
        json.dumps({m: v.model_dump() for m, v in r.items()})
        assert r["equivalent"].details["reason"]
    # execution accuracy: same result on the scenario's database
    assert [r["execution_accuracy"].value for r in rows[:5]] == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert [r["valid_sql"].value for r in rows[:5]] == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert rows[0]["clause_f1"].value == 1.0
    assert 0 < rows[2]["clause_f1"].value < 1
    assert rows[2]["clause_f1"].details["clauses"]["where"] == 0.0
    assert rows[0]["exec_time_ratio"].value > 0
    assert rows[3]["exec_time_ratio"].error


# A scenario cannot configure `equivalence` without a database (the last tests below); the
# hook itself, called directly as here, still works without one — so does check_equivalence().


def test_undecided_is_an_error_never_a_silent_zero():
    judge = FakeJudge(lambda i: FakeJudgment(error="cannot decide"))
    batch = [(case("SELECT a FROM t"), Text2SQLStep(sql="SELECT b FROM t"))] * 2
    rows = evaluate_text2sql("equivalence", batch, EquivalenceSettings(),
                             EvalContext(judge=judge))
    assert len(judge.calls) == 1  # one batched call for the whole batch
    for r in rows:
        assert r["equivalent"].value is None
        assert r["equivalent"].error.startswith("undecided:")
        assert r["equivalent"].details["stage"] == "judge"
        assert r["execution_accuracy"].error == "the scenario has no database"


def test_the_judge_verdict_carries_the_judgment_record():
    judge = FakeJudge(lambda i: FakeJudgment(equivalent=False))
    rows = evaluate_text2sql("equivalence", [(case("SELECT a FROM t"),
                                              Text2SQLStep(sql="SELECT b FROM t"))],
                             EquivalenceSettings(), EvalContext(judge=judge))
    value = rows[0]["equivalent"]
    assert value.value == 0.0 and value.details["stage"] == "judge"
    assert value.details["judge"]["task"] == "sql_equivalence"
    rows = evaluate_text2sql("equivalence", [(case("SELECT a FROM t"),
                                              Text2SQLStep(sql="SELECT b FROM t"))],
                             EquivalenceSettings(use_judge=False), EvalContext(judge=judge))
    assert rows[0]["equivalent"].error.startswith("undecided")


def test_other_evaluator_names_are_not_ours():
    assert evaluate_text2sql("something_else", [], EquivalenceSettings(), EvalContext()) is None


def test_report_section_counts_stages_and_categories():
    def result(value):
        return CaseResult(case=Case(id="c", question="q"), trace=Trace(case_id="c"), components={
            "text2sql": ComponentResult(status="evaluated", metrics={"equivalent": value},
                                        evaluators={"equivalent": "equivalence"})})

    results = [result(MetricValue.of(True, stage="normalise")),
               result(MetricValue.of(False, stage="execute", category="wrong_filter")),
               result(MetricValue.failed("undecided: no judge", stage="undecided"))]
    (section,) = report_sections(None, results)
    assert "1 equivalent, 1 not equivalent, 1 undecided" in section.markdown
    assert section.data["category"] == {"wrong_filter": 1}
    assert report_sections(None, []) is None


def test_equivalence_without_a_database_is_refused_with_the_line(tmp_path):
    from evalharness.scenario import load_scenario

    (tmp_path / "traces.jsonl").write_text('{"case_id": "a", "text2sql": {"sql": "SELECT 1"}}\n')
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent("""\
        name: nodb
        cases:
          - {id: a, question: q, gold: {sql: "SELECT 1"}}
        traces: traces.jsonl
        pipeline: {text2sql: {}}
        evaluators:
          text2sql: [equivalence]
    """))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert "line 7" in message and "equivalence" in message and "database" in message


def test_check_equivalence_without_a_database_still_works():
    v = check_equivalence("SELECT a FROM t", "select A from T")
    assert v.equivalent is True and v.stage == "normalise"
