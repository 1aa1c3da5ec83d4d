"""Failure attribution along the gold path, the bottleneck ranking, and how it is reported."""

from __future__ import annotations

import json

import pytest
from test_verdicts import GOOD_GEN, criteria, judged, result

from conftest import SHOP, run_cli, write, write_jsonl
from evalharness.attribution import gold_path, summarise, upstream
from evalharness.models import Case, CaseResult, ComponentResult, Gold, Trace
from evalharness.pipeline import ComponentSpec, Pipeline
from evalharness.verdicts import ComponentCriteria, Criteria, apply

BAD_GEN = GOOD_GEN | {"correctness_f1": 0.1}


# --- the walk ---------------------------------------------------------------------------------


def test_a_misroute_blames_the_router_although_the_branch_never_ran():
    r = judged(result(["sql"], {"router": {"route_accuracy": 0}, "retriever": {"recall@5": 0},
                                "generator": BAD_GEN | {"faithfulness": 0.1}}))
    assert r.verdicts["text2sql"].status == "fail"  # did not run, and the gold route needs it
    assert r.verdicts["generator"].status == "fail"
    a = r.attribution
    assert (a.kind, a.root_causes, a.shares) == ("attributed", ["router"], {"router": 1.0})
    assert a.failing == ["router", "text2sql", "generator"]
    assert a.path == ["router", "text2sql", "generator"], "the retriever is off the gold path"
    assert a.reason.startswith("router fails first: router: route_accuracy = 0")


def test_two_failing_parallel_branches_share_the_blame():
    r = judged(result(["sql", "blog"], {
        "router": {"route_accuracy": 1}, "text2sql": {"execution_accuracy": 0},
        "retriever": {"recall@5": 0.2}, "generator": BAD_GEN | {"faithfulness": 0.0}}))
    a = r.attribution
    assert a.kind == "attributed"
    assert sorted(a.root_causes) == ["retriever", "text2sql"]
    assert a.shares == {"text2sql": 0.5, "retriever": 0.5}
    assert "generator" in a.failing and "generator" not in a.root_causes
    assert "parallel branches" in a.reason


def test_the_generator_is_blamed_when_everything_upstream_passes():
    r = judged(result(["blog"], {"router": {"route_accuracy": 1}, "retriever": {"recall@5": 1},
                                 "generator": BAD_GEN | {"faithfulness": 0.2}}))
    assert r.attribution.root_causes == ["generator"]


def test_every_component_passes_but_the_end_fails_is_unattributed():
    r = judged(result(["blog"], {"router": {"route_accuracy": 1}, "retriever": {"recall@5": 1},
                                 "generator": BAD_GEN}))
    assert r.end_to_end.status == "fail"
    a = r.attribution
    assert (a.kind, a.root_causes, a.shares, a.failing) == ("unattributed", [], {}, [])
    assert "interaction" in a.reason


def test_passing_end_to_end_despite_a_failing_component_is_masked():
    r = judged(result(["sql"], {"router": {"route_accuracy": 1},
                                "text2sql": {"execution_accuracy": 0}, "generator": GOOD_GEN}))
    a = r.attribution
    assert (a.kind, a.failing, a.root_causes) == ("masked", ["text2sql"], [])
    assert "text2sql fails" in a.reason


def test_a_failing_component_off_the_gold_path_does_not_mask():
    r = judged(result(["sql"], {"router": {"route_accuracy": 1},
                                "text2sql": {"execution_accuracy": 1},
                                "retriever": {"recall@5": 0}, "generator": GOOD_GEN}))
    assert r.verdicts["retriever"].status == "fail"  # it ran, so it is judged
    assert r.attribution.kind == "passed"


def test_an_error_upstream_of_every_failure_makes_the_cause_unknown():
    r = judged(result(["sql"], {"router": {"route_accuracy": "no gold routes"},
                                "text2sql": {"execution_accuracy": 0}, "generator": BAD_GEN}))
    a = r.attribution
    assert (a.kind, a.root_causes) == ("unknown", [])
    assert "router: route_accuracy: no gold routes" in a.reason


def test_an_error_in_a_parallel_branch_leaves_the_known_root_cause():
    r = judged(result(["sql", "blog"], {
        "router": {"route_accuracy": 1}, "text2sql": {"execution_accuracy": 0},
        "retriever": {"recall@5": "no relevance labels"}, "generator": BAD_GEN}))
    a = r.attribution
    assert (a.kind, a.root_causes) == ("attributed", ["text2sql"])
    assert "retriever: verdict unknown" in a.reason


