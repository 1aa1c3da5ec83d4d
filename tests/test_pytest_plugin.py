"""The pytest plugin (``pytest --evalharness SCENARIO``): items per case × component verdict
and per gate, one run per session for only the cases the selected items need."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest

# Imported before pytester's in-process sessions, which drop the modules first imported inside
# them (and numpy cannot be imported twice in one process).
import evalharness.api  # noqa: F401
from conftest import (
    CASES,
    JUDGED_UNREACHABLE,
    SHOP,
    SMALL_SCENARIO,
    TRACES,
    run_cli,
    small_scenario,
    write,
    write_jsonl,
)
from evalharness.plugins import load_plugins
from evalharness.scenario import load_scenario

pytest_plugins = ["pytester"]
load_scenario(SHOP)  # imports every built-in plugin and what they import
load_plugins()

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def one_process(pytester, monkeypatch):
    """The sessions these tests start find this repository's pyproject.toml (the scenario
    lives here), whose addopts run the suite in two workers: they run in one process
    (set after pytester's own set-up, which clears PYTEST_ADDOPTS)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-n 0")


def _statuses(recorder) -> dict[str, str]:
    """nodeid tail (``CASE::COMPONENT`` or ``gates::GATE``) -> passed/failed/skipped."""
    out = {}
    for rep in recorder.getreports("pytest_runtest_logreport"):
        if rep.when == "call" or (rep.when == "setup" and not rep.passed):
            out[rep.nodeid.split("shop.yaml::", 1)[1]] = rep.outcome
    return out


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> Path:
    """The shop scenario run by the CLI: the reference the pytest session must agree with."""
    out = tmp_path_factory.mktemp("cli") / "run"
    result = run_cli("scenario", SHOP, "--out", out, "--no-headroom", "-q")
    assert result.code == 0, result
    return out


def test_a_session_fails_exactly_what_the_run_fails(pytester, cli_run):
    out = pytester.path / "runs"
    rec = pytester.inline_run("--evalharness", str(SHOP), "--evalharness-out", str(out),
                              "-p", "no:cacheprovider")
    got = _statuses(rec)
    expected = {}
    for line in (cli_run / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        verdicts = dict(r["verdicts"])
        if r.get("end_to_end"):
            verdicts["end_to_end"] = r["end_to_end"]
        for component, v in verdicts.items():
            expected[f"{r['case']['id']}::{component}"] = {
                "pass": "passed", "fail": "failed", "error": "failed",
                "not_applicable": "skipped"}[v["status"]]
    for g in json.loads((cli_run / "report.json").read_text())["gates"]:
        expected[f"gates::{g['name']}"] = "passed" if g["passed"] else "failed"
    assert got == expected
    assert "failed" in got.values() and "passed" in got.values()
    # one run, of every case (the gates need them all)
    (folder,) = out.iterdir()
    assert len((folder / "results.jsonl").read_text().splitlines()) == 51


def test_failure_message_is_the_evaluators_reason(pytester):
    result = pytester.runpytest_inprocess("--evalharness", str(SHOP), "-k", "q003",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)
    text = result.stdout.str()
    assert "running shop on 1 of 51 cases" in text
    assert "q003 retriever: recall@5 = 0.667 (needs >= 0.75)" in text
    assert "relevant chunks not in the top 5: b046 (grade 1)" in text
    assert "equivalent: different results on the database" in text  # the SQL cascade's reason
    assert "Traceback" not in text and "pytest_plugin.py" not in text


def test_k_runs_one_case_and_unfiltered_gates_stay_out(pytester):
    out = pytester.path / "runs"
    rec = pytester.inline_run("--evalharness", str(SHOP), "--evalharness-out", str(out),
                              "-k", "q001", "-p", "no:cacheprovider")
    got = _statuses(rec)
    assert got and all(k.startswith("q001::") for k in got)
    (folder,) = out.iterdir()
    lines = (folder / "results.jsonl").read_text().splitlines()
    assert [json.loads(x)["case"]["id"] for x in lines] == ["q001"]
    assert json.loads((folder / "run.json").read_text())["selection"]["chosen"] == 1


def _passing_and_failing(cli_run: Path) -> tuple[str, str]:
    records = [json.loads(x) for x in (cli_run / "results.jsonl").read_text().splitlines()]
    passing = [r["case"]["id"] for r in records
               if all(v["status"] in ("pass", "not_applicable") for v in r["verdicts"].values())
               and r["end_to_end"]["status"] == "pass"]
    failing = [r["case"]["id"] for r in records if r["end_to_end"]["status"] == "fail"]
    assert passing and failing, "the shop has cases that pass and cases that fail"
    return passing[0], failing[0]


@pytest.fixture
def shop(pytester) -> Path:
    """The shop scenario copied into the pytester folder (its rootdir and cache stay there)."""
    shutil.copytree(SHOP.parent / "shop", pytester.path / "shop")
    return Path(shutil.copy(SHOP, pytester.path / "shop.yaml"))


def test_last_failed_reruns_only_the_failed_cases(pytester, shop, cli_run):
    ok, bad = _passing_and_failing(cli_run)
    out = pytester.path / "runs"
    first = pytester.inline_run("--evalharness", str(shop), "--evalharness-out", str(out),
                                "-k", f"{ok} or {bad}")
    failed_first = {k for k, v in _statuses(first).items() if v == "failed"}
    assert {k.split("::")[0] for k in failed_first} == {bad}
    second = pytester.inline_run("--evalharness", str(shop), "--evalharness-out", str(out),
                                 "--lf")
    assert set(_statuses(second)) == failed_first
    newest = max(out.iterdir(), key=lambda p: p.name)
    ran = [json.loads(x)["case"]["id"] for x in
           (newest / "results.jsonl").read_text().splitlines()]
    assert ran == [bad]


def test_passes_when_the_verdicts_pass(pytester, cli_run):
    ok, _ = _passing_and_failing(cli_run)
    result = pytester.runpytest_inprocess("--evalharness", str(SHOP), "-k", ok,
                                          "-p", "no:cacheprovider")
    assert result.ret == 0
    assert result.parseoutcomes()["passed"] >= 2


def test_inert_without_the_option(pytester):
    pytester.makepyfile(test_one="def test_one():\n    assert True\n")
    scenario = pytester.path / "shop.yaml"
    scenario.write_text(SHOP.read_text())
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")  # the folder, yaml and all
    result.assert_outcomes(passed=1)
    assert "evalharness:" not in result.stdout.str()  # no run announced, no run folder
    assert pytester.parseconfig().pluginmanager.get_plugin("evalharness-session") is None
    # the plugin is installed: its option and fixture exist all the same
    assert pytester.parseconfig().pluginmanager.has_plugin("evalharness")


def test_with_paths_the_session_collects_both(pytester):
    pytester.makepyfile(test_one="def test_one():\n    assert True\n")
    result = pytester.runpytest_inprocess("--evalharness", str(SHOP), "test_one.py", "-k",
                                          "test_one or q005", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 2  # test_one and q005's passing items


def test_a_broken_scenario_is_a_collection_error_with_evalharness_message(pytester):
    bad = pytester.path / "bad.yaml"
    bad.write_text("name: bad\ncases: nowhere.jsonl\n")
    result = pytester.runpytest_inprocess("--evalharness", str(bad), "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    text = result.stdout.str()
    assert "bad.yaml" in text and "nowhere.jsonl" in text and "Traceback" not in text


def test_missing_scenario_is_a_usage_error(pytester):
    result = pytester.runpytest_inprocess("--evalharness", "nope.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no such scenario file" in result.stderr.str()


def test_fixture_runs_once_per_options(pytester):
    pytester.makepyfile(test_fx=f"""
        SHOP = {str(SHOP)!r}

        def test_sample(evalharness_run):
            report = evalharness_run(SHOP, sample=6, seed=2)
            assert report.cases["total"] == 6
            assert "stratified by gold route" in report.selection["how"]
            assert report is evalharness_run(SHOP, sample=6, seed=2)  # cached

        def test_gate(evalharness_run):
            report = evalharness_run(SHOP, limit=3)
            assert report.components["router"].metrics["route_accuracy"].n == 3
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_ctrl_c_during_the_run_stops_the_session(pytester):
    """An interrupted run (the first Ctrl-C saves what was evaluated) ends the pytest session
    as a KeyboardInterrupt does, rather than failing every item with "interrupted"."""
    pytester.makeconftest("""
        import evalharness.api

        def fake_execute(*args, **kwargs):
            raise evalharness.api.RunInterrupted(kwargs["out"], 3, 51)

        def pytest_configure(config):
            evalharness.api.execute = fake_execute
    """)
    # in a subprocess: an in-process session's KeyboardInterrupt would end this one too
    result = pytester.runpytest_subprocess("--evalharness", str(SHOP), "-k", "q001",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "KeyboardInterrupt" in result.stdout.str()
    assert "3 of 51 cases are saved" in result.stdout.str()


def test_a_pipe_as_the_scenario_is_a_usage_error_saying_so(pytester):
    fifo = pytester.path / "s.yaml"
    os.mkfifo(fifo)
    result = pytester.runpytest_inprocess("--evalharness", str(fifo))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "is a named pipe (FIFO), not a regular file" in result.stderr.str()


def _small(folder: Path, ids: list[str]) -> Path:
    """The shared small recorded-traces scenario in ``folder``, its three cases renamed."""
    cases, traces = copy.deepcopy(CASES), copy.deepcopy(TRACES)
    for case, trace, new in zip(cases, traces, ids, strict=True):
        case["id"] = trace["case_id"] = new
    write_jsonl(folder / "cases.jsonl", cases)
    write_jsonl(folder / "traces.jsonl", traces)
    write(folder / "items.sql", """
        CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL);
        INSERT INTO items VALUES (1, 'Navy Coat', 40), (2, 'Camel Coat', 120);
    """)
    return write(folder / "small.yaml", SMALL_SCENARIO)


def test_junitxml_of_ids_with_control_characters_is_well_formed(pytester):
    """`--junitxml` wrote a case id's control characters raw into `classname` (pytest escapes
    `name` only): the file was not XML. Names now carry them as visible escapes."""
    plain = _small(pytester.path / "plain", ["c1", "c2", "c3"])
    expected = pytester.runpytest_inprocess("--evalharness", str(plain),
                                            "-p", "no:cacheprovider").parseoutcomes()
    odd = _small(pytester.path / "odd", ["bell\x07", "nul\x00 esc\x1b[0m", "c3"])
    xml = pytester.path / "x.xml"
    result = pytester.runpytest_inprocess("--evalharness", str(odd), "--junitxml", str(xml),
                                          "-p", "no:cacheprovider")
    assert result.parseoutcomes() == expected  # each item found its case's verdict
    testcases = ElementTree.parse(xml).findall(".//testcase")  # well-formed, or it raises
    assert testcases
    illegal = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
    for tc in testcases:
        assert not illegal.search(tc.get("classname") + tc.get("name")), tc.attrib
    classnames = {tc.get("classname") for tc in testcases}
    assert {"odd.small.yaml.bell\\x07", "odd.small.yaml.nul\\x00 esc\\x1b\\x5b0m"} <= classnames


def test_a_case_id_with_double_colons_or_a_bracket_is_selected_by_its_node_id(pytester):
    """`::` splits a node id and `[` starts its parameters, so `pytest s.yaml::a::b::router`
    found nothing; the test name escapes them (docs/pytest.md) and the node id selects."""
    scenario = _small(pytester.path, ["a::b", "q[1]", "end:"])
    listed = pytester.runpytest_inprocess("--evalharness", str(scenario), "--collect-only",
                                          "-q", "-p", "no:cacheprovider").stdout.lines
    expected = {"a::b": "small.yaml::a:\\x3ab::router",
                "q[1]": "small.yaml::q\\x5b1]::router",
                "end:": "small.yaml::end\\x3a::router"}
    assert set(expected.values()) <= set(listed)
    for case, nodeid in expected.items():
        out = pytester.path / "runs" / str(len(case) + ord(case[0]))
        rec = pytester.inline_run(nodeid, "--evalharness", str(scenario), "--evalharness-out",
                                  str(out), "-p", "no:cacheprovider")
        reports = [r for r in rec.getreports("pytest_runtest_logreport") if r.when == "call"]
        assert [r.nodeid for r in reports] == [nodeid], case
        (folder,) = out.iterdir()
        lines = (folder / "results.jsonl").read_text().splitlines()
        assert [json.loads(x)["case"]["id"] for x in lines] == [case]


def test_pytest_plugin_says_why_the_run_could_not_do_its_work(tmp_path, pytester,
                                                                 monkeypatch):
    scenario = small_scenario(tmp_path, extra=JUDGED_UNREACHABLE)
    scenario.write_text(scenario.read_text().replace("[answer_present]",
                                                     "[faithfulness, answer_present]"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    result = pytester.runpytest_inprocess("--evalharness", str(scenario), "-p",
                                          "no:cacheprovider", "--evalharness-out",
                                          str(tmp_path / "runs"))
    text = result.stdout.str()
    assert "the run could not do its work: the judge (openai:judge-1) gave no usable answer" in text
    assert "(the CLI exits 3 on this run; docs/ci.md)" in text


def _flaky_scenario(folder: Path) -> Path:
    """test_repeat_outcomes' repeated scenario with two cases: stable_pass, and flaky (its
    router fails in repeat 2 of 3; generator and end to end pass in every repeat)."""
    from test_repeat_outcomes import repeat_scenario

    return repeat_scenario(folder, ids=["stable_pass", "flaky"])


def _counts(result) -> dict[str, int]:
    """The summary line's counts, without the warnings (of pytester's in-process runs)."""
    return {k: v for k, v in result.parseoutcomes().items() if k not in ("warning", "warnings")}


def test_a_flaky_item_is_reported_as_flaky_and_passes(pytester):
    scenario = _flaky_scenario(pytester.path / "rep")
    result = pytester.runpytest_inprocess("--evalharness", str(scenario), "-v",
                                          "--evalharness-out", str(pytester.path / "runs"),
                                          "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    assert _counts(result) == {"passed": 5, "flaky": 1}
    result.stdout.fnmatch_lines(["*rep.yaml::flaky::router FLAKY*",
                                 "*rep.yaml::flaky::generator PASSED*",
                                 "*= 5 passed, *1 flaky in *"])
    assert "running rep on 2 of 2 cases, 3 times each," in result.stdout.str()


def test_a_flaky_item_in_the_progress_line_is_k(pytester):
    scenario = _flaky_scenario(pytester.path / "rep")
    result = pytester.runpytest_inprocess("--evalharness", str(scenario), "-k", "router",
                                          "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    # the letter in the progress line (after the run's own line: "." then "K")
    result.stdout.fnmatch_lines(["rep/rep.yaml K * [[]100%[]]"])
    assert _counts(result) == {"passed": 1, "flaky": 1, "deselected": 4}


def test_evalharness_flaky_fail_fails_a_flaky_item_saying_so(pytester):
    scenario = _flaky_scenario(pytester.path / "rep")
    result = pytester.runpytest_inprocess("--evalharness", str(scenario),
                                          "--evalharness-flaky=fail", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _counts(result) == {"passed": 5, "failed": 1}
    text = result.stdout.str()
    assert ("flaky router: flaky: passed 2 of 3 repeats; repeat 2 failed: "
            "route_accuracy = 0 (needs >= 1)") in text
    assert "repeat 2 failed: route_accuracy = 0 (needs >= 1)\n" \
           "route_accuracy: predicted ['blog'], gold ['sql']" in text


def test_evalharness_repeat_runs_each_case_n_times(pytester):
    """Without `repeat:` in the scenario, --evalharness-repeat makes the run repeat; a stable
    failure is one failed item whatever the repeats (and --junitxml says which are flaky)."""
    from test_repeat_outcomes import repeat_scenario

    scenario = repeat_scenario(pytester.path / "rep", ids=["stable_fail", "flaky"])
    scenario.write_text(scenario.read_text().replace("repeat: 3\n", ""))
    once = pytester.runpytest_inprocess("--evalharness", str(scenario), "-p",
                                        "no:cacheprovider")
    assert _counts(once) == {"passed": 5, "failed": 1}  # repeat 1: flaky passes
    xml = pytester.path / "x.xml"
    out = pytester.path / "runs"
    result = pytester.runpytest_inprocess("--evalharness", str(scenario), "--evalharness-repeat",
                                          "2", "--junitxml", str(xml), "--evalharness-out",
                                          str(out), "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _counts(result) == {"passed": 4, "failed": 1, "flaky": 1}
    assert "stable_fail router: failed in 2 of 2 repeats; repeat 1: " in result.stdout.str()
    (folder,) = out.iterdir()
    lines = [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines()]
    assert sorted((x["case"]["id"], x["repeat"]) for x in lines) == [
        ("flaky", 1), ("flaky", 2), ("stable_fail", 1), ("stable_fail", 2)]
    flaky = [tc for tc in ElementTree.parse(xml).iter("testcase")
             if tc.find("properties/property[@name='evalharness_flaky']") is not None]
    assert [tc.get("name") for tc in flaky] == ["router"]
    bad = pytester.runpytest_inprocess("--evalharness", str(scenario), "--evalharness-repeat",
                                       "0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--evalharness-repeat: '0': give a whole number from 1 to 1000" in bad.stderr.str()
