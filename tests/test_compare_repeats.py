"""`evalharness compare` on runs with repeats (``--repeat N``): each case's repeats reduced to
one value by the metric's reducer, the within-case noise, flaky cases; and the correction of
the many metrics tested at once (Benjamini–Hochberg q-values, ``--correction none``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import SHOP, run_cli
from evalharness.compare import Comparison, compare_runs, load_run, reduce_repeats
from evalharness.errors import InputError
from evalharness.models import SCHEMA_VERSION
from evalharness.stats import benjamini_hochberg, paired_permutation_p


def words(text: str) -> str:
    """The terminal output with its line breaks (the console wraps at 120) undone."""
    return " ".join(text.split())


# --------------------------------------------------------------------------------------------
# Run folders written by hand, for exact numbers
# --------------------------------------------------------------------------------------------

Values = dict[tuple[str, str], dict[str, "list[float | None] | float | None"]]


def write_run(folder: Path, values: Values, *, repeats: int | None = None,
              reducers: dict[tuple[str, str], str] | None = None,
              run_level: tuple[tuple[str, str], ...] = (), flaky: tuple[str, ...] = (),
              scenario: str = "hand") -> Path:
    """A run folder: ``values`` (component, metric) -> case id -> a value, or with
    ``repeats`` a list of one value per repeat (``None``: the metric failed in that repeat).
    The report holds what ``compare`` reads: the metrics' declarations (reducer, direction),
    their scope, and ``repeats`` (n, flaky)."""
    folder.mkdir(parents=True, exist_ok=True)
    cases = list(dict.fromkeys(c for per_case in values.values() for c in per_case))
    lines = []
    for repeat in range(1, (repeats or 1) + 1):
        for cid in cases:
            components: dict[str, dict] = {}
            for (component, metric), per_case in values.items():
                if cid not in per_case:
                    continue
                got = per_case[cid]
                value = got[repeat - 1] if repeats else got
                components.setdefault(component, {"status": "evaluated", "metrics": {}})[
                    "metrics"][metric] = {"value": value} if value is not None else {
                        "error": "failed"}
            line = {"schema_version": SCHEMA_VERSION, "case": {"id": cid, "question": "?"},
                    "trace": {"case_id": cid}, "components": components}
            if repeats:
                line["repeat"] = repeat
            lines.append(json.dumps(line))
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report: dict = {"schema_version": SCHEMA_VERSION,
                    "scenario": {"name": scenario, "sha256": "0" * 64},
                    "judge": {"backend": "heuristic"}, "components": {}}
    for component, metric in [*values, *run_level]:
        summary = {"declaration": {"direction": "higher",
                                   "reducer": (reducers or {}).get((component, metric),
                                                                   "mean")}}
        if (component, metric) in run_level:
            summary.update(scope="run", mean=0.5, n=1)
        report["components"].setdefault(component, {"kind": component, "metrics": {}})[
            "metrics"][metric] = summary
    if repeats:
        report["repeats"] = {"n": repeats, "cases": len(cases), "flaky": [
            {"case": c, "component": "end_to_end", "passed": 1, "failed": repeats - 1}
            for c in flaky]}
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    return folder


R, NDCG, LAT = "retriever", ("retriever", "ndcg@5"), ("retriever", "latency_ms")

A_VALUES: Values = {
    NDCG: {"c1": [1.0, 0.0, 1.0], "c2": [0.5, 0.5, 0.5], "c3": [0.2, None, 0.6],
           "c4": [None, None, None]},
    LAT: {"c1": [10.0, 30.0, 20.0], "c2": [5.0, 5.0, 50.0], "c3": [1.0, 2.0, 3.0],
          "c4": [4.0, None, 8.0]},
}
B_VALUES: Values = {
    NDCG: {"c1": [1.0, 1.0, 1.0], "c2": [0.0, 0.5, 1.0], "c3": [0.4, 0.4, 0.4],
           "c4": [0.9, 0.9, None]},
    LAT: {"c1": [10.0, 10.0, 10.0], "c2": [5.0, 5.0, 5.0], "c3": [3.0, 2.0, 1.0],
          "c4": [6.0, 6.0, 6.0]},
}


def test_repeats_are_reduced_to_hand_computed_values(tmp_path):
    run = load_run(write_run(tmp_path / "a", A_VALUES, repeats=3, reducers={LAT: "median"}))
    assert run.repeats == 3 and sorted(run.cases) == ["c1", "c2", "c3", "c4"]
    # the mean of the computed repeats (a failed repeat left out); None when none computed
    assert run.values[NDCG] == pytest.approx({"c1": 2 / 3, "c2": 0.5, "c3": 0.4, "c4": None})
    # latency_ms declares the median
    assert run.values[LAT] == {"c1": 20.0, "c2": 5.0, "c3": 2.0, "c4": 6.0}
    spread = run.spread[NDCG]
    assert [spread[c].n for c in ("c1", "c2", "c3", "c4")] == [3, 3, 2, 0]
    assert spread["c1"].var == pytest.approx(1 / 3) and spread["c2"].var == 0.0
    assert spread["c3"].var == pytest.approx(0.08) and spread["c4"].var is None
    # pooled within-case SD: sqrt of the mean variance over the cases with two values or more
    assert run.noise(*NDCG) == pytest.approx(math.sqrt((1 / 3 + 0 + 0.08) / 3))
    # equal repeats reduce to the value itself, not a rounded mean of it
    assert reduce_repeats([0.1, 0.1, 0.1])[0] == 0.1
    assert reduce_repeats([0.7, 0.1, 0.2])[0] == math.fsum([0.1, 0.2, 0.7]) / 3


def test_a_run_without_repeats_reads_as_before(tmp_path):
    run = load_run(write_run(tmp_path / "s", {NDCG: {"c1": 1.0, "c2": None}}))
    assert run.repeats is None and run.spread == {} and run.noise(*NDCG) is None
    assert run.values[NDCG] == {"c1": 1.0, "c2": None}


def test_a_repeated_key_is_an_error_naming_file_and_line(tmp_path):
    folder = write_run(tmp_path / "a", A_VALUES, repeats=3)
    results = folder / "results.jsonl"
    lines = results.read_text().splitlines()
    (folder / "results.jsonl").write_text("\n".join([*lines, lines[5]]) + "\n")
    # lines 1-4: repeat 1 of c1..c4, lines 5-8: repeat 2; line 6 is c2's repeat 2
    with pytest.raises(InputError, match=rf"{results}, line 13: case 'c2' repeat 2 appears "
                                         r"again \(first on line 6\)"):
        load_run(folder)
    # the same case id in another repeat is no error; a line without a repeat among lines
    # with one is
    single = json.loads(lines[0])
    del single["repeat"]
    results.write_text("\n".join([*lines[:2], json.dumps(single)]) + "\n")
    with pytest.raises(InputError, match=r"line 3: case 'c1' has no repeat, but line 1 has one"):
        load_run(folder)


def test_paired_test_runs_over_cases_and_the_noise_is_reported(tmp_path):
    a = write_run(tmp_path / "a", A_VALUES, repeats=3, reducers={LAT: "median"}, flaky=("c1",))
    b = write_run(tmp_path / "b", B_VALUES, repeats=3, reducers={LAT: "median"},
                  flaky=("c2", "c3"))
    cmp = compare_runs(a, b)
    ndcg = next(m for m in cmp.metrics if m.metric == "ndcg@5")
    # c4 has no computed repeat in A: three pairs of reduced values
    diffs = [1.0 - 2 / 3, 0.5 - 0.5, 0.4 - 0.4]
    assert ndcg.n_paired == 3 and ndcg.only_b == 1
    assert ndcg.delta == pytest.approx(sum(diffs) / 3)
    # the sign flips flip whole cases: the p of the three per-case differences
    assert ndcg.p_value == paired_permutation_p(diffs, seed=0) == 1.0
    assert ndcg.mean_a == pytest.approx((2 / 3 + 0.5 + 0.4) / 3)
    assert (ndcg.repeats_a, ndcg.repeats_b) == (3, 3)
    assert ndcg.noise_a == pytest.approx(math.sqrt((1 / 3 + 0 + 0.08) / 3))
    # B: c1 and c3 do not vary, c2 has var 0.25, c4 two equal values
    assert ndcg.noise_b == pytest.approx(math.sqrt(0.25 / 4))
    assert cmp.a.repeats == 3 and cmp.a.flaky == ["c1"] and cmp.b.flaky == ["c2", "c3"]
    assert not any("ran each case" in w for w in cmp.warnings)
    res = run_cli("compare", a, b)
    assert res.code == 0, res
    out = words(res.out)
    assert "(hand, 4 cases × 3 repeats, 1 flaky end to end," in out
    assert "× 3 repeats, 2 flaky end to end" in out
    assert "Repeat noise (within-case SD, A/B): retriever.ndcg@5 0.371/0.250, " \
        "retriever.latency_ms 14.000/0.500" in out


# --------------------------------------------------------------------------------------------
# The correction for many metrics
# --------------------------------------------------------------------------------------------

IDS = [f"c{i}" for i in range(6)]


def family_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Four tested metrics whose exact p-values are known, a run-level one and one without
    pairs. B − A per case: m1 1..6 (p = 2/64), m2 five +1 and a −1 (p = 14/64), m3 nothing
    (p = 1), m4 all +1 (p = 2/64)."""
    base = dict.fromkeys(IDS, 0.0)
    a = {(R, m): dict(base) for m in ("m1", "m2", "m3", "m4")}
    a[(R, "only_a")] = dict(base)
    b = {(R, "m1"): {c: float(i + 1) for i, c in enumerate(IDS)},
         (R, "m2"): {c: (-1.0 if i == 5 else 1.0) for i, c in enumerate(IDS)},
         (R, "m3"): dict(base), (R, "m4"): dict.fromkeys(IDS, 1.0),
         (R, "only_a"): dict.fromkeys(IDS, None)}
    return (write_run(tmp_path / "a", a, run_level=((R, "macro_f1"),)),
            write_run(tmp_path / "b", b, run_level=((R, "macro_f1"),)))


