"""The monitor as a service that runs for months (issue 33): intake decoupled from evaluation
by a queue in the store, a judge that goes down and comes back, back-pressure at the queue's
bound, and the judge's daily budget.

The judge is the loopback OpenAI-compatible server (it answers as the offline judge does);
"down" is its port closed (connection refused), as when a vLLM or Ollama box restarts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("duckdb")

from conftest import MonitorStore, StoreBackend, run_cli, write  # noqa: E402
from evalharness.monitor import passes  # noqa: E402
from evalharness.monitor.config import load_monitor  # noqa: E402
from evalharness.monitor.passes import MonitorRun  # noqa: E402
from evalharness.testing.fake_openai import FakeOpenAI  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "scenarios" / "shop"
TRAFFIC = SHOP / "monitor" / "traffic"
FIRST, SECOND = TRAFFIC / "spans-0001.jsonl", TRAFFIC / "spans-0002.jsonl"  # 45 and 15
KEY = {"EVALHARNESS_TEST_JUDGE_KEY": "sk-test-service"}


def scenario_file(folder: Path, port: int) -> Path:
    """The shop traffic's scenario with an LLM judge at ``port`` of 127.0.0.1 (no retries,
    so a judge that is down is seen at once)."""
    return write(folder / "scenario.yaml", f"""
        name: shop-traffic-llm-judge
        cases: "{SHOP / 'cases.jsonl'}"
        traces: {{path: "{TRAFFIC}", mapping: "{SHOP / 'traces-openinference.yaml'}",
                  join: question}}
        corpus: "{SHOP / 'blog_chunks.jsonl'}"
        judge:
          backend: openai
          model: fake-judge
          base_url: "http://127.0.0.1:{port}/v1"
          api_key_env: EVALHARNESS_TEST_JUDGE_KEY
          max_retries: 0
          timeout_s: 5
          cache_mode: "off"
        pipeline:
          router: {{routes: {{sql: [text2sql], blog: [retriever]}}}}
          text2sql: {{after: [router]}}
          retriever: {{after: [router]}}
          generator: {{after: [text2sql, retriever]}}
        evaluators:
          router: [routing]
          text2sql: [sql_health]
          generator:
            - faithfulness: {{availability: [stock]}}
            - answer_present
        """)


def monitor_file(folder: Path, scenario: Path, source: Path, made: MonitorStore,
                 extra: str = "") -> Path:
    return write(folder / "monitor.yaml", f"""
        scenario: "{scenario}"
        sources: ["{source}"]
        sampling: {{rate: 1.0}}
        store: {{{made.yaml}, retention_days: null}}
        drift: {{enabled: false}}
        batch_size: 10
        queue: {{retry: 0.2s, max_retry: 0.5s}}
        {extra}
        """)


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on (a judge that is down)."""
    server = FakeOpenAI()
    port = server.httpd.server_address[1]
    server.httpd.server_close()
    return port


def judge_at(port: int) -> FakeOpenAI:
    """The judge coming up at ``port``."""
    for _ in range(50):  # the port may linger a moment after a close
        try:
            return FakeOpenAI(port=port).start()
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} stayed busy")


