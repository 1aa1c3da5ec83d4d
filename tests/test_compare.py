"""`evalharness compare`: paired deltas, bootstrap CIs, permutation p-values, exit codes."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import CASES, SHOP, TRACES, run_cli, write, write_jsonl
from evalharness.compare import (
    Comparison,
    bottleneck_shift,
    compare_metric,
    compare_runs,
    direction_of,
    paired_differences,
)
from evalharness.errors import InputError
from evalharness.stats import paired_permutation_p

# --------------------------------------------------------------------------------------------
# The statistics
# --------------------------------------------------------------------------------------------


def brute_force_p(diffs: list[float]) -> float:
    """Every sign pattern, written out the slow way."""
    observed = abs(sum(diffs))
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(diffs)):
        total += 1
        hits += abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= observed - 1e-12
    return hits / total


@pytest.mark.parametrize("n", [1, 2, 5, 9, 12])
def test_exact_permutation_p_matches_brute_force(n):
    diffs = list(np.round(np.random.default_rng(n).normal(0.3, 1, n), 2))
    assert paired_permutation_p(diffs, seed=0) == pytest.approx(brute_force_p(diffs), abs=1e-12)


def test_monte_carlo_p_approaches_the_exact_p():
    diffs = [0.5, -0.2, 0.3, 0.1, 0.4, -0.1, 0.2, 0.6, -0.3, 0.2, 0.1, 0.05]
    exact = paired_permutation_p(diffs, seed=0)
    assert exact == pytest.approx(brute_force_p(diffs))
    mc = paired_permutation_p(diffs, seed=3, exact_max=0, permutations=40_000)
    assert abs(mc - exact) < 0.01
    # Seeded: the same differences and seed give the same p.
    assert paired_permutation_p(diffs, seed=3, exact_max=0, permutations=500) == \
        paired_permutation_p(diffs, seed=3, exact_max=0, permutations=500)


def test_monte_carlo_p_is_never_zero_and_identical_runs_give_one():
    assert paired_permutation_p([1.0] * 50, seed=1, permutations=999) == pytest.approx(1 / 1000)
    assert paired_permutation_p([0.0] * 50, seed=1) == 1.0
    assert paired_permutation_p([0.0] * 5, seed=1) == 1.0
    assert paired_permutation_p([], seed=1) is None


def test_p_values_are_uniform_enough_under_the_null():
    """Under no difference, p < 0.05 should happen about 5% of the time — not 0%, not 30%."""
    rng = np.random.default_rng(11)
    ps = [paired_permutation_p(rng.normal(0, 1, 30), seed=i, permutations=1000)
          for i in range(300)]
    rate = np.mean(np.asarray(ps) < 0.05)
    assert 0.01 <= rate <= 0.10, rate


def test_directions_come_from_the_declarations():
    """Which way is better is what the plugin declares: stored in report.json, else (a report
    from before declarations were stored) the installed plugin's evaluator of that name."""
    def way(kind, evaluator, metric):
        return direction_of([{"evaluator": evaluator, "metric": metric}], kind)

    assert [way("router", "route_accuracy", "route_accuracy"),
            way("retriever", "ranking", "ndcg@5"),
            way("generator", "faithfulness", "faithfulness")] == ["higher"] * 3
    lower = [("generator", "generation_cost", "latency_ms"),
             ("generator", "generation_cost", "total_tokens"),
             ("text2sql", "equivalence", "exec_time_ratio"), ("router", "routing", "brier"),
             ("router", "routing", "abstention"), ("router", "routing", "ece@10bins")]
    assert {way(*x) for x in lower} == {"lower"}
    assert way("generator", "answer_present", "answer_words") == "neutral"
    assert way("generator", "no_such_evaluator", "latency_ms") == "higher"
    stored = {"declaration": {"direction": "lower"}, "evaluator": "faithfulness",
              "metric": "faithfulness"}
    assert direction_of([stored], "generator") == "lower"  # the run's own word wins


# --------------------------------------------------------------------------------------------
# One metric, by hand
# --------------------------------------------------------------------------------------------


