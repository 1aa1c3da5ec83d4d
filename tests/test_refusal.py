"""Unanswerable cases: the refusal pattern matcher, the `refusal` metric, the evaluator added
when a case has `gold.refusal: true`, and a run through the CLI with a toy system that
declines on some cases."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli, write, write_jsonl
from evalharness.context import EvalContext
from evalharness.models import Case, GeneratorStep, Gold, RetrieverStep, RouterStep
from evalharness.registry import NoSettings
from evalharness.scenario import load_scenario
from evalharness.verdicts import criteria_for
from evalharness_generation import evaluate_generator
from evalharness_generation.refusal import RULES, detect, expectation
from evalharness_retrieval import evaluate_retriever
from evalharness_retrieval.ranking import NOTHING_RELEVANT, RankingSettings
from evalharness_router import evaluate_router

# --- the pattern matcher ----------------------------------------------------------------------

REFUSALS = [
    # (answer, the kind of refusal, the phrase that matched)
    ("I'm sorry, I couldn't find any information about that product.", "no information",
     "I couldn't find any information"),
    ("I'm sorry, I couldn't find any red dresses under €50.", "nothing found",
     "I couldn't find"),
    ("There is no information about the Patagonia Nano Puff in our catalog.",
     "no information", "There is no information"),
    ("I don't have data on shipping times to Japan.", "no information", "I don't have data"),
    ("Unfortunately we don't carry Nike shoes.", "does not carry",
     "Unfortunately we don't carry"),
    ("Sorry, we no longer stock the Alpine Parka.", "does not carry",
     "Sorry, we no longer stock"),
    ("I don't know.", "ignorance", "I don't know"),
    ("I do not know the answer to that question.", "ignorance", "I do not know"),
    ("No idea, sorry.", "ignorance", "No idea"),
    ("We don't know yet when the Alpine Parka is back in stock.", "ignorance",
     "We don't know"),
    ("I'm not aware of any such policy.", "ignorance", "I'm not aware of"),
    ("Sorry, I can't help with that.", "inability", "I can't help"),
    ("I\u2019m sorry, but I can\u2019t answer that.", "inability", "I can\u2019t answer"),
    ("I'm unable to answer that based on the available information.", "inability",
     "I'm unable to answer"),
    ("I cannot determine the delivery date from the data I have.", "inability",
     "I cannot determine"),
    ("Based on the documents, it is not possible to say.", "inability", "not possible to say"),
    ("That information is not available.", "no information", "information is not available"),
    ("Pricing data for that model is unavailable.", "no information",
     "data for that model is unavailable"),
    ("I have no information on that.", "no information", "I have no information"),
    ("There's no record of order 9921 in our system.", "no information", "There's no record"),
    ("We don't have any information regarding the CEO's salary.", "no information",
     "We don't have any information"),
    ("I'm not able to provide that information.", "no information",
     "I'm not able to provide that information"),
    ("There isn't enough information to answer this question.", "no information",
     "There isn't enough information"),
    ("The provided context does not mention a warranty period.", "not in the data",
     "context does not mention"),
    ("I'm afraid that isn't in our catalog.", "not in the data", "isn't in our catalog"),
    ("This product does not appear in our database.", "not in the data",
     "not appear in our database"),
    ("Our data doesn't cover store opening hours.", "not in the data", "data doesn't cover"),
    ("Delivery times to Japan aren't mentioned in the documents.", "not in the data",
     "aren't mentioned in the documents"),
    ("As the shop's assistant I can only answer questions about our products.",
     "out of scope", "I can only answer"),
    ("That's outside the scope of what I can answer.", "out of scope", "outside the scope"),
    ("No results were found for your query.", "nothing found", "No results were found"),
    ("I could not locate that order.", "nothing found", "I could not locate"),
    # the shop assistant's words when its query returns no row
    ("I found nothing in the catalog matching that.", "nothing found",
     "nothing in the catalog"),
]

ANSWERS = [
    # negative answers about the data: answers, not refusals
    "No, we have no red dresses under €50.",
    "There are no orders placed in March 2024.",
    "None of our coats are waterproof.",
    "We have 0 red dresses in stock.",
    "Nope, there were no returns last week.",
    "Our records don't show any orders from Iceland.",
    "Unfortunately, there are no blue sofas in our catalog.",
    "The catalog lists 12 coats; none of them is red.",
    "There is no shipping fee on orders over €50.",
    "The Navy Coat is not available in size XL.",
    "The data shows the coat is not available in XL.",
    "Unfortunately, the Navy Coat is sold out in size M.",
    "We can't ship to Japan; we deliver within the EU only.",
    "No, we can't provide a refund after 30 days.",
    "We don't carry sofas.",
    # a direct yes/no first: what follows explains the answer
    "No, unfortunately we don't carry sofas.",
    "No, I couldn't find any red dresses under €50 — the cheapest dress is €59.90.",
    "No, there is nothing in our catalog under €20.",
    # plain answers that share words with refusals
    "The Navy Coat costs €129.00.",
    "Yes, the Navy Coat is available in XL.",
    "No. The return window is 30 days, not 60.",
    "You cannot wash cashmere in hot water; hand-wash it cold.",
    "I can tell you that the coat is in stock.",
    "I can't say for sure, but it usually arrives in 3 days.",
    "I can't wait to help you pick a coat: the Navy Coat is €129.",
    "Sorry for the wait! The coat costs €129.",
]


@pytest.mark.parametrize(("answer", "rule", "phrase"), REFUSALS)
def test_refusals_are_detected_with_their_phrase(answer, rule, phrase):
    found = detect(answer)
    assert (found.refused, found.rule, found.phrase) == (True, rule, phrase)


@pytest.mark.parametrize("answer", ANSWERS)
def test_answers_negative_ones_included_are_not_refusals(answer):
    found = detect(answer)
    assert not found.refused, (found.rule, found.phrase)
    assert found.phrase is None


def test_enough_hand_written_answers_and_every_rule_is_exercised():
    assert len(REFUSALS) + len(ANSWERS) >= 25
    assert {rule for _, rule, _ in REFUSALS} == {r.name for r in RULES}


def test_a_direct_no_keeps_a_weak_match_from_counting_but_not_a_strong_one():
    weak = detect("No, unfortunately we don't carry sofas.")
    assert not weak.refused and "direct yes or no" in weak.note
    assert detect("No, I don't know.").refused
    assert detect("No, there is no information about that in our catalog.").refused


def test_an_empty_or_missing_answer_is_not_a_refusal_and_says_so():
    for answer in (None, "", "   "):
        found = detect(answer)
        assert not found.refused
        assert found.note == "the answer is empty: a missing answer is not a refusal"


# --- the metric -------------------------------------------------------------------------------


def rows(*pairs: tuple[Gold, str | None]):
    batch = [(Case(id=f"c{i}", question="q", gold=gold), GeneratorStep(answer=answer))
             for i, (gold, answer) in enumerate(pairs)]
    return [r["refusal"] for r in evaluate_generator("refusal", batch, NoSettings(),
                                                      EvalContext())]


def test_metric_on_refusal_cases():
    declined, answered = rows((Gold(refusal=True), "I don't have data on gift cards."),
                              (Gold(refusal=True), "Gift cards cost €25."))
    assert declined.value == 1.0
    assert declined.details == {"expected": True, "expected_from": "gold.refusal",
                                "refused": True, "phrase": "I don't have data",
                                "rule": "no information"}
    assert answered.value == 0.0
    assert answered.details["refused"] is False and answered.details["phrase"] is None


def test_metric_on_answerable_cases():
    declined, answered, negative = rows(
        (Gold(refusal=False), "I'm sorry, I can't answer that."),
        (Gold(refusal=False), "The Navy Coat costs €129."),
        (Gold(refusal=False), "No, we have no red dresses under €50."))
    assert (declined.value, answered.value, negative.value) == (0.0, 1.0, 1.0)
    assert declined.details["expected"] is False and declined.details["refused"] is True


def test_metric_without_a_label_reads_the_reference_answer_or_is_an_error():
    from_answer, refusing_gold, no_gold = rows(
        (Gold(answer="The Navy Coat costs €129."), "I don't know."),
        (Gold(answer="We have no information about gift cards."), "I don't know."),
        (Gold(), "I don't know."))
    assert from_answer.value == 0.0
    assert from_answer.details["expected"] is False
    assert from_answer.details["expected_from"].startswith("gold.answer")
    assert refusing_gold.value is None
    assert "reference answer (gold.answer) is itself a refusal" in refusing_gold.error
    assert "set gold.refusal: true" in refusing_gold.error
    assert no_gold.value is None
    assert no_gold.error == ("the case has neither a refusal label (gold.refusal) nor a "
                             "reference answer (gold.answer)")
    assert no_gold.details["refused"] is True  # the evidence is kept


def test_a_missing_answer_is_not_a_refusal_in_the_metric():
    on_refusal, on_answerable = rows((Gold(refusal=True), None), (Gold(refusal=False), ""))
    assert (on_refusal.value, on_answerable.value) == (0.0, 1.0)
    assert on_refusal.details["note"] == ("the answer is empty: a missing answer is not a "
                                          "refusal")


def test_expectation_prefers_the_label_over_the_reference_answer():
    case = Case(id="c", question="q", gold=Gold(refusal=True, answer="The coat costs €129."))
    assert expectation(case) == (True, "gold.refusal")


# --- the other components on unanswerable cases -----------------------------------------------


def test_router_choosing_no_route_is_correct_for_gold_routes_empty():
    case = Case(id="u", question="q", gold=Gold(routes=[], refusal=True))
    none, some = evaluate_router("route_accuracy", [(case, RouterStep(routes=[])),
                                                    (case, RouterStep(routes=["blog"]))])
    assert none["route_accuracy"].value == 1.0
    assert some["route_accuracy"].value == 0.0
    assert some["route_accuracy"].details == {"predicted": ["blog"], "gold": []}


def test_retriever_with_nothing_relevant_scores_0_and_says_why():
    case = Case(id="u", question="q", gold=Gold(relevant={}, refusal=True))
    settings = RankingSettings(k=[1, 3], measures=["recall", "mrr", "ndcg"])
    [row] = evaluate_retriever("ranking", [(case, RetrieverStep(ids=["d1", "d2"]))], settings)
    assert {m: v.value for m, v in row.items()} == dict.fromkeys(row, 0.0)
    assert all(v.details["note"] == NOTHING_RELEVANT and v.details["relevant"] == 0
               for v in row.values())
    labelled = Case(id="a", question="q", gold=Gold(relevant={"d1": 1}))
    [row] = evaluate_retriever("ranking", [(labelled, RetrieverStep(ids=["d1"]))], settings)
    assert not any("note" in v.details for v in row.values())


# --- loading a scenario: the evaluator added ---------------------------------------------------

CASES = [
    {"id": "a1", "question": "How do I wash wool?",
     "gold": {"routes": ["blog"], "relevant": {"d1": 1},
              "answer": "Hand wash wool in cold water."}},
    {"id": "a2", "question": "How should I store cashmere?",
     "gold": {"routes": ["blog"], "relevant": {"d2": 1}, "refusal": False,
              "answer": "Fold cashmere and keep it in a drawer."}},
    {"id": "u1", "question": "Do you sell gift cards?",
     "gold": {"routes": [], "relevant": {}, "refusal": True,
              "answer": "I don't have information about gift cards."}},
    {"id": "u2", "question": "Do you offer gift wrapping?",
     "gold": {"routes": [], "relevant": {}, "refusal": True}},
    {"id": "u3", "question": "Who designed the Navy Coat?",
     "gold": {"routes": [], "relevant": {}, "refusal": True}},
]

TOY = '''
"""A toy assistant: the route, the chunks and the answer of each question, from a table."""

PLAN = {
    "How do I wash wool?": (["blog"], ["d1"], "Hand wash wool in cold water."),
    "How should I store cashmere?": (["blog"], ["d2"], "I don't know."),
    "Do you sell gift cards?": (
        [], None, "I'm sorry, I couldn't find any information about gift cards."),
    "Do you offer gift wrapping?": (["blog"], ["d2"], "Gift wrapping costs 5 euros."),
    "Who designed the Navy Coat?": ([], None, "No, we don't offer that."),
}


def answer(case):
    routes, ids, text = PLAN[case.question]
    trace = {"case_id": case.id, "router": {"routes": routes},
             "generator": {"answer": text, "contexts": ["Hand wash wool in cold water."]}}
    if ids is not None:
        trace["retriever"] = {"ids": ids, "texts": ["chunk " + i for i in ids]}
    return trace
'''

SCENARIO = """
name: toy-refusal
cases: cases.jsonl
system: toy.py:answer
pipeline:
  router: {kind: router, routes: {blog: [retriever]}}
  retriever: {kind: retriever}
  generator: {kind: generator, after: [retriever]}
