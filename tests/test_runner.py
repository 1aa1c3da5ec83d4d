"""The runner: system errors recorded per case, async systems, streaming, interrupt and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import run_cli, write, write_jsonl

SYSTEM = '''
"""A slow, deterministic test system; case ids ending in 7 raise."""
import asyncio, time
from evalharness import Trace

def answer(case, delay=0.0, fail_on="7"):
    time.sleep(delay)
    if case.id.endswith(fail_on):
        raise ValueError(f"cannot answer {case.id}")
    n = int(case.id[1:])
    return Trace(case_id=case.id,
                 router={"routes": ["sql"] if n % 2 else ["blog"], "latency_ms": float(n)},
                 retriever={"ids": [f"d{n % 3}", "d1", "d9"]} if n % 2 == 0 else None,
                 generator={"answer": "yes" if n % 5 else "", "latency_ms": 2.0 * n})

async def answer_async(case, delay=0.0):
    await asyncio.sleep(delay)
    return {"router": {"routes": ["sql"]}, "generator": {"answer": case.question}}
'''


def make(tmp_path, n=24, delay=0.0, callable_="system.py:answer", extra=""):
    write(tmp_path / "system.py", SYSTEM)
    cases = [{"id": f"c{i}", "question": f"q{i}", "gold": {
        "routes": ["sql"] if i % 3 else ["blog"], "relevant": {"d1": 1, "d2": 2}}}
        for i in range(1, n + 1)]
    write_jsonl(tmp_path / "cases.jsonl", cases)
    return write(tmp_path / "s.yaml", f"""
        name: slow
        cases: cases.jsonl
        system: {{callable: "{callable_}", options: {{delay: {delay}}}}}
        evaluators:
          router: [route_accuracy]
          retriever: [{{ranking: {{k: [1, 3]}}}}]
          generator: [answer_present, generation_cost]
        batch_size: 4
        concurrency: 2
        {extra}
    """)


def strip_run(report: dict) -> dict:
    report = dict(report)
    report.pop("run")
    return report


def test_system_exception_is_the_case_error_and_the_run_goes_on(tmp_path):
    scenario = make(tmp_path)
    res = run_cli("scenario", scenario, "--out", tmp_path / "o", "--quiet")
    assert res.code == 0, res
    results = [json.loads(x) for x in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert len(results) == 24
    failed = {r["case"]["id"]: r for r in results if r["trace"]["error"]}
    assert set(failed) == {"c7", "c17"}
    assert failed["c7"]["trace"]["error"] == "ValueError: cannot answer c7"
    assert failed["c7"]["components"]["router"]["status"] == "not_run"
    assert "the system failed for this case" in failed["c7"]["components"]["router"]["reason"]
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["cases"]["system_errors"] == 2
    assert report["components"]["router"]["metrics"]["route_accuracy"]["n"] == 22


def test_async_system(tmp_path):
    scenario = make(tmp_path, callable_="system.py:answer_async")
    res = run_cli("scenario", scenario, "--out", tmp_path / "o", "--quiet")
    assert res.code == 0, res
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["components"]["generator"]["metrics"]["answer_present"]["mean"] == 1.0
    assert report["cases"]["evaluated"] == 24


def _interrupt(tmp_path, sig, out):
    scenario = make(tmp_path, delay=0.15)
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalharness.cli", "scenario", str(scenario), "--out", str(out),
         "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k != "EVALHARNESS_LOAD_PLUGINS"})
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.is_file() and results.read_text().count("\n") >= 6:
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    return scenario, proc.returncode, stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_run_resumes_to_the_same_report(tmp_path, sig):
    out = tmp_path / "interrupted"
    scenario, code, stderr = _interrupt(tmp_path, sig, out)
    lines = (out / "results.jsonl").read_text().splitlines()
    assert 6 <= len(lines) < 24, "the kill must land midway"
    if sig == signal.SIGINT:
        assert code == 130, stderr
        assert "--resume" in stderr and "Traceback" not in stderr
        assert all(json.loads(line) for line in lines), "every line is complete"
        assert not (out / "report.json").exists()
    res = run_cli("scenario", scenario, "--out", out, "--resume", "--quiet")
    assert res.code == 0, res
    ids = [json.loads(x)["case"]["id"] for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"c{i}" for i in range(1, 25)), "no case lost or repeated"
    full = tmp_path / "full"
    assert run_cli("scenario", scenario, "--out", full, "--quiet").code == 0
    resumed = json.loads((out / "report.json").read_text())
    uninterrupted = json.loads((full / "report.json").read_text())
    assert strip_run(resumed) == strip_run(uninterrupted)
    assert resumed["run"]["resumed_cases"] == len(lines)


def test_resume_drops_a_torn_last_line(tmp_path):
    scenario = make(tmp_path, n=6)
    out = tmp_path / "o"
    assert run_cli("scenario", scenario, "--out", out, "--quiet").code == 0
    results = out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    res = run_cli("scenario", scenario, "--out", out, "--resume", "--quiet")
    assert res.code == 0, res
    assert len(results.read_text().splitlines()) == 6


def test_resume_refuses_a_changed_scenario(tmp_path):
    scenario = make(tmp_path, n=4)
    out = tmp_path / "o"
    assert run_cli("scenario", scenario, "--out", out, "--quiet").code == 0
    scenario.write_text(scenario.read_text().replace("concurrency: 2", "concurrency: 3"))
    res = run_cli("scenario", scenario, "--out", out, "--resume", "--quiet")
    assert res.code == 2 and "different version of the scenario" in res.err


def test_resume_needs_out_and_something_to_resume(tmp_path):
    scenario = make(tmp_path, n=2)
    assert run_cli("scenario", scenario, "--resume").code == 2
    res = run_cli("scenario", scenario, "--out", tmp_path / "empty", "--resume")
    assert res.code == 2 and "nothing to resume" in res.err


def test_results_stream_before_the_run_ends(tmp_path):
    """With a slow system, finished cases reach results.jsonl long before the last one."""
    scenario = make(tmp_path, n=12, delay=0.3)
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "evalharness.cli", "scenario", str(scenario),
                             "--out", str(out), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen = 0
    while proc.poll() is None:
        if (out / "results.jsonl").is_file():
            seen = max(seen, (out / "results.jsonl").read_text().count("\n"))
        if 0 < seen < 12:
            break
        time.sleep(0.05)
    proc.communicate(timeout=60)
    assert 0 < seen < 12


def test_default_output_folder(tmp_path):
    scenario = make(tmp_path, n=2)
    res = run_cli("scenario", scenario, "--quiet", cwd=tmp_path)
    assert res.code == 0, res
    (folder,) = (tmp_path / "runs").iterdir()
    assert folder.name.startswith("slow-") and (folder / "report.json").is_file()


def test_progress_bar_is_silent_without_a_tty(tmp_path):
    scenario = make(tmp_path, n=3)
    res = run_cli("scenario", scenario, "--out", tmp_path / "o")
    assert res.code == 0 and "cases" not in res.err and "━" not in res.err


def test_concurrency_option_is_validated(tmp_path):
    scenario = make(tmp_path, n=2)
    res = run_cli("scenario", scenario, "--out", tmp_path / "o", "--concurrency", "0")
    assert res.code == 2 and "--concurrency" in res.err


def test_resume_refuses_changed_cases(tmp_path):
    scenario = make(tmp_path, n=4)
    out = tmp_path / "o"
    assert run_cli("scenario", scenario, "--out", out, "--quiet").code == 0
    cases = tmp_path / "cases.jsonl"
    cases.write_text(cases.read_text().replace('"q1"', '"q one"'))
    res = run_cli("scenario", scenario, "--out", out, "--resume", "--quiet")
    assert res.code == 2 and f"{cases} changed since" in res.err, res


def test_system_errors_are_announced(tmp_path):
    scenario = make(tmp_path, n=8)
    res = run_cli("scenario", scenario, "--out", tmp_path / "o")
    assert res.code == 0, res
    assert "1 of 8 cases failed in the system under test" in " ".join(res.out.split())
    assert "1 cases failed in the system under test" in (tmp_path / "o" / "report.md").read_text()


def test_quiet_still_names_failed_gates(tmp_path):
    scenario = make(tmp_path, n=4, extra="gates: [router.route_accuracy >= 0.99]")
    res = run_cli("scenario", scenario, "--out", tmp_path / "o", "--quiet")
    assert res.code == 1 and res.out == ""
    assert "gate failed: router.route_accuracy >= 0.99" in res.err


def test_resume_notices_an_edit_to_any_file_of_a_package_system(tmp_path):
    """`system: package.module:function` (imported from the scenario's folder): every .py
    file of the package is part of the run's fingerprint, not only a `file.py:function`."""
    write_jsonl(tmp_path / "cases.jsonl",
                [{"id": f"c{i}", "question": "q", "gold": {"routes": ["sql"]}} for i in range(2)])
    write(tmp_path / "bot" / "__init__.py", "")
    write(tmp_path / "bot" / "routes.py", "ROUTES = ['sql']\n")
    write(tmp_path / "bot" / "main.py", """
        from bot.routes import ROUTES

        def answer(case):
            return {"case_id": case.id, "router": {"routes": ROUTES}}
    """)
    scenario = write(tmp_path / "pkg.yaml", """
        name: pkg
        cases: cases.jsonl
        system: bot.main:answer
        pipeline:
          router: {routes: {sql: []}}
        evaluators:
          router: [route_accuracy]
    """)
    out = tmp_path / "o"
    assert run_cli("scenario", scenario, "--out", out, "--quiet").code == 0
    inputs = json.loads((out / "run.json").read_text())["inputs"]
    assert str(tmp_path / "bot" / "routes.py") in inputs
    (tmp_path / "bot" / "routes.py").write_text("ROUTES = ['blog']\n")
    res = run_cli("scenario", scenario, "--out", out, "--resume", "--quiet")
    assert res.code == 2 and f"{tmp_path / 'bot' / 'routes.py'} changed since" in res.err, res


def test_a_package_folder_path_is_a_system_too(tmp_path):
    """`system: path/to/package:function` — a package folder named by its path, as a file is
    (so a scenario copied elsewhere can name the package by an absolute path): it runs, its
    files are fingerprinted, and a folder that is no package is a clear input error."""
    write_jsonl(tmp_path / "cases.jsonl",
                [{"id": f"c{i}", "question": "q", "gold": {"routes": ["sql"]}} for i in range(2)])
    write(tmp_path / "src" / "bot" / "__init__.py", "from .main import answer\n")
    write(tmp_path / "src" / "bot" / "main.py", """
        def answer(case):
            return {"case_id": case.id, "router": {"routes": ["sql"]}}
    """)
    body = """
        name: pkg
        cases: cases.jsonl
        system: {system}
        pipeline:
          router: {{routes: {{sql: []}}}}
        evaluators:
          router: [route_accuracy]
    """
    scenario = write(tmp_path / "pkg.yaml", body.format(system="src/bot:answer"))
    out = tmp_path / "o"
    assert run_cli("scenario", scenario, "--out", out, "--quiet").code == 0
    assert json.loads((out / "report.json").read_text())["components"]["router"]["metrics"][
        "route_accuracy"]["mean"] == 1.0
    inputs = json.loads((out / "run.json").read_text())["inputs"]
    assert str(tmp_path / "src" / "bot" / "main.py") in inputs
    (tmp_path / "src" / "empty").mkdir()
    bad = write(tmp_path / "bad.yaml", body.format(system="src/empty:answer"))
    res = run_cli("validate", bad)
    assert res.code == 2 and "field `system`" in res.err and "__init__.py" in res.err, res


def test_the_local_executor_keeps_the_executor_protocol(tmp_path):
    """`local` is an executor like Ray's: `run(spec, work, emit, stopped)` from a thread
    without an event loop gives the lines a run writes, for the spec attached to the
    driver's loaded scenario; without that it refuses."""
    from conftest import SHOP
    from evalharness.errors import RunError
    from evalharness.executors import Work, attach
    from evalharness.local_executor import LocalExecutor
    from evalharness.prepare import load_system, make_judge, prepare_context
    from evalharness.runner import worker_spec
    from evalharness.scenario import load_scenario

    scenario = load_scenario(SHOP)
    context = prepare_context(scenario, tmp_path, make_judge(scenario))
    spec = worker_spec(scenario, context, tmp_path, None)
    ids = [c.id for c in scenario.cases[:5]]
    got: list = []
    executor = LocalExecutor()
    with pytest.raises(RunError, match="driver's process"):
        executor.run(spec, [Work(i) for i in ids], lambda g, lines: None, lambda: False)
    with attach(spec, scenario, load_system(scenario), context):
        stopped = executor.run(spec, [Work(i) for i in ids],
                               lambda group, lines: got.extend(zip(group, lines, strict=True)),
                               lambda: False)
    assert stopped is False
    assert sorted(w.case_id for w, _ in got) == sorted(ids)
    lines = {w.case_id: json.loads(line) for w, line in got}
    assert all(lines[i]["case"]["id"] == i for i in ids)
    assert all(lines[i]["end_to_end"] is not None for i in ids)  # metrics, then verdicts