def test_paired_deltas_by_hand():
    a = {"c1": 1.0, "c2": 0.0, "c3": 0.5, "c4": None, "c5": 1.0}
    b = {"c1": 0.0, "c2": 0.0, "c3": 1.0, "c4": 1.0, "c6": 1.0}
    assert paired_differences(a, b) == (["c1", "c2", "c3"], [-1.0, 0.0, 0.5])
    m = compare_metric("router", "route_accuracy", a, b)
    assert m.n_paired == 3 and m.n_a == 4 and m.n_b == 5
    assert m.only_a == 1 and m.only_b == 2  # c5 | c4 (failed in A) and c6
    assert m.mean_a == pytest.approx(2.5 / 4) and m.mean_b == pytest.approx(3 / 5)
    assert m.delta == pytest.approx(-0.5 / 3)
    # Every sign pattern of (-1, 0.5) reaches |sum| >= 0.5: exact p = 1.
    assert m.p_value == 1.0 and m.p_method == "exact"
    assert m.status == "not_significant" and m.direction == "higher"
    lo, hi = m.ci95
    assert -1.0 <= lo <= m.delta <= hi <= 0.5


def test_significant_regression_is_flagged_and_a_null_difference_is_not():
    ids = [f"q{i:02d}" for i in range(30)]
    base = dict(zip(ids, np.random.default_rng(0).uniform(0.4, 0.9, 30), strict=True))
    worse = {c: v - 0.2 for c, v in base.items()}
    m = compare_metric("retriever", "ndcg@5", base, worse, gates=["retriever.ndcg@5 >= 0.7"])
    assert m.status == "regressed" and m.p_value < 0.05 and m.p_method == "monte_carlo"
    assert m.delta == pytest.approx(-0.2) and m.ci95 == pytest.approx([-0.2, -0.2])
    assert m.gates == ["retriever.ndcg@5 >= 0.7"]
    # The same change is an improvement for a lower-is-better metric.
    assert compare_metric("generator", "latency_ms", base, worse,
                          direction="lower").status == "improved"
    # ... and only "changed" for a metric without a better direction.
    assert compare_metric("generator", "answer_words", base, worse,
                          direction="neutral").status == "changed"
    # Differences that cancel out: delta 0, nothing flagged.
    wobble = {c: v + (0.1 if i % 2 else -0.1) for i, (c, v) in enumerate(base.items())}
    null = compare_metric("retriever", "ndcg@5", base, wobble)
    assert null.delta == pytest.approx(0, abs=1e-12) and null.p_value > 0.5
    assert null.status == "not_significant"
    # Identical values: p is exactly 1.
    same = compare_metric("retriever", "ndcg@5", base, dict(base))
    assert same.p_value == 1.0 and same.delta == 0 and same.ci95 == [0.0, 0.0]


def test_no_pairs_and_incomparable_metrics():
    m = compare_metric("generator", "faithfulness", {"a": 1.0}, {"b": 1.0})
    assert m.status == "no_pairs" and m.delta is None and m.p_value is None and m.ci95 is None
    ids = [str(i) for i in range(20)]
    m = compare_metric("generator", "faithfulness", dict.fromkeys(ids, 1.0),
                       dict.fromkeys(ids, 0.0), judged=True, comparable=False)
    assert m.status == "not_comparable" and m.p_value < 0.05


def test_bottleneck_shift():
    a = {"bottleneck": {"ranking": [{"component": "retriever", "share": 0.7, "ci95": None,
                                     "failures": 7}]}}
    b = {"bottleneck": {"ranking": [{"component": "retriever", "share": 0.4},
                                    {"component": "text2sql", "share": 0.35}]}}
    s = bottleneck_shift(a, b)
    assert s.available and s.moved is False and s.share_a == 0.7 and s.share_b == 0.4
    assert s.shares == {"retriever": [0.7, 0.4], "text2sql": [None, 0.35]}
    s = bottleneck_shift({"bottleneck": {"ranking": []}}, b)
    assert not s.available and "run A" in s.note
    assert "both runs" in bottleneck_shift({}, {}).note


# --------------------------------------------------------------------------------------------
# Real runs through the CLI
# --------------------------------------------------------------------------------------------

N = 20