def test_an_end_to_end_error_is_unknown():
    r = judged(result(["sql"], {"router": {"route_accuracy": 0},
                                "generator": GOOD_GEN | {"correctness_f1": "judge failed"}}))
    assert r.end_to_end.status == "error"
    assert r.attribution.kind == "unknown" and r.attribution.failing == ["router", "text2sql"]


def test_upstream_and_gold_path_of_a_pipeline_with_a_plugin_kind():
    p = Pipeline({
        "router": ComponentSpec(routes={"sql": ["text2sql"], "blog": ["retriever"]}),
        "text2sql": ComponentSpec(after=["router"]),
        "retriever": ComponentSpec(after=["router"]),
        "reranker": ComponentSpec(kind="reranker", after=["retriever"]),
        "generator": ComponentSpec(after=["text2sql", "reranker"]),
    })
    assert upstream(p)["reranker"] == {"router", "retriever"}
    assert upstream(p)["generator"] == {"router", "retriever", "reranker", "text2sql"}
    sql_only = CaseResult(case=Case(id="a", question="q", gold=Gold(routes=["sql"])),
                          trace=Trace(case_id="a"),
                          components={n: ComponentResult(status="not_run") for n in p.order})
    assert gold_path(p, sql_only) == ["router", "text2sql", "generator"]
    blog = sql_only.model_copy(update={"case": Case(id="a", question="q",
                                                    gold=Gold(routes=["blog"]))})
    assert gold_path(p, blog)[1:] == ["retriever", "reranker", "generator"]


# --- the bottleneck summary -------------------------------------------------------------------


def _run() -> list[CaseResult]:
    """Seven hand-built cases: two pass, one masked, five fail (see the test below)."""
    ok = {"router": {"route_accuracy": 1}}
    cases = [
        result(["sql"], ok | {"text2sql": {"execution_accuracy": 1}, "generator": GOOD_GEN}),
        result(["sql"], {"router": {"route_accuracy": 0}, "retriever": {"recall@5": 1},
                         "generator": BAD_GEN}),                                       # router
        result(["sql", "blog"], ok | {"text2sql": {"execution_accuracy": 0},
                                      "retriever": {"recall@5": 0.1},
                                      "generator": BAD_GEN}),                          # shared
        result(["blog"], ok | {"retriever": {"recall@5": 1}, "generator": BAD_GEN}),  # unattr.
        result(["sql"], ok | {"text2sql": {"execution_accuracy": 0},
                              "generator": GOOD_GEN}),                                 # masked
        result(["blog"], ok | {"retriever": {"recall@5": 0.0},
                               "generator": BAD_GEN | {"faithfulness": 0}}),          # retriever
        result(["sql"], ok | {"text2sql": {"execution_accuracy": 1},
                              "generator": BAD_GEN | {"answer_relevancy": 0}}),        # generator
    ]
    for i, r in enumerate(cases):
        r.case.id = r.trace.case_id = f"k{i}"
    return apply(None, cases, criteria())


def test_bottleneck_shares_by_hand():
    b = summarise(_run(), ["router", "text2sql", "retriever", "generator"])
    e2e = b.end_to_end
    assert (e2e.cases, e2e.passed, e2e.failed, e2e.errors) == (7, 2, 5, 0)
    assert e2e.pass_rate == pytest.approx(2 / 7)
    shares = {r.component: (r.share, r.failures) for r in b.ranking}
    assert shares == {"retriever": (pytest.approx(0.3), 1.5), "router": (0.2, 1.0),
                      "generator": (0.2, 1.0), "text2sql": (0.1, 0.5)}
    assert [r.component for r in b.ranking] == ["retriever", "router", "generator", "text2sql"]
    assert (b.unattributed, b.unattributed_share, b.masked, b.unknown) == (1, 0.2, 1, 0)
    assert b.masked_by == {"text2sql": 1}
    assert b.verdicts["text2sql"] == {"pass": 2, "fail": 3, "not_applicable": 2, "error": 0}
    assert b.verdicts["retriever"] == {"pass": 2, "fail": 2, "not_applicable": 3, "error": 0}
    # the lowest recall first, with the evaluator's reason
    assert [w.case for w in b.worst_cases["retriever"]] == ["k5", "k2"]
    assert b.worst_cases["retriever"][0].values == {"recall@5": 0.0}
    assert b.worst_cases["router"][0].reason == "route_accuracy = 0 (needs >= 1)"
    assert b.worst_cases["text2sql"][0].case == "k2"


