"""The monitor end to end on live traffic (issue 32, "Done when"): the instrumented shop sends
its spans over OTLP/HTTP to `evalharness traces receive` with the generator fault switched on
midway, `evalharness monitor --once` evaluates what the receiver completed, users' feedback is
posted to the feedback endpoint, a second `--once` counts nothing twice, and `monitor report`
shows the feedback joined (thumbs, judge-user agreement, thumbs-down traces linked)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto")

from conftest import MonitorStore, run_cli, traced_shop, write  # noqa: E402
from evalharness.monitor import feedback as F  # noqa: E402
from evalharness.monitor import store  # noqa: E402
from evalharness.spans.paths import trace_files  # noqa: E402
from evalharness.spans.readers import detect  # noqa: E402
from evalharness.spans.receive.server import Receiver  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "scenarios" / "shop"
SCENARIO = SHOP / "monitor" / "scenario.yaml"  # the shop traces scenario shop-monitor.yaml uses
QUESTIONS, FAULT_AFTER = 60, 30
TOKEN = "e2e-feedback-token"


@pytest.fixture
def receiver(tmp_path):
    """`traces receive` on a free port of 127.0.0.1, its files completed 0.3 s after they are
    opened; stopped after the test whatever happens (so no `.part` file stays)."""
    rx = Receiver(tmp_path / "received", port=0, rotate_seconds=0.3, retry_after=0,
                  retry_after_disk=0, min_free_bytes=0).start()
    try:
        yield rx
    finally:
        rx.stop(timeout=5)


@pytest.fixture
def endpoint():
    """The feedback endpoint for a store, on a free port of 127.0.0.1; always shut down."""
    made = []

    def start(monitor_file: Path):
        settings = F.monitor_settings(monitor_file)
        server = F.make_server(settings.store, token=TOKEN, key=settings.key,
                               redact_user_ids=settings.redact_user_ids)
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        made.append((server, thread))
        return server

    yield start
    for server, thread in made:
        server.shutdown()
        server.server_close()
        thread.join(5)


def post(server, records: list[dict]) -> tuple[int, dict]:
    con = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    try:
        con.request("POST", "/feedback", body=json.dumps(records).encode(),
                    headers={"Content-Type": "application/json",
                             "Authorization": f"Bearer {TOKEN}"})
        answer = con.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        con.close()


def complete_spans(folder: Path) -> int:
    return sum(1 for f in trace_files(folder) for _ in detect(f).read(f))


def wait_for_files(rx: Receiver, spans: int, timeout: float = 10.0) -> None:
    """Until every span sent is in a complete file (rotated by age, not by stopping)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not list(rx.folder.glob("*.part")) and complete_spans(rx.folder) == spans:
            return
        time.sleep(0.1)
    raise AssertionError(f"{rx.folder}: the receiver did not complete its files in {timeout} s")


def monitor_yaml(folder: Path, received: Path, store: MonitorStore) -> Path:
    return write(folder / "monitor.yaml", f"""
        scenario: "{SCENARIO}"
        name: shop-live
        sources: ["{received}"]
        sampling:
          rate: 0.5
          by: route
          always: [{{feedback: down}}, {{error: true}}]
          seed: 3
        store: {{{store.yaml}}}
        windows: [hour, day]
        batch_size: 20
        """)


