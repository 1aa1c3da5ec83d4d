"""Reports sliced by case tag (``Report.slices``, docs/slices.md): hand-computed pass rates and
means, the synthetic / hand-written pair, the minimum size and the cap, escaping, determinism,
and the shop run through the CLI."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from conftest import write, write_jsonl
from evalharness import slices
from evalharness.html import render_html
from evalharness.models import (
    Case,
    CaseResult,
    ComponentResult,
    MetricValue,
    Report,
    Trace,
    Verdict,
)
from evalharness.report import render_markdown
from evalharness.slices import SliceTally

COMPONENTS = ["router", "generator"]
COLUMNS = [("router", "route_accuracy"), ("generator", "faithfulness")]


def result(i: int, tags: list[str], verdicts: dict[str, str], e2e: str | None,
           metrics: dict[str, dict[str, float | None]]) -> CaseResult:
    """A case result with the given verdicts and metric values (``None``: an error)."""
    components = {
        c: ComponentResult(status="evaluated", metrics={
            m: MetricValue.of(v) if v is not None else MetricValue.failed("no value")
            for m, v in ms.items()})
        for c, ms in metrics.items()}
    return CaseResult(case=Case(id=f"c{i}", question="q", tags=tags),
                      trace=Trace(case_id=f"c{i}"), components=components,
                      verdicts={c: Verdict(status=s) for c, s in verdicts.items()},
                      end_to_end=Verdict(status=e2e) if e2e else None)


def sliced(results: list[CaseResult]):
    """The slices of ``results``, the way the report gathers them (values in case order, as
    its metric tallies keep them)."""
    tally = SliceTally(COMPONENTS, COMPONENTS, COLUMNS)
    values: dict[tuple[str, str], list[float]] = {col: [] for col in COLUMNS}
    for r in results:
        tally.add(r)
        for c, m in COLUMNS:
            v = r.components[c].metrics.get(m) if c in r.components else None
            if v is not None and v.error is None:
                values[(c, m)].append(v.value)
    return tally.summary(values)


# c1..c5 carry "a"; "b" is on c1, c4, c6; c3 and c5 are synthetic.
RESULTS = [
    result(1, ["a", "b"], {"router": "pass", "generator": "pass"}, "pass",
           {"router": {"route_accuracy": 1.0}, "generator": {"faithfulness": 0.9}}),
    result(2, ["a"], {"router": "fail", "generator": "fail"}, "fail",
           {"router": {"route_accuracy": 0.0}, "generator": {"faithfulness": 0.2}}),
    result(3, ["a", "synthetic"], {"router": "pass", "generator": "error"}, "error",
           {"router": {"route_accuracy": 1.0}, "generator": {"faithfulness": None}}),
    result(4, ["a", "b", "a"], {"router": "pass", "generator": "fail"}, "fail",
           {"router": {"route_accuracy": 1.0}, "generator": {"faithfulness": 0.5}}),
    result(5, ["a", "synthetic"], {"router": "not_applicable", "generator": "pass"}, "pass",
           {"generator": {"faithfulness": 1.0}}),
    result(6, ["b"], {"router": "pass", "generator": "pass"}, "pass",
           {"router": {"route_accuracy": 1.0}, "generator": {"faithfulness": 0.7}}),
]


def test_pass_rates_and_means_are_those_computed_by_hand():
    s = sliced(RESULTS)
    assert [x.name for x in s.tags] == ["a"]
    a = s.tags[0]
    assert a.cases == 5  # c4 lists "a" twice: counted once
    router = a.components["router"].verdicts
    assert (router.passed, router.failed, router.not_applicable, router.errors) == (3, 1, 1, 0)
    assert router.pass_rate == pytest.approx(3 / 4)
    generator = a.components["generator"].verdicts
    assert (generator.passed, generator.failed, generator.errors) == (2, 2, 1)
    assert generator.pass_rate == pytest.approx(0.5)
    e2e = a.end_to_end
    assert (e2e.passed, e2e.failed, e2e.errors, e2e.pass_rate) == (2, 2, 1, 0.5)
    accuracy = a.components["router"].metrics["route_accuracy"]
    assert (accuracy.mean, accuracy.n) == (pytest.approx(0.75), 4)  # c5 has no value
    faithfulness = a.components["generator"].metrics["faithfulness"]
    assert (faithfulness.mean, faithfulness.n) == (pytest.approx((0.9 + 0.2 + 0.5 + 1.0) / 4), 4)
    for stat, value in [(router.ci95, 0.75), (generator.ci95, 0.5), (e2e.ci95, 0.5),
                        (accuracy.ci95, 0.75), (faithfulness.ci95, 0.65)]:
        assert 0.0 <= stat[0] <= value <= stat[1] <= 1.0
    assert generator.ci95[0] < generator.ci95[1]
    assert s.small == {"b": 3, "synthetic": 2} and s.untagged == 0 and s.unlisted == 0


def test_constant_values_have_a_point_interval_and_single_values_none():
    results = [result(i, ["t"], {"router": "pass", "generator": "pass"}, "pass",
                      {"router": {"route_accuracy": 1.0},
                       "generator": {"faithfulness": 0.4 if i == 0 else None}})
               for i in range(5)]
    t = sliced(results).tags[0]
    assert t.components["router"].verdicts.ci95 == [1.0, 1.0]
    assert t.components["router"].metrics["route_accuracy"].ci95 == [1.0, 1.0]
    one = t.components["generator"].metrics["faithfulness"]
    assert (one.mean, one.n, one.ci95) == (0.4, 1, None)


def test_metrics_without_a_value_in_the_slice_are_left_out_and_no_nan_is_written():
    results = [result(i, ["blog"], {"router": "pass", "generator": "not_applicable"}, None,
                      {"router": {"route_accuracy": 1.0}, "generator": {"faithfulness": None}})
               for i in range(5)]
    s = sliced(results)
    blog = s.tags[0]
    assert blog.components["generator"].metrics == {}
    v = blog.components["generator"].verdicts
    assert (v.not_applicable, v.pass_rate, v.ci95) == (5, None, None)
    assert blog.end_to_end is None  # no case has an end-to-end verdict
    text = s.model_dump_json()
    assert "NaN" not in text and "Infinity" not in text


def test_the_synthetic_pair_is_there_only_when_both_sides_have_cases():
    s = sliced(RESULTS)
    hand, synthetic = s.origin
    assert (hand.name, hand.cases, synthetic.name, synthetic.cases) == (
        "hand-written", 4, "synthetic", 2)
    # hand-written: c1 c2 c4 c6; synthetic: c3 c5
    assert hand.components["router"].verdicts.pass_rate == pytest.approx(3 / 4)
    assert hand.components["generator"].metrics["faithfulness"].mean == pytest.approx(
        (0.9 + 0.2 + 0.5 + 0.7) / 4)
    assert synthetic.components["router"].verdicts.not_applicable == 1
    assert synthetic.components["generator"].metrics["faithfulness"].n == 1
    assert (synthetic.end_to_end.passed, synthetic.end_to_end.errors) == (1, 1)
    untagged_synthetic = [r for r in RESULTS if "synthetic" not in r.case.tags]
    assert sliced(untagged_synthetic).origin is None
    everything_synthetic = [r.model_copy(update={"case": r.case.model_copy(
        update={"tags": [*r.case.tags, "synthetic"]})}) for r in RESULTS]
    assert sliced(everything_synthetic).origin is None


def test_no_tag_no_slices():
    results = [r.model_copy(update={"case": r.case.model_copy(update={"tags": []})})
               for r in RESULTS]
    assert sliced(results) is None


def test_minimum_size_and_cap(monkeypatch):
    # tags: "a" 5 cases, "b" 3, "synthetic" 2, "c" 2, "d" 1 (ties by name)
    results = [*RESULTS, result(7, ["c", "d"], {}, None, {}), result(8, ["c"], {}, None, {}),
               result(9, [], {}, None, {})]
    s = sliced(results)
    assert s.min_cases == slices.MIN_CASES == 5 and s.max_tags == slices.MAX_TAGS == 50
    assert [x.name for x in s.tags] == ["a"]
    assert s.small == {"b": 3, "c": 2, "synthetic": 2, "d": 1}
    assert s.untagged == 1
    monkeypatch.setattr(slices, "MIN_CASES", 2)
    monkeypatch.setattr(slices, "MAX_TAGS", 2)
    s = sliced(results)
    assert [x.name for x in s.tags] == ["a", "b"]  # the most frequent
    assert s.beyond_cap == {"c": 2, "synthetic": 2} and s.small == {"d": 1}
    assert s.unlisted == 0 and (s.min_cases, s.max_tags) == (2, 2)
    monkeypatch.setattr(slices, "MAX_LISTED", 1)
    s = sliced(results)
    assert s.beyond_cap == {"c": 2} and s.small == {} and s.unlisted == 2


def test_weakest_slices_come_first_in_report_md():
    results = [result(i, ["good"] if i < 5 else ["bad"], {"router": "pass", "generator": "pass"},
                      "pass" if i < 5 or i == 9 else "fail", {}) for i in range(10)]
    tally = sliced(results)
    names = [x.name for x in slices.weakest_first(tally.tags)]
    assert names == ["bad", "good"]


# --------------------------------------------------------------------------------------------
# Through the report: a small recorded-traces scenario with tags
# --------------------------------------------------------------------------------------------

HOSTILE = "<script>alert(1)</script>"

TAGGED_CASES = [
    {"id": "d1", "question": "q1", "gold": {"routes": ["sql"]}, "tags": ["alpha", HOSTILE,
                                                                         "synthetic"]},
    {"id": "d2", "question": "q2", "gold": {"routes": ["sql"]}, "tags": ["alpha", HOSTILE]},
    {"id": "d3", "question": "q3", "gold": {"routes": ["blog"]},
     "tags": ["alpha", HOSTILE, "synthetic"]},
    {"id": "d4", "question": "q4", "tags": ["alpha", HOSTILE]},
    {"id": "d5", "question": "q5", "gold": {"routes": ["sql"]}, "tags": ["alpha", HOSTILE]},
    {"id": "d6", "question": "q6", "gold": {"routes": ["blog"]}, "tags": ["<b>beta</b>"]},
]

TAGGED_TRACES = [
    {"case_id": "d1", "router": {"routes": ["sql"]}, "generator": {"answer": "two words"}},
    {"case_id": "d2", "router": {"routes": ["blog"]}, "generator": {"answer": "one"}},
    {"case_id": "d3", "router": {"routes": ["blog"]}, "generator": {"answer": ""}},
    {"case_id": "d4", "router": {"routes": ["sql"]}, "generator": {"answer": "a b c"}},
    {"case_id": "d5", "router": {"routes": ["sql"]}, "generator": {"answer": "a b c d"}},
    {"case_id": "d6", "router": {"routes": ["sql"]}, "generator": {"answer": ""}},
]


@pytest.fixture
def tagged(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "cases.jsonl", TAGGED_CASES)
    write_jsonl(tmp_path / "traces.jsonl", TAGGED_TRACES)
    return write(tmp_path / "tagged.yaml", """
        name: tagged
        cases: cases.jsonl
        traces: traces.jsonl
        evaluators:
          router: [route_accuracy]
          generator: [answer_present]
        verdicts:
          router: route_accuracy >= 1
          generator: answer_present >= 1
          end_to_end: generator.answer_present >= 1
    """)


def run(scenario: Path, out: Path) -> Report:
    import evalharness

    return evalharness.run_scenario(scenario, out=out, headroom=False)


def test_a_tagged_run_reports_its_slices(tagged, tmp_path):
    report = run(tagged, tmp_path / "run")
    s = report.slices
    assert [x.name for x in s.tags] == [HOSTILE, "alpha"]  # 5 cases each; ties by name
    assert s.small == {"synthetic": 2, "<b>beta</b>": 1}
    alpha = s.tags[1]
    router = alpha.components["router"]
    # d1 pass, d2 fail (blog for sql), d3 pass, d4 error (no gold route), d5 pass
    assert (router.verdicts.passed, router.verdicts.failed, router.verdicts.errors) == (3, 1, 1)
    assert router.verdicts.pass_rate == pytest.approx(0.75)
    assert router.metrics["route_accuracy"].mean == pytest.approx(0.75)
    assert router.metrics["route_accuracy"].n == 4
    generator = alpha.components["generator"]
    assert generator.verdicts.pass_rate == pytest.approx(0.8)  # d3 answers nothing
    assert generator.metrics["answer_words"].mean == pytest.approx((2 + 1 + 0 + 3 + 4) / 5)
    assert alpha.end_to_end.pass_rate == pytest.approx(0.8)
    assert alpha.components["text2sql"].verdicts is None  # no evaluator, no verdict
    assert alpha.components["text2sql"].metrics == {}
    hand, synthetic = s.origin
    assert (hand.cases, synthetic.cases) == (4, 2)
    assert hand.components["router"].verdicts.pass_rate == pytest.approx(1 / 3)  # d2 d5 d6
    assert synthetic.components["generator"].metrics["answer_words"].mean == pytest.approx(1.0)
    saved = json.loads((tmp_path / "run" / "report.json").read_text(encoding="utf-8"))
    assert saved["slices"] == json.loads(s.model_dump_json())
    md = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "## Slices by tag" in md
    assert "| *hand-written* | 4 | 75% (25–100%) | 33% (" in md and "| *synthetic* | 2 |" in md


def test_tags_are_escaped_in_report_md_and_html(tagged, tmp_path):
    run(tagged, tmp_path / "run")
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    md = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert HOSTILE not in page and "<b>beta</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;b&gt;beta&lt;/b&gt;" in page
    assert 'id="slices"' in page and 'href="#slices"' in page
    assert HOSTILE not in md and "<b>beta" not in md
    assert "| &lt;script>alert(1)&lt;/script> | 5 |" in md


def test_the_same_run_reports_the_same_slices(tagged, tmp_path):
    first, second = run(tagged, tmp_path / "one"), run(tagged, tmp_path / "two")
    assert first.slices.model_dump_json() == second.slices.model_dump_json()
    assert render_markdown(first).split("## Slices")[1] == render_markdown(second).split(
        "## Slices")[1]
    a, b = sliced(RESULTS), sliced(RESULTS)
    assert a == b


def test_html_without_slices_has_no_slices_section(tagged, tmp_path):
    report = run(tagged, tmp_path / "run")
    bare = report.model_copy(update={"slices": None})
    page = render_html(bare, [])
    assert 'id="slices"' not in page and 'href="#slices"' not in page
    assert "## Slices" not in render_markdown(bare)


# --------------------------------------------------------------------------------------------
# The shop, through the CLI (the session's one run of it)
# --------------------------------------------------------------------------------------------


def test_the_shop_report_slices_by_its_tags(shop_cli_run):
    res, out = shop_cli_run
    assert res.code == 0, res
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    cases = [json.loads(line) for line in
             (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    counts = Counter(t for c in cases for t in set(c["case"]["tags"]))
    s = report["slices"]
    assert (s["min_cases"], s["max_tags"]) == (slices.MIN_CASES, slices.MAX_TAGS)
    expected = sorted((t for t, n in counts.items() if n >= s["min_cases"]),
                      key=lambda t: (-counts[t], t))
    assert [x["name"] for x in s["tags"]] == expected
    assert {"sql-only", "blog-only", "both"} <= set(expected)
    assert s["small"] == {t: n for t, n in counts.items() if n < s["min_cases"]}
    assert s["origin"] is None  # no shop case is tagged synthetic
    for x in s["tags"]:
        mine = [c for c in cases if x["name"] in c["case"]["tags"]]
        assert x["cases"] == len(mine)
        e2e = Counter(c["end_to_end"]["status"] for c in mine)
        assert (x["end_to_end"]["passed"], x["end_to_end"]["failed"]) == (e2e["pass"],
                                                                            e2e["fail"])
        assert list(x["components"]) == ["router", "text2sql", "retriever", "generator"]
    blog = next(x for x in s["tags"] if x["name"] == "blog-only")
    assert blog["components"]["text2sql"]["verdicts"]["not_applicable"] == blog["cases"]
    assert blog["components"]["text2sql"]["verdicts"]["pass_rate"] is None
    assert "NaN" not in (out / "report.json").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## Slices by tag" in md
    assert "| slice | cases | end to end | router | text2sql | retriever | generator |" in md
    table = md.split("## Slices by tag")[1].split("\n\n")[2].splitlines()[2:]
    assert [row.split(" | ")[0].lstrip("| ") for row in table] == [
        x.name for x in slices.weakest_first(Report.model_validate(report).slices.tags)]
    assert 'id="slices"' in (out / "report.html").read_text(encoding="utf-8")