def test_bottleneck_cis_come_from_a_seeded_bootstrap_over_the_failing_cases():
    first = summarise(_run(), ["router", "text2sql", "retriever", "generator"])
    again = summarise(_run(), ["router", "text2sql", "retriever", "generator"])
    assert first == again
    for row in first.ranking:
        low, high = row.ci95
        assert 0 <= low <= row.share <= high <= 1
    assert first.unattributed_ci95[0] <= 0.2 <= first.unattributed_ci95[1]


def test_no_end_to_end_verdicts_means_no_bottleneck():
    crit = criteria(e2e=None)
    crit = Criteria({**crit.components, "generator": ComponentCriteria([], "none")},
                    crit.end_to_end, "generator", crit.pipeline)
    results = apply(None, [result(["sql"], {"router": {"route_accuracy": 1}})], crit)
    assert summarise(results, ["router"]) is None


# --- through the CLI --------------------------------------------------------------------------

CASES = [
    {"id": "a1", "question": "q", "gold": {"routes": ["sql"], "sql": "SELECT name FROM items"}},
    {"id": "a2", "question": "q", "gold": {"routes": ["sql"], "sql": "SELECT name FROM items"}},
    {"id": "a3", "question": "q", "gold": {"routes": ["sql", "blog"], "relevant": {"d1": 1},
                                           "sql": "SELECT name FROM items"}},
    {"id": "a4", "question": "q", "gold": {"routes": ["blog"], "relevant": {"d1": 1}}},
    {"id": "a5", "question": "q", "gold": {"routes": ["sql"], "sql": "SELECT name FROM items"}},
    {"id": "a6", "question": "q", "gold": {"routes": ["blog"], "relevant": {"d1": 1}}},
    {"id": "a7", "question": "q", "gold": {"routes": ["sql"], "sql": "SELECT name FROM items"}},
]
RIGHT_SQL = {"sql": "select name from items"}
WRONG_SQL = {"sql": "SELECT price FROM items"}
TRACES = [
    {"case_id": "a1", "router": {"routes": ["sql"]}, "text2sql": RIGHT_SQL,
     "generator": {"answer": "The items are these."}},                              # pass
    {"case_id": "a2", "router": {"routes": ["blog"]}, "retriever": {"ids": ["d1", "d2"]},
     "generator": {"answer": "No idea"}},                                           # router
    {"case_id": "a3", "router": {"routes": ["sql", "blog"]}, "text2sql": WRONG_SQL,
     "retriever": {"ids": ["d8", "d9"]}, "generator": {"answer": "Two words"}},     # shared
    {"case_id": "a4", "router": {"routes": ["blog"]}, "retriever": {"ids": ["d1"]},
     "generator": {"answer": "Short"}},                                             # unattributed
    {"case_id": "a5", "router": {"routes": ["sql"]}, "text2sql": WRONG_SQL,
     "generator": {"answer": "All the prices are here."}},                          # masked
    {"case_id": "a6", "router": {"routes": ["blog"]}, "retriever": {"ids": ["d7"]},
     "generator": {"answer": ""}},                                                  # retriever
    {"case_id": "a7", "router": {"routes": ["sql"]}, "text2sql": RIGHT_SQL,
     "generator": {"answer": ""}},                                                  # generator
]


@pytest.fixture
def attributed(tmp_path):
    write_jsonl(tmp_path / "cases.jsonl", CASES)
    write_jsonl(tmp_path / "traces.jsonl", TRACES)
    return write(tmp_path / "bn.yaml", """
        name: bn
        cases: cases.jsonl
        traces: traces.jsonl
        evaluators:
          router: [route_accuracy]
          text2sql: [exact_match]
          retriever:
            - ranking: {k: [2]}
          generator: [answer_present]
        verdicts:
          end_to_end: generator.answer_words >= 3
        batch_size: 3
    """)