def table(path, sql: str, params: list | None = None) -> list[tuple]:
    with store.connect(path, read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


@pytest.mark.slow
def test_live_traffic_to_monitor_to_feedback_to_report(tmp_path, receiver, endpoint,
                                                       monitor_store):
    run = traced_shop().traffic(QUESTIONS, endpoint=receiver.url, seed=21, fault="generator",
                            fault_after=FAULT_AFTER)
    assert run.dropped == 0 and len(run.asked) == QUESTIONS
    wait_for_files(receiver, run.spans)
    sent = [a.trace_id for a in run.asked]
    faulty = {a.trace_id for a in run.asked if a.fault == "generator"}
    assert len(faulty) == QUESTIONS - FAULT_AFTER

    path = monitor_yaml(tmp_path, receiver.folder, monitor_store)
    db = monitor_store.target
    first = run_cli("monitor", path, "--once")
    assert first.code == 0, first
    assert f"pass done: {QUESTIONS} traces stored" in first.err, first.err
    assert sorted(t for (t,) in table(db, "SELECT trace_id FROM traces")) == sorted(sent)
    left_out = {t for (t,) in table(db, "SELECT trace_id FROM traces WHERE NOT sampled")}
    assert left_out  # rate 0.5: some wait for a thumbs-down

    # users' feedback over the endpoint: down on faulty traces (some left out by sampling),
    # up on traces before the fault
    down = [a for a in run.asked if a.fault][:8]
    up = [a for a in run.asked if not a.fault][:6]
    assert any(a.trace_id in left_out for a in down)
    at = datetime.now(UTC).isoformat(timespec="milliseconds")  # a retry then stores nothing
    records = ([{"trace_id": a.trace_id, "thumbs": "down", "user_id": a.user_id,
                 "comment": "The price is wrong.", "at": at} for a in down]
               + [{"trace_id": a.trace_id, "thumbs": "up", "user_id": a.user_id, "at": at}
                  for a in up])
    server = endpoint(path)
    status, answer = post(server, records)
    assert status == 200, answer
    assert (answer["stored"], answer["resolved"], answer["unresolved"]) == (
        len(records), len(records), 0)
    assert post(server, records)[1]["duplicates"] == len(records)  # a retried POST: once

    second = run_cli("monitor", path, "--once")
    assert second.code == 0, second
    reconsidered = sum(a.trace_id in left_out for a in down)
    assert (f"pass done: {reconsidered} traces stored ({reconsidered} queued, 0 left out by "
            f"sampling, 0 unmappable), {reconsidered} evaluated, 0 waiting") in second.err
    receiver.stop(timeout=5)
    assert not list(receiver.folder.glob("*.part"))
    third = run_cli("monitor", path, "--once")  # after the receiver stopped: nothing new
    assert third.code == 0 and "pass done: 0 traces stored" in third.err, third

    # every sent trace stored once; metrics and verdicts once per trace
    ids = [t for (t,) in table(db, "SELECT trace_id FROM traces")]
    assert sorted(ids) == sorted(sent) and len(set(ids)) == QUESTIONS
    assert table(db, "SELECT count(*) FROM (SELECT trace_id, component, metric FROM metrics "
                     "GROUP BY 1, 2, 3 HAVING count(*) > 1) AS twice") == [(0,)]
    assert table(db, "SELECT count(*) FROM metrics WHERE trace_id NOT IN "
                     "(SELECT trace_id FROM traces WHERE status = 'evaluated')") == [(0,)]
    evaluated = {t for (t,) in table(db, "SELECT trace_id FROM traces WHERE status = "
                                         "'evaluated'")}
    assert {a.trace_id for a in down} <= evaluated  # every thumbs-down evaluated

    # the generator is the top root cause after the fault, and rare before it
    causes = Counter(dict(table(
        db, "SELECT root_cause, count(*) FROM traces WHERE root_cause IS NOT NULL AND "
            f"trace_id IN ({', '.join('?' * len(faulty))}) GROUP BY 1", sorted(faulty))))
    assert causes.most_common(1)[0][0] == "generator", causes
    before = Counter(dict(table(
        db, "SELECT root_cause, count(*) FROM traces WHERE root_cause IS NOT NULL AND "
            f"trace_id NOT IN ({', '.join('?' * len(faulty))}) GROUP BY 1", sorted(faulty))))
    assert before["generator"] < causes["generator"], (before, causes)

    # the report: the feedback joined to the evaluated traces
    out = tmp_path / "report"
    report = run_cli("monitor", "report", path, "--out", out)
    assert report.code == 0, report
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["traffic"]["traces"] == QUESTIONS
    assert data["feedback"]["records"] == len(records) and data["feedback"]["unknown_trace"] == 0
    assert (data["feedback"]["thumbs"]["up"], data["feedback"]["thumbs"]["down"]) == (
        len(up), len(down))
    judged = [t for t, p in table(db, "SELECT trace_id, passed FROM traces WHERE status = "
                                      "'evaluated'") if p is not None]
    with_feedback = {r["trace_id"] for r in records} & set(judged)
    agreement = data["agreement"]["end_to_end"]
    assert agreement["n"] == len(with_feedback) > 0
    assert sum(agreement["confusion"].values()) == len(with_feedback)
    assert agreement["confusion"]["judge_fail_user_down"] > 0  # the judge saw what users saw
    shown = {x["trace_id"]: x for x in data["drilldown"]["traces"]}
    for a in down:
        assert "thumbs down" in shown[a.trace_id]["why"]
        assert [f["thumbs"] for f in shown[a.trace_id]["feedback"]] == [-1]
    html = (out / "report.html").read_text(encoding="utf-8")
    for a in down:
        assert f'id="trace-{a.trace_id}"' in html
    linked = {t for t in shown if f'href="#trace-{t}"' in html}
    assert linked  # the windows' failed traces link into the drill-down
    assert (out / "report.md").is_file()
