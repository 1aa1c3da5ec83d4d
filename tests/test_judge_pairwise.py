"""Pairwise judging of two runs (``compare A B --judge-pairwise CRITERION``,
:mod:`evalharness.judge_pairwise`): the shop against its generator-fault variant, judged by
the fake OpenAI-compatible server; each case in both orders, a disagreement a tie, B's win
rate beside people's, and the judge's own preference in the agreement with them."""

from __future__ import annotations

import json
import re

import pytest
from test_rubrics import scenario_text

from conftest import run_cli, write
from evalharness.review.server import App, Pairing, new_token
from evalharness.review.session import Review
from evalharness.testing.fake_openai import FakeOpenAI

ENV = {"OPENAI_API_KEY": "sk-test"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Runs A (the shop) and B (its generator fault) of the q00* cases, a fake server that
    stays up for the comparisons, and people's preferences on A vs B."""
    tmp = tmp_path_factory.mktemp("pairwise")
    with FakeOpenAI() as server:
        base = scenario_text(server, tmp / "cache.sqlite")
        fault = re.sub(r"system: (\S+):answer",
                       r"system: {callable: '\1:answer', options: {fault: generator}}", base)
        assert fault != base
        runs = {}
        for name, text in (("a", base), ("b", fault)):
            path = write(tmp / f"{name}.yaml", text)
            runs[name] = tmp / name
            result = run_cli("scenario", path, "--out", runs[name], "--filter", "q00*",
                             "--no-headroom", "-q", env=ENV)
            assert result.code in (0, 1), result
        a, b = Review.open(runs["a"]), Review.open(runs["b"])
        ids = list(a.index)
        app = App(a, new_token(), set(), "ana", Pairing(a, b, new_token(), ids))
        for n, case in enumerate(ids):  # people prefer A (the unbroken shop), one tie
            want = "tie" if n == 0 else "a"
            left_is_a = app.pairing.a_is_left(case)
            choice = "tie" if want == "tie" else ("left" if left_is_a else "right")
            app.store({"case": case, "choice": choice, "reviewer": "ana"})
        yield server, runs["a"], runs["b"], ids


def test_each_case_is_judged_in_both_orders_and_a_disagreement_is_a_tie(pair):
    server, a, b, ids = pair
    before = server.counts["chat"]
    result = run_cli("compare", a, b, "--judge-pairwise", "no_false_promises", "--json",
                     env=ENV)
    assert result.code in (0, 1), result
    asked = server.counts["chat"] - before
    jp = json.loads(result.out)["judge_pairwise"]
    assert (jp["criterion"], jp["component"]) == ("no_false_promises", "generator")
    assert jp["judge"] == "openai:gpt-4.1-mini"
    cases = jp["per_case"]
    assert sorted(x["case"] for x in cases) == sorted(ids)
    assert asked == 2 * len(cases), "two requests per case: A shown first, then B"
    for x in cases:
        first, second = x["orders"]
        assert (first["shown_first"], second["shown_first"]) == ("A", "B")
        assert first["record"]["task"] == second["record"]["task"] == \
            "pairwise:no_false_promises"
        assert first["record"]["id"] != second["record"]["id"]
        expected = (first["preferred"] if first["preferred"] == second["preferred"]
                    else "tie")
        assert x["outcome"] == expected
    wins = sum(x["outcome"] == "b" for x in cases)
    ties = sum(x["outcome"] == "tie" for x in cases)
    assert (jp["b_wins"], jp["ties"], jp["cases"]) == (wins, ties, len(cases))
    assert jp["win_rate_b"] == pytest.approx((wins + ties / 2) / len(cases))
    assert jp["order_disagreements"] == sum(
        x["orders"][0]["preferred"] != x["orders"][1]["preferred"] for x in cases)
    assert jp["win_rate_ci95"][0] <= jp["win_rate_b"] <= jp["win_rate_ci95"][1]
    # people's win rate beside it, and their agreement read from the judge's own preference
    human = json.loads(result.out)["human"]
    assert (human["a_wins"], human["ties"]) == (len(ids) - 1, 1)
    judge = human["judge"]
    assert judge["criterion"] == "no_false_promises" and judge["cases"] == len(cases)
    outcome = {x["case"]: x["outcome"] for x in cases}
    people = {case: "tie" if n == 0 else "a" for n, case in enumerate(ids)}
    assert judge["matches"] == sum(outcome[c] == people[c] for c in ids)


def test_the_terminal_shows_the_judge_beside_people_and_a_rerun_is_cached(pair):
    server, a, b, _ = pair
    before = server.counts["chat"]
    result = run_cli("compare", a, b, "--judge-pairwise", "no_false_promises", env=ENV)
    assert result.code in (0, 1), result
    assert server.counts["chat"] == before, "every pairwise judgment from the judge cache"
    assert "people (ana, 9 cases): B preferred 0, A 8, ties 1" in result.out, result.out
    assert "the judge (openai:gpt-4.1-mini, generator.no_false_promises, each case in both " \
           "orders, 9 cases): B preferred" in result.out
    assert "the judge's preferred run (judged pairwise on no_false_promises) is the " \
           "people's in" in result.out


def test_a_rubric_file_and_bad_criteria(pair, tmp_path):
    server, a, b, _ = pair
    rubric = write(tmp_path / "concise.yaml", "component: generator\nmetric: concise\n"
                   "criterion: The answer says what was asked and nothing more.\n"
                   "sees: [question, answer]\n")
    result = run_cli("compare", a, b, "--judge-pairwise", rubric, "--json", env=ENV)
    assert result.code in (0, 1), result
    assert json.loads(result.out)["judge_pairwise"]["criterion"] == "concise"
    unknown = run_cli("compare", a, b, "--judge-pairwise", "politeness", env=ENV)
    assert unknown.code == 2 and "judged metrics there: " in unknown.err, unknown
    assert "generator.no_false_promises" in unknown.err
    offline = run_cli("compare", a, b, "--judge-pairwise", "no_false_promises", "--judge",
                      "heuristic", env=ENV)
    assert offline.code == 2 and "needs a language model" in offline.err, offline
    alone = run_cli("compare", a, b, "--judge", "openai", env=ENV)
    assert alone.code == 2 and "--judge-pairwise" in alone.err
