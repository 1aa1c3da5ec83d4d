"""Per-case verdicts: criteria (written or default), every status, the end-to-end verdict, and
the validation of `verdicts:` through the CLI."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from evalharness.declarations import resolve, undeclared
from evalharness.models import Case, CaseResult, ComponentResult, Gold, MetricValue, Trace
from evalharness.pipeline import SHOP_PIPELINE, ComponentSpec, Pipeline
from evalharness.plugins import load_plugins
from evalharness.scenario import load_scenario, parse_criterion, parse_gate
from evalharness.verdicts import (
    ComponentCriteria,
    Criteria,
    apply,
    criteria_for,
    default_criteria,
)

SHOP = Pipeline({n: ComponentSpec(**c) for n, c in SHOP_PIPELINE.items()})


def criteria(e2e: str | None = "generator.correctness_f1 >= 0.5", **per_component: str
             ) -> Criteria:
    """Hand-written criteria on the shop pipeline (defaults of the brief unless given)."""
    written = {"router": "route_accuracy >= 1", "text2sql": "execution_accuracy >= 1",
               "retriever": "recall@5 >= 0.5",
               "generator": "faithfulness >= 0.5; answer_relevancy >= 0.1"} | per_component
    components = {
        name: ComponentCriteria([parse_criterion(t.strip(), name) for t in text.split(";")],
                                "scenario")
        for name, text in written.items()}
    end = ComponentCriteria([parse_gate(e2e)] if e2e else [], "scenario")
    return Criteria(components, end, "generator", SHOP)


def result(routes: list[str] | None, steps: dict[str, dict | None], *, answer: str | None = "ref",
           system_error: str | None = None) -> CaseResult:
    """A CaseResult by hand: ``steps[component]`` maps metric -> number, or -> a string (an
    error with that reason); a component left out did not run."""
    components = {}
    for name in SHOP.order:
        metrics = steps.get(name)
        if metrics is None:
            components[name] = ComponentResult(status="not_run",
                                               reason=f"the trace has no {name} step")
            continue
        components[name] = ComponentResult(status="evaluated", metrics={
            m: MetricValue.failed(v) if isinstance(v, str) else MetricValue.of(v)
            for m, v in metrics.items()})
    case = Case(id="c", question="q", gold=Gold(routes=routes, answer=answer))
    return CaseResult(case=case, trace=Trace(case_id="c", error=system_error),
                      components=components)


GOOD_GEN = {"faithfulness": 0.9, "answer_relevancy": 0.5, "correctness_f1": 0.8}


def judged(r: CaseResult, crit: Criteria | None = None) -> CaseResult:
    return apply(None, [r], crit or criteria())[0]


# --- component verdicts -----------------------------------------------------------------------


def test_pass_and_fail_from_the_criteria_with_values_and_reasons():
    r = judged(result(["sql"], {"router": {"route_accuracy": 1},
                                "text2sql": {"execution_accuracy": 0},
                                "generator": GOOD_GEN | {"answer_relevancy": 0.05}}))
    assert r.verdicts["router"].status == "pass"
    assert r.verdicts["router"].values == {"route_accuracy": 1.0}
    sql = r.verdicts["text2sql"]
    assert sql.status == "fail" and sql.failed == ["execution_accuracy"]
    assert sql.reason == "execution_accuracy = 0 (needs >= 1)"
    gen = r.verdicts["generator"]
    assert gen.status == "fail" and gen.failed == ["answer_relevancy"]
    assert gen.values == {"faithfulness": 0.9, "answer_relevancy": 0.05}
    assert "answer_relevancy = 0.05 (needs >= 0.1)" == gen.reason


def test_not_applicable_when_the_gold_route_does_not_need_the_component():
    r = judged(result(["sql"], {"router": {"route_accuracy": 1},
                                "text2sql": {"execution_accuracy": 1}, "generator": GOOD_GEN}))
    assert r.verdicts["retriever"].status == "not_applicable"
    assert "does not need it" in r.verdicts["retriever"].reason
    assert r.verdicts["retriever"].values == {"recall@5": None}
    assert r.attribution.path == ["router", "text2sql", "generator"]


def test_a_required_component_that_did_not_run_fails():
    r = judged(result(["sql", "blog"], {"router": {"route_accuracy": 0},
                                        "retriever": {"recall@5": 1}, "generator": GOOD_GEN}))
    assert r.verdicts["text2sql"].status == "fail"
    assert r.verdicts["text2sql"].reason == "did not run: the gold route needs it"


def test_a_component_not_behind_a_route_is_always_required():
    r = judged(result(["blog"], {"router": {"route_accuracy": 1}, "retriever": {"recall@5": 1}}))
    assert r.verdicts["generator"].status == "fail"
    assert "did not run" in r.verdicts["generator"].reason


def test_without_gold_routes_the_path_is_what_ran():
    r = judged(result(None, {"router": {"route_accuracy": "the case has no gold route set"},
                             "retriever": {"recall@5": 1}, "generator": GOOD_GEN}))
    assert r.verdicts["text2sql"].status == "not_applicable"
    assert r.attribution.path == ["router", "retriever", "generator"]


def test_a_metric_error_makes_the_verdict_an_error_with_the_reason_copied():
    r = judged(result(["blog"], {"router": {"route_accuracy": 1},
                                 "retriever": {"recall@5": "the case has no relevance labels"},
                                 "generator": GOOD_GEN}))
    v = r.verdicts["retriever"]
    assert v.status == "error"
    assert v.reason == "recall@5: the case has no relevance labels"
    assert v.values == {"recall@5": None}


def test_a_failing_criterion_wins_over_an_error_in_another():
    r = judged(result(["sql"], {"router": {"route_accuracy": 1},
                                "text2sql": {"execution_accuracy": 1},
                                "generator": {"faithfulness": 0.1,
                                              "answer_relevancy": "the judge failed"}}))
    assert r.verdicts["generator"].status == "fail"


def test_a_missing_metric_is_an_error():
    r = judged(result(["sql"], {"router": {}, "text2sql": {"execution_accuracy": 1},
                                "generator": GOOD_GEN}))
    assert r.verdicts["router"].status == "error"
    assert r.verdicts["router"].reason == "route_accuracy: not computed"


def test_an_invalid_step_is_an_error():
    r = result(["sql"], {"router": {"route_accuracy": 1}, "generator": GOOD_GEN})
    r.components["text2sql"] = ComponentResult(status="error", reason="invalid text2sql step")
    r = judged(r)
    assert r.verdicts["text2sql"].status == "error"
    assert r.verdicts["text2sql"].reason == "invalid text2sql step"


def test_a_system_failure_is_an_error_everywhere():
    r = judged(result(["sql"], {}, system_error="ValueError: boom"))
    assert {v.status for v in r.verdicts.values()} == {"error"}
    assert r.end_to_end.status == "error"
    assert "ValueError: boom" in r.end_to_end.reason
    assert r.attribution.kind == "unknown"


def test_a_component_without_criteria_gets_no_verdict():
    crit = criteria()
    crit.components["retriever"] = ComponentCriteria([], "none")
    r = judged(result(["blog"], {"router": {"route_accuracy": 1}, "retriever": {"recall@5": 0},
                                 "generator": GOOD_GEN}), crit)
    assert "retriever" not in r.verdicts
    assert r.attribution.kind == "passed"


def test_several_criteria_must_all_hold():
    crit = criteria(retriever="recall@5 >= 0.5; ndcg@5 >= 0.7")
    r = judged(result(["blog"], {"router": {"route_accuracy": 1},
                                 "retriever": {"recall@5": 1, "ndcg@5": 0.6},
                                 "generator": GOOD_GEN}), crit)
    assert r.verdicts["retriever"].status == "fail"
    assert r.verdicts["retriever"].failed == ["ndcg@5"]


# --- end to end -------------------------------------------------------------------------------


def test_end_to_end_compares_with_the_reference_answer():
    r = judged(result(["sql"], {"router": {"route_accuracy": 1},
                                "text2sql": {"execution_accuracy": 1},
                                "generator": GOOD_GEN | {"correctness_f1": 0.2}}))
    assert r.end_to_end.status == "fail"
    assert r.end_to_end.values == {"generator.correctness_f1": 0.2}
    assert r.end_to_end.reason == "generator.correctness_f1 = 0.2 (needs >= 0.5)"


def test_without_a_reference_answer_end_to_end_is_the_generators_verdict():
    steps = {"router": {"route_accuracy": 1}, "text2sql": {"execution_accuracy": 1},
             "generator": {"faithfulness": 0.2, "answer_relevancy": 0.5,
                           "correctness_f1": "the case has no reference answer"}}
    r = judged(result(["sql"], steps, answer=None))
    assert r.end_to_end.status == "fail"
    assert r.end_to_end.reason.startswith("no reference answer: generator's verdict: ")
    assert r.end_to_end.values["generator.faithfulness"] == 0.2
    # with a reference answer, the same error is an error
    r = judged(result(["sql"], steps, answer="ref"))
    assert r.end_to_end.status == "error"


def test_without_an_end_to_end_criterion_the_generators_verdict_is_used():
    r = judged(result(["sql"], {"router": {"route_accuracy": 1},
                                "text2sql": {"execution_accuracy": 1}, "generator": GOOD_GEN}),
               criteria(e2e=None))
    assert r.end_to_end.status == "pass"
    assert r.end_to_end.values == {"generator.faithfulness": 0.9,
                                   "generator.answer_relevancy": 0.5}


def test_no_criterion_at_all_means_no_end_to_end_verdict_and_no_attribution():
    crit = criteria(e2e=None)
    crit.components["generator"] = ComponentCriteria([], "none")
    r = judged(result(["sql"], {"router": {"route_accuracy": 1},
                                "text2sql": {"execution_accuracy": 1}, "generator": GOOD_GEN}),
               crit)
    assert r.end_to_end is None and r.attribution is None


def test_verdicts_survive_a_round_trip_through_results_jsonl():
    r = judged(result(["sql"], {"router": {"route_accuracy": 0},
                                "generator": GOOD_GEN | {"correctness_f1": 0.1}}))
    again = CaseResult.model_validate_json(r.model_dump_json())
    assert again == r and again.attribution.root_causes == ["router"]


# --- default criteria -------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "metrics", "expected"), [
    ("router", ["route_accuracy", "route_jaccard"], ["route_accuracy >= 1"]),
    ("router", ["route_jaccard"], []),
    ("text2sql", ["exact_match", "equivalent", "execution_accuracy"], ["equivalent >= 1"]),
    ("text2sql", ["exact_match", "execution_accuracy"], ["execution_accuracy >= 1"]),
    ("text2sql", ["exact_match"], ["exact_match >= 1"]),
    ("retriever", ["recall@3", "recall@10", "recall@5", "context_recall"], ["recall@10 >= 0.5"]),
    ("retriever", ["mrr", "context_recall"], ["context_recall >= 0.5"]),
    ("retriever", ["mrr"], []),
    ("generator", ["faithfulness", "answer_relevancy", "answer_present"],
     ["faithfulness >= 0.5", "answer_relevancy >= 0.1"]),
    ("generator", ["answer_present", "answer_words"], ["answer_present >= 1"]),
    ("generator", ["latency_ms"], []),
    ("reranker", ["recall@5"], []),
])
def test_default_criteria_per_kind(kind, metrics, expected):
    """The built-in plugins' declarations give each kind the defaults it always had (a kind
    whose metrics declare no verdict gets none)."""
    host = load_plugins()
    declared = [e.item.declared() for (k, _), e in host.registry.evaluators.items()
                if k == kind]
    found = [next(r for d in declared if (r := resolve(d, m)) is not None) if declared
             else undeclared(m) for m in metrics]
    assert default_criteria(found) == expected


def test_defaults_are_explicit_in_the_report(small, tmp_path):
    out = tmp_path / "o"
    assert run_cli("scenario", small, "--out", out, "--quiet").code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["verdict_criteria"] == {
        "router": {"criteria": ["route_accuracy >= 1"], "source": "default", "note": None},
        "text2sql": {"criteria": ["exact_match >= 1"], "source": "default", "note": None},
        "retriever": {"criteria": ["recall@2 >= 0.5"], "source": "default", "note": None},
        "generator": {"criteria": ["answer_present >= 1"], "source": "default", "note": None},
        "end_to_end": {"criteria": [], "source": "default",
                       "note": "the verdict of generator for every case"},
    }
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    by_id = {line["case"]["id"]: line for line in lines}
    assert by_id["c1"]["verdicts"]["retriever"]["status"] == "not_applicable"
    assert by_id["c2"]["verdicts"]["router"]["status"] == "fail"
    assert by_id["c2"]["end_to_end"]["status"] == "fail"


def test_default_end_to_end_is_answer_correctness_when_configured(small):
    small.write_text(small.read_text().replace(
        "generator: [answer_present]", "generator: [answer_present, answer_correctness]"))
    crit = criteria_for(load_scenario(small)).report()
    assert crit["end_to_end"].criteria == ["generator.correctness_f1 >= 0.5"]
    assert crit["end_to_end"].source == "default"
    assert "without a reference answer" in crit["end_to_end"].note


def test_an_empty_end_to_end_list_means_no_end_to_end_verdict(small, tmp_path):
    small.write_text(small.read_text() + "verdicts:\n  end_to_end: []\n")
    loaded = load_scenario(small)
    crit = criteria_for(loaded)
    assert crit.report()["end_to_end"].source == "none"
    out = tmp_path / "o"
    assert run_cli("scenario", small, "--out", out, "--quiet").code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["bottleneck"] is None
    line = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert line["end_to_end"] is None and line["attribution"] is None
    assert line["verdicts"]["router"]["status"] == "pass"


def test_written_criteria_override_defaults_and_an_empty_list_opts_out(small):
    small.write_text(small.read_text() + (
        "verdicts:\n"
        "  retriever: [recall@1 >= 0.9, mrr >= 0.5]\n"
        "  text2sql: []\n"
        "  end_to_end: router.route_accuracy >= 1\n"))
    crit = criteria_for(load_scenario(small)).report()
    assert crit["retriever"].criteria == ["recall@1 >= 0.9", "mrr >= 0.5"]
    assert crit["retriever"].source == "scenario"
    assert crit["text2sql"].criteria == [] and crit["text2sql"].source == "none"
    assert crit["router"].source == "default"
    assert crit["end_to_end"].criteria == ["router.route_accuracy >= 1"]


# --- unanswerable cases (gold.refusal: true) --------------------------------------------------


def with_refusal_case(small, generator: str = "[answer_present, answer_correctness]",
                      verdicts: str = ""):
    """The small scenario plus u1, an unanswerable case; the generator's evaluators and a
    `verdicts:` block as given."""
    cases = [json.loads(x) for x in (small.parent / "cases.jsonl").read_text().splitlines()]
    cases.append({"id": "u1", "question": "gift cards?",
                  "gold": {"routes": [], "relevant": {}, "refusal": True}})
    (small.parent / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    small.write_text(small.read_text().replace("generator: [answer_present]",
                                               f"generator: {generator}") + verdicts)
    return load_scenario(small)


def gen_result(refusal: bool | None, generator: dict, answer: str | None = "ref"
               ) -> CaseResult:
    """A case that the router sent nowhere, with the generator's metric values."""
    r = result([] if refusal else ["sql"], {"router": {"route_accuracy": 1},
                                            "text2sql": None if refusal else {"exact_match": 1},
                                            "generator": generator}, answer=answer)
    r.case.gold.refusal = refusal
    return r


