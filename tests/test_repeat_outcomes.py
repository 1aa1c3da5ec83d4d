"""A run with repeats as test outcomes: one outcome per case and component over all its
repeats — passed, failed, error, skipped, or ``flaky`` when its verdict flips between repeats —
and the JUnit file that writes a flaky case as Surefire's ``<flakyFailure>``/``<flakyError>``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from conftest import ROOT, small_scenario, write, write_jsonl
from evalharness.api import execute
from evalharness.junit import render_junit, write_junit
from evalharness.outcomes import (
    DETAIL_LIMIT,
    Attempt,
    Outcome,
    case_outcomes,
    combine,
    combine_repeats,
    outcomes,
    per_case,
)
from evalharness.results import Results

XSD = ROOT / "tests" / "data" / "junit" / "junit-10.xsd"

SYSTEM = '''
def answer(case, repeat=None):
    if case.id == "shaky" and repeat == 1:
        raise RuntimeError("the model timed out")
    wrong = case.id == "stable_fail" or (case.id == "flaky" and repeat == 2)
    return {"router": {"routes": ["blog"] if wrong else ["sql"]},
            "generator": {"answer": "yes"}}
'''
"""stable_pass passes every repeat, stable_fail's router fails every one, flaky's router fails
in repeat 2 only, shaky's system raises in repeat 1 only."""

IDS = ["stable_pass", "stable_fail", "flaky", "shaky"]


def repeat_scenario(folder: Path, repeats: int = 3, ids: list[str] = IDS) -> Path:
    """A scenario of :data:`SYSTEM` over the cases ``ids``, each run ``repeats`` times."""
    write(folder / "system.py", SYSTEM)
    write_jsonl(folder / "cases.jsonl", [
        {"id": i, "question": f"question {i}", "gold": {"routes": ["sql"]}} for i in ids])
    return write(folder / "rep.yaml", f"""
        name: rep
        cases: cases.jsonl
        system: system.py:answer
        evaluators:
          router: [route_accuracy]
          generator: [answer_present]
        repeat: {repeats}
    """)


@pytest.fixture(scope="module")
def repeated(tmp_path_factory):
    """The repeated run (3 repeats), with its JUnit file: ``(run folder, Executed)``."""
    folder = tmp_path_factory.mktemp("repeat")
    out = folder / "run"
    done = execute(repeat_scenario(folder), out=out, headroom=False,
                   junit_xml=out / "junit.xml")
    return out, done


def by_name(items) -> dict[str, Outcome]:
    found = {o.test_name: o for o in items}
    assert len(found) == len(list(items)), "one outcome per case and component"
    return found


def test_one_outcome_per_case_and_component_over_the_repeats(repeated):
    _, done = repeated
    assert done.results.repeated and len(done.results) == 4 * 3
    items = [o for o in outcomes(done.report, done.results) if o.case is not None]
    got = by_name(items)
    assert len(items) == 4 * 3  # 4 cases x (router, generator, end_to_end), not x 3 repeats
    assert {n: o.status for n, o in got.items()} == {
        "stable_pass::router": "passed", "stable_pass::generator": "passed",
        "stable_pass::end_to_end": "passed",
        "stable_fail::router": "failed", "stable_fail::generator": "passed",
        "stable_fail::end_to_end": "passed",
        "flaky::router": "flaky", "flaky::generator": "passed", "flaky::end_to_end": "passed",
        "shaky::router": "flaky", "shaky::generator": "flaky", "shaky::end_to_end": "flaky"}
    assert all(o.repeats == 3 for o in items)

    fail = got["stable_fail::router"]
    assert fail.message == "failed in 3 of 3 repeats; repeat 1: route_accuracy = 0 (needs >= 1)"
    assert fail.passed_repeats == 0 and [a.repeat for a in fail.attempts] == [1, 2, 3]
    assert fail.detail == ("repeats 1, 2, 3 failed: route_accuracy = 0 (needs >= 1)\n"
                           "route_accuracy: predicted ['blog'], gold ['sql']")

    flaky = got["flaky::router"]
    assert flaky.message == ("flaky: passed 2 of 3 repeats; repeat 2 failed: "
                             "route_accuracy = 0 (needs >= 1)")
    assert flaky.passed_repeats == 2
    assert flaky.attempts == (Attempt(2, "failed", "route_accuracy = 0 (needs >= 1)",
                                      "route_accuracy: predicted ['blog'], gold ['sql']"),)

    shaky = got["shaky::end_to_end"]
    assert shaky.message.startswith("flaky: passed 2 of 3 repeats; repeat 1 erred: ")
    assert "RuntimeError: the model timed out" in shaky.message
    assert [(a.repeat, a.status) for a in shaky.attempts] == [(1, "error")]


