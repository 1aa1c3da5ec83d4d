"""Exit codes that mean one thing each (docs/ci.md, "Exit codes"), and gates over the cases
that should have reached their component (issue 26).

Every code of :data:`evalharness.exitcodes.MEANINGS` is driven through the CLI here, and the
table in docs/ci.md is checked against the same dictionary."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import CASES, ROOT, TRACES, run_cli, write, write_jsonl
from conftest import JUDGED_UNREACHABLE as JUDGED
from conftest import small_scenario as small
from evalharness import exitcodes


def misrouted() -> list[dict]:
    """The small scenario's traces with c1 (gold route sql) sent to the blog only, and c3's
    SQL right: text2sql runs on one of the two cases whose gold route needs it, correctly."""
    traces = [dict(t) for t in TRACES]
    traces[0] = {"case_id": "c1", "router": {"routes": ["blog"]}, "retriever": {"ids": ["d1"]},
                 "generator": {"answer": "The Navy Coat costs 40."}}
    traces[2]["text2sql"] = {"sql": "SELECT name FROM items WHERE price < 50"}
    return traces


# -- gates over the cases that should have reached the component --------------------------------


def test_a_case_the_router_sent_elsewhere_counts_against_the_components_gate(tmp_path):
    """Was: the gate passed at 1.000 on the one case that reached text2sql, exit 0, while the
    other case's text2sql verdict was 'fail: did not run: the gold route needs it'."""
    scenario = small(tmp_path, gate="text2sql.exact_match >= 0.9", traces=misrouted())
    out = tmp_path / "run"
    res = run_cli("scenario", scenario, "--out", out, "--junit-xml", out / "junit.xml")
    assert res.code == exitcodes.GATE_FAILED, res
    report = json.loads((out / "report.json").read_text())
    gate = report["gates"][0]
    assert gate["value"] == 1.0 and not gate["passed"]
    assert (gate["n"], gate["errors"], gate["missing"]) == (2, 1, 1)
    assert "(1 never reached text2sql although their gold route needs it)" in gate["reason"]
    assert report["components"]["text2sql"]["cases"]["missing"] == 1
    assert report["components"]["retriever"]["cases"]["missing"] == 0
    assert any(w.startswith("text2sql did not run on 1 case whose gold route needs it")
               for w in report["warnings"]), report["warnings"]
    # the terminal, report.md and the JUnit file say how many were missing
    assert "1 of 2 (1 missing)" in res.out
    assert "| 1 of 2, 1 missing (max 5%) |" in (out / "report.md").read_text()
    verdicts = [json.loads(line)["verdicts"].get("text2sql")
                for line in (out / "results.jsonl").read_text().splitlines()]
    assert verdicts[0]["status"] == "fail"  # the case's own verdict agrees with the gate
    junit = ET.parse(out / "junit.xml").getroot()
    gate_case = junit.find(".//testcase[@classname='small.gates']")
    failure = gate_case.find("failure")
    assert failure is not None and "1 of them missing" in failure.text


def test_missing_cases_are_errors_under_max_error_rate(tmp_path):
    """The documented choice: a missing case is an error of the gate (not a 0 mixed into its
    mean, which a lower-is-better metric would read as perfect), so `max_error_rate` decides."""
    scenario = small(tmp_path, traces=misrouted(), gate="text2sql.exact_match >= 0.9")
    scenario.write_text(scenario.read_text().replace(
        "  - text2sql.exact_match >= 0.9",
        "  - {gate: text2sql.exact_match >= 0.9, max_error_rate: 0.5}"))
    res = run_cli("scenario", scenario, "--out", tmp_path / "run", "-q")
    assert res.code == exitcodes.OK, res
    gate = json.loads((tmp_path / "run" / "report.json").read_text())["gates"][0]
    assert gate["passed"] and gate["missing"] == 1 and gate["error_rate"] == 0.5


def test_without_gold_routes_nothing_is_missing(tmp_path):
    """A case without gold routes needs what ran: a component the router skipped is not
    missing."""
    traces = misrouted()
    cases = [dict(c, gold={k: v for k, v in c["gold"].items() if k != "routes"})
             for c in CASES]
    scenario = small(tmp_path, traces=traces, gate="text2sql.exact_match >= 0.9")
    write_jsonl(tmp_path / "cases.jsonl", cases)
    run_cli("scenario", scenario, "--out", tmp_path / "run", "-q")
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["gates"][0]["missing"] == 0
    assert report["components"]["text2sql"]["cases"]["missing"] == 0


# -- every exit code, through the CLI -------------------------------------------------------------