def test_refusal_cases_get_the_refusal_default_beside_normal_cases(small):
    crit = criteria_for(with_refusal_case(small))
    report = crit.report()
    assert report["generator"].criteria == ["answer_present >= 1"]
    assert report["generator"].note.startswith("cases with gold.refusal: true: `refusal >= 1` "
                                               "instead; the `refusal` evaluator was added "
                                               "automatically: 1 of the scenario's cases")
    values = {"answer_present": 1, "correctness_f1": 0.9, "refusal": 0}
    normal, unanswerable = apply(None, [gen_result(None, values), gen_result(True, values)],
                                 crit)
    assert normal.verdicts["generator"].status == "pass"
    assert normal.verdicts["generator"].values == {"answer_present": 1.0}
    assert normal.end_to_end.status == "pass"
    assert normal.end_to_end.values == {"generator.correctness_f1": 0.9}
    assert unanswerable.verdicts["generator"].status == "fail"
    assert unanswerable.verdicts["generator"].reason == "refusal = 0 (needs >= 1)"
    assert unanswerable.end_to_end.status == "fail"
    assert unanswerable.end_to_end.values == {"generator.refusal": 0.0}
    assert unanswerable.attribution.root_causes == ["generator"]
    declined = apply(None, [gen_result(True, values | {"refusal": 1, "correctness_f1": 0})],
                     crit)[0]
    assert (declined.verdicts["generator"].status, declined.end_to_end.status) == ("pass",
                                                                                   "pass")
    assert declined.attribution.kind == "passed"
    assert ("generator", "refusal") in crit.needed()  # the oracle reruns evaluate it too