def _medium(folder: Path, name: str, traces: list[dict], gate: str) -> Path:
    """The small scenario's three cases, repeated to N cases, with the given traces."""
    cases = [dict(CASES[i % 3], id=f"c{i:02d}") for i in range(N)]
    write_jsonl(folder / "cases.jsonl", cases)
    write_jsonl(folder / f"{name}.jsonl", traces)
    write(folder / "items.sql", """
        CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL);
        INSERT INTO items VALUES (1, 'Navy Coat', 40), (2, 'Camel Coat', 120);
    """)
    return write(folder / f"{name}.yaml", f"""
        name: medium
        cases: cases.jsonl
        traces: {name}.jsonl
        database: {{build: items.sql}}
        evaluators:
          router: [route_accuracy]
          retriever:
            - ranking: {{k: [1, 2]}}
          generator: [answer_present]
        gates:
          - {gate}
    """)


def _traces(worse: bool) -> list[dict]:
    out = []
    for i in range(N):
        trace = json.loads(json.dumps(TRACES[i % 3]))
        trace["case_id"] = f"c{i:02d}"
        gold = CASES[i % 3]["gold"]["routes"]
        trace["router"] = {"routes": list(gold)}
        if worse and i % 2 == 0:  # every other case routed wrongly
            trace["router"] = {"routes": ["blog"] if gold == ["sql"] else ["sql"]}
        out.append(trace)
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """A baseline run and a run of deliberately worse traces, both through the CLI."""
    folder = tmp_path_factory.mktemp("medium")
    good = _medium(folder, "good", _traces(False), "router.route_accuracy >= 0.5")
    bad = _medium(folder, "bad", _traces(True), "router.route_accuracy >= 0.5")
    a, b = folder / "run-a", folder / "run-b"
    for scenario, out in ((good, a), (bad, b)):
        res = run_cli("scenario", scenario, "--out", out, "--quiet")
        assert res.code == 0, res  # B still passes its gate (0.5 >= 0.5) ...
    return a, b


def test_cli_flags_the_regression_of_a_gated_metric(pair, tmp_path):
    a, b = pair
    res = run_cli("compare", a, b, "--out", tmp_path / "cmp" / "comparison.json")
    assert res.code == 1, res  # ... yet its gated metric regressed significantly
    assert "▼ regressed (gate)" in res.out
    assert "gated metric regressed: router.route_accuracy" in res.out
    assert "the scenario file changed between the runs" in res.out
    cmp = Comparison.model_validate_json((tmp_path / "cmp" / "comparison.json").read_text())
    route = next(m for m in cmp.metrics if m.metric == "route_accuracy")
    assert route.mean_a == 1.0 and route.mean_b == 0.5 and route.delta == -0.5
    assert route.n_paired == N and route.p_method == "monte_carlo"
    # 10 differences of -1 and 10 of 0: p is 2/1024 up to Monte Carlo error.
    assert route.p_value < 0.01
    assert route.gates == ["router.route_accuracy >= 0.5"]
    assert cmp.regressions == ["router.route_accuracy"]
    assert cmp.gated_regressions == ["router.route_accuracy"]
    others = [m for m in cmp.metrics if m.metric != "route_accuracy"]
    assert others and all(m.status == "not_significant" and m.p_value == 1.0 for m in others)
    assert cmp.cases.both == N and not cmp.cases.only_a and not cmp.cases.changed
    rankings = [json.loads((run / "report.json").read_text()).get("bottleneck") or {}
                for run in (a, b)]
    assert cmp.bottleneck.available == all(r.get("ranking") for r in rankings)


def test_cli_json_and_metric_filter(pair):
    a, b = pair
    res = run_cli("compare", a, b, "--json", "--metric", "retriever.*", "--alpha", "0.01")
    assert res.code == 0, res  # the gated metric was not compared
    cmp = Comparison.model_validate_json(res.out)
    assert [m.metric for m in cmp.metrics] == ["recall@1", "recall@2", "mrr"]
    assert cmp.alpha == 0.01 and not cmp.regressions
    assert "warning: the scenario file changed" in res.err
    res = run_cli("compare", a, b, "--metric", "retriever.ndcg@99")
    assert res.code == 2 and "matches no metric" in res.err and "retriever.mrr" in res.err


