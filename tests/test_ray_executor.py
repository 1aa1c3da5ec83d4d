"""``--executor ray`` (docs/scale.md): the shop scenario on a local Ray instance gives the
local executor's results and report (timing left out), survives a worker killed mid-run,
resumes after the driver is interrupted, and runs on a two-node cluster on localhost. A node
that dies is an infrastructure failure (exit 3, the report of what completed, --resume runs
the rest), an address where no cluster answers is an input error before anything is written,
and a local instance listens on 127.0.0.1 only and leaves no process behind.

Ray is the ``ray`` extra (in ``dev``, so CI runs these); without it they are skipped, except
under ``CI=true``, where a missing Ray fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import SHOP, run_cli, shop_text_elsewhere
from evalharness.executors import group_of, groups_of
from evalharness.models import Case

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

if os.environ.get("CI") == "true":
    import ray  # noqa: F401 - CI installs the extra: a missing Ray is a failure there
else:
    ray = pytest.importorskip("ray")

TIMING = ("latency_ms", "exec_time_ratio")
"""Per-case fields that measure time, not behaviour: they differ between any two runs."""


def normalised(run: Path) -> dict[str, dict]:
    """A run's results by case id, without timing fields, judgment record ids (fresh per
    record) and the run folder's own path."""

    def strip(value, parent=None):
        if isinstance(value, dict):
            return {k: strip(v, k) for k, v in value.items()
                    if k not in TIMING and not (parent == "judgments" and k == "id")}
        if isinstance(value, list):
            return [strip(v, parent) for v in value]
        return value

    text = (run / "results.jsonl").read_text(encoding="utf-8").replace(str(run), "RUN")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = {r["case"]["id"]: strip(r) for r in rows}
    assert len(out) == len(rows), "a case was written twice"
    return out


def report_without_timing(run: Path) -> dict:
    """report.json without when the run happened, latency and cost, and the means of timing
    metrics wherever they appear (per component, per slice)."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in ("run", "cost") and not any(t in k for t in TIMING)}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    text = (run / "report.json").read_text(encoding="utf-8").replace(str(run), "RUN")
    return strip(json.loads(text))


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for the module: 2 CPUs, no dashboard, a small object store,
    listening on 127.0.0.1 only."""
    from evalharness.ray_executor import loopback_only

    with loopback_only():
        ray.init(address="local", num_cpus=2, include_dashboard=False,
                 object_store_memory=80 * 1024 * 1024, log_to_driver=False)
    yield
    ray.shutdown()


LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1", "::1")


