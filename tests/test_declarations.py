"""Metric declarations: an outside plugin's metric and component kind are first-class.

The done-when test of the metric-declarations issue: a local plugin file adds one generator
metric and one component kind (a reranker), with declarations only, and the shop run shows
them exactly like the built-ins — default verdicts and attribution, scale and direction in
report.html, review questions, agreement against labels, gates, ``compare``.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from evalharness import Metric
from evalharness.compare import compare_runs
from evalharness.declarations import call_with, describe_cases, matches, resolve
from evalharness.errors import EvalHarnessDeprecationWarning, PluginError
from evalharness.hookspecs import hookimpl
from evalharness.plugins import load_plugins
from evalharness.registry import Evaluator, Oracle
from evalharness.review.agreement import compute as agreement
from evalharness.review.labels import Label
from evalharness.review.session import Review
from evalharness.runfolder import load_run

SHOP = ROOT / "scenarios"

PLUGIN = '''
"""An outside plugin: a generator metric and a reranker kind, declared, nothing else."""
from pydantic import BaseModel

from evalharness import (ComponentKind, Evaluator, LabelGold, Metric, MetricValue, Oracle,
                         hookimpl)
from evalharness.errors import NoOracle


class RerankerStep(BaseModel):
    ids: list[str] = []
    latency_ms: float | None = None


def concise(batch):
    return [{"concise": MetricValue.of(len((s.answer or "").split()) <= 40)}
            for _, s in batch]


def rerank(batch):
    rows = []
    for case, step in batch:
        relevant = case.gold.relevant
        if relevant is None:
            rows.append({"top_relevant": MetricValue.failed("no gold.relevant"),
                         "moved": MetricValue.of(step.moved)})
            continue
        top = step.ids[:1]
        rows.append({"top_relevant": MetricValue.of(bool(top) and relevant.get(top[0], 0) > 0),
                     "moved": MetricValue.of(step.moved)})
    return rows


class Step(RerankerStep):
    moved: int = 0


def perfect(case):
    if not case.gold.relevant:
        raise NoOracle("no gold.relevant")
    return {"ids": sorted(case.gold.relevant, key=lambda c: -case.gold.relevant[c])}


@hookimpl
def register_component_kinds(register):
    register(ComponentKind("reranker", Step, description="reorders the retrieved chunks"))


@hookimpl
def register_oracles(register):
    register(Oracle("reranker", perfect))


@hookimpl
def register_evaluators(register):
    register(Evaluator(
        name="concise", component="generator", evaluate=concise,
        metrics=[Metric("concise", verdict=">= 1", description="at most 40 words",
                        question="Is the answer short enough for a chat window?",
                        gold=LabelGold(field="answer", step="answer", confirms=False))]))
    register(Evaluator(
        name="rerank_quality", component="reranker", evaluate=rerank,
        metrics=[Metric("top_relevant", verdict=">= 1", description="a relevant chunk on top",
                        question="Is the chunk on top relevant?"),
                 Metric("moved", range=(0, None), direction="lower", unit="positions",
                        description="chunks the reranker moved")]))
'''

SYSTEM = '''
import os
import sys

sys.path.insert(0, {scenarios!r})
from shop.assistant import answer as shop_answer


def answer(case, overrides=None):
    overrides = dict(overrides or {{}})
    imposed = overrides.pop("reranker", None)
    trace = shop_answer(case, overrides=overrides)
    if trace.retriever is not None:
        ids = list(trace.retriever.ids)
        if imposed is not None:
            new = list(imposed["ids"])
        elif os.environ.get("RERANK") == "keep" or case.id.endswith(("0", "5")):
            new = ids
        else:  # a poor reranker: the first chunk goes last
            new = ids[1:] + ids[:1]
        moved = sum(1 for a, b in zip(ids, new) if a != b)
        trace.steps["reranker"] = {{"ids": new, "moved": moved, "latency_ms": 0.5}}
    return trace
'''


def shop_with_plugin(folder: Path) -> Path:
    """The shop scenario plus a reranker after the retriever and the outside plugin."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "outside.py").write_text(PLUGIN)
    (folder / "reranked.py").write_text(SYSTEM.format(scenarios=str(SHOP)))
    text = (SHOP / "shop.yaml").read_text()
    for rel in ("shop/cases.jsonl", "shop/catalog.sql", "shop/blog_chunks.jsonl"):
        text = text.replace(rel, str(SHOP / rel))
    text = text.replace("system: shop.assistant:answer", "system: reranked.py:answer")
    text = text.replace("  generator: {after: [text2sql, retriever]}",
                        "  reranker: {after: [retriever]}\n"
                        "  generator: {after: [text2sql, reranker]}")
    text = text.replace("    - generation_cost\n",
                        "    - generation_cost\n    - concise\n  reranker: [rerank_quality]\n")
    assert "  reranker: [rerank_quality]" in text
    text = text.replace("gates:\n", "gates:\n  - reranker.top_relevant >= 0.9\n"
                                    "  - generator.concise >= 0.5\n")
    path = folder / "scenario.yaml"
    path.write_text("plugins: [outside.py]\n" + text)
    return path


