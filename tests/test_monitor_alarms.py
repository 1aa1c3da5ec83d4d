"""Drift alarms over time (docs/monitor.md, "Drift alarms" and "Alerts"): an alarm is stored
and sent once when it starts firing and once when it resolves; senders are plugins' (the
built-in webhook POSTs JSON, a failing sender is a warning); MONITOR.yaml's `drift:` and
`alerts:` are checked like the rest of it; `monitor --once` and `monitor report` exit 5 when
an alarm fires, and the report shows the check — on the shop's recorded traffic, whose third
day carries the generator fault, the alarms name the generator, and a day without the fault
raises none."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_monitor import FEEDBACK, SCENARIO, TRAFFIC
from test_monitor_drift import DAY0, store, traffic

from conftest import MonitorStore, run_cli, write
from evalharness.errors import ScenarioError
from evalharness.monitor import alerts as A
from evalharness.monitor.config import load_monitor

pytest.importorskip("duckdb")

END = DAY0 + timedelta(days=5)


def check(con, until=END, min_n=20):
    return A.run_check(con, recent="1d", baseline="4d", q=0.05, min_n=min_n, until=until)


def test_an_alarm_is_sent_when_it_starts_and_when_it_resolves(store_backend):
    con = store(traffic(2, 320, 100, drop=True), backend=store_backend)
    first = check(con)
    assert first["alarms"] and all(t["alarm"] for t in first["alarms"])
    fired = A.update_alarms(con, first, monitor="shop", store="s.duckdb")
    assert {a.state for a in fired} == {"firing"}
    assert {a.key for a in fired} == {A.alarm_key(t) for t in first["alarms"]}
    assert "metric/generator/faithfulness/all" in {a.key for a in fired}
    alert = next(a for a in fired if a.key == "metric/generator/faithfulness/all")
    assert alert.message.startswith("generator faithfulness (all routes)")
    assert json.loads(json.dumps(alert.to_json()))["alarm"]["p_adjusted"] <= 0.05
    # the same check again: still firing, nothing to send; the rows say so
    assert A.update_alarms(con, first, monitor="shop") == []
    opened = con.execute("SELECT count(*) FROM alarms WHERE closed_at IS NULL").fetchone()[0]
    assert opened == len(fired)
    # the drift is gone (the same traffic without the drop): every alarm resolves
    store(traffic(2, 320, 100), con)
    calm = check(con)
    assert not calm["alarms"]
    resolved = A.update_alarms(con, calm, monitor="shop")
    tested = {A.alarm_key(t) for t in calm["tests"] if not t["skipped"]}
    assert {a.key for a in resolved} == {a.key for a in fired} & tested
    assert "metric/generator/faithfulness/all" in {a.key for a in resolved}
    assert {a.state for a in resolved} == {"resolved"}
    assert resolved[0].message.startswith("resolved: ")
    # those the calm check could not test (too few failed traces) still fire
    still = {k for (k,) in con.execute("SELECT key FROM alarms WHERE closed_at IS NULL")
             .fetchall()}
    assert still == {a.key for a in fired} - tested
    # back again: the resolved ones fire anew
    store(traffic(2, 320, 100, drop=True), con)
    again = A.update_alarms(con, check(con), monitor="shop")
    assert {a.key for a in again} == {a.key for a in resolved}
    con.close()


def test_a_check_that_could_not_test_an_alarm_leaves_it_firing(store_backend):
    con = store(traffic(2, 320, 100, drop=True), backend=store_backend)
    fired = A.update_alarms(con, check(con), monitor="shop")
    too_few = check(con, min_n=1000)  # every test skipped
    assert not too_few["alarms"] and all(t["skipped"] for t in too_few["tests"])
    assert A.update_alarms(con, too_few, monitor="shop") == []
    assert con.execute("SELECT count(*) FROM alarms WHERE closed_at IS NULL").fetchone()[0] \
        == len(fired)
    con.close()


def test_the_check_ends_at_the_hour_after_the_newest_trace(store_backend):
    con = store(traffic(1, 40, 10), backend=store_backend)
    newest = con.execute("SELECT max(coalesce(start_time, stored_at)) FROM traces "
                         "WHERE status = 'evaluated'").fetchone()[0]
    end = A.check_end(con)
    assert end - timedelta(hours=1) <= newest < end and end.minute == 0
    assert A.check_end(con, END) == END
    con.execute("DELETE FROM traces")
    assert A.check_end(con) is None and A.run_check(
        con, recent="1d", baseline="7d", q=0.05, min_n=20) is None
    con.close()


# -- senders -----------------------------------------------------------------------------------


class Receiver:
    """A local HTTP server recording what is POSTed to it; answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.seen: list[tuple[dict, dict]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - stdlib's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.seen.append((dict(self.headers), json.loads(body)))
                self.send_response(status)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def an_alert(state="firing") -> A.Alert:
    return A.Alert("shop", state, "metric/generator/faithfulness/all",
                   "generator faithfulness (all routes): mean 0.91 → 0.42",
                   {"kind": "metric", "component": "generator", "p": 0.0001},
                   {"baseline": {}, "recent": {}, "q": 0.05}, "s.duckdb")


def test_the_webhook_posts_the_alert_as_json_with_its_token(receiver, monkeypatch):
    from evalharness.builtin import WebhookSettings

    monkeypatch.setenv("ALERT_TOKEN", "t0k3n")
    A.post_webhook(an_alert(), WebhookSettings(url=receiver.url, token_env="ALERT_TOKEN"))
    ((headers, body),) = receiver.seen
    assert headers["Authorization"] == "Bearer t0k3n"
    assert headers["Content-Type"] == "application/json"
    assert body["version"] == 1 and body["state"] == "firing" and body["monitor"] == "shop"
    assert body["alarm"]["component"] == "generator"
    monkeypatch.delenv("ALERT_TOKEN")
    with pytest.raises(RuntimeError, match="ALERT_TOKEN .* is not set"):
        A.post_webhook(an_alert(), WebhookSettings(url=receiver.url, token_env="ALERT_TOKEN"))


def test_a_failing_sender_is_a_warning_and_the_others_still_send(receiver):
    from evalharness.builtin import WebhookSettings

    refusing = Receiver(status=500)
    warnings: list[str] = []
    try:
        done = A.send([an_alert(), an_alert("resolved")], [
            ("broken", A.post_webhook, WebhookSettings(url=refusing.url)),
            ("webhook", A.post_webhook, WebhookSettings(url=receiver.url))], warnings.append)
    finally:
        refusing.close()
    assert done.alerts == 2 and len(receiver.seen) == 2
    assert len(warnings) == 2 and "alert sender 'broken' could not send the firing alarm " \
        "metric/generator/faithfulness/all: RuntimeError: " in warnings[0]
    assert "answered 500" in warnings[0]


def test_excluded_metrics_are_not_tested(store_backend):
    """`drift.exclude` leaves metrics out of the check — by name or as component.metric —
    so they neither alarm nor enter the Benjamini–Hochberg family."""
    con = store(traffic(2, 320, 100, drop=True), backend=store_backend)
    try:
        whole = check(con)
        metrics = {(t["component"], t["metric"]) for t in whole["tests"]
                   if t["kind"] == "metric"}
        assert ("generator", "faithfulness") in metrics
        other = sorted(metrics - {("generator", "faithfulness")})[0]
        result = A.run_check(con, recent="1d", baseline="4d", q=0.05, min_n=20, until=END,
                             exclude=["faithfulness", f"{other[0]}.{other[1]}"])
        left = {(t["component"], t["metric"]) for t in result["tests"] if t["kind"] == "metric"}
        assert left == metrics - {("generator", "faithfulness"), other}
        assert result["excluded"] == sorted(["faithfulness", f"{other[0]}.{other[1]}"])
        assert not any(t["metric"] == "faithfulness" for t in result["alarms"])
    finally:
        con.close()


def test_alerts_go_through_the_outbox_at_least_once(store_backend, receiver):
    """The alarm's transaction writes its alerts to the outbox (a monitor killed before
    sending sends them at its next check); `deliver` marks each sent once its sender took it,
    a failing sender's alerts wait out a backoff and are sent when it is back — each once —
    and a sender still failing a day later is given up, with a warning."""
    import contextlib
    from datetime import datetime

    from evalharness.builtin import WebhookSettings

    con = store(traffic(2, 320, 100, drop=True), backend=store_backend)
    t0 = datetime(2026, 12, 6, 12, 0)
    fired = A.update_alarms(con, check(con), monitor="shop", now=t0, senders=["hook", "pager"])
    n = len(fired)
    assert n and len({a.id for a in fired}) == n
    # the monitor dies here: nothing sent, every alert waits in the outbox, once per sender
    assert con.execute("SELECT count(*) FROM outbox WHERE sent_at IS NULL").fetchone()[0] \
        == 2 * n
    refusing = Receiver(status=503)
    warnings: list[str] = []

    def connect():
        return contextlib.nullcontext(con)

    senders = [("hook", A.post_webhook, WebhookSettings(url=receiver.url)),
               ("pager", A.post_webhook, WebhookSettings(url=refusing.url))]
    try:
        done = A.deliver(connect, senders, warnings.append, now=t0)
        assert done.alerts == n and len(receiver.seen) == n and len(warnings) == n
        assert {body["id"] for _, body in receiver.seen} == {a.id for a in fired}
        assert "answered 503" in warnings[0] and "tried again from 12:01 UTC" in warnings[0]
        # at once again: the hook's are sent, the pager's wait for their backoff
        assert A.deliver(connect, senders, warnings.append, now=t0 + timedelta(seconds=30)) \
            == A.Sent()
        # the pager is back after its backoff: each of its alerts once
        back = [senders[0], ("pager", A.post_webhook, WebhookSettings(url=receiver.url))]
        assert A.deliver(connect, back, warnings.append,
                         now=t0 + timedelta(minutes=1)).alerts == n
        assert len(receiver.seen) == 2 * n
        assert A.deliver(connect, back, warnings.append, now=t0 + timedelta(hours=2)) == \
            A.Sent()
        # an alarm resolving while the pager is down for more than a day: given up
        resolved = A.update_alarms(con, check(store(traffic(2, 320, 100), con)),
                                   monitor="shop", now=t0 + timedelta(hours=3),
                                   senders=["pager"])
        assert resolved
        late = t0 + timedelta(hours=3, days=1)
        failed = A.deliver(connect, senders, warnings.append, now=late)
        assert failed.alerts == 0 and all("; given up" in f for f in failed.failures)
        assert A.deliver(connect, senders, warnings.append, now=late + timedelta(hours=2)) \
            == A.Sent()
        assert con.execute("SELECT count(*) FROM outbox WHERE given_up_at IS NOT NULL"
                           ).fetchone()[0] == len(resolved)
    finally:
        refusing.close()
        con.close()


PLUGIN = '''
from pydantic import BaseModel
from evalharness import hookimpl
from evalharness.registry import AlertSender

SEEN = []

class Settings(BaseModel):
    channel: str

def note(alert, settings):
    with open(OUT, "a", encoding="utf-8") as fh:
        fh.write(f"{settings.channel} {alert.state} {alert.key}\\n")

@hookimpl
def register_alert_senders(register):
    register(AlertSender("notes", note, settings=Settings))
'''


def shop_monitor(folder: Path, *, extra: str = "", sources: list[Path] | None = None,
                 plugin: Path | None = None, store: MonitorStore | None = None) -> Path:
    """MONITOR.yaml over the recorded shop traffic, every trace evaluated, a drift check of
    the last day against the two before (at least 10 values a window)."""
    scenario = SCENARIO
    if plugin is not None:  # the scenario, with the plugin file listed
        text = SCENARIO.read_text(encoding="utf-8").replace(
            "cases: ../cases.jsonl", f"cases: ../cases.jsonl\nplugins: [{plugin}]")
        text = text.replace(" ../", f" {SCENARIO.parent.parent}/").replace(
            "path: traffic/", f"path: {TRAFFIC}/")
        scenario = write(folder / "scenario.yaml", text)
    listed = ", ".join(f'"{s}"' for s in (sources or [TRAFFIC]))
    return write(folder / "monitor.yaml", f"""
        scenario: "{scenario}"
        sources: [{listed}]
        sampling: {{rate: 1.0}}
        store: {{{store.yaml if store else "path: store.duckdb"}, retention_days: null}}
        feedback: {{path: "{FEEDBACK}"}}
        evaluators:
          router: [route_confidence]
          text2sql: [sql_health]
          generator: [faithfulness, numeric_consistency, answer_present]
        drift: {{recent: 1d, baseline: 2d, min_n: 10}}
        {extra}
        """)


def test_hook_register_alert_senders():
    """A plugin's sender is registered by name, beside the core's webhook."""
    from evalharness import hookimpl
    from evalharness.plugins import load_plugins
    from evalharness.registry import AlertSender

    def send(alert, settings):
        pass

    class Pager:
        @hookimpl
        def register_alert_senders(self, register):
            register(AlertSender("pager", send))

    host = load_plugins(modules=[Pager()], entry_points=False)
    assert host.alert_sender("pager").send is send
    assert host.alert_sender("webhook").settings.__name__ == "WebhookSettings"
    assert host.alert_sender("nothing") is None


def test_alerts_and_drift_are_checked_like_the_rest_of_the_file(tmp_path):
    path = shop_monitor(tmp_path, extra="alerts: {pager: {}}")
    with pytest.raises(ScenarioError, match=r"line \d+, field `alerts.pager`: no plugin "
                                            r"registers the alert sender 'pager'; registered: "
                                            r"webhook"):
        load_monitor(path)
    path = shop_monitor(tmp_path, extra='alerts: {webhook: {url: "ftp://x"}}')
    with pytest.raises(ScenarioError, match=r"field `alerts.webhook.url`: .*valid keys of "
                                            r"`alerts.webhook`: url, token_env, timeout_s"):
        load_monitor(path)
    path = write(tmp_path / "m.yaml", f"""
        scenario: "{SCENARIO}"
        sources: ["{TRAFFIC}"]
        drift: {{recent: yesterday}}
        """)
    with pytest.raises(ScenarioError, match=r"field `drift.recent`: 'yesterday' is no span"):
        load_monitor(path)


@pytest.fixture(scope="module")
def monitored(tmp_path_factory, store_backend):
    """`monitor --once` over the shop's recorded traffic (the third day with the generator
    fault), with a plugin's alert sender: its output, the folder and the notes it wrote."""
    folder = tmp_path_factory.mktemp("alarms")
    notes = folder / "notes.txt"
    plugin = write(folder / "notes_plugin.py", f"OUT = {str(notes)!r}\n" + PLUGIN)
    path = shop_monitor(folder, plugin=plugin, extra="alerts: {notes: {channel: '#shop'}}",
                        store=store_backend.new(folder))
    result = run_cli("monitor", path, "--once", "--out", folder / "report")
    return result, folder, notes, path


def test_once_exits_5_naming_the_generator_and_the_plugin_sender_gets_the_alarms(monitored):
    result, folder, notes, _ = monitored
    assert result.code == 5, result
    assert "drift: " in result.err and "alarm (new): generator" in result.err
    sent = notes.read_text().splitlines()
    assert sent and all(line.startswith("#shop firing ") for line in sent)
    assert any("/generator/" in line for line in sent)
    report = json.loads((folder / "report" / "report.json").read_text())
    alarms = report["drift"]["alarms"]
    assert alarms and {t["component"] for t in alarms if t["kind"] != "end_to_end"} \
        <= {"generator"}
    # the 24 h up to the hour after the newest trace (19:53 on the third day)
    assert report["drift"]["recent"] == {"start": "2026-12-04T20:00:00Z",
                                         "end": "2026-12-05T20:00:00Z"}
    html = (folder / "report" / "report.html").read_text()
    assert 'id="drift"' in html and 'class="alarm"' in html
    # the trend charts: the generator's gate as a line, the alarm's windows ringed (the
    # faithfulness chart of each window size has the ring; no unalarmed metric has one)
    assert "<title>verdict: faithfulness &gt;= 0.50</title>" in html
    charts = html.split('<svg class="chart window-metric"')[1:]
    ringed = {c.split('data-metric="', 1)[1].split('"', 1)[0] for c in charts
              if 'class="alarm-ring"' in c.split("</svg>", 1)[0]}
    alarmed = {t["metric"] for t in alarms if t["kind"] == "metric" and t["route"] == "all"}
    assert "faithfulness" in ringed and ringed == alarmed
    assert "## Drift" in (folder / "report" / "report.md").read_text()


def test_report_exits_5_too_and_a_day_without_the_fault_raises_no_alarm(monitored):
    _, folder, _, path = monitored
    again = run_cli("monitor", "report", path, "--out", folder / "again")
    assert again.code == 5, again
    # the second day against the first: the same assistant, no fault
    calm = run_cli("monitor", "report", path, "--until", "2026-12-05", "--json")
    assert calm.code == 0, calm
    drift = json.loads(calm.out)["drift"]
    assert drift["recent"]["start"] == "2026-12-04T00:00:00Z"
    assert drift["alarms"] == [] and sum(1 for t in drift["tests"] if not t["skipped"]) >= 5


def test_a_recent_window_under_an_hour_ends_at_the_minute_after_the_newest_trace(store_backend):
    """`recent: 30m` with the newest trace at 19:10: the window must hold it (ending at the
    next whole hour, 20:00, it held 19:30-20:00: nothing, every test skipped)."""
    from datetime import datetime

    con = store(traffic(1, 40, 10), backend=store_backend)
    con.execute("UPDATE traces SET start_time = ?, stored_at = ? WHERE trace_id = "
                "(SELECT max(trace_id) FROM traces WHERE status = 'evaluated')",
                [datetime(2026, 12, 9, 19, 10, 30), datetime(2026, 12, 9, 19, 10, 31)])
    assert A.check_end(con, recent="30m") == datetime(2026, 12, 9, 19, 11)
    assert A.check_end(con, recent="1d") == datetime(2026, 12, 9, 20, 0)
    result = A.run_check(con, recent="30m", baseline="2h", q=0.05, min_n=1)
    assert result["recent"] == {"start": "2026-12-09T18:41:00Z", "end": "2026-12-09T19:11:00Z"}
    e2e = next(t for t in result["tests"] if t["kind"] == "end_to_end" and t["route"] == "all")
    assert e2e["recent"]["n"] == 1
    con.close()