def test_the_flaky_outcomes_are_the_reports_flaky_cases(repeated):
    _, done = repeated
    flaky = {(o.case, o.name) for o in outcomes(done.report, done.results)
             if o.status == "flaky"}
    assert flaky == {(f.case, f.component) for f in done.report.repeats.flaky}
    assert len(flaky) == 4


def test_a_view_in_the_order_of_the_file_gives_the_same_outcomes(repeated):
    """results.jsonl is written repeat by repeat; a view opened without the case order (as
    load_run opens it) still holds a case's repeats together, so each case has one outcome
    each."""
    out, done = repeated
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(x)["case"]["id"] for x in lines[:2]] == ["stable_pass", "stable_fail"]
    raw = Results.open(out / "results.jsonl")
    assert raw.keys[:3] == [("stable_pass", 1), ("stable_pass", 2), ("stable_pass", 3)]
    assert list(per_case(raw)) == list(per_case(done.results))
    assert [cid for cid, _ in per_case(raw)] == IDS


def test_combine_takes_one_cases_results(repeated):
    _, done = repeated
    flaky = [r for r in done.results if r.case.id == "flaky"]
    assert [r.repeat for r in flaky] == [1, 2, 3]
    assert combine(flaky) == dict(per_case(done.results))["flaky"]


def test_a_run_without_repeats_keeps_one_outcome_per_result(tmp_path):
    done = execute(small_scenario(tmp_path), out=tmp_path / "run", headroom=False)
    assert not done.results.repeated
    cases = [o for o in outcomes(done.report, done.results) if o.case is not None]
    assert cases == [o for r in done.results for o in case_outcomes(r)]
    assert all(o.repeats == 0 and not o.attempts for o in cases)
    assert {o.status for o in cases} >= {"passed", "failed", "skipped"}
    xml = render_junit("small", outcomes(done.report, done.results))
    assert "<properties>" not in xml and "flaky" not in xml


OK = Outcome("q1", "retriever", "passed", seconds=0.2)
FAIL = Outcome("q1", "retriever", "failed", "recall@5 = 0.5 (needs >= 0.75)", "missed d2",
               seconds=0.4)
ERROR = Outcome("q1", "retriever", "error", "recall@5: could not be computed", "no ids")
SKIP = Outcome("q1", "retriever", "skipped", "the case's gold route does not need it")


@pytest.mark.parametrize(("repeats", "status", "message"), [
    ([OK, OK, OK], "passed", ""),
    ([SKIP, SKIP], "skipped", "the case's gold route does not need it"),
    ([SKIP, OK], "passed", ""),
    ([FAIL, FAIL, FAIL, FAIL, FAIL], "failed",
     "failed in 5 of 5 repeats; repeat 1: recall@5 = 0.5 (needs >= 0.75)"),
    ([ERROR, FAIL], "failed",
     "failed in 1 of 2 repeats (error in 1); repeat 2: recall@5 = 0.5 (needs >= 0.75)"),
    ([ERROR, ERROR], "error", "error in 2 of 2 repeats; repeat 1: recall@5: could not be computed"),
    ([OK, ERROR, OK, OK, FAIL], "flaky",
     "flaky: passed 3 of 5 repeats; repeat 2 erred: recall@5: could not be computed"),
])
def test_how_repeats_combine(repeats, status, message):
    got = combine_repeats("q1", "retriever", list(enumerate(repeats, 1)))
    assert (got.status, got.message) == (status, message)
    assert got.repeats == len(repeats)
    assert got.passed_repeats == sum(o.status == "passed" for o in repeats)
    assert [a.repeat for a in got.attempts] == [
        i for i, o in enumerate(repeats, 1) if o.status in ("failed", "error")]
    assert got.seconds == pytest.approx(sum(o.seconds for o in repeats) / len(repeats))