FAILING_SYSTEM = """
    def answer(case):
        raise ConnectionError("the catalogue service is down")
"""

SLOW_SYSTEM = """
    import time

    from evalharness import Trace


    def answer(case):
        time.sleep(0.4)
        return Trace(case_id=case.id, generator={"answer": "ok"})
"""




def drive(code: int, tmp_path: Path):
    """Make `evalharness scenario` exit with ``code``; returns (result, run folder)."""
    out = tmp_path / "run"
    if code == exitcodes.OK:
        return run_cli("scenario", small(tmp_path), "--out", out, "-q"), out
    if code == exitcodes.GATE_FAILED:
        scenario = small(tmp_path, gate="router.route_accuracy >= 0.9")
        return run_cli("scenario", scenario, "--out", out, "-q"), out
    if code == exitcodes.INPUT:
        return run_cli("scenario", tmp_path / "no-such.yaml", "--out", out, "-q"), out
    if code == exitcodes.INFRASTRUCTURE:
        scenario = small(tmp_path, extra=JUDGED)
        scenario.write_text(scenario.read_text().replace("[answer_present]",
                                                         "[faithfulness, answer_present]"))
        return run_cli("scenario", scenario, "--out", out, "-q", "--no-cache",
                       env={"OPENAI_API_KEY": "sk-test"}), out
    if code == exitcodes.NOTHING_EVALUATED:
        scenario = small(tmp_path, system=FAILING_SYSTEM, gate="router.route_accuracy >= 0")
        scenario.write_text(scenario.read_text().replace("gates:\n  - router.route_accuracy "
                                                         ">= 0\n", ""))
        return run_cli("scenario", scenario, "--out", out, "-q", "--no-headroom"), out
    if code == exitcodes.INTERRUPTED:
        scenario = small(tmp_path, system=SLOW_SYSTEM, extra="concurrency: 1\n")
        proc = subprocess.Popen([sys.executable, "-m", "evalharness.cli", "scenario",
                                 str(scenario), "--out", str(out), "-q"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (out / "run.json").is_file():
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)

        class Done:
            pass

        done = Done()
        done.code, done.out, done.err = proc.returncode, stdout, stderr
        return done, out
    raise AssertionError(f"no way to drive exit code {code}")


@pytest.mark.parametrize("code", sorted(exitcodes.MEANINGS))
def test_every_exit_code(code, tmp_path):
    res, out = drive(code, tmp_path)
    assert res.code == code, (res.code, res.out[-2000:], res.err[-2000:])
    if code == exitcodes.OK:
        assert res.err == ""
    if code == exitcodes.GATE_FAILED:
        assert "gate failed: router.route_accuracy >= 0.9" in res.err
    if code == exitcodes.INPUT:
        assert "no-such.yaml" in res.err and not out.exists()
    if code == exitcodes.INFRASTRUCTURE:
        report = json.loads((out / "report.json").read_text())
        assert report["infrastructure"], report
        assert re.match(r"the judge \(openai:judge-1\) gave no usable answer to any of the \d+ "
                        r"judgments? asked of it; most often: .*could not connect to "
                        r"http://127.0.0.1:9/v1", report["infrastructure"][0])
        assert "error: the run could not do its work: the judge" in res.err
        assert res.err.rstrip().endswith("(exit code 3)")
        assert "> **The run could not do its work:** the judge" in \
            (out / "report.md").read_text()
        assert "<b>The run could not do its work</b>: the judge" in \
            (out / "report.html").read_text()
    if code == exitcodes.NOTHING_EVALUATED:
        assert "error: the system failed on every case (3 of 3): nothing was evaluated" \
            in res.err
        assert (out / "report.json").is_file()  # the report is written all the same
    if code == exitcodes.INTERRUPTED:
        assert "continue with: evalharness scenario" in res.err and "--resume" in res.err


def test_the_exit_code_table_in_the_docs_is_the_one_the_cli_uses():
    text = (ROOT / "docs" / "ci.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\d+)` \| (.+?) \|$", section, re.MULTILINE))
    assert {int(k) for k in rows} == set(exitcodes.MEANINGS)
    for code, meaning in exitcodes.MEANINGS.items():
        assert rows[str(code)] == meaning
    help_text = run_cli("scenario", "--help").out
    for code in exitcodes.MEANINGS:
        assert re.search(rf"\b{code}\b", help_text), f"--help does not mention exit code {code}"


# -- a run whose executor could not finish ------------------------------------------------------