@pytest.fixture(scope="module")
def outside_runs(tmp_path_factory):
    """Two runs of the shop with the outside plugin: the poor reranker (A), and one that keeps
    the retriever's order (B)."""
    folder = tmp_path_factory.mktemp("outside")
    scenario = shop_with_plugin(folder)
    a, b = folder / "a", folder / "b"
    first = run_cli("scenario", scenario, "--out", a, "-q")
    second = run_cli("scenario", scenario, "--out", b, "-q", env={"RERANK": "keep"})
    return scenario, a, b, first, second


def test_an_outside_plugin_is_shown_exactly_like_the_built_ins(outside_runs):
    scenario, a, _, first, _ = outside_runs
    assert first.code == 1, first.err  # the reranker's gate fails, as it should
    report = json.loads((a / "report.json").read_text())
    crit = report["verdict_criteria"]
    # default verdicts: the outside metric joins the built-ins' default; the new kind has one
    assert crit["generator"] == {"criteria": ["faithfulness >= 0.5", "answer_relevancy >= 0.1",
                                              "concise >= 1"], "source": "default",
                                 "note": None}
    assert crit["reranker"]["criteria"] == ["top_relevant >= 1"]
    assert crit["reranker"]["source"] == "default"
    # ... and attribution: the poor reranker is a root cause like any component
    ranking = {r["component"]: r for r in report["bottleneck"]["ranking"]}
    assert ranking["reranker"]["failures"] > 0
    # declarations stored with the values
    rr = report["components"]["reranker"]
    assert rr["kind"] == "reranker"
    assert rr["metrics"]["moved"]["declaration"]["direction"] == "lower"
    assert rr["metrics"]["moved"]["declaration"]["unit"] == "positions"
    assert report["components"]["generator"]["metrics"]["concise"]["declaration"][
        "question"] == "Is the answer short enough for a chat window?"
    # gates
    gates = {g["name"]: g for g in report["gates"]}
    assert gates["reranker.top_relevant >= 0.9"]["passed"] is False
    assert gates["generator.concise >= 0.5"]["value"] is not None
    # report.html: a 0-1 metric on the bar chart, an unbounded one in the table with its unit
    # and direction
    page = (a / "report.html").read_text()
    charts = [c.split("</svg>", 1)[0] for c in page.split('<svg class="chart metrics"')[1:]]
    chart = next(c for c in charts if 'data-component="reranker"' in c)
    assert ">top_relevant<" in chart and "moved" not in chart
    assert "moved <span class=\"muted\">(positions)</span><span class=\"muted\" " \
           "title=\"lower is better\"> ↓</span>" in page
    gen_chart = next(c for c in charts if 'data-component="generator"' in c)
    assert ">concise<" in gen_chart and "at most 40 words" in gen_chart