def test_report_bottleneck_of_a_small_scenario_by_hand(attributed, tmp_path):
    out = tmp_path / "out"
    res = run_cli("scenario", attributed, "--out", out)
    assert res.code == 0, res
    report = json.loads((out / "report.json").read_text())
    b = report["bottleneck"]
    assert b["end_to_end"] | {"ci95": None} == {"cases": 7, "passed": 2, "failed": 5, "errors": 0,
                                                "pass_rate": pytest.approx(2 / 7), "ci95": None}
    assert [(r["component"], r["share"], r["failures"]) for r in b["ranking"]] == [
        ("retriever", pytest.approx(0.3), 1.5), ("router", 0.2, 1.0), ("generator", 0.2, 1.0),
        ("text2sql", 0.1, 0.5)]
    assert all(len(r["ci95"]) == 2 for r in b["ranking"])
    assert (b["unattributed"], b["masked"], b["unknown"]) == (1, 1, 0)
    assert b["masked_by"] == {"text2sql": 1}
    assert report["verdict_criteria"]["end_to_end"] == {
        "criteria": ["generator.answer_words >= 3"], "source": "scenario",
        "note": "cases without a reference answer (gold.answer) whose criterion cannot be "
                "computed: the verdict of generator"}
    lines = {json.loads(x)["case"]["id"]: json.loads(x)
             for x in (out / "results.jsonl").read_text().splitlines()}
    assert lines["a2"]["attribution"]["root_causes"] == ["router"]
    assert lines["a2"]["verdicts"]["retriever"]["status"] == "error"  # ran, but no labels
    assert lines["a3"]["attribution"]["shares"] == {"text2sql": 0.5, "retriever": 0.5}
    assert lines["a4"]["attribution"]["kind"] == "unattributed"
    assert lines["a5"]["attribution"]["kind"] == "masked"
    # the terminal table, under the metrics table
    assert res.out.index("bottleneck — 5 of 7 cases fail end to end") > res.out.index(
        "route_accuracy")
    assert "30% of failed cases start at retriever" in res.out
    assert "unattributed (interaction)" in res.out
    md = (out / "report.md").read_text()
    assert "## Bottleneck" in md and "**30% of failed cases start at retriever (CI " in md
    assert "| retriever | 30% |" in md and "| text2sql | 10% |" in md
    assert "| *unattributed (interaction)* | 20% |" in md
    assert "- `a2`: route_accuracy = 0 (needs >= 1) — predicted ['blog'], gold ['sql']" in md


def test_resume_gives_the_same_bottleneck(attributed, tmp_path):
    full = tmp_path / "full"
    assert run_cli("scenario", attributed, "--out", full, "--quiet").code == 0
    part = tmp_path / "part"
    assert run_cli("scenario", attributed, "--out", part, "--quiet").code == 0
    results = part / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:3]) + lines[3][:40])  # three cases and a torn line
    (part / "report.json").unlink()
    assert run_cli("scenario", attributed, "--out", part, "--resume", "--quiet").code == 0
    a, b = (json.loads((d / "report.json").read_text()) for d in (full, part))
    for report in (a, b):
        report.pop("run")
        report["scenario"].pop("path", None)
    assert a["bottleneck"] is not None and a == b


def test_results_without_verdicts_are_judged_when_the_report_is_built(attributed, tmp_path):
    """A results.jsonl written before verdicts existed still gets a bottleneck."""
    out = tmp_path / "o"
    assert run_cli("scenario", attributed, "--out", out, "--quiet").code == 0
    expected = json.loads((out / "report.json").read_text())["bottleneck"]
    results = out / "results.jsonl"
    old = []
    for line in results.read_text().splitlines():
        record = json.loads(line)
        for key in ("verdicts", "end_to_end", "attribution"):
            record.pop(key)
        old.append(json.dumps(record) + "\n")
    results.write_text("".join(old))
    (out / "report.json").unlink()
    assert run_cli("scenario", attributed, "--out", out, "--resume", "--quiet").code == 0
    assert json.loads((out / "report.json").read_text())["bottleneck"] == expected


def test_the_shop_run_shows_a_bottleneck_table(tmp_path):
    out = tmp_path / "shop"
    res = run_cli("scenario", SHOP, "--out", out)
    assert res.code == 0, res
    assert "bottleneck — " in res.out and "cases fail end to end" in res.out
    report = json.loads((out / "report.json").read_text())
    b = report["bottleneck"]
    ranked = [r["component"] for r in b["ranking"]]
    assert sorted(ranked) == ["generator", "retriever", "router", "text2sql"]
    for row in b["ranking"]:
        assert row["component"] in res.out
    assert 0 < b["end_to_end"]["passed"] < b["end_to_end"]["cases"], "not degenerate"
    assert sum(1 for r in b["ranking"] if r["failures"] > 0) >= 3
    assert b["ranking"][0]["share"] < 0.8
    total = sum(r["failures"] for r in b["ranking"]) + b["unattributed"] + b["unknown"]
    assert total == pytest.approx(b["end_to_end"]["failed"])
    assert set(report["verdict_criteria"]) == {"router", "text2sql", "retriever", "generator",
                                               "end_to_end"}
    assert "## Bottleneck" in (out / "report.md").read_text()
