"""Repeats (docs/repeat.md): each case run N times, one results.jsonl line per repeat; values
reduced per case, intervals over cases, flaky cases; resume; the judge cache and the
repeats; the workers' side."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli, write, write_jsonl
from evalharness.stats import bootstrap_ci, cluster_bootstrap_ci, seed_for

SYSTEM = '''
from evalharness import Trace

def answer(case, *, wobble="c2,c5", repeat=None):
    """Routes right, but for the `wobble` cases in even repeats; c4 always wrong."""
    gold = case.gold.routes
    wrong = case.id == "c4" or (case.id in wobble.split(",") and (repeat or 1) % 2 == 0)
    routes = ["blog" if gold == ["sql"] else "sql"] if wrong else gold
    return Trace(case_id=case.id, router={"routes": routes},
                 generator={"answer": f"answer to {case.question}"})

def plain(case):
    """Takes no `repeat`: answers the same every time."""
    return Trace(case_id=case.id, router={"routes": case.gold.routes},
                 generator={"answer": "yes"})
'''

N_CASES = 8


def make(folder: Path, extra: str = "", callable_: str = "system.py:answer") -> Path:
    write(folder / "system.py", SYSTEM)
    write_jsonl(folder / "cases.jsonl", [
        {"id": f"c{i}", "question": f"question {i}",
         "gold": {"routes": ["sql"] if i % 2 else ["blog"]}} for i in range(1, N_CASES + 1)])
    return write(folder / "s.yaml", f"""
        name: wobbly
        cases: cases.jsonl
        system: {callable_}
        pipeline: {{router: {{routes: {{sql: [generator], blog: [generator]}}}},
                    generator: {{after: [router]}}}}
        evaluators:
          router: [route_accuracy]
          generator: [answer_present]
        verdicts:
          end_to_end: router.route_accuracy >= 1
        concurrency: 2
        batch_size: 3
        {extra}
    """)


def lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def report_of(run: Path) -> dict:
    return json.loads((run / "report.json").read_text())


@pytest.fixture(scope="module")
def repeated(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("repeated")
    res = run_cli("scenario", make(folder), "--out", folder / "run", "--repeat", "4", "-q")
    assert res.code == 0, res
    return folder / "run"


def test_each_case_runs_n_times_and_the_system_is_told_which_repeat(repeated):
    found = lines(repeated)
    assert len(found) == 4 * N_CASES
    assert sorted((r["case"]["id"], r["repeat"]) for r in found) == sorted(
        (f"c{i}", k) for i in range(1, N_CASES + 1) for k in range(1, 5))
    routes = {(r["case"]["id"], r["repeat"]): r["trace"]["router"]["routes"] for r in found}
    assert routes[("c2", 1)] == ["blog"] and routes[("c2", 2)] == ["sql"]  # even: wrong
    assert routes[("c5", 3)] == ["sql"] and routes[("c5", 4)] == ["blog"]
    run = json.loads((repeated / "run.json").read_text())
    assert run["repeat"] == {"n": 4, "judge": "cached"}


def test_means_are_over_cases_and_intervals_resample_cases(repeated):
    summary = report_of(repeated)["components"]["router"]["metrics"]["route_accuracy"]
    # per case: c2 and c5 right in 2 of 4 repeats, c4 never, the other five always
    per_case = [1.0, 0.5, 1.0, 0.0, 0.5, 1.0, 1.0, 1.0]
    assert summary["mean"] == pytest.approx(np.mean(per_case))
    assert summary["n"] == N_CASES
    seed = seed_for("router", "route_accuracy")
    assert summary["ci95"] == pytest.approx(list(bootstrap_ci(per_case, seed=seed)))
    spread = summary["repeats"]
    assert spread["reducer"] == "mean" and spread["values"] == 32 and spread["varying"] == 2
    # within-case SD: sqrt(mean of the per-case sample variances), two cases at var(1,0,1,0)
    assert spread["within_sd"] == pytest.approx(np.sqrt(2 * np.var([1, 0, 1, 0], ddof=1) / 8))
    naive = spread["naive_ci95"]
    assert naive[1] - naive[0] < summary["ci95"][1] - summary["ci95"][0]


def test_flaky_cases_are_listed_and_the_bottleneck_resamples_cases(repeated):
    report = report_of(repeated)
    repeats = report["repeats"]
    assert repeats["n"] == 4 and repeats["cases"] == N_CASES and repeats["incomplete"] == 0
    assert repeats["end_to_end"] == {"always_pass": 5, "always_fail": 1, "flaky": 2,
                                     "undecided": 0}
    flaky = {(f["case"], f["component"]): (f["passed"], f["failed"]) for f in repeats["flaky"]}
    assert flaky == {("c2", "end_to_end"): (2, 2), ("c2", "router"): (2, 2),
                     ("c5", "end_to_end"): (2, 2), ("c5", "router"): (2, 2)}
    assert report["cases"] == {"total": 8, "evaluated": 8, "system_errors": 0, "results": 32}
    e2e = report["bottleneck"]["end_to_end"]
    assert (e2e["passed"], e2e["failed"]) == (24, 8)
    decided = [1.0 if r["end_to_end"]["status"] == "pass" else 0.0 for r in lines(repeated)]
    groups = [int(r["case"]["id"][1:]) for r in lines(repeated)]
    assert e2e["ci95"] == pytest.approx(list(cluster_bootstrap_ci(
        decided, groups, seed=seed_for("bottleneck", "end_to_end"))))
    md = (repeated / "report.md").read_text()
    assert "## Repeats" in md and "| c2 | end to end | 2 | 2 | 0 |" in md
    assert "4 repeats of 8 cases; end to end 5 always pass, 1 always fail, 2 flaky" in md


def test_the_terminal_names_the_flaky_cases(tmp_path):
    res = run_cli("scenario", make(tmp_path), "--out", tmp_path / "run", "--repeat", "2")
    assert res.code == 0, res
    assert "× 2 repeats" in res.out
    assert "flaky end to end (passed/repeats): c2 (1/2), c5 (1/2)" in res.out


def test_a_run_without_repeats_writes_what_it_always_wrote(tmp_path):
    res = run_cli("scenario", make(tmp_path), "--out", tmp_path / "run", "-q")
    assert res.code == 0, res
    found = lines(tmp_path / "run")
    assert len(found) == N_CASES and all("repeat" not in r for r in found)
    report = report_of(tmp_path / "run")
    assert report["repeats"] is None and "results" not in report["cases"]
    assert report["components"]["router"]["metrics"]["route_accuracy"]["repeats"] is None


def test_the_scenario_asks_for_repeats_and_the_command_line_overrides(tmp_path):
    scenario = make(tmp_path, extra="repeat: 2")
    assert run_cli("scenario", scenario, "--out", tmp_path / "a", "-q").code == 0
    assert len(lines(tmp_path / "a")) == 2 * N_CASES
    assert run_cli("scenario", scenario, "--out", tmp_path / "b", "-q", "--repeat", "3",
                   "--no-headroom").code == 0
    assert len(lines(tmp_path / "b")) == 3 * N_CASES
    assert report_of(tmp_path / "b")["repeats"]["n"] == 3


@pytest.mark.parametrize("given, expected", [
    ("repeat: 0", "field `repeat`: Input should be greater than or equal to 1"),
    ("repeat: {n: 3, judge: sometimes}", "field `repeat.judge`"),
    ("repeat: {n: 3, epochs: 2}", "field `repeat.epochs`"),
])
def test_a_bad_repeat_block_names_the_field(tmp_path, given, expected):
    res = run_cli("scenario", make(tmp_path, extra=given), "--out", tmp_path / "run")
    assert res.code == 2, res
    assert expected in res.err and "s.yaml" in res.err


def test_a_system_that_takes_no_repeat_is_called_the_same_way_each_time(tmp_path):
    res = run_cli("scenario", make(tmp_path, callable_="system.py:plain"), "--out",
                  tmp_path / "run", "-q", "--repeat", "3")
    assert res.code == 0, res
    assert len(lines(tmp_path / "run")) == 3 * N_CASES
    assert report_of(tmp_path / "run")["repeats"]["flaky"] == []


def test_repeat_is_not_a_system_option(tmp_path):
    scenario = make(tmp_path)
    text = scenario.read_text().replace("system: system.py:answer",
                                        "system: {callable: system.py:answer, "
                                        "options: {repeat: 2}}")
    scenario.write_text(text)
    res = run_cli("scenario", scenario, "--out", tmp_path / "run")
    assert res.code == 2, res
    assert "field `system.options.repeat`" in res.err and "--repeat" in res.err


def test_an_interrupted_repeated_run_resumes_to_the_same_report(tmp_path, repeated):
    scenario = make(tmp_path)
    out = tmp_path / "run"
    assert run_cli("scenario", scenario, "--out", out, "-q", "--repeat", "4").code == 0
    kept = (out / "results.jsonl").read_text().splitlines()[:13]  # repeat 1, part of 2
    (out / "results.jsonl").write_text("\n".join(kept) + "\n")
    (out / "report.json").unlink()
    (out / "headroom.jsonl").unlink(missing_ok=True)
    res = run_cli("scenario", scenario, "--out", out, "-q", "--repeat", "4", "--resume")
    assert res.code == 0, res
    assert len(lines(out)) == 32
    mine, theirs = report_of(out), report_of(repeated)
    for report in (mine, theirs):
        report.pop("run")
        report["scenario"].pop("path")
        report["scenario"].pop("sha256")
    assert mine == theirs
    other = run_cli("scenario", scenario, "--out", out, "--repeat", "2", "--resume")
    assert other.code == 2, other
    assert "--repeat 4 (judge cached), not --repeat 2 (judge cached)" in other.err


def test_the_oracle_reruns_a_failed_repeat_as_that_repeat(tmp_path):
    system = SYSTEM + '''
def oracled(case, *, repeat=None, overrides=None):
    trace = answer(case, repeat=repeat)
    if overrides and "router" in overrides:
        trace.router.routes = list(overrides["router"]["routes"])
    return trace
'''
    scenario = make(tmp_path, callable_="system.py:oracled")
    write(tmp_path / "system.py", system)
    res = run_cli("scenario", scenario, "--out", tmp_path / "run", "-q", "--repeat", "2")
    assert res.code == 0, res
    records = [json.loads(x) for x in (tmp_path / "run" / "headroom.jsonl").read_text()
               .splitlines()]
    reruns = sorted((r["case_id"], r["repeat"], r["status"]) for r in records
                    if r["oracle"] == "router")
    # c4 fails in both repeats, c2 and c5 in their second: each failed repeat rerun as itself
    assert reruns == [("c2", 2, "fixed"), ("c4", 1, "fixed"), ("c4", 2, "fixed"),
                      ("c5", 2, "fixed")]
    # the gain: 4 of the 16 decided results fixed; its interval resamples the 8 cases
    row = next(r for r in report_of(tmp_path / "run")["bottleneck"]["headroom"]
               if r["oracle"] == "router")
    assert row["gain"] == pytest.approx(4 / 16) and row["fixed"] == 4
    fixed = {"c2": 1, "c4": 2, "c5": 1}
    values, groups = [], []
    for g, case in enumerate(f"c{i}" for i in range(1, N_CASES + 1)):
        values += [1.0] * fixed.get(case, 0) + [0.0] * (2 - fixed.get(case, 0))
        groups += [g, g]
    assert row["ci95"] == pytest.approx(list(cluster_bootstrap_ci(
        values, groups, seed=seed_for("headroom", "router"))))


JUDGED_CASES = [
    {"id": "a", "question": "How much is the navy coat?",
     "gold": {"answer": "The navy coat costs 129 euros."}},
    {"id": "b", "question": "How do I wash wool?",
     "gold": {"answer": "Hand wash wool at 30 degrees."}},
]
JUDGED_TRACES = [
    {"case_id": "a", "generator": {"answer": "The navy coat costs 129 euros. It is warm.",
                                   "contexts": ["name: Navy Coat, price: 129"]}},
    {"case_id": "b", "generator": {"answer": "Hand wash wool at 30 degrees.",
                                   "contexts": ["Wool: hand wash at 30 degrees, dry flat."]}},
]


def test_the_judge_cache_meets_the_repeats_as_asked(tmp_path):
    """cached: the repeats of an unchanged answer reuse its judgments (one repeat's requests,
    into an empty cache); fresh: every repeat asks the judge anew (three times the requests:
    the cached judgments are not theirs), and a second fresh run asks nothing (each repeat's
    judgments are cached under their own key)."""
    from evalharness.testing.fake_openai import FakeOpenAI

    write_jsonl(tmp_path / "cases.jsonl", JUDGED_CASES)
    write_jsonl(tmp_path / "traces.jsonl", JUDGED_TRACES)
    with FakeOpenAI() as server:
        scenario = write(tmp_path / "j.yaml", f"""
            name: judged
            cases: cases.jsonl
            traces: traces.jsonl
            pipeline: {{generator: {{}}}}
            judge: {{backend: openai, model: judge-1, base_url: "{server.base_url}",
                     cache: cache.sqlite, max_retries: 0, timeout_s: 5}}
            evaluators:
              generator: [faithfulness]
        """)
        env = {"OPENAI_API_KEY": "sk-test"}

        def requests(*args: str) -> int:
            before = sum(server.counts.values())
            res = run_cli("scenario", scenario, *args, "-q", env=env)
            assert res.code == 0, res
            return sum(server.counts.values()) - before

        once = requests("--out", str(tmp_path / "once"), "--no-cache")
        assert once == 4  # claims, then their support: 2 per case
        assert requests("--out", str(tmp_path / "cached"), "--repeat", "3") == once
        assert requests("--out", str(tmp_path / "fresh"), "--repeat", "3",
                        "--repeat-judge", "fresh") == 3 * once
        assert requests("--out", str(tmp_path / "again"), "--repeat", "3",
                        "--repeat-judge", "fresh") == 0
    report = report_of(tmp_path / "fresh")
    assert report["repeats"]["judge"] == "fresh"
    keys = {(r["case"]["id"], j["key"]) for r in lines(tmp_path / "fresh")
            for j in r["components"]["generator"]["metrics"]["faithfulness"]["details"]
            ["judgments"]}
    assert len(keys) == 3 * 4  # a distinct judgment per repeat


def test_a_worker_evaluates_a_repeat_as_the_driver_asked(tmp_path):
    """The workers' side (Ray's tasks): the spec carries the driver's --repeat, a Work item its
    repeat; the lines come back marked with it."""
    from evalharness import executors
    from evalharness.scenario import load_scenario, with_repeat
    from evalharness.work import Work, WorkerSpec

    scenario = with_repeat(load_scenario(make(tmp_path)), 3, "fresh")
    spec = WorkerSpec.of(scenario, tmp_path / "out", 1)
    assert spec.repeat == (3, "fresh")
    found = [json.loads(x) for x in executors.run_group(
        spec, [Work("c2", repeat=1), Work("c2", repeat=2), Work("c3", repeat=2)])]
    assert [(r["case"]["id"], r["repeat"]) for r in found] == [("c2", 1), ("c2", 2), ("c3", 2)]
    assert [r["end_to_end"]["status"] for r in found] == ["pass", "fail", "pass"]
    loaded = executors._state(spec)
    assert loaded.scenario.spec.repeat.judge == "fresh" and loaded.takes_repeat


def test_a_repeated_run_read_back_and_as_a_table(repeated):
    """load_run: the results hold a case's repeats together (the file holds them repeat by
    repeat), `flaky`, `failed` once per case, one result per repeat, a `repeat` column."""
    import evalharness

    run = evalharness.load_run(repeated)
    keys = [r.key for r in run.results]
    assert keys[:5] == [("c1", 1), ("c1", 2), ("c1", 3), ("c1", 4), ("c2", 1)]
    assert run.flaky == ["c2", "c5"]
    assert run.failed == ["c2", "c4", "c5"]
    assert [r.repeat for r in run.repeats_of("c5")] == [1, 2, 3, 4]
    assert run.result("c2", 2).trace.router.routes == ["sql"]
    assert run.result("c2").repeat == 1
    records = run.records()
    assert {r["repeat"] for r in records} == {1, 2, 3, 4}
    route = [r for r in records if r["metric"] == "route_accuracy" and r["case_id"] == "c2"]
    assert [(r["repeat"], r["value"]) for r in route] == [(1, 1.0), (2, 0.0), (3, 1.0),
                                                          (4, 0.0)]
    outcomes = [o for o in run.outcomes() if o.case == "c2"]
    assert {o.name: o.status for o in outcomes} == {"router": "flaky", "generator": "passed",
                                                    "end_to_end": "flaky"}


def test_the_notebook_judges_rows_anew_in_each_repeat(tmp_path):
    import evalharness

    rows = [{"id": "a", "question": "Is the navy coat warm?", "answer": "Yes, it is wool."},
            {"id": "b", "question": "Do you ship to Spain?", "answer": "Yes."}]
    run = evalharness.evaluate(rows, ["answer_present"], out=tmp_path / "nb", repeat=3,
                               repeat_judge="fresh")
    assert run.report.repeats.n == 3 and run.report.repeats.judge == "fresh"
    assert sorted((r["case_id"], r["repeat"]) for r in run.records()
                  if r["metric"] == "answer_present") == [
        ("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("b", 3)]


def test_one_row_per_case_reduced_over_its_repeats(repeated):
    """The per-case table: each case's value reduced over its repeats, its spread, and its
    verdict over them."""
    import evalharness

    run = evalharness.load_run(repeated)
    rows = {(r["case_id"], r["metric"]): r for r in run.case_records()}
    assert len(rows) == N_CASES * 3  # route_accuracy, answer_present, answer_words
    c2 = rows["c2", "route_accuracy"]
    assert (c2["value"], c2["min"], c2["max"], c2["repeats"], c2["errors"]) == (
        0.5, 0.0, 1.0, 4, 0)
    assert c2["sd"] == pytest.approx(np.std([1, 0, 1, 0], ddof=1))
    assert (c2["passed"], c2["failed"], c2["verdict"]) == (2, 2, "flaky")
    c4, c1 = rows["c4", "route_accuracy"], rows["c1", "route_accuracy"]
    assert (c4["value"], c4["sd"], c4["verdict"]) == (0.0, 0.0, "fail")
    assert (c1["value"], c1["verdict"], c1["reducer"]) == (1.0, "pass", "mean")
    means = [rows[f"c{i}", "route_accuracy"]["value"] for i in range(1, N_CASES + 1)]
    report = run.report.components["router"].metrics["route_accuracy"]
    assert np.mean(means) == pytest.approx(report.mean)
    table = run.to_pandas(reduced=True)
    assert len(table) == len(rows) and "sd" in table.columns
    assert not table.duplicated(["case_id", "component", "metric"]).any()


def test_the_page_shows_the_repeats_and_a_flaky_link_shows_the_cases_failed_repeats(repeated):
    """report.html in a browser: the repeats section with its outcome bar and flaky table;
    following a flaky case's link filters the failed-cases list to its failed repeats."""
    from selenium.webdriver.common.by import By

    from conftest import headless_chromium

    with headless_chromium("the repeats section of report.html") as drv:
        drv.get((repeated / "report.html").resolve().as_uri())
        assert drv.find_element(By.ID, "console-errors").text.strip() == ""
        section = drv.find_element(By.ID, "repeats")
        assert "always pass 5" in section.text and "flaky 2" in section.text
        rows = drv.find_elements(By.CSS_SELECTOR, "#flaky-cases tbody tr")
        assert [r.text.split()[:3] for r in rows][:2] == [["c2", "end", "to"],
                                                          ["c5", "end", "to"]]
        drv.find_element(By.CSS_SELECTOR, '#flaky-cases a.case-link[data-case="c2"]').click()
        shown = [e.get_attribute("id") for e in
                 drv.find_elements(By.CSS_SELECTOR, "#cases-list details.case")
                 if e.is_displayed()]
        assert shown == ["case-c2-r2", "case-c2-r4"]
        assert drv.find_element(By.ID, "case-count").text == "2 of 8 shown"
        box = drv.find_element(By.ID, "case-search")  # typing filters by text again
        box.clear()
        box.send_keys("question 4")
        assert drv.find_element(By.ID, "case-count").text == "4 of 8 shown"


def test_repeat_judge_without_repeats_is_a_usage_error_and_writes_nothing(tmp_path):
    res = run_cli("scenario", make(tmp_path), "--out", tmp_path / "run", "--repeat-judge",
                  "fresh")
    assert res.code == 2, res
    assert "--repeat-judge fresh needs repeats: give --repeat N too" in res.err
    assert "s.yaml" in res.err and not (tmp_path / "run").exists()


def test_people_review_each_cases_first_repeat(repeated):
    from evalharness.review.session import Review
    from evalharness.runfolder import load_run

    for review in (Review.open(repeated), Review.of(load_run(repeated))):
        chosen = [review.run.results[i] for i in review.chosen]
        assert [r.key for r in chosen] == [(f"c{i}", 1) for i in range(1, N_CASES + 1)]
        assert review.result("c2").repeat == 1