DYING_EXECUTOR = '''
from evalharness import hookimpl
from evalharness.errors import InfrastructureError
from evalharness.executors import run_group, work_groups
from evalharness.registry import Executor


class Dying:
    """Runs the first group of one case, then its "cluster" dies."""

    def __init__(self, address):
        pass

    def run(self, spec, work, emit, stopped):
        groups = work_groups(work, size=1)
        emit(groups[0], run_group(spec, groups[0]))
        left = sum(map(len, groups[1:]))
        raise InfrastructureError(f"the node died; {left} cases did not complete")

    def close(self):
        pass


@hookimpl
def register_executors(register):
    register(Executor("dying", Dying, description="dies after one case"))
'''


def test_an_executor_that_dies_is_exit_3_and_resume_completes_the_run(tmp_path):
    scenario = small(tmp_path, system="""
        from evalharness import Trace


        def answer(case):
            return Trace(case_id=case.id, router={"routes": ["sql"]},
                         generator={"answer": "The Navy Coat costs 40."})
    """)
    plugin = write(tmp_path / "dying.py", DYING_EXECUTOR)
    out = tmp_path / "run"
    res = run_cli("scenario", scenario, "--out", out, "--plugin", plugin, "--executor",
                  "dying", "--junit-xml", out / "junit.xml")
    assert res.code == exitcodes.INFRASTRUCTURE, res
    assert "error: the run could not do its work: the node died; 2 cases did not complete" \
        in res.err
    report = json.loads((out / "report.json").read_text())
    assert report["cases"]["evaluated"] == 1 and report["cases"]["total"] == 3
    assert report["infrastructure"][1].startswith("2 of 3 cases did not complete and have no "
                                                  "result: every gate counts them as errors")
    gate = report["gates"][0]
    assert (gate["n"], gate["errors"], gate["missing"], gate["passed"]) == (3, 2, 2, False)
    assert len((out / "results.jsonl").read_text().splitlines()) == 1  # no error lines
    run = ET.parse(out / "junit.xml").getroot().find(".//testcase[@name='run']")
    assert run is not None and "node died" in run.find("error").get("message")
    resumed = run_cli("scenario", scenario, "--out", out, "--resume", "-q", "--plugin", plugin)
    assert resumed.code in (exitcodes.OK, exitcodes.GATE_FAILED), resumed
    ids = [json.loads(line)["case"]["id"]
           for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == ["c1", "c2", "c3"]
    assert not json.loads((out / "report.json").read_text())["infrastructure"]



def test_ctrl_c_while_loading_is_130_not_1(tmp_path, monkeypatch):
    """Was: click's "Aborted!" and exit 1 — the code of a failed gate."""
    import evalharness.api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(evalharness.api, "load", interrupted)
    res = run_cli("scenario", small(tmp_path), "--out", tmp_path / "run")
    assert res.code == exitcodes.INTERRUPTED and res.err.strip() == "interrupted", res
    assert not (tmp_path / "run").exists()


STARTING_EXECUTOR = '''
from evalharness import hookimpl
from evalharness.errors import InfrastructureError
from evalharness.registry import Executor


class Failing:
    """An executor whose cluster cannot start (``address`` "down"), or whose start is
    interrupted (``address`` "ctrl-c")."""

    def __init__(self, address):
        self.address = address

    def start(self):
        if self.address == "ctrl-c":
            raise KeyboardInterrupt
        raise InfrastructureError("the local cluster did not start within 180 s")

    def run(self, spec, work, emit, stopped):
        raise AssertionError("never runs")

    def close(self):
        pass


@hookimpl
def register_executors(register):
    register(Executor("failing", Failing, description="cannot start"))
'''


@pytest.mark.parametrize(("address", "code", "said"), [
    ("down", exitcodes.INFRASTRUCTURE,
     "error: the run could not do its work: the local cluster did not start within 180 s "
     "(exit code 3)"),
    ("ctrl-c", exitcodes.INTERRUPTED,
     "interrupted before the run began: nothing was written: run the same command again"),
])
def test_an_executor_that_cannot_start_writes_nothing(tmp_path, address, code, said):
    """Before the run folder exists: a cluster that cannot start is exit 3, Ctrl-C while it
    starts is 130 without a --resume hint (there is nothing to resume)."""
    plugin = write(tmp_path / "failing.py", STARTING_EXECUTOR)
    res = run_cli("scenario", small(tmp_path), "--out", tmp_path / "run", "--plugin", plugin,
                  "--executor", "failing", "--address", address)
    assert res.code == code and res.err.strip() == said, res
    assert not (tmp_path / "run").exists()
