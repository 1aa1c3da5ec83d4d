"""`evalharness.evaluate(rows, evaluators=...)` (issue 34, "Done when": a notebook-style test):
ten rows of each component kind give the same values as the same cases through the shop
scenario's run; rows as dicts, pydantic models or a DataFrame; `.to_pandas()` one row per
case and metric (and Arrow, polars); a notebook's own Evaluator object; errors naming the
row and the field; a call from inside a running event loop (Jupyter)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import evalharness
from conftest import ROOT
from evalharness.errors import EvalHarnessError, InputError
from evalharness.pipeline import SHOP_PIPELINE

SHOP_DIR = ROOT / "scenarios" / "shop"
TIMING = ("latency", "exec_time", "cost")


def shop_results(run: Path) -> dict[str, dict]:
    """The shop run's results by case id (JSON lines as written)."""
    out = {}
    for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        out[record["case"]["id"]] = record
    return out


def values(results: dict[str, dict] | evalharness.RunFolder, component: str
           ) -> dict[tuple[str, str], float | None]:
    """(case id, metric) -> value of one component, timing and cost left out (they are the
    machine's, not the cases')."""
    if isinstance(results, dict):
        rows = [(cid, m, v.get("value")) for cid, r in results.items()
                for m, v in r["components"].get(component, {}).get("metrics", {}).items()]
    else:
        rows = [(r["case_id"], r["metric"], r["value"]) for r in results.records()
                if r["component"] == component]
    return {(cid, m): v for cid, m, v in rows if not any(t in m for t in TIMING)}


@pytest.fixture(scope="module")
def shop(shop_cli_run) -> dict[str, dict]:
    result, run = shop_cli_run
    assert result.code in (0, 1), result
    return shop_results(run)


def ten_of(shop: dict[str, dict], route: str | None = None) -> list[dict]:
    """Ten evaluated shop cases (of a gold route, when given), in id order."""
    chosen = [r for cid, r in sorted(shop.items())
              if route is None or route in (r["case"]["gold"].get("routes") or [])]
    return chosen[:10]


def test_ten_rows_of_each_component_kind_give_the_scenarios_values(shop, tmp_path):
    """Router, text-to-SQL, retriever and generator rows — flat fields in our words and in
    Ragas's — evaluated with the shop's evaluator settings: every value equals the shop run's
    for the same case and metric."""
    router = [{"id": r["case"]["id"], "question": r["case"]["question"],
               "routes": r["trace"]["router"]["routes"],
               "route_scores": r["trace"]["router"].get("scores"),
               "confidence": r["trace"]["router"].get("confidence"),
               "gold_routes": r["case"]["gold"]["routes"]} for r in ten_of(shop)]
    got = evalharness.evaluate(router, ["route_accuracy", "routing"], out=tmp_path / "router")
    assert values(got, "router") and values(got, "router") == {
        k: v for k, v in values(shop, "router").items() if k[0] in {r["id"] for r in router}}

    sql = [{"id": r["case"]["id"], "question": r["case"]["question"],
            "sql": r["trace"]["text2sql"]["sql"], "rows": r["trace"]["text2sql"].get("rows"),
            "columns": r["trace"]["text2sql"].get("columns"),
            "gold_sql": r["case"]["gold"]["sql"]}
           for r in ten_of(shop, "sql") if r["trace"].get("text2sql")]
    assert len(sql) == 10
    got = evalharness.evaluate(sql, ["exact_match", "equivalence"], out=tmp_path / "sql",
                               database={"engine": "sqlite",
                                         "build": SHOP_DIR / "catalog.sql"})
    ids = {r["id"] for r in sql}
    assert values(got, "text2sql") == {k: v for k, v in values(shop, "text2sql").items()
                                       if k[0] in ids}

    blog = [{"id": r["case"]["id"], "user_input": r["case"]["question"],
             "retrieved_ids": r["trace"]["retriever"]["ids"],
             "retrieved_texts": r["trace"]["retriever"].get("texts"),
             "retrieved_scores": r["trace"]["retriever"].get("scores"),
             "relevant": r["case"]["gold"]["relevant"],
             "reference": r["case"]["gold"]["answer"]}
            for r in ten_of(shop, "blog") if r["trace"].get("retriever")]
    assert len(blog) == 10
    got = evalharness.evaluate(blog, [
        {"ranking": {"k": [3, 5], "relevance_level": 1, "gain": "exp2", "measures": "all"}},
        {"context_precision": {"k": [3, 5]}}, "context_recall"],
        corpus=SHOP_DIR / "blog_chunks.jsonl", out=tmp_path / "retriever")
    ids = {r["id"] for r in blog}
    assert values(got, "retriever") == {k: v for k, v in values(shop, "retriever").items()
                                        if k[0] in ids}

    # the generator's faithfulness checks answers built from SQL rows against those rows:
    # the rows hold whole traces, so the pipeline is said
    answers = [{"id": r["case"]["id"], "question": r["case"]["question"],
                "gold": r["case"]["gold"], "trace": r["trace"]} for r in ten_of(shop)]
    got = evalharness.evaluate(answers, {"generator": [
        {"faithfulness": {"availability": ["stock"]}}, "answer_relevancy",
        "answer_correctness", "numeric_consistency", "answer_present", "generation_cost"]},
        pipeline=SHOP_PIPELINE, database={"engine": "sqlite",
                                          "build": SHOP_DIR / "catalog.sql"},
        corpus=SHOP_DIR / "blog_chunks.jsonl", out=tmp_path / "generator")
    ids = {r["id"] for r in answers}
    expected = {k: v for k, v in values(shop, "generator").items() if k[0] in ids}
    assert values(got, "generator") == expected and len(expected) >= 50