def test_bh_q_values_are_the_hand_computed_ones(tmp_path):
    a, b = family_runs(tmp_path)
    cmp = compare_runs(a, b)
    assert cmp.correction == "bh"
    rows = {m.metric: m for m in cmp.metrics}
    assert [rows[m].p_value for m in ("m1", "m2", "m3", "m4")] == [2 / 64, 14 / 64, 1.0, 2 / 64]
    # BH by hand: sorted p 2/64, 2/64, 14/64, 1 (m = 4) scaled by m / rank: 0.125, 0.0625,
    # 0.2917, 1; the running minimum from the largest: 0.0625, 0.0625, 0.2917, 1
    assert rows["m1"].q_value == rows["m4"].q_value == pytest.approx(0.0625)
    assert rows["m2"].q_value == pytest.approx(14 / 64 * 4 / 3)
    assert rows["m3"].q_value == 1.0
    assert benjamini_hochberg([2 / 64, 14 / 64, 1.0, 2 / 64])[0] == pytest.approx(
        [0.0625, 14 / 48, 1.0, 0.0625])
    # rows without a p-value are outside the family
    assert rows["macro_f1"].status == "run_level" and rows["macro_f1"].q_value is None
    assert rows["only_a"].status == "no_pairs" and rows["only_a"].q_value is None
    # p = 0.03 < 0.05 but q = 0.0625 > 0.05: not a change once corrected
    assert {rows[m].status for m in ("m1", "m2", "m3", "m4")} == {"not_significant"}
    assert not cmp.improvements
    assert compare_runs(a, b, alpha=0.07).improvements == ["retriever.m1", "retriever.m4"]