def table(made: MonitorStore, sql: str, params: list | None = None) -> list[tuple]:
    with made.connect(read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def statuses(made: MonitorStore) -> dict[str, int]:
    return dict(table(made, "SELECT status, count(*) FROM traces GROUP BY 1"))


METRICS = ("SELECT trace_id, component, metric, value, error FROM metrics "
           "WHERE metric <> 'latency_ms' ORDER BY 1, 2, 3")
VERDICTS = "SELECT trace_id, component, passed, reason FROM verdicts ORDER BY 1, 2"


@pytest.fixture(scope="module")
def up_all_along(tmp_path_factory, store_backend: StoreBackend) -> MonitorStore:
    """The reference: both files evaluated with the judge up the whole time (on each store
    backend)."""
    folder = tmp_path_factory.mktemp("judge-up")
    made = store_backend.new(folder)
    received = folder / "received"
    received.mkdir()
    for f in (FIRST, SECOND):
        shutil.copy(f, received / f.name)
    with FakeOpenAI() as judge:
        path = monitor_file(folder, scenario_file(folder, judge.httpd.server_address[1]),
                            received, made)
        result = run_cli("monitor", path, "--once", env=KEY, separate=True)
    assert result.code == 0, result
    assert statuses(made) == {"evaluated": 60}
    return made


def test_queue_and_budget_settings_are_checked_naming_the_line(tmp_path):
    """A retry that is no span of time, a queue bound below 1, a cost budget without the
    judge's prices: one paragraph naming the file, line and field (exit 2)."""
    scenario = SHOP / "monitor" / "scenario.yaml"
    cases = {
        "queue: {retry: later}": ("line 3, field `queue.retry`", "'later' is no span of time"),
        "queue: {max: 0}": ("line 3, field `queue.max`", "greater than or equal to 1"),
        "budget: {judge_cost_per_day: 2.5}": (
            "line 3, field `budget.judge_cost_per_day`", "a cost budget needs the judge's "
            "prices"),
        "budget: {soften_at: 1.5}": ("line 3, field `budget.soften_at`", "less than 1"),
    }
    for extra, (where, what) in cases.items():
        path = write(tmp_path / "m.yaml", f"""
            scenario: "{scenario}"
            sources: ["{TRAFFIC}"]
            {extra}
            """)
        result = run_cli("monitor", path, "--once")
        assert result.code == 2, (extra, result)
        assert f"{path}, {where}" in result.err and what in result.err, (extra, result.err)


def test_judge_down_intake_goes_on_evaluation_catches_up_nothing_lost(tmp_path, up_all_along,
                                                                      monitor_store):
    """The judge is down for two passes: intake decides and queues every trace (the second
    file too), no error is stored as a value; when the judge is back one pass evaluates them
    all, with exactly the values of a store whose judge never went down."""
    port = free_port()
    received = tmp_path / "received"
    received.mkdir()
    shutil.copy(FIRST, received / FIRST.name)
    path = monitor_file(tmp_path, scenario_file(tmp_path, port), received, monitor_store)
    db = monitor_store

    down = run_cli("monitor", path, "--once", env=KEY, separate=True)
    assert down.code == 0, down
    assert "judge down, 10 back in the queue" in down.err and "45 waiting" in down.err, down.err
    assert f"127.0.0.1:{port}" in down.err  # the reason names the endpoint
    assert statuses(db) == {"queued": 45}
    assert table(db, "SELECT count(*) FROM metrics") == [(0,)]  # no error stored as a value
    assert table(db, "SELECT max(attempts) FROM queue") == [(1,)]
    report = run_cli("monitor", "report", path, "--out", tmp_path / "report", separate=True)
    assert report.code == 0, report
    view = json.loads((tmp_path / "report" / "report.json").read_text())
    assert view["queue"]["waiting"] == 45 and view["traffic"]["queued"] == 45
    assert "could not connect" in view["queue"]["last_error"]
    assert "45 traces wait for evaluation" in (tmp_path / "report" / "report.md").read_text()

    shutil.copy(SECOND, received / SECOND.name)  # traffic goes on while the judge is down
    time.sleep(0.25)  # the put-back batch's backoff (queue.retry) ends
    still = run_cli("monitor", path, "--once", env=KEY, separate=True)
    assert still.code == 0, still
    assert "15 traces stored (15 queued" in still.err and "60 waiting" in still.err, still.err
    assert statuses(db) == {"queued": 60}
    assert table(db, "SELECT max(attempts) FROM queue") == [(2,)]  # tried again, backed off

    judge = judge_at(port)
    try:
        time.sleep(0.55)  # the backoff after two failures (capped at queue.max_retry)
        back = run_cli("monitor", path, "--once", env=KEY, separate=True)
    finally:
        judge.stop()
    assert back.code == 0, back
    assert "60 evaluated, 0 waiting" in back.err, back.err
    assert statuses(db) == {"evaluated": 60}
    assert table(db, "SELECT count(*) FROM queue") == [(0,)]
    assert table(db, METRICS) == table(up_all_along, METRICS)
    assert table(db, VERDICTS) == table(up_all_along, VERDICTS)
    requests = table(db, "SELECT sum(judge_requests) FROM traces")[0][0]
    assert requests == table(up_all_along, "SELECT sum(judge_requests) FROM traces")[0][0] > 0


def test_the_service_keeps_taking_traffic_while_the_judge_is_down(tmp_path, up_all_along,
                                                                  monitor_store):
    """`monitor` without --once: with the judge down, intake still stores each new file
    (the evaluation thread backs off); when the judge comes up, the queue drains; SIGTERM
    ends it with exit 0 and the store equals the judge-up-all-along store."""
    port = free_port()
    received = tmp_path / "received"
    received.mkdir()
    shutil.copy(FIRST, received / FIRST.name)
    path = monitor_file(tmp_path, scenario_file(tmp_path, port), received, monitor_store)
    env = {**os.environ, **KEY, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "evalharness.cli", "monitor", str(path),
                             "--interval", "0.3"], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env=env)
    lines: list[str] = []
    judge = None
    try:
        deadline = time.monotonic() + 120
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("judge down") and not any("15 traces stored" in seen
                                                         for seen in lines):
                shutil.copy(SECOND, received / SECOND.name)
            if line.startswith("pass done: 15 traces stored (15 queued") and judge is None:
                judge = judge_at(port)  # intake took the file while the judge was down
            if judge is not None and line.startswith("evaluated:") and "0 waiting" in line:
                break
            if time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        if judge is not None:
            judge.stop()
    text = "".join(lines) + (rest or "")
    assert proc.returncode == 0, text
    assert text.index("judge down") < text.index("pass done: 15 traces stored"), text
    assert "judge answering again" in text, text
    db = monitor_store
    assert statuses(db) == {"evaluated": 60}, text
    assert table(db, METRICS) == table(up_all_along, METRICS)