def test_an_outside_metric_gets_review_questions_agreement_and_curation(outside_runs):
    _, a, _, _, _ = outside_runs
    review = Review.of(load_run(a))
    ran = [r for r in review.sampled() if r.verdicts.get("reranker") is not None
           and r.verdicts["reranker"].status in ("pass", "fail")
           and r.components["reranker"].status == "evaluated"]
    targets = {(t.component, t.metric): t for t in review.targets(ran[0].case.id)}
    assert targets["reranker", "top_relevant"].question == "Is the chunk on top relevant?"
    assert targets["generator", "concise"].question == \
        "Is the answer short enough for a chat window?"
    ids = [r.case.id for r in ran][:8]
    labels = [Label(case=c, component="reranker", metric="top_relevant",
                    label="yes" if review.result(c).verdicts["reranker"].status == "pass"
                    else "no", reviewer="ana") for c in ids]
    found = agreement(review, labels, what_if=False, resamples=200)
    [row] = [m for m in found["rows"] if (m["component"], m["metric"]) ==
             ("reranker", "top_relevant")]
    assert row["n"] == len(ids) >= 4 and row["threshold"] == "top_relevant >= 1"
    assert row["kappa"]["value"] == 1.0  # the labels agree with the verdicts, by construction
    # what a label makes gold, as declared: a correction of `concise` becomes the reference
    # answer; the reranker's metric declares no gold, so a label on it changes nothing
    from evalharness.review.curate import updates

    corrected = Label(case=ids[0], component="generator", metric="concise", label="no",
                      reviewer="ana", correction="Short answer.")
    assert updates(review, [corrected, labels[0]]) == {ids[0]: {"answer": "Short answer."}}


def test_compare_reads_the_declared_direction(outside_runs):
    _, a, b, _, second = outside_runs
    assert second.code in (0, 1), second.err
    # the direction is what is tested: each metric on its own (a handful of cases, where the
    # correction over the metrics would leave the moves unflagged)
    comparison = compare_runs(a, b, correction="none")
    rows = {(r.component, r.metric): r for r in comparison.metrics}
    moved = rows["reranker", "moved"]
    assert moved.direction == "lower" and moved.status == "improved"
    assert rows["reranker", "top_relevant"].status == "improved"


def test_plugins_lists_declarations_and_oracles(tmp_path):
    (tmp_path / "outside.py").write_text(PLUGIN)
    res = run_cli("plugins", "--json", "--plugin", tmp_path / "outside.py")
    assert res.code == 0, res.err
    outside = next(p for p in json.loads(res.out) if p["name"] == "outside")
    assert outside["oracles"] == ["reranker"] and outside["component_kinds"] == ["reranker"]
    declared = {d["name"]: d for e in outside["evaluators"] for d in e["declarations"]}
    assert declared["moved"]["direction"] == "lower"
    table = run_cli("plugins", "--plugin", tmp_path / "outside.py")
    assert "oracles: reranker" in table.out


# --- the declarations themselves --------------------------------------------------------------


def test_patterns_match_their_instances_only():
    recall = Metric("recall@{k}", verdict=">= 0.5")
    assert recall.match("recall@10") == {"k": "10"}
    assert recall.match("context_recall@10") is None and recall.match("recall") is None
    found = resolve([Metric("mrr"), recall], "recall@3")
    assert found.name == "recall@3" and found.pattern == "recall@{k}" and found.verdict
    assert resolve([recall], "ndcg@3") is None


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"verdict": "high"}, "not a criterion"),
    ({"range": (1, 0)}, "low is above high"),
    ({"scope": "run", "verdict": ">= 1"}, "run-level metric cannot decide"),
])
def test_a_bad_declaration_says_what_is_wrong(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Metric("x", **kwargs)


def test_case_filters():
    from evalharness import Case

    unanswerable = Case(id="u", question="?", gold={"refusal": True})
    assert matches(unanswerable, {"gold.refusal": True})
    assert not matches(Case(id="a", question="?"), {"gold.refusal": True})
    assert describe_cases({"gold.refusal": True}) == "gold.refusal: true"


def test_callables_get_only_the_arguments_they_name():
    assert call_with(lambda batch: len(batch), batch=[1, 2], settings=None) == 2
    assert call_with(lambda **kw: sorted(kw), batch=[], context=None) == ["batch", "context"]


def test_an_evaluator_with_a_pattern_needs_names():
    class Bad:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator("depth", "retriever", metrics=[Metric("depth@{k}")],
                               evaluate=lambda batch: []))

    with pytest.raises(PluginError, match="pattern 'depth@{k}' but no `names`"):
        load_plugins(modules=[Bad()], entry_points=False)