def test_a_run_compared_with_itself_changes_nothing(pair):
    a, _ = pair
    res = run_cli("compare", a, a, "--json")
    assert res.code == 0, res
    cmp = Comparison.model_validate_json(res.out)
    assert all(m.p_value == 1.0 and m.delta == 0 and m.status == "not_significant"
               for m in cmp.metrics)
    assert not cmp.warnings


def test_bad_input_exits_2(pair, tmp_path):
    a, _ = pair
    res = run_cli("compare", a, tmp_path / "nowhere")
    assert res.code == 2 and "nowhere: no such run folder" in res.err, res
    broken = tmp_path / "broken"
    shutil.copytree(a, broken)
    lines = (broken / "results.jsonl").read_text().splitlines(keepends=True)
    lines[1] = lines[1][:40] + "\n"
    (broken / "results.jsonl").write_text("".join(lines))
    res = run_cli("compare", a, broken)
    assert res.code == 2 and "results.jsonl, line 2: not valid JSON" in res.err, res
    lines[1] = json.dumps({"case": {"id": "x", "question": "?"}, "trace": {}}) + "\n"
    (broken / "results.jsonl").write_text("".join(lines))
    with pytest.raises(InputError, match=r"results.jsonl, line 2, field `trace.case_id`"):
        compare_runs(a, broken)
    lines[1] = lines[0]
    (broken / "results.jsonl").write_text("".join(lines))
    with pytest.raises(InputError, match=r"line 2: case 'c00' appears again \(first on line 1"):
        compare_runs(a, broken)
    (broken / "report.json").unlink()
    with pytest.raises(InputError, match="no report.json.*--resume"):
        compare_runs(broken, a)
    (broken / "results.jsonl").unlink()
    with pytest.raises(InputError, match="has no results.jsonl"):
        compare_runs(a, broken)
    with pytest.raises(InputError, match="is a file, not a run folder"):
        compare_runs(a, a / "report.md")


def test_judges_and_bottlenecks_from_the_reports(pair, tmp_path):
    a, b = pair
    copies = []
    for run, top, model in ((a, "retriever", "m1"), (b, "router", "m2")):
        copy = tmp_path / run.name
        shutil.copytree(run, copy)
        report = json.loads((copy / "report.json").read_text())
        report["bottleneck"] = {"ranking": [{"component": top, "share": 0.6, "ci95": None,
                                             "failures": 6}], "unattributed": 0, "masked": 0}
        report["verdict_criteria"] = {"router": {"criteria": [model]}}
        report["judge"]["model"] = model
        report["components"]["router"]["metrics"]["route_accuracy"]["judge"] = {"judgments": 1}
        (copy / "report.json").write_text(json.dumps(report))
        copies.append(copy)
    cmp = compare_runs(*copies)
    route = next(m for m in cmp.metrics if m.metric == "route_accuracy")
    assert route.judged and route.status == "not_comparable" and not cmp.gated_regressions
    assert any("the judges differ" in w and "router.route_accuracy" in w for w in cmp.warnings)
    assert "the verdict criteria differ" in " ".join(cmp.warnings)
    assert cmp.bottleneck.moved is True
    assert (cmp.bottleneck.top_a, cmp.bottleneck.top_b) == ("retriever", "router")
    res = run_cli("compare", *copies)
    assert res.code == 0, res
    assert "bottleneck: A retriever (0.60) → B router (0.60): moved" in res.out
    assert "judge differs" in res.out


# --------------------------------------------------------------------------------------------
# The shop: twice the same, and a fault variant
# --------------------------------------------------------------------------------------------

TIMING = {"latency_ms", "exec_time_ratio"}  # measured wall-clock times differ between runs


