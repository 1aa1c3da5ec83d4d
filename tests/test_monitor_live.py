"""Drift alarms end to end on live traffic (issue 33, "Done when"): the instrumented shop sends
three simulated days of traffic over OTLP/HTTP to a receiver on 127.0.0.1, `evalharness
monitor --once` evaluates it and checks the last day against the two before it.

* **fault arm**: a production incident is switched on at the start of the last day — the
  shop's `schema_migration` (a renamed column breaks the text-to-SQL queries that read it).
  The monitor exits 5; its alarms name text2sql, and the root-cause-share test shows the
  *bottleneck shift*: text2sql's share of the failed traces, 0 before (the heuristic judge
  fails only generator verdicts on this traffic), rises.
* **control arm**: the same seeded traffic without the fault: exit 0, no alarm.

The check leaves out ``latency_ms`` (``drift.exclude``): those values are the spans' real
durations, this machine's load while the traffic ran (a parallel test's burst in the recent
day's second of sending can move them), not the traffic's; every other metric is seeded, so
the control's "no alarm" does not hang on the scheduler. (DuckDB only: the drift check's
SQL runs on PostgreSQL in tests/test_monitor_alarms.py and test_monitor_drift.py.)

Time: the traffic is sent in a few seconds, the drift windows are days. `traced.traffic(...,
at=...)` gives each question a simulated arrival (a seeded Poisson process, 40 a day) and
starts and ends its spans there as they are sent, so the receiver's files already hold the
three days — nothing is restamped afterwards. One traffic run and one monitor pass per arm,
shared by the arm's tests.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto")

from test_monitor_e2e import SCENARIO, complete_spans, table  # noqa: E402

from conftest import CLIResult, run_cli, traced_shop, write  # noqa: E402
from evalharness.exitcodes import ALARM  # noqa: E402
from evalharness.spans.receive.server import Receiver  # noqa: E402

QUESTIONS, PER_DAY, SEED = 120, 40.0, 33
START = datetime(2026, 11, 2, tzinfo=UTC)
"""The simulated traffic starts after this (its first arrival is one Poisson gap later)."""
FAULT, FAULTY = "schema_migration", "text2sql"
"""The live fault switched on, and the component it breaks."""
UNTOUCHED = ("router", "retriever")
"""Components the fault leaves alone, whose values are the control's trace for trace (same
seed). The generator's are not: it answers "I could not look that up" after a failed query,
so its metrics, verdicts and root-cause share move with the fault and may alarm too."""


def schedule() -> tuple[list[datetime], datetime, int]:
    """The arrivals, the end of the monitor's recent window (the hour after the newest trace)
    and how many questions arrive before the recent window: the fault's switch-on, so the
    recent day is the faulty one and the baseline two days the clean ones."""
    at = traced_shop().arrivals(QUESTIONS, PER_DAY, start=START, seed=SEED)
    end = at[-1].replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return at, end, sum(1 for t in at if t < end - timedelta(days=1))


class Arm:
    """One arm's traffic run, what the receiver wrote and the monitor's verdict on it."""

    def __init__(self, folder: Path, fault: str | None) -> None:
        self.at, self.end, self.fault_after = schedule()
        self.folder = folder
        rx = Receiver(folder / "received", port=0, rotate_seconds=0.3, retry_after=0,
                      retry_after_disk=0, min_free_bytes=0).start()
        try:
            self.run = traced_shop().traffic(QUESTIONS, endpoint=rx.url, seed=SEED,
                                             fault=fault, fault_after=self.fault_after,
                                             at=self.at)
        finally:
            rx.stop(timeout=5)  # completes its files
        self.received = rx.folder
        self.store = folder / "store.duckdb"
        monitor = write(folder / "monitor.yaml", f"""
            scenario: "{SCENARIO}"
            name: shop-live-drift
            sources: ["{self.received}"]
            sampling: {{rate: 1.0}}
            store: {{path: "{self.store}", retention_days: null}}
            drift: {{recent: 1d, baseline: 2d, min_n: 10, q: 0.05, exclude: [latency_ms]}}
            """)
        self.result: CLIResult = run_cli("monitor", monitor, "--once", "--out",
                                         folder / "report")
        report = folder / "report" / "report.json"
        self.report = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else {}

    @property
    def drift(self) -> dict:
        return self.report["drift"]

    def stored_alarms(self) -> list[tuple]:
        """The store's firing alarms: (kind, component, metric, route, details)."""
        return table(self.store, "SELECT kind, component, metric, route, details FROM alarms "
                                 "WHERE closed_at IS NULL ORDER BY key")


@pytest.fixture(scope="module")
def fault_arm(tmp_path_factory) -> Arm:
    return Arm(tmp_path_factory.mktemp("live-fault"), FAULT)


@pytest.fixture(scope="module")
def control_arm(tmp_path_factory) -> Arm:
    return Arm(tmp_path_factory.mktemp("live-control"), None)