def test_correction_none_gives_the_uncorrected_statuses(tmp_path):
    a, b = family_runs(tmp_path)
    cmp = compare_runs(a, b, correction="none")
    assert cmp.correction == "none"
    rows = {m.metric: m for m in cmp.metrics}
    assert [rows[m].status for m in ("m1", "m2", "m3", "m4")] == [
        "improved", "not_significant", "not_significant", "improved"]
    assert cmp.improvements == ["retriever.m1", "retriever.m4"]
    assert rows["m1"].q_value == pytest.approx(0.0625)  # still shown
    with pytest.raises(InputError, match="correction 'holm'"):
        compare_runs(a, b, correction="holm")  # type: ignore[arg-type]
    res = run_cli("compare", a, b, "--correction", "none")
    assert res.code == 0, res
    assert "no correction" in res.out
    assert "2 improvements at α = 0.05, uncorrected" in words(res.out)
    res = run_cli("compare", a, b)
    assert "Benjamini–Hochberg over 4 tests" in res.out
    assert "0 improvements at q ≤ 0.05" in words(res.out)
    assert json.loads(run_cli("compare", a, b, "--json", "--correction", "none").out)[
        "correction"] == "none"


def test_two_runs_of_a_noisy_system_flag_less_often_once_corrected():
    """The same system twice, 40 metrics of pure noise each: uncorrected about 2 false
    changes per comparison, corrected by BH rarely any."""
    from evalharness.compare import compare_metric, correct

    rng = np.random.default_rng(5)
    false_none = false_bh = 0
    for _ in range(20):
        rows = [compare_metric("g", f"m{k}", dict(enumerate(rng.normal(0, 1, 30))),
                               dict(enumerate(rng.normal(0, 1, 30))), permutations=500)
                for k in range(40)]
        false_none += sum(r.status != "not_significant" for r in correct(rows, 0.05, "none"))
        false_bh += sum(r.status != "not_significant" for r in correct(rows, 0.05, "bh"))
    assert 20 <= false_none <= 70  # about 40 × 0.05 × 20 = 40
    assert false_bh <= 3