def test_a_full_queue_holds_new_traces_in_the_sources(tmp_path, monitor_store):
    """`queue.max: 20` with the judge down: intake queues 20 traces and leaves the other 25
    in the source (back-pressure); with the judge back, each pass evaluates what is queued
    and the next takes the rest — 45 in the end, each once."""
    port = free_port()
    path = monitor_file(tmp_path, scenario_file(tmp_path, port), FIRST, monitor_store)
    text = path.read_text().replace("queue: {retry: 0.2s, max_retry: 0.5s}",
                                    "queue: {max: 20, retry: 0.2s, max_retry: 0.5s}")
    path.write_text(text)
    os.environ.update(KEY)
    try:
        run = MonitorRun(load_monitor(path))
        try:
            first = run.run_pass()
            assert (first.queued, first.held_back, first.waiting) == (20, 25, 20)
            assert first.judge_down is not None
            judge = judge_at(port)
            try:
                time.sleep(0.25)
                second = run.run_pass()  # the queue is still full: intake takes none
                assert (second.queued, second.held_back, second.evaluated) == (0, 25, 20)
                third = run.run_pass()
                assert (third.queued, third.held_back, third.evaluated) == (20, 5, 20)
                fourth = run.run_pass()
                assert (fourth.queued, fourth.held_back, fourth.evaluated) == (5, 0, 5)
            finally:
                judge.stop()
        finally:
            run.close()
    finally:
        for k in KEY:
            os.environ.pop(k, None)
    assert statuses(monitor_store) == {"evaluated": 45}


def budget_store(folder: Path, port: int, made: MonitorStore) -> tuple[Path, float]:
    """The second file (15 traces) evaluated with no budget: the store learns what a trace
    costs. MONITOR.yaml's path and the requests spent."""
    received = folder / "received"
    received.mkdir()
    shutil.copy(SECOND, received / SECOND.name)
    path = monitor_file(folder, scenario_file(folder, port), received, made)
    run = MonitorRun(load_monitor(path))
    try:
        first = run.run_pass()
        assert first.evaluated == 15 and first.budget is None
    finally:
        run.close()
    spent = table(made, "SELECT sum(judge_requests) FROM traces")[0][0]
    assert spent > 0
    shutil.copy(FIRST, received / FIRST.name)
    return path, spent


def test_the_daily_budget_slows_sampling_gracefully(tmp_path, monkeypatch, monitor_store):
    """`budget: {judge_requests_per_day: B}` with 45% of B spent: on the next 45 traces
    sampling slows as the day's spend and queue pass half of B (`budget` left-outs, counted
    in the pass line), some are still evaluated, and the day stays within B."""
    monkeypatch.setenv(*next(iter(KEY.items())))
    with FakeOpenAI() as judge:
        path, spent = budget_store(tmp_path, judge.httpd.server_address[1], monitor_store)
        budget = int(spent * 2.2)
        path.write_text(path.read_text() + f"budget: {{judge_requests_per_day: {budget}}}\n")
        run = MonitorRun(load_monitor(path))
        try:
            second = run.run_pass()
        finally:
            run.close()
    db = monitor_store
    reasons = dict(table(db, "SELECT sample_reason, count(*) FROM traces GROUP BY 1"))
    assert second.left_by_budget == reasons["budget"] > 0  # slowed, not cut off
    assert 0 < second.queued == second.evaluated < 45
    assert "left out by the judge's budget" in second.line()
    assert table(db, "SELECT sum(judge_requests) FROM traces")[0][0] <= budget
    assert second.budget["requests_budget"] == budget and second.budget["factor"] < 1


def test_a_spent_budget_holds_the_queue_until_the_next_day(tmp_path, monkeypatch,
                                                          monitor_store):
    """A day whose budget is spent sends nothing more: traces an always-rule takes are
    queued and wait (nothing lost, no error stored); the next UTC day evaluates them, as far
    as its budget goes (overshooting it by at most one trace's requests)."""
    monkeypatch.setenv(*next(iter(KEY.items())))
    with FakeOpenAI() as judge:
        path, spent = budget_store(tmp_path, judge.httpd.server_address[1], monitor_store)
        text = path.read_text().replace("sampling: {rate: 1.0}",
                                        "sampling: {rate: 1.0, always: [{route: sql}]}")
        path.write_text(text + f"budget: {{judge_requests_per_day: {spent}}}\n")
        run = MonitorRun(load_monitor(path))
        try:
            second = run.run_pass()
            assert second.evaluated == 0 and second.budget_spent, second
            assert "budget for" in second.budget_spent and "is spent" in second.budget_spent
            assert second.queued == second.waiting > 0  # the sql route's traces
            assert second.left_by_budget == 45 - second.queued
            tomorrow = datetime.now(UTC).replace(tzinfo=None) + timedelta(days=1)
            monkeypatch.setattr(passes, "_now", lambda: tomorrow)
            third = run.evaluate_queue()
        finally:
            run.close()
    db = monitor_store
    assert third.evaluated > 0
    assert third.evaluated + third.waiting == second.waiting
    next_day = table(db, "SELECT sum(judge_requests), max(judge_requests) FROM traces "
                         "WHERE evaluated_at >= ?", [tomorrow.replace(hour=0, minute=0,
                                                                      second=0)])
    assert next_day[0][0] <= spent + next_day[0][1]