evaluators:
  router: [route_accuracy]
  retriever:
    - ranking: {k: [1]}
  generator: [answer_present, answer_correctness]
"""


@pytest.fixture
def toy(tmp_path):
    write_jsonl(tmp_path / "cases.jsonl", CASES)
    write(tmp_path / "toy.py", TOY)
    return write(tmp_path / "toy.yaml", SCENARIO)


def test_the_evaluator_is_added_when_a_case_expects_a_refusal(toy):
    scenario = load_scenario(toy)
    names = [(e.component, e.name, e.added is not None) for e in scenario.evaluators]
    assert names[-1] == ("generator", "refusal", True)
    assert "3 of the scenario's cases have gold.refusal: true" in scenario.evaluators[-1].added
    note = criteria_for(scenario).report()["generator"].note
    assert "cases with gold.refusal: true: `refusal >= 1` instead" in note
    assert "the `refusal` evaluator was added automatically" in note


def test_the_evaluator_is_not_added_twice_nor_without_refusal_cases(toy, tmp_path):
    toy.write_text(toy.read_text().replace("[answer_present, answer_correctness]",
                                           "[answer_present, refusal]"))
    scenario = load_scenario(toy)
    assert [e.name for e in scenario.evaluators_on("generator")] == ["answer_present",
                                                                      "refusal"]
    assert all(e.added is None for e in scenario.evaluators)
    assert "added automatically" not in criteria_for(scenario).report()["generator"].note
    write_jsonl(tmp_path / "cases.jsonl", [c for c in CASES if not c["gold"].get("refusal")])
    toy.write_text(SCENARIO)
    scenario = load_scenario(toy)
    assert "refusal" not in [e.name for e in scenario.evaluators]
    assert criteria_for(scenario).report()["generator"].note is None


def test_an_added_evaluator_can_be_named_in_verdicts_and_gates(toy):
    toy.write_text(toy.read_text() + "verdicts:\n  generator: refusal >= 1\n"
                   "gates:\n  - generator.refusal >= 0.5\n")
    scenario = load_scenario(toy)
    assert [g.name for g in scenario.gates] == ["generator.refusal >= 0.5"]
    assert [g.name for g in scenario.verdicts["generator"]] == ["refusal >= 1"]


# --- through the CLI --------------------------------------------------------------------------


def test_a_run_with_unanswerable_cases_through_the_cli(toy, tmp_path):
    out = tmp_path / "out"
    result = run_cli("scenario", toy, "--out", out, "--quiet")
    assert result.code == 0, result
    report = json.loads((out / "report.json").read_text())
    generator = report["components"]["generator"]
    assert [e["name"] for e in generator["evaluators"]] == ["answer_present",
                                                            "answer_correctness", "refusal"]
    # a1, a2 expect an answer (a1 from its reference answer), u1-u3 a refusal; the toy
    # declines on a2 (wrong) and u1 (right)
    assert generator["metrics"]["refusal"]["mean"] == pytest.approx(2 / 5)
    assert generator["metrics"]["refusal"]["n"] == 5
    crit = report["verdict_criteria"]
    assert crit["generator"]["criteria"] == ["answer_present >= 1"]
    assert "added automatically" in crit["generator"]["note"]
    assert crit["end_to_end"]["criteria"] == ["generator.correctness_f1 >= 0.5"]
    assert "cases with gold.refusal: true: `generator.refusal >= 1` instead" in \
        crit["end_to_end"]["note"]

    lines = {json.loads(x)["case"]["id"]: json.loads(x)
             for x in (out / "results.jsonl").read_text().splitlines()}

    def story(case_id):
        line = lines[case_id]
        return ({c: (v["status"], v["values"]) for c, v in line["verdicts"].items()},
                line["end_to_end"]["status"], line["attribution"]["kind"],
                line["attribution"]["root_causes"])

    # a normal case: the usual defaults, a refusal there does not matter to its generator
    verdicts, e2e, kind, _ = story("a2")
    assert verdicts["generator"] == ("pass", {"answer_present": 1.0})
    assert lines["a2"]["components"]["generator"]["metrics"]["refusal"]["value"] == 0.0
    assert lines["a2"]["end_to_end"]["values"] == {"generator.correctness_f1": 0.0}
    # declined as it should: router chose no route, the retriever did not run
    verdicts, e2e, kind, _ = story("u1")
    assert verdicts == {"router": ("pass", {"route_accuracy": 1.0}),
                        "retriever": ("not_applicable", {"recall@1": None}),
                        "generator": ("pass", {"refusal": 1.0})}
    assert (e2e, kind) == ("pass", "passed")
    assert lines["u1"]["end_to_end"]["values"] == {"generator.refusal": 1.0}
    # routed to the blog and answered: the router fails first
    verdicts, e2e, kind, roots = story("u2")
    assert verdicts["router"] == ("fail", {"route_accuracy": 0.0})
    assert verdicts["generator"] == ("fail", {"refusal": 0.0})
    assert (e2e, kind, roots) == ("fail", "attributed", ["router"])
    # a negative answer to a question nothing answers: the generator's failure
    verdicts, e2e, kind, roots = story("u3")
    assert verdicts["generator"] == ("fail", {"refusal": 0.0})
    assert lines["u3"]["end_to_end"]["reason"] == "generator.refusal = 0 (needs >= 1)"
    assert (e2e, kind, roots) == ("fail", "attributed", ["generator"])
    assert report["bottleneck"]["end_to_end"]["passed"] == 2  # a1 and u1