def test_a_scenario_file_evaluates_rows_as_its_own_cases(shop, tmp_path):
    """`scenario=`: the scenario's pipeline, evaluators, judge, corpus and database for the
    rows given (recorded traces: no system runs); the same values as its own run, a report
    with verdicts and the bottleneck."""
    rows = [{"id": r["case"]["id"], "question": r["case"]["question"],
             "gold": r["case"]["gold"], "trace": r["trace"]} for r in ten_of(shop)]
    got = evalharness.evaluate(rows, scenario=ROOT / "scenarios" / "shop.yaml",
                               out=tmp_path / "run")
    ids = {r["id"] for r in rows}
    for component in ("router", "text2sql", "retriever", "generator"):
        assert values(got, component) == {
            k: v for k, v in values(shop, component).items() if k[0] in ids}, component
    assert got.report.cases["total"] == 10
    assert got.report.bottleneck is not None
    assert (tmp_path / "run" / "report.html").is_file()
    with pytest.raises(EvalHarnessError, match="leave out evaluators"):
        evalharness.evaluate(rows, ["faithfulness"], scenario=ROOT / "scenarios" / "shop.yaml")


def test_a_dataframe_models_and_dicts_give_one_table_row_per_case_and_metric(tmp_path):
    """The same rows as a pandas DataFrame (its index the case ids), as pydantic models and as
    dicts: the same values; `.to_pandas()` has one row per case and metric, `.to_arrow()` and
    `.to_polars()` the same table; a value that could not be computed is NaN with its error."""
    pandas = pytest.importorskip("pandas")
    from pydantic import BaseModel

    class Row(BaseModel):
        question: str
        answer: str
        contexts: list[str]
        reference: str | None = None

    rows = [Row(question="Is the navy coat in stock?", answer="Yes, 3 are in stock.",
                contexts=["The Navy Wool Coat: 3 in stock."],
                reference="Yes, three are in stock."),
            Row(question="What does the red scarf cost?", answer="It costs 20 euros.",
                contexts=["Red scarf, 25.00 EUR."]),
            Row(question="Hello?", answer="Hi! How can I help?", contexts=[])]
    evaluators = ["faithfulness", "answer_correctness", "answer_present"]
    from_models = evalharness.evaluate(rows, evaluators, out=tmp_path / "models")
    frame = pandas.DataFrame([r.model_dump() for r in rows], index=["a", "b", "c"])
    from_frame = evalharness.evaluate(frame, evaluators, out=tmp_path / "frame")
    table = from_frame.to_pandas()
    metrics = {m for r in from_frame.results for m in r.components["generator"].metrics}
    assert len(table) == 3 * len(metrics) and set(table["case_id"]) == {"a", "b", "c"}
    assert list(table.columns) == ["case_id", "repeat", "question", "component", "metric",
                                   "value", "error", "evaluator", "verdict", "end_to_end",
                                   "root_cause"]
    assert not table.duplicated(["case_id", "metric"]).any()
    by_position = {("0", "a"), ("1", "b"), ("2", "c")}
    a = {(cid, m): v for cid, m, v in
         zip(from_models.to_pandas()["case_id"], from_models.to_pandas()["metric"],
             from_models.to_pandas()["value"], strict=True)}
    b = {(cid, m): v for cid, m, v in zip(table["case_id"], table["metric"], table["value"],
                                          strict=True)}
    for position, index in by_position:
        for m in metrics:
            assert (a[(position, m)] == b[(index, m)]) or (
                pandas.isna(a[(position, m)]) and pandas.isna(b[(index, m)])), m
    missing = table[(table["case_id"] == "b") & (table["metric"] == "correctness_f1")]
    assert missing["value"].isna().all() and missing["error"].str.contains("reference").all()
    arrow = from_frame.to_arrow()
    assert arrow.num_rows == len(table) and arrow.column_names == list(table.columns)
    polars = pytest.importorskip("polars")
    assert from_frame.to_polars().shape == table.shape and isinstance(
        from_frame.to_polars(), polars.DataFrame)
    dicts = evalharness.evaluate([r.model_dump() for r in rows], evaluators,
                                 out=tmp_path / "dicts")
    assert dicts.records() == [dict(r) for r in from_models.records()]