@pytest.fixture(scope="module")
def shop_runs(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("shop-compare")
    for name in ("a", "b"):
        res = run_cli("scenario", SHOP, "--out", folder / name, "--quiet")
        assert res.code == 0, res
    return folder / "a", folder / "b"


def test_shop_twice_shows_no_regression(shop_runs):
    a, b = shop_runs
    res = run_cli("compare", a, b, "--json")
    assert res.code == 0, res
    cmp = Comparison.model_validate_json(res.out)
    assert len(cmp.metrics) > 30 and cmp.cases.both == cmp.a.cases == cmp.b.cases
    report = json.loads((a / "report.json").read_text())
    for m in cmp.metrics:  # the means are the reports' means
        assert m.mean_a == pytest.approx(report["components"][m.component]["metrics"][m.metric]
                                         ["mean"], rel=1e-12)
    for m in cmp.metrics:
        if m.status == "run_level":  # macro_f1, micro_f1, ece@10bins: the same value twice
            assert m.delta == 0 and m.p_value is None, m
        elif m.metric not in TIMING:
            assert (m.delta, m.p_value, m.status) == (0, 1.0, "not_significant"), m
    assert not cmp.gated_regressions and set(cmp.regressions) <= {
        f"{m.component}.{m.metric}" for m in cmp.metrics if m.metric in TIMING}
    assert not cmp.warnings


def test_shop_fault_variant_regression_is_significant(shop_runs, tmp_path):
    """Recorded shop traces with the retriever's two best chunks pushed to the bottom."""
    a, _ = shop_runs
    traces = []
    for line in (a / "results.jsonl").read_text().splitlines():
        trace = json.loads(line)["trace"]
        step = trace.get("retriever")
        if step and step["ids"]:
            for key in ("ids", "texts"):  # scores stay: the ranks follow the new order
                if step.get(key) is not None:
                    step[key] = step[key][2:] + step[key][:2]
        traces.append(trace)
    write_jsonl(tmp_path / "fault.jsonl", traces)
    shop = SHOP.parent / "shop"
    text = SHOP.read_text().replace("name: shop", "name: shop-retriever-fault")
    text = text.replace("system: shop.assistant:answer", f"traces: {tmp_path / 'fault.jsonl'}")
    for rel in ("cases.jsonl", "catalog.sql", "blog_chunks.jsonl"):
        text = text.replace(f"shop/{rel}", str(shop / rel))
    fault = write(tmp_path / "fault.yaml", text)
    res = run_cli("scenario", fault, "--out", tmp_path / "fault", "--quiet")
    assert res.code == 1, res  # its own ndcg@5 gate fails
    res = run_cli("compare", a, tmp_path / "fault", "--out", tmp_path / "comparison.json")
    assert res.code == 1, res
    assert "different scenarios" in res.out and "retriever.ndcg@5" in res.out
    cmp = Comparison.model_validate_json((tmp_path / "comparison.json").read_text())
    ndcg = next(m for m in cmp.metrics if (m.component, m.metric) == ("retriever", "ndcg@5"))
    assert ndcg.status == "regressed" and ndcg.p_value < 0.05 and ndcg.ci95[1] < 0
    assert cmp.gated_regressions == ["retriever.ndcg@5"]
    router = next(m for m in cmp.metrics if m.metric == "route_accuracy")
    assert router.p_value == 1.0 and router.status == "not_significant"


def test_run_level_metrics_are_shown_never_tested_or_flagged(tmp_path):
    """A run-level metric (one value per run) has no per-case pairs: both values and B − A,
    status run_level, never a regression — even when it is gated and much worse."""
    outs = []
    for name, worse in (("good", False), ("bad", True)):
        folder = tmp_path / name
        scenario = _medium(folder, name, _traces(worse), "router.macro_f1 >= 0.1")
        scenario.write_text(scenario.read_text().replace(
            "router: [route_accuracy]", "router: [route_accuracy, routing]"))
        out = folder / "run"
        assert run_cli("scenario", scenario, "--out", out, "-q").code == 0
        outs.append(out)
    res = run_cli("compare", *outs, "--json", "--metric", "router.*")
    cmp = Comparison.model_validate_json(res.out)
    macro = next(m for m in cmp.metrics if m.metric == "macro_f1")
    assert macro.status == "run_level" and macro.p_value is None and macro.n_paired == 0
    assert macro.mean_a == 1.0 and macro.delta == pytest.approx(macro.mean_b - 1.0)
    assert macro.delta < -0.3
    assert macro.gates == ["router.macro_f1 >= 0.1"]
    assert "router.macro_f1" not in cmp.regressions
    table = run_cli("compare", *outs, "--metric", "router.macro_f1")
    assert "per run: not tested" in table.out