# --------------------------------------------------------------------------------------------
# A run with repeats against one without
# --------------------------------------------------------------------------------------------


def test_repeated_against_single_is_compared_with_a_warning(tmp_path):
    single = write_run(tmp_path / "s", {NDCG: {"c1": 1.0, "c2": 0.5, "c3": 0.0, "c4": 1.0}})
    repeated = write_run(tmp_path / "r", A_VALUES, repeats=3)
    cmp = compare_runs(single, repeated)
    ndcg = next(m for m in cmp.metrics if m.metric == "ndcg@5")
    assert ndcg.n_paired == 3 and ndcg.delta == pytest.approx((2 / 3 - 1 + 0 + 0.4) / 3)
    assert (ndcg.repeats_a, ndcg.repeats_b, ndcg.noise_a) == (None, 3, None)
    assert ndcg.noise_b == pytest.approx(math.sqrt((1 / 3 + 0.08) / 3))
    warning, = [w for w in cmp.warnings if "--repeat" in w]
    assert warning.startswith("run B ran each case 3 times (--repeat) and run A once")
    back = compare_runs(repeated, single)
    assert any(w.startswith("run A ran each case 3 times") for w in back.warnings)


@pytest.fixture(scope="module")
def shop_single_and_repeated(tmp_path_factory) -> tuple[Path, Path]:
    """The shop (deterministic) once, and with every case three times."""
    from evalharness.api import execute

    folder = tmp_path_factory.mktemp("shop-repeats")
    execute(SHOP, out=folder / "single", headroom=False)
    execute(SHOP, out=folder / "repeated", headroom=False, repeat=3)
    return folder / "single", folder / "repeated"