def test_the_flaky_detail_lists_each_repeat_that_did_not_pass():
    got = combine_repeats("q1", "retriever", list(enumerate([OK, FAIL, ERROR, FAIL], 1)))
    assert got.detail == ("repeats 2, 4 failed: recall@5 = 0.5 (needs >= 0.75)\nmissed d2\n\n"
                          "repeat 3 erred: recall@5: could not be computed\nno ids")


def test_evidence_is_bounded_however_many_repeats_fail():
    repeats = [(i, Outcome("q1", "generator", "failed", f"reason {i}", f"{i}:" + "x" * 999))
               for i in range(1, 201)]
    got = combine_repeats("q1", "generator", [(0, Outcome("q1", "generator", "passed")),
                                              *repeats])
    assert got.status == "flaky" and len(got.attempts) == 200
    assert len(got.detail) <= DETAIL_LIMIT and got.detail.endswith("…")
    assert sum(len(a.detail) for a in got.attempts) <= DETAIL_LIMIT
    assert got.attempts[0].detail.startswith("1:x") and got.attempts[-1].detail == ""
    assert got.attempts[-1].message == "reason 200"


# --- JUnit ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def test_junit_of_a_repeated_run_validates_and_marks_the_flaky_cases(repeated, schema):
    out, done = repeated
    path = out / "junit.xml"  # written by the run (--junit-xml)
    errors = [str(e) for e in schema.iter_errors(str(path))]
    assert not errors, errors[:2]
    root = ET.parse(path).getroot()
    suites = {s.get("name"): s for s in root}
    assert list(suites) == ["rep.router", "rep.generator", "rep.end_to_end"]
    for suite in suites.values():
        props = suite.findall("properties/property")
        assert [(p.get("name"), p.get("value")) for p in props] == [("repeats", "3")]
        assert len(suite.findall("testcase")) == 4
    router = {c.get("name"): c for c in suites["rep.router"].findall("testcase")}
    assert len(router["stable_pass"]) == 0
    (failure,) = router["stable_fail"]
    assert failure.tag == "failure" and failure.get("message").startswith("failed in 3 of 3")
    (rerun,) = router["flaky"]  # a passed testcase: no <failure>, one flakyFailure
    assert (rerun.tag, rerun.get("type")) == ("flakyFailure", "fail")
    assert rerun.get("message") == "repeat 2 of 3: route_accuracy = 0 (needs >= 1)"
    assert rerun.find("stackTrace").text == "route_accuracy: predicted ['blog'], gold ['sql']"
    (erred,) = router["shaky"]
    assert (erred.tag, erred.get("type")) == ("flakyError", "error")
    assert "RuntimeError: the model timed out" in erred.find("stackTrace").text
    # a flaky testcase counts as passed: failures are the stable failures only
    counts = {n: (s.get("tests"), s.get("failures"), s.get("errors"))
              for n, s in suites.items()}
    assert counts == {"rep.router": ("4", "1", "0"), "rep.generator": ("4", "0", "0"),
                      "rep.end_to_end": ("4", "0", "0")}
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("12", "1", "0")
    assert len(root.findall(".//flakyFailure")) == 1
    assert len(root.findall(".//flakyError")) == 3


def test_write_junit_of_the_file_ordered_view_is_the_same(repeated, tmp_path):
    out, done = repeated
    a = write_junit(tmp_path / "a.xml", done.report, done.results)
    b = write_junit(tmp_path / "b.xml", done.report, Results.open(out / "results.jsonl"))
    assert a.read_bytes() == b.read_bytes()