def test_an_evaluate_function_may_only_take_offered_arguments():
    class Bad:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator("x", "generator", metrics=["x"],
                               evaluate=lambda batch, colour: []))

    with pytest.raises(PluginError, match="takes an argument 'colour'"):
        load_plugins(modules=[Bad()], entry_points=False)


def test_hook_register_oracles():
    """Oracles are keyed by kind: one is found by kind, two for one kind name both plugins."""
    def perfect(case):
        return {"ids": []}

    class First:
        @hookimpl
        def register_oracles(self, register):
            register(Oracle("generator", perfect))

    class Second:
        @hookimpl
        def register_oracles(self, register):
            register(Oracle("generator", perfect))

    host = load_plugins(modules=[First()], entry_points=False)
    assert host.oracle_output("generator", "generator", None, None)[1] == {"ids": []}
    with pytest.raises(PluginError) as exc:
        load_plugins(modules=[First(), Second()], entry_points=False)
    assert "'First' and 'Second' both offer the oracle of component kind 'generator'" in \
        str(exc.value).replace("plugins ", "")


def test_two_plugins_offering_a_built_in_kinds_oracle_are_an_error():
    class Mine:
        @hookimpl
        def register_oracles(self, register):
            register(Oracle("router", lambda case: {"routes": []}))

    with pytest.raises(PluginError, match="'evalharness_router' and 'Mine' both offer"):
        load_plugins(modules=[Mine()])


def test_the_evaluate_hooks_of_0_1_still_work_and_warn(small):
    """A plugin written for evalharness 0.1 (an `evaluate_<kind>` hook, no `evaluate`) runs,
    with a deprecation warning that says what to do."""
    from test_hooks import run_with

    class Old:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator(name="says_coat", component="generator",
                               metrics=["says_coat"]))

        @hookimpl
        def evaluate_generator(self, evaluator, batch):
            return [{"says_coat": "coat" in (s.answer or "")} for _, s in batch]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, _, report = run_with([Old()], small, replace={
            "[answer_present]": "[answer_present, says_coat]"})
    assert report.components["generator"].metrics["says_coat"].n == 3
    messages = [str(w.message) for w in caught
                if issubclass(w.category, EvalHarnessDeprecationWarning)]
    assert any("evaluator 'says_coat' has no `evaluate`" in m and "Migrating from the evaluate "
               "hooks" in m for m in messages), messages


def test_docs_show_a_declaration_and_the_migration():
    hooks = (ROOT / "docs" / "hooks.md").read_text()
    guide = (ROOT / "docs" / "writing-a-plugin.md").read_text()
    assert "Metric(" in hooks and "Metric(" in guide
    assert "## Migrating from the evaluate hooks" in guide
    assert "declaration" in (ROOT / "docs" / "architecture.md").read_text()
    example = textwrap.dedent(guide.split("```python", 1)[1].split("```", 1)[0])
    assert "Metric(" in example and "evaluate=" in example


def _strings_outside_docstrings(path: Path) -> list[tuple[int, str]]:
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs]


