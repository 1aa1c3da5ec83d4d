"""The first metric of each built-in plugin, against hand-computed and reference values."""

from __future__ import annotations

import random

import pytest
import pytrec_eval

from evalharness.context import Database, EvalContext, build_sqlite
from evalharness.models import Case, GeneratorStep, RetrieverStep, RouterStep, Text2SQLStep
from evalharness_generation import evaluate_generator
from evalharness_retrieval import RankingSettings, evaluate_retriever
from evalharness_router import evaluate_router
from evalharness_sql import ExactMatchSettings, evaluate_text2sql, normal_form


def case(**gold) -> Case:
    return Case(id="x", question="q", gold=gold)


# -- router ----------------------------------------------------------------------------------


def test_route_accuracy_is_exact_set_match():
    batch = [
        (case(routes=["sql", "blog"]), RouterStep(routes=["blog", "sql"])),
        (case(routes=["sql", "blog"]), RouterStep(routes=["sql"])),
        (case(routes=["blog"]), RouterStep(routes=["blog", "blog"])),
        (case(routes=["blog"]), RouterStep(routes=[])),
        (case(), RouterStep(routes=["sql"])),
    ]
    rows = evaluate_router("route_accuracy", batch)
    values = [r["route_accuracy"].value for r in rows]
    assert values == [1.0, 0.0, 1.0, 0.0, None]
    assert rows[4]["route_accuracy"].error == "the case has no gold route set (gold.routes)"
    assert rows[1]["route_accuracy"].details == {"predicted": ["sql"], "gold": ["blog", "sql"]}
    assert evaluate_router("something_else", batch) is None


# -- text-to-SQL -----------------------------------------------------------------------------


@pytest.fixture
def database(tmp_path):
    script = tmp_path / "db.sql"
    script.write_text("CREATE TABLE products (id INTEGER, name TEXT, price REAL, brand_id INT);"
                      "CREATE TABLE brands (brand_id INT, name TEXT);")
    build_sqlite(script, tmp_path / "db.sqlite")
    return Database(path=tmp_path / "db.sqlite")


SAME = [
    ("SELECT name FROM products WHERE price < 10", "select NAME from PRODUCTS where price<10"),
    ("SELECT p.name FROM products AS p", "SELECT name FROM products"),
    ('SELECT "name" FROM products', "SELECT name FROM products -- a comment"),
    ("SELECT p.name, b.name FROM products p JOIN brands b ON p.brand_id = b.brand_id",
     "SELECT x.name, y.name FROM products x JOIN brands y ON x.brand_id = y.brand_id"),
]
DIFFERENT = [
    ("SELECT name FROM products WHERE price < 10", "SELECT name FROM products WHERE price <= 10"),
    ("SELECT name FROM products", "SELECT name, price FROM products"),
    ("SELECT name FROM products ORDER BY price", "SELECT name FROM products ORDER BY price DESC"),
    ("SELECT name FROM products LIMIT 1", "SELECT name FROM products"),
    ("SELECT p.name FROM products p JOIN brands b ON p.brand_id = b.brand_id",
     "SELECT b.name FROM products p JOIN brands b ON p.brand_id = b.brand_id"),
]


@pytest.mark.parametrize("gold, pred", SAME)
def test_exact_match_ignores_cosmetics(gold, pred, database):
    rows = evaluate_text2sql("exact_match", [(case(sql=gold), Text2SQLStep(sql=pred))],
                             ExactMatchSettings(), EvalContext(database=database))
    assert rows[0]["exact_match"].value == 1.0, rows[0]["exact_match"].details


@pytest.mark.parametrize("gold, pred", DIFFERENT)
def test_exact_match_keeps_differences(gold, pred, database):
    for ctx in (EvalContext(database=database), EvalContext()):
        rows = evaluate_text2sql("exact_match", [(case(sql=gold), Text2SQLStep(sql=pred))],
                                 ExactMatchSettings(), ctx)
        assert rows[0]["exact_match"].value == 0.0


def test_exact_match_failures_and_errors():
    batch = [
        (case(sql="SELECT 1"), Text2SQLStep(sql="SELEC name FRM products")),
        (case(sql="SELECT 1"), Text2SQLStep(sql=None, error="timeout")),
        (case(), Text2SQLStep(sql="SELECT 1")),
        (case(sql="SELECT FROM WHERE ("), Text2SQLStep(sql="SELECT 1")),
        (case(sql="SELECT 1"), Text2SQLStep(sql="SELECT 1; DROP TABLE x")),
    ]
    rows = evaluate_text2sql("exact_match", batch, ExactMatchSettings(), EvalContext())
    v = [r["exact_match"] for r in rows]
    assert v[0].value == 0.0 and "does not parse" in v[0].details["reason"]
    assert v[1].value == 0.0 and v[1].details["reason"] == "no SQL was produced"
    assert v[2].error == "the case has no gold SQL (gold.sql)"
    assert v[3].error.startswith("the gold SQL does not parse as sqlite")
    assert v[4].value == 0.0 and "expected one statement" in v[4].details["reason"]


def test_normal_form_dialect():
    assert normal_form("SELECT `name` FROM products", "mysql") == \
        normal_form("SELECT name FROM products", "mysql")


# -- retrieval -------------------------------------------------------------------------------