TIMING = {"latency_ms", "exec_time_ratio"}


def test_cli_the_shop_once_and_three_times_agree(shop_single_and_repeated, tmp_path):
    single, repeated = shop_single_and_repeated
    res = run_cli("compare", single, repeated, "--correction", "none", "--out",
                  tmp_path / "comparison.json")
    assert res.code == 0, res
    assert "run B ran each case 3 times (--repeat) and run A once" in words(res.out)
    assert "no correction" in res.out and "uncorrected" in res.out
    cmp = Comparison.model_validate_json((tmp_path / "comparison.json").read_text())
    assert cmp.correction == "none" and cmp.b.repeats == 3 and cmp.a.repeats is None
    assert cmp.cases.both == cmp.a.cases == cmp.b.cases
    report = json.loads((repeated / "report.json").read_text())
    tested = [m for m in cmp.metrics if m.status != "run_level"]
    assert len(tested) > 30
    for m in tested:
        # B's means are its report's: over the cases' reduced values
        assert m.mean_b == pytest.approx(report["components"][m.component]["metrics"]
                                         [m.metric]["mean"], rel=1e-12)
        assert m.repeats_b == 3 and m.repeats_a is None and m.noise_a is None
        if m.metric not in TIMING:
            # a deterministic system: each case's three equal values are its one value, so
            # no difference at all, not one of rounding
            assert (m.delta, m.p_value, m.status, m.noise_b) == (0, 1.0, "not_significant",
                                                                 0.0), m


# --- the report of the same runs ----------------------------------------------------------


def test_repeating_a_deterministic_system_changes_no_mean_and_no_interval(
        shop_single_and_repeated):
    """The shop is deterministic: its 3 repeats of a case agree, so a case's reduced value is
    its one value, and every interval — a metric's, the router's run-level F1s' and ECE's, the
    end-to-end pass rate's, a root cause's share, a slice's — resamples the same cases with the
    same draws as the single run."""
    import evalharness

    once, thrice = (evalharness.load_run(folder).report for folder in shop_single_and_repeated)
    assert thrice.repeats.end_to_end["flaky"] == 0 and thrice.cases["results"] == 153
    for name, comp in once.components.items():
        for metric, s in comp.metrics.items():
            if metric in ("latency_ms", "exec_time_ratio"):
                continue
            t = thrice.components[name].metrics[metric]
            assert t.mean == pytest.approx(s.mean), metric
            assert t.ci95 == pytest.approx(s.ci95), metric
            if s.scope == "run":  # the router's F1s and ECE: over results, cases resampled
                assert t.n == 3 * s.n, metric
                continue
            assert t.n == s.n, metric
            assert t.errors == 3 * s.errors and t.repeats.varying == 0, metric
    a, b = once.bottleneck, thrice.bottleneck
    assert b.end_to_end.pass_rate == pytest.approx(a.end_to_end.pass_rate)
    assert b.end_to_end.ci95 == pytest.approx(a.end_to_end.ci95)
    assert b.end_to_end.failed == 3 * a.end_to_end.failed
    assert [r.component for r in b.ranking] == [r.component for r in a.ranking]
    for x, y in zip(a.ranking, b.ranking, strict=True):
        assert y.share == pytest.approx(x.share) and y.ci95 == pytest.approx(x.ci95)
    assert once.slices.tags, "the shop's cases carry tags"
    for x, y in zip(once.slices.tags, thrice.slices.tags, strict=True):
        assert (x.name, x.cases) == (y.name, y.cases)
        assert y.end_to_end.passed == 3 * x.end_to_end.passed
        assert y.end_to_end.pass_rate == pytest.approx(x.end_to_end.pass_rate)
        assert y.end_to_end.ci95 == pytest.approx(x.end_to_end.ci95), x.name
