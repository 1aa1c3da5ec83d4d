"""The routing report section: when it appears, its numbers (hand-computed), its tables, and
the routing evaluator end to end in a small scenario."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from conftest import write_jsonl
from evalharness import Case, CaseResult, RouterStep, Trace
from evalharness.models import ComponentResult, EvaluatorRun
from evalharness.plugins import load_plugins
from evalharness.registry import ReportSection
from evalharness.report import build_report, render_markdown
from evalharness.runner import run
from evalharness.scenario import load_scenario
from evalharness_router import report_sections
from evalharness_router.section import ece_name, routing_section


def result(gold, routes, confidence=None, scores=None, id="c", component="router",
           status="evaluated") -> CaseResult:
    step = RouterStep(routes=routes, confidence=confidence, scores=scores)
    trace = (Trace(case_id=id, router=step) if component == "router"
             else Trace(case_id=id, steps={component: step.model_dump()}))
    return CaseResult(case=Case(id=id, question="q", gold={"routes": gold}), trace=trace,
                      components={component: ComponentResult(status=status)})


def report_with(evaluators: list[tuple[str, dict]], kind="router", name="router",
                brier_mean=None):
    """A stand-in for the aggregated report: what the hook reads of it."""
    metrics = {"brier": SimpleNamespace(mean=brier_mean)} if brier_mean is not None else {}
    component = SimpleNamespace(
        kind=kind, metrics=metrics,
        evaluators=[EvaluatorRun(name=n, plugin="evalharness_router", version="0.1.0",
                                 settings=s) for n, s in evaluators])
    return SimpleNamespace(components={name: component})


# the MULTI pairs of test_router_metrics, as case results, plus a case without gold labels
MULTI = [
    result(["sql"], ["sql"], 0.9, id="c1"),
    result(["sql"], ["sql", "blog"], 0.8, id="c2"),
    result(["sql", "blog"], ["blog"], 0.55, id="c3"),
    result(["blog"], [], 0.3, id="c4"),
    result(["blog"], ["sql"], 0.85, id="c5"),
    result(["faq"], ["blog"], None, id="c6"),
    result(None, ["sql"], 0.95, id="c7"),
    result(["sql"], ["sql"], 1.0, id="c8", status="not_run"),    # not evaluated: left out
]


def test_section_only_with_the_routing_evaluator():
    assert report_sections(report_with([("route_accuracy", {})]), MULTI) is None
    assert report_sections(report_with([("routing", {})], kind="retriever"), MULTI) is None
    assert report_sections(None, MULTI) is None
    (section,) = report_sections(report_with([("route_accuracy", {}), ("routing", {})]), MULTI)
    assert isinstance(section, ReportSection) and section.title == "Routing"
    json.dumps(section.data)     # JSON-able


def test_multi_route_section_numbers_by_hand():
    (section,) = report_sections(report_with([("routing", {"ece_bins": 10})],
                                             brier_mean=0.123), MULTI)
    d = section.data
    assert d["mode"] == "multi-route" and d["routes"] == ["blog", "faq", "sql"]
    assert d["cases"] == {"evaluated": 7, "with_gold": 6, "without_gold": 1}
    assert d["accuracy"] == pytest.approx(1 / 6)
    assert d["jaccard"] == pytest.approx((1 + 0.5 + 0.5 + 0 + 0 + 0) / 6)
    assert {k: d["per_route"]["blog"][k] for k in ("tp", "fp", "fn", "tn")} == \
        {"tp": 1, "fp": 2, "fn": 2, "tn": 1}
    assert {k: d["per_route"]["sql"][k] for k in ("tp", "fp", "fn", "tn")} == \
        {"tp": 2, "fp": 1, "fn": 1, "tn": 2}
    faq = d["per_route"]["faq"]
    assert faq["precision"] is None and faq["recall"] == 0.0 and faq["f1"] == 0.0
    assert d["macro_f1"] == pytest.approx(1 / 3)
    assert d["micro_f1"] == pytest.approx(6 / 13)
    assert d["micro_precision"] == pytest.approx(0.5)
    assert d["micro_recall"] == pytest.approx(3 / 7)
    assert d["confusion_matrix"]["of"] == "route set"
    assert d["confusion_matrix"]["labels"] == ["blog", "faq", "sql", "blog+sql", "(none)"]
    assert d["confusion_matrix"]["counts"][3] == [1, 0, 0, 0, 0]   # gold blog+sql → blog
    # abstention over every evaluated case (c4), with or without gold
    assert d["abstention"] == {"cases": 1, "of": 7, "rate": 1 / 7, "no_route": 1,
                               "fallback_only": 0, "fallback_routes": []}
    assert d["undefined"] == ["precision of `faq` is undefined: the router never chose it"]
    cal = d["calibration"]
    # cases with gold and a confidence: c1 .9 ✓, c2 .8 ✗, c3 .55 ✗, c4 .3 ✗, c5 .85 ✗
    assert cal["bins"] == 10 and cal["metric"] == "ece@10bins"
    assert cal["cases"] == 5 and cal["without_confidence"] == 1 and cal["brier"] == 0.123
    # bins: [.3) .3 ✗ gap .3; [.5) .55 ✗ .55; [.8) .8 ✗ .85 ✗ conf .825 gap .825; [.9) .9 ✓ .1
    assert cal["ece@10bins"] == pytest.approx((0.3 + 0.55 + 2 * 0.825 + 0.1) / 5)
    assert [(b["lower"], b["cases"]) for b in cal["reliability"]] == \
        [(0.3, 1), (0.5, 1), (0.8, 2), (0.9, 1)]


def test_multi_route_markdown():
    (section,) = report_sections(report_with([("routing", {})]), MULTI)
    md = section.markdown
    assert "6 of 7 evaluated cases have gold routes; 1 without `gold.routes` left out" in md
    assert "| `faq` | — | 0.000 | 0.000 | 1 | 0 |" in md
    assert "— = undefined, not 0: precision of `faq` is undefined: the router never chose it" in md
    assert "Macro-F1 **0.333**" in md and "micro-F1 **0.462**" in md
    # one 2×2 table per route
    assert "| `blog` | chosen | not chosen |\n|---|---:|---:|\n" \
           "| **gold** | 1 (TP) | 2 (FN) |\n| **not gold** | 2 (FP) | 1 (TN) |" in md
    assert "| `faq` | chosen | not chosen |" in md and "| `sql` | chosen | not chosen |" in md
    assert "the diagonal counts exact matches; `(none)` = no route):" in md
    assert "| gold \\ chosen | blog | faq | sql | blog+sql | (none) |" in md
    assert "| **blog+sql** | 1 | 0 | 0 | 0 | 0 |" in md
    assert "Abstention: 1 of 7 cases (0.143): no route 1." in md
    assert "`ece@10bins` = **0.520**" in md
    assert "| [0.80, 0.90) | 2 | 0.825 | 0.000 | 0.825 |" in md


SINGLE = [
    result(["a"], ["a"], 0.9, id="s1"),
    result(["a"], ["b"], 0.6, id="s2"),
    result(["a"], ["a"], 0.7, id="s3"),
    result(["b"], [], 0.2, id="s4"),
    result(["b"], ["b"], 1.0, id="s5"),
    result([], ["c"], 0.4, id="s6"),           # empty gold set: no route should be chosen
    result([], ["x"], id="s7", component="other_router"),   # another component: not counted
]


def test_single_route_confusion_matrix():
    section = routing_section("router", SINGLE, bins=5, fallback_routes=["c"])
    d = section.data
    assert d["mode"] == "single-route"
    assert d["confusion_matrix"] == {"of": "route", "rows": "gold", "columns": "predicted",
                                     "labels": ["a", "b", "c", "(none)"],
                                     "counts": [[2, 1, 0, 0], [0, 1, 0, 1], [0, 0, 0, 0],
                                                [0, 0, 1, 0]]}
    c = d["per_route"]["c"]
    assert (c["precision"], c["recall"], c["f1"]) == (0.0, None, 0.0)
    assert d["undefined"] == ["recall of `c` is undefined: no case has it in its gold set"]
    assert d["macro_f1"] == pytest.approx(1.3 / 3) and d["micro_f1"] == pytest.approx(0.6)
    # s4 chose nothing; s6 chose only the fallback route c
    assert d["abstention"]["cases"] == 2 and d["abstention"]["no_route"] == 1
    assert d["abstention"]["fallback_only"] == 1
    # 5 bins: [.8,1] .9 ✓ 1.0 ✓; [.6,.8) .6 ✗ .7 ✓; [.4,.6) .4 ✗; [.2,.4) .2 ✗
    cal = d["calibration"]
    assert cal["metric"] == ece_name(5) == "ece@5bins" and cal["bins"] == 5
    assert cal["ece@5bins"] == pytest.approx((2 * 0.05 + 2 * 0.15 + 0.4 + 0.2) / 6)
    md = section.markdown
    assert "Confusion matrix (rows = gold route, columns = chosen route" in md
    assert "| gold \\ chosen | a | b | c | (none) |" in md
    assert "| **a** | 2 | 1 | 0 | 0 |" in md and "| **(none)** | 0 | 0 | 1 | 0 |" in md
    assert "(TP)" not in md
    assert "only fallback routes (c) 1" in md
    assert "| [0.80, 1.00] | 2 | 0.950 | 1.000 | 0.050 |" in md


def test_section_for_a_router_component_with_another_name():
    (section,) = report_sections(report_with([("routing", {})], name="other_router"), SINGLE)
    assert section.title == "Routing (other_router)"
    assert section.data["cases"]["evaluated"] == 1 and section.data["routes"] == ["x"]


def test_section_without_confidences_or_gold():
    no_conf = [result(["a"], ["a"]), result(["b"], ["a"])]
    section = routing_section("router", no_conf)
    assert section.data["calibration"] is None
    assert "the router reports no confidence for any case with gold routes" in section.markdown
    unlabelled = routing_section("router", [result(None, ["a"], 0.5), result(None, [])])
    assert unlabelled.data["cases"] == {"evaluated": 2, "with_gold": 0, "without_gold": 2}
    assert unlabelled.data["macro_f1"] is None and unlabelled.data["accuracy"] is None
    assert unlabelled.data["abstention"]["cases"] == 1
    assert "0 of 2 evaluated cases have gold routes" in unlabelled.markdown
    empty = routing_section("router", [])
    assert empty.markdown == "No case has a router step that was evaluated."
    json.dumps(empty.data)


# -- end to end: the small scenario with the routing evaluator and gates on its metrics --------


def test_routing_in_a_scenario(small):
    traces = [json.loads(line) for line in (small.parent / "traces.jsonl").read_text().splitlines()]
    routers = [{"routes": ["sql"], "confidence": 0.9, "scores": {"sql": 0.9, "blog": 0.2}},
               {"routes": ["blog", "sql"], "confidence": 0.6},
               {"routes": [], "confidence": 0.3}]
    for trace, router in zip(traces, routers, strict=True):
        trace["router"] = router
    write_jsonl(small.parent / "traces.jsonl", traces)
    text = small.read_text().replace(
        "  router: [route_accuracy]",
        "  router:\n    - route_accuracy\n    - routing: {ece_bins: 5}")
    text += ("  - router.route_jaccard >= 0.3\n  - router.abstention <= 0.5\n"
             "  - router.brier <= 0.5\n")
    small.write_text(text)
    scenario = load_scenario(small, host=load_plugins())
    outcome = asyncio.run(run(scenario, small.parent / "out"))
    report = build_report(scenario, outcome)
    metrics = report.components["router"].metrics
    # c1 sql/sql: J 1; c2 gold blog, chose blog+sql: J .5; c3 gold sql+blog, chose none: J 0
    assert metrics["route_jaccard"].mean == pytest.approx(0.5)
    assert metrics["abstention"].mean == pytest.approx(1 / 3)
    # c1 scores over the pipeline's routes blog, sql: ((.9-1)^2 + .2^2) / 2 = .025;
    # c2 confidence .6, wrong: .36; c3 confidence .3, wrong: .09
    assert metrics["brier"].mean == pytest.approx((0.025 + 0.36 + 0.09) / 3)
    gates = {g.name: g.passed for g in report.gates}
    assert gates == {"router.route_accuracy >= 0.5": False,     # 1 of 3 exact matches
                     "router.route_jaccard >= 0.3": True, "router.abstention <= 0.5": True,
                     "router.brier <= 0.5": True}
    (section,) = [s for s in report.sections if s["plugin"] == "evalharness_router"]
    assert section["title"] == "Routing"
    data = section["data"]
    assert data["calibration"]["metric"] == "ece@5bins"
    assert data["calibration"]["brier"] == pytest.approx(metrics["brier"].mean)
    # bins of 5: [.8,1] .9 ✓; [.6,.8) .6 ✗; [.2,.4) .3 ✗
    assert data["calibration"]["ece@5bins"] == pytest.approx((0.1 + 0.6 + 0.3) / 3)
    assert data["per_route"]["blog"]["fp"] == 0 and data["per_route"]["sql"]["fp"] == 1
    md = render_markdown(report)
    assert "## Routing\n\n3 of 3 evaluated cases have gold routes." in md


def test_run_level_metrics_by_hand():
    """macro_f1, micro_f1 and ece@10bins as run-level metrics: the section's numbers (checked
    by hand above), with bootstrap intervals around them."""
    from evalharness_router.run import run_metrics
    from evalharness_router.settings import RoutingSettings

    out = run_metrics("router", MULTI, RoutingSettings(ece_bins=10))
    assert out["macro_f1"].value == pytest.approx(1 / 3)
    assert out["micro_f1"].value == pytest.approx(6 / 13)
    assert out["ece@10bins"].value == pytest.approx((0.3 + 0.55 + 2 * 0.825 + 0.1) / 5)
    assert out["macro_f1"].details["n"] == 6 and out["ece@10bins"].details["n"] == 5
    for name, value in out.items():
        lo, hi = value.details["ci95"]
        assert 0 <= lo <= value.value <= hi <= 1, name
    assert out == run_metrics("router", MULTI, RoutingSettings(ece_bins=10))  # seeded
    # without gold, or without confidences: errors with reasons, never 0
    none = run_metrics("router", [result(None, ["sql"], 0.9)], RoutingSettings())
    assert all(v.error and "no case has gold routes" in v.error for v in none.values())
    unsure = run_metrics("router", [result(["sql"], ["sql"]), result(["blog"], ["sql"])],
                         RoutingSettings())
    assert unsure["ece@10bins"].error.startswith("the router reports no confidence")
    assert unsure["micro_f1"].value == pytest.approx(2 / 4)  # TP 1, FP 1, FN 1


def test_run_level_bootstrap_of_sums_matches_recomputing_on_resamples():
    """The interval from resampled sums is the interval of the statistic recomputed on each
    resample of the cases (the same seeded resamples)."""
    import numpy as np

    from evalharness.stats import bootstrap_sums, percentile_ci, seed_for
    from evalharness_router.metrics import averages, route_counts
    from evalharness_router.run import run_metrics
    from evalharness_router.settings import RoutingSettings

    cases = MULTI[:6]
    pairs = [(frozenset(r.trace.router.routes), frozenset(r.case.gold.routes)) for r in cases]
    rng = np.random.default_rng(seed_for("run", "router", "routes"))
    idx = rng.integers(0, len(pairs), size=(2000, len(pairs)), dtype=np.int32)
    micro = []
    for row in idx:
        sample = [pairs[i] for i in row]
        f1 = averages(route_counts(sample, ["blog", "faq", "sql"]))["micro_f1"]
        micro.append(np.nan if f1 is None else f1)
    expected = percentile_ci(np.array(micro))
    got = run_metrics("router", cases, RoutingSettings())["micro_f1"].details["ci95"]
    assert got == pytest.approx(list(expected))
    assert bootstrap_sums(np.ones((3, 1)), seed=1, resamples=5).ravel().tolist() == [3.0] * 5


def test_run_level_metrics_are_gated_in_a_scenario(small, cli):
    text = small.read_text().replace("  router: [route_accuracy]",
                                     "  router: [route_accuracy, routing]")
    small.write_text(text + "  - router.macro_f1 >= 0.95\n  - router.ece@10bins <= 0.5\n")
    result = cli("scenario", small, "--out", small.parent / "out")
    assert result.code == 1, result
    report = json.loads((small.parent / "out" / "report.json").read_text())
    macro = report["components"]["router"]["metrics"]["macro_f1"]
    # sql: TP c1 c3, FP c2 -> F1 0.8; blog: TP c2 c3 -> F1 1; macro 0.9
    assert macro["scope"] == "run" and macro["n"] == 3 and macro["mean"] == pytest.approx(0.9)
    gates = {g["name"]: g["passed"] for g in report["gates"]}
    assert gates["router.macro_f1 >= 0.95"] is False
    # the small traces report no confidence: the ECE is an error, so its gate fails
    ece = report["components"]["router"]["metrics"]["ece@10bins"]
    assert ece["mean"] is None and ece["errors"] == 1 and gates["router.ece@10bins <= 0.5"] is False
    assert "macro_f1 (per run)" in result.out