def test_no_core_code_names_a_built_in_metric_or_plugin():
    """The core's code (docstrings aside) holds no built-in metric, evaluator or plugin name:
    what it knows about a metric comes from its declaration. The words a built-in metric
    shares with the core's own data contracts are allowed only as those."""
    from evalharness import models

    host = load_plugins()
    plugins = {p for p in host.plugins if p != "evalharness"}
    names: set[str] = set()
    for (_, name), registered in host.registry.evaluators.items():
        if registered.plugin == "evalharness":  # the core's own (`judged`): its to name
            continue
        names.add(name)
        for metric in [*registered.item.declared(), *registered.item.declared("run")]:
            names.add(metric.name.split("{")[0] if metric.is_pattern else metric.name)
    # Fields of the core's own models: a step's latency, a usage's tokens, a case's gold.
    contract = {f for model in (models.Step, models.Usage, models.Gold, models.Bottleneck)
                for f in model.model_fields} | {"total_tokens"}
    allowed = {
        ("html.py", "routing"), ("html.py", "macro_f1"), ("html.py", "micro_f1"),
        ("html.py", "abstention"),  # the "routing" section view and its data keys (registry)
        ("mapping.py", "map"),  # the trace mapping's `map:` modifier
        ("compare.py", "ranking"),  # report.json's bottleneck ranking
        ("fake_openai.py", "equivalent"),  # the SQL-equivalence judgment task's output field
    }
    hits = []
    for path in sorted((ROOT / "core" / "evalharness").rglob("*.py")):
        for line, text in _strings_outside_docstrings(path):
            for name in names | plugins:
                pattern = name.endswith("@") and text.startswith(name)
                if (text == name or pattern or (name in plugins and name in text)) and \
                        name not in contract and (path.name, name) not in allowed:
                    hits.append(f"{path.relative_to(ROOT)}:{line}: {text[:60]!r}")
    assert hits == []


def test_a_run_level_metric_cannot_declare_a_verdict():
    class Bad:
        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator("x", "router", metrics=[], evaluate=lambda batch: [],
                               run_metrics=[Metric("f1", verdict=">= 1")],
                               evaluate_run=lambda results: {}))

    with pytest.raises(PluginError, match="'x': run-level metric 'f1' declares a verdict"):
        load_plugins(modules=[Bad()], entry_points=False)


def test_an_evaluator_of_a_hookless_kind_needs_evaluate():
    from pydantic import BaseModel

    from evalharness import ComponentKind

    class Step(BaseModel):
        ids: list[str] = []

    class Bad:
        @hookimpl
        def register_component_kinds(self, register):
            register(ComponentKind("reranker", Step))

        @hookimpl
        def register_evaluators(self, register):
            register(Evaluator("moved", "reranker", metrics=["moved"]))

    with pytest.raises(PluginError, match="without `evaluate`, and component kind 'reranker' "
                                          "has no evaluator hook"):
        load_plugins(modules=[Bad()], entry_points=False)


def test_a_built_in_evaluator_runs_by_name_outside_a_run():
    from evalharness import Case, Text2SQLStep
    from evalharness_sql import evaluate_text2sql

    [row] = evaluate_text2sql("exact_match", [(Case(id="a", question="?", gold={
        "sql": "SELECT 1"}), Text2SQLStep(sql="select 1"))])  # no context: an empty one
    assert row["exact_match"].value == 1.0


def test_a_report_from_before_declarations_gets_them_from_the_installed_plugins(shop_sample):
    """report.json written by evalharness 0.1 has no declarations: readers (and a page rebuilt
    by `evalharness agreement`) take them from the installed plugins."""
    from evalharness.models import Report
    from evalharness.plugins import complete_declarations, declarations_of

    report = Report.model_validate_json((shop_sample / "report.json").read_text())
    for comp in report.components.values():
        for summary in comp.metrics.values():
            summary.declaration = None
    assert declarations_of(report)["generator", "latency_ms"].direction == "lower"
    assert declarations_of(report)["router", "route_accuracy"].question == \
        "Is the route right for this question?"
    complete_declarations(report)
    assert report.components["retriever"].metrics["ndcg@5"].declaration.pattern == "ndcg@{k}"