class Descendants:
    """The processes a command started, watched while it runs (psutil, which Ray ships):
    every one seen, and every listening socket of theirs — or of the command itself, Ray's
    driver — on another address than the loopback."""

    def __init__(self, proc: subprocess.Popen) -> None:
        import psutil

        self.psutil, self.root = psutil, psutil.Process(proc.pid)
        self.seen: dict[int, psutil.Process] = {}
        self.names: set[str] = set()
        self.exposed: set[tuple[str, str, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        psutil = self.psutil
        while not self._stop.is_set():
            try:
                children = self.root.children(recursive=True)
            except psutil.Error:
                children = []
            for child in [self.root, *children]:
                try:
                    if child is not self.root and child.pid not in self.seen:
                        self.seen[child.pid] = child
                        self.names.add(child.name())
                    for conn in child.net_connections(kind="inet"):
                        if conn.status == psutil.CONN_LISTEN and conn.laddr.ip not in LOOPBACK:
                            self.exposed.add((child.name(), conn.laddr.ip, conn.laddr.port))
                except psutil.Error:
                    pass
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def left(self) -> list[str]:
        """The ones still running (the same process: psutil checks its start time)."""
        out = []
        for process in self.seen.values():
            try:
                if process.is_running() and process.status() != self.psutil.STATUS_ZOMBIE:
                    out.append(f"{process.pid} {process.name()}")
            except self.psutil.Error:
                pass
        return out


def test_groups_are_picked_by_a_stable_hash_of_the_case_id():
    cases = [Case(id=f"q{i:03d}", question="q") for i in range(100)]
    groups = groups_of(cases, size=16)
    assert sorted(i for g in groups for i in g) == [c.id for c in cases]
    assert len(groups) <= 7
    # a case's group depends on its id and the number of groups only
    assert all(group_of(i, 7) == group_of(i, 7) for g in groups for i in g)
    assert groups_of(cases[::-1], size=16) == [g[::-1] for g in groups]


def test_shop_on_ray_equals_the_local_run(local_ray, shop_cli_run, tmp_path, monkeypatch):
    _, local = shop_cli_run
    out = tmp_path / "ray-run"

    def not_here(*args, **kwargs):
        raise AssertionError("the oracle reruns ran in the driver, not on the workers")

    monkeypatch.setattr("evalharness.local_executor.call_system", not_here)
    proc_report = __import__("evalharness").run_scenario(SHOP, out=out, executor="ray")
    assert proc_report.cases["evaluated"] == 51
    assert normalised(out) == normalised(local)
    assert report_without_timing(out) == report_without_timing(local)
    # the oracle reruns ran on the workers too: the same records (in another order)
    assert sorted((out / "headroom.jsonl").read_text().splitlines()) == sorted(
        (local / "headroom.jsonl").read_text().splitlines())
    assert len((out / "headroom.jsonl").read_text().splitlines()) > 10
    assert (out / "report.md").read_text().count("## ") == (local / "report.md").read_text(
    ).count("## ")


CRASHY = '''"""The shop assistant, slowed down and (in a Ray worker) crashing once on one case."""
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, {scenarios!r})
from shop.assistant import answer as shop_answer  # noqa: E402

MARK = Path(__file__).with_name("crashed-once")


def answer(case, *, overrides=None, delay=0.0, crash_on=None):
    time.sleep(delay)
    if crash_on == case.id and "RAY_RAYLET_PID" in os.environ and not MARK.exists():
        MARK.write_text(str(os.getpid()))
        os._exit(1)  # the worker process dies mid-task
    return shop_answer(case, overrides=overrides)
'''


def crashy_scenario(tmp_path: Path, **options) -> Path:
    """The shop scenario with its system wrapped by :data:`CRASHY` (``options`` are the
    system's: ``delay``, ``crash_on``)."""
    system = tmp_path / "crashy.py"
    system.write_text(CRASHY.format(scenarios=str(SHOP.parent)), encoding="utf-8")
    text = shop_text_elsewhere()
    spec = json.dumps({"callable": f"{system}:answer", "options": options})
    text = text.replace(f"system: {SHOP.parent}/shop/assistant:answer", f"system: {spec}")
    assert f"system: {spec}" in text
    path = tmp_path / "shop.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def resume_equals_local(scenario: Path, out: Path, env: dict, tmp_path: Path, *,
                        executor: str = "ray") -> None:
    """``--resume`` of the run in ``out`` on ``executor`` completes it; its results then equal
    an uninterrupted local run's, every case once."""
    resumed = run_cli("scenario", scenario, "--out", out, "--executor", executor, "--resume",
                      "--no-headroom", "-q", env=env, separate=True)
    assert resumed.code in (0, 1), resumed
    import evalharness

    evalharness.run_scenario(scenario, out=tmp_path / "local", headroom=False)
    assert normalised(out) == normalised(tmp_path / "local")


def test_a_worker_killed_mid_run_loses_no_case(local_ray, tmp_path):
    scenario = crashy_scenario(tmp_path, crash_on="q007")
    import evalharness

    evalharness.run_scenario(scenario, out=tmp_path / "local", headroom=False)
    evalharness.run_scenario(scenario, out=tmp_path / "ray", headroom=False, executor="ray")
    assert (tmp_path / "crashed-once").is_file()  # a worker did die
    assert normalised(tmp_path / "ray") == normalised(tmp_path / "local")


def test_the_driver_interrupted_then_resumed(tmp_path):
    """The CLI on Ray (its own local instance), stopped with Ctrl-C once some cases are
    written, then --resume: the same results as an uninterrupted local run."""
    scenario = crashy_scenario(tmp_path, delay=0.15)
    out = tmp_path / "run"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    # a stopped `ray start` cluster leaves its address behind; without --address the run
    # must start its own instance, not try to join that one (it used to hang)
    note = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    stale = not note.exists()
    if stale:
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text("127.0.0.1:9\n")
    proc = subprocess.Popen([sys.executable, "-m", "evalharness.cli", "scenario", str(scenario),
                             "--out", str(out), "--executor", "ray", "--no-headroom", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    watched = Descendants(proc)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if results.is_file() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.1)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        watched.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if stale:
            note.unlink(missing_ok=True)
    written = results.read_text().count("\n")
    assert proc.returncode == 130, err
    assert 1 <= written < 51, err
    # the local instance listened on 127.0.0.1 only, and none of its processes outlived it
    assert "raylet" in watched.names, watched.names
    assert not watched.exposed, watched.exposed
    assert not watched.left(), watched.left()
    resume_equals_local(scenario, out, env, tmp_path)


def test_a_node_that_dies_stops_the_run_with_exit_3_then_resume_completes_it(tmp_path):
    """The node's RuntimeEnvAgent killed mid-run (its raylet dies with it, and every group
    still running or waiting fails): the run ends with the infrastructure exit code 3, a
    message saying what died and how many cases completed, the report of those, no case
    written as an error, and no process left behind; --resume then runs exactly the rest,
    and the results equal a local run's."""
    scenario = crashy_scenario(tmp_path, delay=0.3)
    out = tmp_path / "run"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "evalharness.cli", "scenario", str(scenario),
                             "--out", str(out), "--executor", "ray", "--concurrency", "1",
                             "--no-headroom", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    watched = Descendants(proc)
    results = out / "results.jsonl"
    killed = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not killed:
            if results.is_file() and results.read_text().count("\n") >= 1:
                for child in list(watched.seen.values()):
                    try:
                        if child.name() == "ray::RuntimeEnvAgent":
                            child.kill()
                            killed.append(child.pid)
                    except watched.psutil.Error:
                        pass
            time.sleep(0.05)
        _, err = proc.communicate(timeout=120)
    finally:
        watched.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert killed, f"no RuntimeEnvAgent to kill\n{err}"
    written = normalised(out)
    assert proc.returncode == 3, err
    assert "raylet died" in err and f"{len(written)} of 51 cases completed" in err, err
    assert "--resume" in err, err
    assert 1 <= len(written) < 51
    assert not any(r["trace"].get("error") for r in written.values()), "a case error"
    assert (out / "report.json").is_file()
    assert not watched.exposed, watched.exposed
    assert not watched.left(), watched.left()
    # the rest on this machine (the interrupted run above resumes on Ray: a run's folder
    # does not care which executor wrote it)
    resume_equals_local(scenario, out, env, tmp_path, executor="local")


def test_a_stale_or_unreachable_address_is_an_input_error_before_anything_is_written(
        tmp_path):
    """`--address auto` with the note of a cluster that has stopped, or an address where
    nothing listens: exit 2 within seconds, naming the address, nothing written (the run
    used to hang for minutes after writing run.json, run.lock and results.jsonl)."""
    ray_tmp = tmp_path / "ray-tmp"  # Ray's temp folder (RAY_TMPDIR), not the machine's
    (ray_tmp / "ray").mkdir(parents=True)
    (ray_tmp / "ray" / "ray_current_cluster").write_text("127.0.0.1:9\n")
    env = {"RAY_TMPDIR": str(ray_tmp), "RAY_ADDRESS": "", "RAY_USAGE_STATS_ENABLED": "0"}
    for address, named in (("auto", "ray_current_cluster"), ("127.0.0.1:9", "127.0.0.1:9")):
        out = tmp_path / f"run-{address}"
        t0 = time.monotonic()
        done = run_cli("scenario", SHOP, "--out", out, "--executor", "ray", "--address",
                       address, "-q", env=env, separate=True, timeout=60)
        assert done.code == 2, done
        assert time.monotonic() - t0 < 20, "it waited for the cluster"
        assert "no Ray cluster answers at 127.0.0.1:9" in done.err and named in done.err
        assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


def test_ray_failures_are_named_by_what_died():
    """Each way Ray says the machinery failed is one line naming what died; a task's own
    exception is shown through Ray's wrapper."""
    import ray.exceptions as rx

    from evalharness.errors import InfrastructureError, RunError
    from evalharness.ray_executor import _reason

    assert _reason(rx.LocalRayletDiedError()) == \
        "this machine's Ray raylet died (LocalRayletDiedError)"
    assert _reason(rx.WorkerCrashedError()).startswith("a worker process died")
    assert _reason(rx.NodeDiedError("node 1 died")).startswith("a Ray node died")
    assert _reason(rx.ActorDiedError()).startswith("the run's judge service")
    assert _reason(rx.ObjectLostError("abc" * 14, "owner", "call site")).startswith(
        "a group's results were lost")
    assert _reason(rx.GetTimeoutError("late")).startswith("the cluster did not answer")
    assert _reason(rx.RaySystemError("boom")) == "Ray failed (RaySystemError)"
    assert _reason(ConnectionError("gone")).startswith("the connection to the Ray cluster")
    wrapped = rx.RayTaskError("run_group", "traceback", rx.WorkerCrashedError())
    assert _reason(wrapped).startswith("a worker process died")
    own = rx.RayTaskError("run_group", "traceback", RunError("other inputs than the driver"))
    assert _reason(own) == ("a worker failed on a group of cases: RunError: other inputs "
                            "than the driver")
    lost = rx.RayTaskError("run_group", "tb", InfrastructureError("the judge service died"))
    assert _reason(lost) == "the judge service died"


def test_a_two_node_cluster_on_localhost_then_its_head_vanishing(tmp_path):
    """`ray start --head --num-cpus 1` and a second node joining it (`--num-cpus 1`), both in
    the foreground in their own process groups, on 127.0.0.1, stopped by process id; the CLI
    runs the shop scenario on them with --address (joining on the loopback: the cluster does
    not answer on the machine's address).

    Then the head node killed (its whole process group) while the CLI waits on the cluster:
    Ray's calls would block until Ray ends the driver a minute later with no report; the
    driver's watch of the cluster's GCS stops the run within seconds, exit 3, with the report
    of what completed. (One cluster for both: starting one is most of either's time.)"""
    import psutil

    from evalharness.testing.ray_cluster import ENV, localhost_cluster

    env = {**os.environ, **ENV}
    scenario = crashy_scenario(tmp_path, delay=0.3)
    crashy = tmp_path / "crashy-run"
    with localhost_cluster([1, 1], cwd=tmp_path) as address:
        out = tmp_path / "run"
        done = run_cli("scenario", SHOP, "--out", out, "--executor", "ray", "--address",
                       address, "--no-headroom", "-q", env=env, timeout=240, separate=True)
        assert done.code in (0, 1), done
        assert len(normalised(out)) == 51
        # both nodes joined, each on 127.0.0.1 (so listening there only)
        nodes_seen = run_cli_python(
            "import ray; from evalharness.ray_executor import loopback_only\n"
            f"with loopback_only(): ray.init(address={address!r}, log_to_driver=False)\n"
            "print(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))", env)
        assert nodes_seen.strip().splitlines()[-1] == "['127.0.0.1', '127.0.0.1']"

        def command(process: psutil.Process) -> list[str]:
            try:
                return process.cmdline()
            except psutil.Error:  # an earlier test's child, ended (a zombie) or gone
                return []

        heads = [p for p in psutil.Process().children()
                 if "--head" in command(p) and address.rsplit(":", 1)[1] in command(p)]
        assert len(heads) == 1
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalharness.cli", "scenario", str(scenario), "--out",
             str(crashy), "--executor", "ray", "--address", address, "--concurrency", "1",
             "--no-headroom", "-q"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        results = crashy / "results.jsonl"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if results.is_file() and results.read_text().count("\n") >= 1:
                    break
                time.sleep(0.05)
            os.killpg(heads[0].pid, signal.SIGKILL)
            killed_at = time.monotonic()
            _, err = proc.communicate(timeout=120)
            waited = time.monotonic() - killed_at
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    assert proc.returncode == 3, err
    assert waited < 40, f"the driver waited {waited:.0f} s"
    assert "the Ray cluster stopped answering" in err and "cases completed" in err, err
    assert (crashy / "report.json").is_file()
    assert 1 <= len(normalised(crashy)) < 51


def run_cli_python(code: str, env: dict) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_executor_names_and_addresses_are_checked(tmp_path):
    bad = run_cli("scenario", SHOP, "--out", tmp_path / "a", "--executor", "dask")
    assert bad.code == 2 and "--executor 'dask': no such executor; registered: local, ray" \
        in bad.err
    bad = run_cli("scenario", SHOP, "--out", tmp_path / "b", "--address", "auto")
    assert bad.code == 2 and "--address names a cluster" in bad.err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_worker_loads_the_drivers_scenario_and_refuses_other_files(tmp_path):
    """What a task does first, in this process: the judge settings after the command line's
    overrides arrive whole (nested prices as models), and a worker that sees other input
    files than the driver refuses to run."""
    import dataclasses

    from evalharness.errors import RunError
    from evalharness.executors import WorkerSpec, _state
    from evalharness.judge.base import Price
    from evalharness.scenario import load_scenario

    driver = load_scenario(SHOP, judge_overrides={"prices": {"m": Price(input=1, output=2)},
                                                  "concurrency": 3})
    spec = WorkerSpec.of(driver, tmp_path, None)
    worker = _state(spec).scenario
    assert worker.spec.judge == driver.spec.judge
    assert isinstance(worker.spec.judge.prices["m"], Price)
    other = dataclasses.replace(spec, inputs=(*spec.inputs[:-1], "0" * 64))
    with pytest.raises(RunError, match="other inputs than the driver"):
        _state(other)
    # a long-lived worker keeps the last MAX_STATES scenarios, not every run's
    from evalharness.executors import _STATES, MAX_STATES

    for n in range(MAX_STATES + 1):
        _state(dataclasses.replace(spec, concurrency=10 + n))
    assert len(_STATES) == MAX_STATES and spec.key() not in _STATES


JUDGED_CASES = [{"id": f"j{i:02d}", "question": f"How much is coat {i % 6}?",
                 "gold": {"answer": f"Coat {i % 6} costs {10 + i % 6} euros."}}
                for i in range(24)]
JUDGED_TRACES = [{"case_id": f"j{i:02d}", "generator": {
    "answer": f"Coat {i % 6} costs {10 + i % 6} euros. It is wool.",
    "contexts": [f"Coat {i % 6}: {10 + i % 6} euros, wool."]}} for i in range(24)]


def judged_scenario(tmp_path: Path, base_url: str, cache: str, extra: str = "") -> Path:
    """24 cases whose answers repeat every 6: the same judgments are asked by cases in
    different groups, so on different workers at the same time."""
    from conftest import write, write_jsonl

    write_jsonl(tmp_path / "cases.jsonl", JUDGED_CASES)
    write_jsonl(tmp_path / "traces.jsonl", JUDGED_TRACES)
    return write(tmp_path / f"judged-{cache}.yaml", f"""
        name: judged
        cases: cases.jsonl
        traces: traces.jsonl
        pipeline: {{generator: {{}}}}
        judge: {{backend: openai, model: j-1, embedding_model: e-1, base_url: "{base_url}",
                 cache: {cache}.sqlite, concurrency: 2, max_retries: 0,
                 prices: {{j-1: {{input: 1000, output: 1000}}, e-1: {{input: 10, output: 0}}}}
                 {extra}}}
        evaluators:
          generator: [faithfulness, answer_relevancy]
    """)


def metric_values(run: Path) -> dict:
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    return {r["case"]["id"]: {m: (v["value"], v["error"]) for m, v in
                              r["components"]["generator"]["metrics"].items()} for r in rows}


def test_the_llm_judge_is_one_for_the_whole_cluster(local_ray, tmp_path):
    """Every worker's judge requests go through one judge service: its concurrency is the
    cluster's (not per worker), two workers asking the same judgment pay once (the same
    requests as a local run), a rerun makes none, and max_cost holds across workers."""
    import evalharness
    from evalharness.testing.fake_openai import FakeOpenAI

    with FakeOpenAI(latency_s=0.05) as server:
        local = evalharness.run_scenario(judged_scenario(tmp_path, server.base_url, "a"),
                                         out=tmp_path / "local")
        paid = sum(server.counts.values())
        assert paid == local.judge["usage"]["requests"] > 0
        server.counts.clear()
        server.max_in_flight.clear()
        scenario = judged_scenario(tmp_path, server.base_url, "b")
        on_ray = evalharness.run_scenario(scenario, out=tmp_path / "ray", executor="ray")
        assert sum(server.counts.values()) == paid == on_ray.judge["usage"]["requests"], \
            "two workers paid twice for one judgment"
        assert server.max_in_flight["chat"] <= 2, "the concurrency limit is per worker"
        assert metric_values(tmp_path / "ray") == metric_values(tmp_path / "local")
        server.counts.clear()
        again = evalharness.run_scenario(scenario, out=tmp_path / "again", executor="ray")
        assert sum(server.counts.values()) == 0 and again.judge["usage"]["requests"] == 0
        ceiling = round(local.judge["usage"]["cost"] / 3, 6)
        capped = judged_scenario(tmp_path, server.base_url, "c", f", max_cost: {ceiling}")
        report = evalharness.run_scenario(capped, out=tmp_path / "capped", executor="ray")
    usage = report.judge["usage"]
    assert usage["cost"] <= ceiling and usage["refused"] > 0


def test_a_judge_service_that_died_fails_the_group_not_its_cases(local_ray, tmp_path):
    """A worker whose judge service is gone gets judgments and embeddings that are errors
    with the reason (never an exception inside an evaluator), and the judge says it lost the
    service: run_group then fails the group (an infrastructure failure, --resume reruns it)
    rather than return results whose judgments are that error."""
    import dataclasses

    import ray as ray_

    from evalharness.executors import ClusterJudge, JudgeService, WorkerSpec
    from evalharness.judge import CLAIMS, ClaimsInput
    from evalharness.scenario import load_scenario

    scenario = load_scenario(judged_scenario(tmp_path, "http://127.0.0.1:9/v1", "d"))
    spec = dataclasses.replace(WorkerSpec.of(scenario, tmp_path, None), shared_judge=True,
                               spent=1.5)
    service = ray_.remote(JudgeService).options(num_cpus=0).remote(spec)
    # a resumed run's earlier spending counts against the service's ceiling
    assert ray_.get(service.summary.remote())["limits"]["spent"] == 1.5
    judge = ClusterJudge(scenario.spec.judge, service)
    assert judge.identity()["backend"] == "openai" and judge.is_llm
    assert judge.embedding_model == "e-1" and judge.label() == "openai:j-1"
    ray_.kill(service)
    out = judge.run_many(CLAIMS, [ClaimsInput(question="q", answer="a")])
    vectors = judge.embed_many([["a text"]])
    judge.close()
    assert out[0].output is None and "judge service" in out[0].error
    assert "could not be reached" in out[0].error and "come from the cache" in out[0].error
    assert vectors[0].vectors is None and "judge service" in vectors[0].error
    assert judge.lost == out[0].error


def test_a_monitors_backlog_evaluated_on_ray_equals_the_local_evaluation(local_ray, tmp_path):
    """`monitor --executor ray`: a queue of 60 traces (intake done, evaluation not: a
    backlog) is evaluated by the cluster's workers — each loads the monitor's scenario — and
    the store ends as the monitor's own in-process evaluation leaves it."""
    pytest.importorskip("duckdb")
    from evalharness.monitor import store
    from evalharness.monitor.config import load_monitor
    from evalharness.monitor.passes import MonitorRun
    from evalharness.ray_executor import RayExecutor

    shop = SHOP.parent / "shop"
    traffic = shop / "monitor" / "traffic"
    stores = {}
    for name in ("local", "ray"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "monitor.yaml").write_text(
            f'scenario: "{shop / "monitor" / "scenario.yaml"}"\n'
            f'sources: ["{traffic}"]\nsampling: {{rate: 1.0}}\n'
            "store: {path: store.duckdb, retention_days: null}\n"
            "drift: {enabled: false}\nbatch_size: 7\n")
        monitor = load_monitor(folder / "monitor.yaml")
        run = MonitorRun(monitor, executor=RayExecutor() if name == "ray" else None)
        try:
            intake = run.intake()
            assert intake.queued == 60 and intake.evaluated == 0
            done = run.evaluate_queue()
            assert (done.evaluated, done.waiting) == (60, 0)
            if name == "ray":
                assert done.batches == 1  # one executor run took the whole backlog
        finally:
            run.close()
        stores[name] = folder / "store.duckdb"
    query = {"metrics": "SELECT trace_id, component, metric, value, error FROM metrics "
                        "WHERE metric NOT LIKE '%latency%' ORDER BY 1, 2, 3",
             "verdicts": "SELECT * FROM verdicts ORDER BY 1, 2",
             "traces": "SELECT trace_id, status, root_cause, passed FROM traces ORDER BY 1"}
    with store.connect(stores["local"], read_only=True) as a, \
            store.connect(stores["ray"], read_only=True) as b:
        for what, sql in query.items():
            assert a.execute(sql).fetchall() == b.execute(sql).fetchall(), what