def test_ranking_by_hand():
    batch = [
        (case(relevant={"a": 2, "b": 1, "c": 0}), RetrieverStep(ids=["x", "c", "b", "a"])),
        (case(relevant={"a": 1}), RetrieverStep(ids=["y", "z"])),
        (case(relevant={}), RetrieverStep(ids=["a"])),
        (case(relevant={"a": 1}), RetrieverStep(ids=[])),
        (case(), RetrieverStep(ids=["a"])),
        (case(relevant={"a": 1}), RetrieverStep(ids=["a", "b", "a"])),
    ]
    rows = evaluate_retriever("ranking", batch, RankingSettings(k=[1, 3]))
    first = {m: v.value for m, v in rows[0].items()}
    assert first == {"recall@1": 0.0, "recall@3": 0.5, "mrr": pytest.approx(1 / 3)}
    assert rows[0]["mrr"].details == {"first_relevant_rank": 3, "relevant": 2}
    assert {m: v.value for m, v in rows[1].items()} == {"recall@1": 0, "recall@3": 0, "mrr": 0}
    assert {m: v.value for m, v in rows[2].items()} == {"recall@1": 0, "recall@3": 0, "mrr": 0}
    assert {m: v.value for m, v in rows[3].items()} == {"recall@1": 0, "recall@3": 0, "mrr": 0}
    assert rows[4]["mrr"].error == "the case has no relevance labels (gold.relevant)"
    assert "more than once: a" in rows[5]["recall@1"].error


def test_relevance_level_setting():
    batch = [(case(relevant={"a": 2, "b": 1}), RetrieverStep(ids=["b", "a"]))]
    rows = evaluate_retriever("ranking", batch, RankingSettings(k=[1], relevance_level=2))
    assert rows[0]["recall@1"].value == 0.0 and rows[0]["mrr"].value == 0.5


def test_ranking_settings_are_validated():
    with pytest.raises(ValueError, match="cutoffs >= 1"):
        RankingSettings(k=[0, 5])


def test_ranking_matches_pytrec_eval_on_random_runs():
    """recall_K and recip_rank from trec_eval itself (via pytrec_eval), on 300 random queries."""
    rng = random.Random(7)
    docs = [f"d{i:03d}" for i in range(60)]
    qrels, run, batch = {}, {}, []
    for q in range(300):
        judged = rng.sample(docs, rng.randint(0, 8))
        labels = {d: rng.choice([0, 0, 1, 2, 3]) for d in judged}
        ranking = rng.sample(docs, rng.randint(0, 30))
        qid = f"q{q}"
        qrels[qid] = labels or {"unjudged": 0}
        # Distinct, decreasing scores: trec_eval's order is then exactly our rank order.
        run[qid] = {d: float(len(ranking) - i) for i, d in enumerate(ranking)}
        batch.append((case(relevant=labels), RetrieverStep(ids=ranking)))
    ks = [1, 5, 10, 20]
    reference = pytrec_eval.RelevanceEvaluator(
        qrels, {"recip_rank"} | {f"recall_{k}" for k in ks}).evaluate(run)
    rows = evaluate_retriever("ranking", batch, RankingSettings(k=ks))
    for q, row in enumerate(rows):
        expected = reference.get(f"q{q}")
        if expected is None:  # pytrec_eval omits queries with an empty run
            assert all(v.value == 0 for v in row.values())
            continue
        assert row["mrr"].value == pytest.approx(expected["recip_rank"], abs=1e-12)
        for k in ks:
            assert row[f"recall@{k}"].value == pytest.approx(expected[f"recall_{k}"], abs=1e-12)


# -- generation ------------------------------------------------------------------------------


def test_answer_present_and_words():
    batch = [(case(), GeneratorStep(answer="The navy coat costs 129.00 €.")),
             (case(), GeneratorStep(answer="   \n")),
             (case(), GeneratorStep(answer=None))]
    rows = evaluate_generator("answer_present", batch, None, EvalContext())
    assert [r["answer_present"].value for r in rows] == [1.0, 0.0, 0.0]
    assert [r["answer_words"].value for r in rows] == [6.0, 0.0, 0.0]


def test_generation_cost_reports_missing_figures_as_errors():
    batch = [(case(), GeneratorStep(answer="a", latency_ms=12.5,
                                    usage={"prompt_tokens": 30, "completion_tokens": 4})),
             (case(), GeneratorStep(answer="b"))]
    rows = evaluate_generator("generation_cost", batch, None, EvalContext())
    assert rows[0]["latency_ms"].value == 12.5 and rows[0]["total_tokens"].value == 34
    assert rows[0]["total_tokens"].details == {"prompt": 30, "completion": 4}
    assert rows[1]["latency_ms"].error == "the generator step reports no latency_ms"
    assert rows[1]["total_tokens"].error == "the generator step reports no token usage"
    assert "cost" not in rows[0]  # no prices: no cost


def test_generation_cost_prices_the_tokens_when_given_prices():
    batch = [(case(), GeneratorStep(answer="a", usage={"prompt_tokens": 2000,
                                                       "completion_tokens": 500})),
             (case(), GeneratorStep(answer="b"))]
    rows = evaluate_generator("generation_cost", batch,
                              {"prices": {"input": 0.15, "output": 0.6}}, EvalContext())
    # 2000 × 0.15 / 1e6 + 500 × 0.6 / 1e6, by hand
    assert rows[0]["cost"].value == pytest.approx(0.0006)
    assert rows[0]["cost"].details == {"prices": {"input": 0.15, "output": 0.6}}
    assert rows[1]["cost"].error == "the generator step reports no token usage to price"