def test_the_traffic_carries_its_simulated_schedule_as_sent(fault_arm):
    """Spans arrive with their simulated times: three days, the fault on the last one; the
    monitor's windows are those days, not the seconds the traffic took."""
    run, at = fault_arm.run, fault_arm.at
    assert run.dropped == 0 and len(run.asked) == QUESTIONS
    assert complete_spans(fault_arm.received) == run.spans
    assert not list(fault_arm.received.glob("*.part"))
    assert [a.at for a in run.asked] == at
    assert at[-1] - at[0] > timedelta(days=2)
    faulty = [a for a in run.asked if a.fault == FAULT]
    assert 0 < fault_arm.fault_after < QUESTIONS
    assert len(faulty) == QUESTIONS - fault_arm.fault_after
    starts = dict(table(fault_arm.store, "SELECT trace_id, start_time FROM traces"))
    assert len(starts) == QUESTIONS
    for a in run.asked:  # each root span starts at its arrival (stored to the microsecond)
        assert abs(starts[a.trace_id] - a.at.replace(tzinfo=None)) < timedelta(milliseconds=1)
    ends = dict(table(fault_arm.store, "SELECT trace_id, end_time FROM traces"))
    assert all(timedelta(0) < ends[t] - starts[t] < timedelta(minutes=1) for t in starts)
    # the monitor's windows: the last day, with the fault on exactly there, and two before it
    recent = fault_arm.end - timedelta(days=1)
    assert all((a.at >= recent) == (a.fault == FAULT) for a in run.asked)

    def iso(days: int) -> str:
        return f"{fault_arm.end - timedelta(days=days):%Y-%m-%dT%H:%M:%SZ}"

    assert fault_arm.drift["recent"] == {"start": iso(1), "end": iso(0)}
    assert fault_arm.drift["baseline"] == {"start": iso(3), "end": iso(1)}


def test_a_fault_switched_on_midway_raises_alarms_that_name_its_component(fault_arm):
    result, drift = fault_arm.result, fault_arm.drift
    assert result.code == ALARM, result
    assert f"alarm (new): {FAULTY}" in result.err, result.err
    alarms = drift["alarms"]
    named = {a["component"] for a in alarms}
    assert FAULTY in named, [a["message"] for a in alarms]
    assert not named & set(UNTOUCHED), [a["message"] for a in alarms]
    verdict = next(a for a in alarms if (a["kind"], a["component"]) == ("verdict", FAULTY))
    assert verdict["effect"] < 0 and verdict["baseline"]["rate"] == 1.0
    # the store remembers what fires
    stored = {(kind, component) for kind, component, *_ in fault_arm.stored_alarms()}
    assert ("verdict", FAULTY) in stored


def test_the_root_cause_share_alarm_shows_the_bottleneck_shift(fault_arm):
    """Before the fault every failed trace fails at the generator; after it, text2sql — the
    first failing component on the path — is the root cause of a large share of them."""
    drift = fault_arm.drift
    shift = [a for a in drift["alarms"] if a["kind"] == "root_cause_share"]
    rose = [a for a in shift if a["effect"] > 0]
    assert {a["component"] for a in rose} == {FAULTY}, [a["message"] for a in shift]
    alarm = next(a for a in rose if a["route"] == "all")  # and maybe per SQL route
    assert alarm["baseline"]["count"] == 0 and alarm["baseline"]["n"] >= 10
    assert alarm["recent"]["rate"] >= 0.3 and alarm["effect"] == alarm["recent"]["rate"]
    assert alarm["ci95"][0] > 0
    assert alarm["p"] < 0.001 and alarm["p_adjusted"] <= drift["q"]
    assert alarm["message"].startswith(f"root cause {FAULTY} (all routes): 0% → ")
    fell = {a["component"] for a in shift if a["effect"] < 0}
    assert fell <= {"generator"}  # the shares sum to one: the generator's falls
    # the store's alarm holds the same finding
    stored = {(k, c, r): json.loads(d) if isinstance(d, str) else d
              for k, c, _, r, d in fault_arm.stored_alarms()}
    details = stored[("root_cause_share", FAULTY, "all")]
    assert details["effect"] == pytest.approx(alarm["effect"])
    assert details["p"] == pytest.approx(alarm["p"])
    # and the traces say the same: text2sql is the root cause only after the switch-on
    causes = table(fault_arm.store, "SELECT start_time >= ?, root_cause, count(*) FROM traces "
                                    "WHERE root_cause IS NOT NULL GROUP BY ALL",
                   [fault_arm.at[fault_arm.fault_after].replace(tzinfo=None)])
    assert {c for after, c, _ in causes if not after} == {"generator"}
    assert (True, FAULTY) in {(after, c) for after, c, _ in causes}


def test_the_same_traffic_without_the_fault_raises_no_alarm(control_arm, fault_arm):
    result, drift = control_arm.result, control_arm.drift
    assert result.code == 0, result
    assert drift["alarms"] == [], [a["message"] for a in drift["alarms"]]
    tested = [t for t in drift["tests"] if not t["skipped"]]
    assert len(tested) >= 10
    assert any(t["kind"] == "root_cause_share" for t in tested)
    assert control_arm.stored_alarms() == []
    # the same questions, users and times as the fault arm: only the fault differs
    assert [(a.trace_id, a.question, a.at) for a in control_arm.run.asked] == [
        (a.trace_id, a.question, a.at) for a in fault_arm.run.asked]
    assert drift["recent"] == fault_arm.drift["recent"]