def test_written_verdicts_win_over_the_refusal_default(small):
    crit = criteria_for(with_refusal_case(small, verdicts=(
        "verdicts:\n  generator: answer_present >= 1\n"
        "  end_to_end: generator.answer_words >= 3\n")))
    report = crit.report()
    assert report["generator"].source == "scenario"
    assert "cases with gold.refusal: true too (a `verdicts:` entry wins over their default " \
           "`refusal >= 1`)" in report["generator"].note
    assert "wins over their default `generator.refusal >= 1`" in report["end_to_end"].note
    r = apply(None, [gen_result(True, {"answer_present": 1, "answer_words": 5, "refusal": 0,
                                       "correctness_f1": 0})], crit)[0]
    assert r.verdicts["generator"].status == "pass"
    assert r.verdicts["generator"].values == {"answer_present": 1.0}
    assert r.end_to_end.status == "pass"
    assert r.end_to_end.values == {"generator.answer_words": 5.0}


def test_a_generator_without_a_usual_default_is_judged_on_refusal_cases_only(small):
    crit = criteria_for(with_refusal_case(small, generator="[generation_cost]"))
    report = crit.report()
    assert report["generator"].criteria == ["refusal >= 1"]
    assert report["generator"].source == "default"
    assert "the other cases get no verdict" in report["generator"].note
    assert report["end_to_end"].criteria == []
    assert report["end_to_end"].note.startswith(
        "cases with gold.refusal: true: `generator.refusal >= 1`; the other cases get none")
    assert "generator" in crit.judged()
    normal, unanswerable = apply(None, [
        gen_result(None, {"latency_ms": 1, "refusal": 1}),
        gen_result(True, {"latency_ms": 1, "refusal": 1})], crit)
    assert "generator" not in normal.verdicts and normal.end_to_end is None
    assert unanswerable.verdicts["generator"].status == "pass"
    assert unanswerable.end_to_end.status == "pass"