def test_a_notebooks_own_evaluator_object(tmp_path):
    """An Evaluator defined in the notebook is registered for the call, placed on the
    component of its kind, and its values come back like a built-in's."""
    from evalharness import Evaluator, Metric, MetricValue

    def words(batch):
        return [{"n_words": MetricValue.of(len((step.answer or "").split()))}
                for _, step in batch]

    mine = Evaluator(name="n_words", component="generator", evaluate=words,
                     metrics=[Metric("n_words", range=(0, None))])
    got = evalharness.evaluate([{"question": "q", "answer": "one two three"},
                                {"question": "r", "answer": "four"}],
                               [mine, "answer_present"], out=tmp_path / "mine")
    table = {(r["case_id"], r["metric"]): r["value"] for r in got.records()}
    assert table[("0", "n_words")] == 3 and table[("1", "n_words")] == 1
    assert table[("0", "answer_present")] == 1
    assert got.report.components["generator"].metrics["n_words"].mean == 2


def test_load_run_of_a_scenario_run_gives_the_same_table(shop_cli_run):
    """`load_run(DIR).to_pandas()`: one row per case and metric of a CLI run."""
    pytest.importorskip("pandas")
    _, run = shop_cli_run
    folder = evalharness.load_run(run)
    table = folder.to_pandas()
    expected = sum(len(c.metrics) for r in folder.results for c in r.components.values())
    assert len(table) == expected and table["case_id"].nunique() == folder.report.cases["total"]


def test_bad_rows_are_errors_naming_the_row_and_the_field(tmp_path):
    with pytest.raises(InputError, match=r"row 1: unknown field 'anwser' \(did you mean "
                                         r"'answer'\?\); valid flat fields: id, case_id"):
        evalharness.evaluate([{"question": "q", "answer": "a"},
                              {"question": "q", "anwser": "a"}], ["answer_present"])
    with pytest.raises(InputError, match="row 0: no question; give `question`"):
        evalharness.evaluate([{"answer": "a"}], ["answer_present"])
    with pytest.raises(InputError, match=r"row 0, field `generator.contexts`: Input should be "
                                         r"a valid list"):
        evalharness.evaluate([{"question": "q", "generator": {"answer": "a", "contexts": 3}}],
                             ["answer_present"])
    with pytest.raises(InputError, match="case id 'x' again"):
        evalharness.evaluate([{"id": "x", "question": "q", "answer": "a"},
                              {"id": "x", "question": "r", "answer": "b"}], ["answer_present"])
    with pytest.raises(InputError, match="say which route runs which, e.g. pipeline="):
        evalharness.evaluate([{"question": "q", "routes": ["sql"], "sql": "SELECT 1"}],
                             ["exact_match"])
    with pytest.raises(InputError, match="evaluator 'faithfulness': no component of these "
                                         "rows has it"):
        evalharness.evaluate([{"question": "q", "routes": ["sql"]}], ["faithfulness"])
    with pytest.raises(InputError, match="not a single dict; wrap one row in a list"):
        evalharness.evaluate({"question": "q", "answer": "a"}, ["answer_present"])
    with pytest.raises(InputError, match="got no rows"):
        evalharness.evaluate([], ["answer_present"])


def test_it_runs_inside_a_running_event_loop_as_in_jupyter(tmp_path):
    """Jupyter runs cells inside an event loop: `evaluate` still works (the API runs the
    evaluation on a loop of its own in a worker thread)."""

    async def cell():
        return evalharness.evaluate([{"question": "q", "answer": "an answer"}],
                                    ["answer_present"], out=tmp_path / "jupyter")

    got = asyncio.run(cell())
    assert got.records()[0]["value"] == 1