def test_without_refusal_cases_nothing_changes(small):
    before = criteria_for(load_scenario(small)).report()
    assert all(c.note is None or "refusal" not in c.note for c in before.values())
    assert all(e.name != "refusal" for e in load_scenario(small).evaluators)


# --- validation through the CLI ---------------------------------------------------------------


@pytest.mark.parametrize(("block", "needles"), [
    ('verdicts:\n  retriever: "recall@2 is high"\n',
     ["line 14", "field `verdicts.retriever`", "not a criterion", "`metric OP number`"]),
    ("verdicts:\n  retriever: [recall@1 >= 0.5, recall@5 >= 0.5]\n",
     ["line 14", "field `verdicts.retriever[1]`", "component 'retriever' has no metric "
      "'recall@5'", "its evaluators produce: recall@1, recall@2, mrr", "Did you mean"]),
    ("verdicts:\n  reranker: recall@1 >= 0.5\n",
     ["line 14", "field `verdicts.reranker`", "not a component of the pipeline", "end_to_end"]),
    ("verdicts:\n  end_to_end: answer_present >= 1\n",
     ["line 14", "field `verdicts.end_to_end`", "not an end-to-end criterion",
      "`component.metric OP number`"]),
    ("verdicts:\n  end_to_end: generator.correctness_f1 >= 0.5\n",
     ["line 14", "field `verdicts.end_to_end`", "has no metric 'correctness_f1'",
      "answer_present, answer_words"]),
    ("verdicts:\n  router: {route_accuracy: 1}\n",
     ["line 14", "field `verdicts.router`"]),
])
def test_bad_criteria_exit_2_naming_file_line_and_field(small, tmp_path, block, needles):
    small.write_text(small.read_text() + block)
    out = tmp_path / "out"
    res = run_cli("scenario", small, "--out", out)
    assert res.code == 2, res
    message = res.err.strip()
    assert message.startswith("Error: ") and "\n" not in message and "Traceback" not in res.err
    assert "small.yaml" in message
    for needle in needles:
        assert needle in message, (needle, message)
    assert not out.exists()
