"""``evalharness monitor report``: a store built row by row per the DDL (200 traces over three
days, two routes, a generator fault on day 3, users' feedback) read into report.json,
report.md and report.html, checked against values computed by hand from the same rows."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("duckdb")

from conftest import MonitorStore, headless_chromium  # noqa: E402
from evalharness.monitor import report as R  # noqa: E402
from evalharness.monitor.report_render import render_html  # noqa: E402
from evalharness.monitor.store import connect, dialect  # noqa: E402
from evalharness.review import stats as S  # noqa: E402

DAY0 = datetime(2026, 12, 1)
NOW = datetime(2026, 12, 4, 12, 0)


def trace_rows() -> list[dict]:
    """The traces: i // 67 is the day, even i the sql route, odd the docs route; every tenth
    left out by sampling, two unmappable; the generator fails on day 3 (but every fifth)."""
    rows = []
    for i in range(200):
        day = i // 67
        route = "sql" if i % 2 == 0 else "docs"
        t = DAY0 + timedelta(days=day, minutes=20 * (i % 67))
        row = {"i": i, "trace_id": f"t{i:03d}", "t": t, "day": day, "route": route,
               "status": "evaluated", "sampled": True, "components": {}}
        if i % 10 == 9:
            row.update(status="not sampled", sampled=False)
        elif i in (7, 107):
            row.update(status="unmappable")
        else:
            middle = "sql" if route == "sql" else "retriever"
            comps = {"router": ({"confidence": 0.9}, True)}
            if middle == "sql":
                ok = i % 13 != 0
                comps["sql"] = ({"valid_sql": 1.0 if ok else 0.0, "latency_ms": 10.0 + i % 7},
                                ok)
            else:
                ok = i % 17 != 0
                comps["retriever"] = ({"context_precision": 0.8 if ok else 0.2}, ok)
            gen_ok = day < 2 or i % 5 == 0
            comps["generator"] = ({"faithfulness": 0.9 if gen_ok else 0.3 + (i % 3) * 0.05,
                                   "answer_relevancy": None if i % 11 == 0 else 0.7}, gen_ok)
            row["components"] = comps
            cause = next((c for c, (_, ok) in comps.items() if not ok), None)
            row["root_cause"] = cause
            row["passed"] = cause is None
        rows.append(row)
    return rows


def feedback_rows(traces: list[dict]) -> list[dict]:
    """u1 thumbs every fourth evaluated trace (down when it failed, flipped on every third),
    with an older opposite thumb first on every eighth (the latest wins); u2 scores every
    twentieth; three records for no stored trace: two given on the first day (the store holds
    traffic of two days after: their traces are unknown), one after the traffic (waiting)."""
    out = []
    at = DAY0 + timedelta(days=5)
    for r in traces:
        i = r["i"]
        if r["status"] != "evaluated":
            continue
        if i % 4 == 0:
            up = r["passed"] != (i % 3 == 0)
            if i % 8 == 0:
                out.append({"id": f"f{i}-old", "trace_id": r["trace_id"], "thumbs": -1 if up else 1,
                            "score": None, "user": "u1", "at": at - timedelta(hours=1)})
            out.append({"id": f"f{i}", "trace_id": r["trace_id"], "thumbs": 1 if up else -1,
                        "score": None, "user": "u1", "at": at,
                        "comment": "wrong <b>total</b>" if not up else None})
        if i % 20 == 0:
            out.append({"id": f"s{i}", "trace_id": r["trace_id"], "thumbs": None, "score": 2.0,
                        "user": "u2", "at": at})
    for k, given in enumerate([DAY0, DAY0 + timedelta(hours=1), at]):
        out.append({"id": f"u{k}", "trace_id": None, "thumbs": -1, "score": None, "user": "u3",
                    "at": given})
    return out


def insert(con, table: str, rows: list[dict]) -> None:
    """``rows`` into ``table``: DuckDB, one statement of ``unnest``ed columns; PostgreSQL, 200
    rows a statement (row-by-row INSERTs of a thousand rows take seconds)."""
    if rows and dialect(con) == "duckdb":
        cols = list(rows[0])
        types = dict(con.execute(f"SELECT column_name, data_type FROM duckdb_columns() "
                                 f"WHERE table_name = '{table}'").fetchall())
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT "
                    + ", ".join(f"unnest(?::{types[c]}[])" for c in cols),
                    [[r[c] for r in rows] for c in cols])
        return
    for start in range(0, len(rows), 200):
        part = rows[start:start + 200]
        cols = list(part[0])
        marks = "(" + ", ".join("?" * len(cols)) + ")"
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
                    + ", ".join([marks] * len(part)), [r[c] for r in part for c in cols])


def build_store(path, traces: list[dict], feedback: list[dict]) -> None:
    rows, verdicts, metrics = [], [], []
    for r in traces:
        rows.append({
            "trace_id": r["trace_id"], "start_time": r["t"],
            "end_time": r["t"] + timedelta(seconds=2), "stored_at": NOW, "source": "rec.jsonl",
            "route": r["route"], "question": f"question {r['i']} <script>alert(1)</script>",
            "answer": f"answer {r['i']}", "user_id": "u1", "sampled": r["sampled"],
            "sample_reason": "rate", "status": r["status"],
            "error": "no span maps onto the router" if r["status"] == "unmappable" else None,
            "root_cause": r.get("root_cause"), "passed": r.get("passed"), "latency_ms": 120.0,
            "total_tokens": 300})
        for comp, (values, ok) in r["components"].items():
            verdicts.append({"trace_id": r["trace_id"], "component": comp, "passed": ok,
                             "criterion": f"{comp} criterion",
                             "reason": None if ok else f"{comp} failed"})
            metrics += [{"trace_id": r["trace_id"], "component": comp, "metric": m, "value": v,
                         "error": "timeout" if v is None else None} for m, v in values.items()]
    fb = [{"feedback_id": f["id"], "trace_id": f["trace_id"], "key_attribute": "trace_id",
           "key_value": f["trace_id"] or "x", "received_at": f["at"], "thumbs": f["thumbs"],
           "score": f["score"], "labels": json.dumps(["wrong"]) if f["thumbs"] == -1 else None,
           "comment": f.get("comment"), "user_id": f["user"], "source": "http"}
          for f in feedback]
    with connect(path) as con:
        for table, data in (("traces", rows), ("verdicts", verdicts), ("metrics", metrics),
                            ("feedback", fb)):
            insert(con, table, data)


@pytest.fixture(scope="module")
def data() -> tuple[list[dict], list[dict]]:
    traces = trace_rows()
    return traces, feedback_rows(traces)


@pytest.fixture(scope="module")
def store(tmp_path_factory, data, store_backend) -> MonitorStore:
    made = store_backend.new(tmp_path_factory.mktemp("monitor"), "monitor.duckdb")
    build_store(made.target, *data)
    return made


@pytest.fixture(scope="module")
def written(store, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("report")
    view = R.write_report(store.target, out, windows=("day", "hour"), now=NOW)
    return view, out


@pytest.mark.postgresql
def test_the_postgresql_store_gives_the_same_report(data, postgres_dsn, tmp_path):
    """The same rows in a DuckDB file and a PostgreSQL schema: the same report, value for
    value (lists, floats, times, JSON), but for the store's name."""
    pytest.importorskip("psycopg")
    from conftest import StoreBackend

    views = []
    backends = [StoreBackend("duckdb", None), StoreBackend("postgresql", postgres_dsn)]
    try:
        for backend in backends:
            made = backend.new(tmp_path / backend.name, "monitor.duckdb")
            made.folder.mkdir()
            build_store(made.target, *data)
            views.append(R.write_report(made.target, tmp_path / backend.name / "out",
                                        windows=("day", "hour"), now=NOW))
    finally:
        backends[1].drop()
    assert str(views[1].pop("store")).startswith("postgresql://")
    views[0].pop("store")
    assert views[0] == views[1]


# --------------------------------------------------------------------------------------------


def test_traffic_counts(written, data):
    view, out = written
    traces, _ = data
    t = view["traffic"]
    evaluated = [r for r in traces if r["status"] == "evaluated"]
    assert (t["traces"], t["sampled"], t["not_sampled"], t["unmappable"]) == (200, 180, 20, 2)
    assert t["evaluated"] == len(evaluated) == 178
    assert t["failed"] == sum(1 for r in evaluated if not r["passed"])
    assert t["routes"]["sql"]["traces"] == 100 and t["routes"]["docs"]["unmappable"] == 2
    assert t["first"] == "2026-12-01T00:00:00Z"
    assert json.loads((out / "report.json").read_text()) == view


def test_metric_means_errors_and_pass_rates(written, data):
    view, _ = written
    traces, _ = data
    evaluated = [r for r in traces if r["status"] == "evaluated"]
    gen = view["per_component"]["generator"]
    faith = [r["components"]["generator"][0]["faithfulness"] for r in evaluated]
    s = gen["metrics"]["faithfulness"]
    assert s["n"] == len(faith) and s["errors"] == 0
    assert s["mean"] == pytest.approx(sum(faith) / len(faith))
    assert s["ci95"][0] < s["mean"] < s["ci95"][1]
    rel = gen["metrics"]["answer_relevancy"]
    assert rel["errors"] == sum(1 for r in evaluated if r["i"] % 11 == 0) and rel["mean"] == pytest.approx(0.7)
    passed = sum(1 for r in evaluated if r["components"]["generator"][1])
    v = gen["verdicts"]
    assert (v["passed"], v["failed"]) == (passed, len(evaluated) - passed)
    assert v["pass_rate"] == pytest.approx(passed / len(evaluated))
    assert v["ci95"] == pytest.approx(R.wilson(passed, len(evaluated)))
    # the SQL component only on the sql route
    sql = view["per_component"]["sql"]
    assert list(sql["routes"]) == ["sql"]
    lat = [r["components"]["sql"][0]["latency_ms"] for r in evaluated if r["route"] == "sql"]
    assert sql["metrics"]["latency_ms"]["mean"] == pytest.approx(sum(lat) / len(lat))
    # in the order the monitor wrote the metrics of the first trace that has them
    assert view["components"] == ["router", "sql", "generator", "retriever"]


def test_windows_show_the_generator_fault(written, data):
    view, _ = written
    traces, _ = data
    days = view["windows"]["day"]
    assert [w["start"] for w in days] == ["2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z",
                                          "2026-12-03T00:00:00Z"]
    for d, w in enumerate(days):
        ev = [r for r in traces if r["status"] == "evaluated" and r["day"] == d]
        gen_pass = sum(1 for r in ev if r["components"]["generator"][1])
        assert w["components"]["generator"]["verdicts"]["passed"] == gen_pass
        failed = [r for r in ev if not r["passed"]]
        assert w["root_causes"]["failed"] == len(failed)
        for cause, s in w["root_causes"]["shares"].items():
            k = sum(1 for r in failed if r["root_cause"] == cause)
            assert s["count"] == k and s["share"] == pytest.approx(k / len(failed))
        faith = [r["components"]["generator"][0]["faithfulness"] for r in ev]
        assert w["components"]["generator"]["metrics"]["faithfulness"]["mean"] == \
            pytest.approx(sum(faith) / len(faith))
    assert days[2]["components"]["generator"]["verdicts"]["pass_rate"] < 0.3
    assert next(iter(days[2]["root_causes"]["shares"])) == "generator"
    assert days[0]["components"]["generator"]["verdicts"]["pass_rate"] == 1.0
    assert len(view["windows"]["hour"]) == len({r["t"].replace(minute=0) for r in traces})


def test_root_causes_overall(written, data):
    view, _ = written
    traces, _ = data
    failed = [r for r in traces if r["status"] == "evaluated" and not r["passed"]]
    rc = view["root_causes"]
    assert rc["failed"] == len(failed)
    assert {k: s["count"] for k, s in rc["shares"].items()} == {
        c: sum(1 for r in failed if r["root_cause"] == c) for c in {r["root_cause"] for r in failed}}


def user_labels(traces, feedback):
    """Per (trace, user): the latest thumbs — the test's own reading of the rule."""
    by_id = {r["trace_id"]: r for r in traces}
    latest = {}
    for f in sorted(feedback, key=lambda f: (f["at"], f["id"])):
        if f["trace_id"] in by_id and f["thumbs"] is not None:
            latest[(f["trace_id"], f["user"])] = f["thumbs"]
    return by_id, latest


def test_feedback_rates(written, data):
    view, _ = written
    traces, feedback = data
    by_id, latest = user_labels(traces, feedback)
    f = view["feedback"]
    down = sum(1 for v in latest.values() if v < 0)
    assert f["thumbs"]["down"] == down and f["thumbs"]["up"] == len(latest) - down
    assert f["thumbs"]["down_share"] == pytest.approx(down / len(latest))
    assert f["unknown_trace"] == 2 and f["waiting"] == 1
    assert f["score"]["mean"] == 2.0 and f["score"]["n"] == sum(1 for x in feedback if x["score"])
    labelled = {t for t, _ in latest} | {x["trace_id"] for x in feedback if x["score"]}
    assert f["labelled_traces"] == len(labelled)
    assert f["labelled_share"] == pytest.approx(len(labelled) / 178)
    assert f["records"] == sum(1 for x in feedback if x["trace_id"] in by_id)


def user_says(traces, feedback):
    """Per (trace, user) of an evaluated trace: what the user says — the latest thumbs, else
    the latest score (1-2 fail, 4-5 pass, 3 nothing) — the test's own reading of the rule."""
    by_id, thumbs = user_labels(traces, feedback)
    scores = {}
    for f in sorted(feedback, key=lambda f: (f["at"], f["id"])):
        if f["trace_id"] in by_id and f["score"] is not None:
            scores[(f["trace_id"], f["user"])] = f["score"]
    says = {k: v > 0 for k, v in thumbs.items()}
    says.update({k: v > 3 for k, v in scores.items() if k not in thumbs and v != 3})
    return by_id, {k: (1 if v else -1) for k, v in says.items()
                   if by_id[k[0]]["status"] == "evaluated"}


def test_agreement_matches_sklearn(written, data):
    view, _ = written
    traces, feedback = data
    by_id, latest = user_says(traces, feedback)
    assert any(u == "u2" for _t, u in latest)  # scores count where no thumbs was given
    judge = [by_id[t]["passed"] for (t, _u) in sorted(latest)]
    user = [v > 0 for (_t, _u), v in sorted(latest.items())]
    a = view["agreement"]["end_to_end"]
    assert a["n"] == len(judge) and a["enough"]
    expected = S.cohen_kappa(judge, user)
    sklearn = pytest.importorskip("sklearn.metrics")
    assert expected == pytest.approx(sklearn.cohen_kappa_score(judge, user))
    assert a["kappa"]["value"] == pytest.approx(expected)
    assert a["balanced_accuracy"]["value"] == pytest.approx(
        sklearn.balanced_accuracy_score(user, judge))
    c = a["confusion"]
    assert c["judge_fail_user_down"] == sum(1 for j, u in zip(judge, user, strict=True)
                                            if not j and not u)
    assert sum(c.values()) == a["n"]
    # per component: the sql verdicts against the same thumbs, on the sql route only
    sql = view["agreement"]["components"]["sql"]
    rows = [(by_id[t]["components"]["sql"][1], v > 0) for (t, _u), v in sorted(latest.items())
            if "sql" in by_id[t]["components"]]
    assert sql["n"] == len(rows)
    if sql["kappa"]["value"] is not None:
        assert sql["kappa"]["value"] == pytest.approx(
            sklearn.cohen_kappa_score([r[0] for r in rows], [r[1] for r in rows]))
    # per route: end to end on that route's traces
    for route, block in view["agreement"]["routes"].items():
        rows = [(by_id[t]["passed"], v > 0) for (t, _u), v in sorted(latest.items())
                if by_id[t]["route"] == route]
        assert block["n"] == len(rows) and block["confusion"]["judge_fail_user_down"] == \
            sum(1 for j, u in rows if not j and not u)
    assert sum(b["n"] for b in view["agreement"]["routes"].values()) == a["n"]


def test_small_n_is_flagged():
    block = R.agreement_block([True, False, True], [True, False, False], "x")
    assert not block["enough"] and "too small" in block["note"]
    assert R.agreement_block([], [], "x")["note"].startswith("no trace")


def test_drilldown_lists_failed_and_thumbs_down(written, data):
    view, _ = written
    traces, feedback = data
    by_id, latest = user_labels(traces, feedback)
    failed = {r["trace_id"] for r in traces if r["status"] == "evaluated" and not r["passed"]}
    down = {t for (t, _u), v in latest.items() if v < 0}
    d = view["drilldown"]
    assert d["total"] == len(failed | down) == d["shown"]
    shown = {x["trace_id"]: x for x in d["traces"]}
    assert set(shown) == failed | down
    x = shown[next(iter(sorted(failed)))]
    assert "failed" in x["why"] and x["components"]["router"]["verdict"]["passed"] is True
    times = [x["time"] for x in d["traces"]]
    assert times == sorted(times, reverse=True)


def test_html_is_self_contained_and_complete(written):
    view, out = written
    page = (out / "report.html").read_text()
    assert "Content-Security-Policy" in page and "default-src &#x27;none&#x27;" not in page
    assert "default-src 'none'" in page
    assert not re.search(r"""(src|href)=["'](https?:)?//""", page)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)" in page
    for section in ("overview", "traffic", "components", "windows", "feedback", "traces"):
        assert f'id="{section}"' in page
    assert page.count('<details class="trace"') == view["drilldown"]["shown"]
    assert 'id="root-causes-day"' in page and 'class="chart window-metric"' in page
    # the per-window tables link to traces that the drill-down holds
    links = set(re.findall(r'href="#trace-([^"]+)"', page))
    anchors = set(re.findall(r'id="trace-([^"]+)"', page))
    assert links and links <= anchors
    md = (out / "report.md").read_text()
    for heading in ("## Traffic", "## Components", "## Root causes", "## Per day",
                    "## Feedback", "## Judge–user agreement", "## Failed and thumbs-down"):
        assert heading in md
    assert "<script>" not in md and "question 198 &lt;script&gt;" in md  # inert in Markdown


def test_since_filters(store, tmp_path, data):
    traces, _ = data
    store = store.target
    view = R.write_report(store, tmp_path, since="2026-12-03", now=NOW)
    assert view["traffic"]["traces"] == sum(1 for r in traces if r["day"] == 2)
    assert [w["start"][:10] for w in view["windows"]["day"]] == ["2026-12-03"]
    rel = R.write_report(store, tmp_path / "b", since="36h", now=NOW)  # from 12-03 00:00
    assert rel["traffic"]["traces"] == view["traffic"]["traces"]
    until = R.write_report(store, tmp_path / "c", until=datetime(2026, 12, 2), now=NOW)
    assert until["traffic"]["traces"] == 67


def test_parse_time_errors():
    with pytest.raises(R.InputError, match="is no time"):
        R.parse_time("yesterday", now=NOW)
    assert R.parse_time("2w", now=NOW) == NOW - timedelta(weeks=2)


def test_empty_store(tmp_path, monitor_store):
    path = monitor_store.target
    with connect(path):
        pass
    view = R.write_report(path, tmp_path / "out", now=NOW)
    assert view["traffic"]["traces"] == 0 and view["drilldown"]["total"] == 0
    assert "No failed or thumbs-down trace" in (tmp_path / "out" / "report.html").read_text()


def monitor_file(tmp_path: Path, store: MonitorStore) -> Path:
    path = tmp_path / "shop-monitor.yaml"
    path.write_text(f"scenario: shop.yaml\nsources: [traffic/]\nstore: {{{store.yaml}}}\n"
                    "windows: [day]\n", encoding="utf-8")
    return path


def test_cli(store, tmp_path):
    monitor = monitor_file(tmp_path, store)
    runner = CliRunner()
    result = runner.invoke(R.report_command, [str(monitor), "--since", "2026-12-02",
                                              "--out", str(tmp_path / "o"), "--window", "day"])
    # the generator fault of day 3 is a drift alarm: exit 5, the report written first
    assert result.exit_code == 5, result.output
    assert "generator" in result.output and "wrote" in result.output
    assert "alarm: generator faithfulness (all routes)" in " ".join(result.output.split())
    view = json.loads((tmp_path / "o" / "report.json").read_text())
    assert view["period"]["since"] == "2026-12-02T00:00:00Z"
    assert view["monitor"] == str(monitor) and view["name"] == "shop-monitor"
    assert list(view["windows"]) == ["day"]  # MONITOR.yaml's windows
    result = runner.invoke(R.report_command, [str(monitor), "--json", "--out",
                                              str(tmp_path / "j")])
    assert result.exit_code == 5 and json.loads(result.output)["traffic"]["traces"] == 200
    calm = runner.invoke(R.report_command, [str(monitor), "--json", "--until", "2026-12-03",
                                            "--out", str(tmp_path / "k")])
    assert calm.exit_code == 0 and json.loads(calm.output)["drift"]["alarms"] == []
    bad = runner.invoke(R.report_command, [str(monitor), "--since", "last tuesday"])
    assert bad.exit_code == 2 and "is no time" in bad.output
    help_ = runner.invoke(R.report_command, ["--help"])
    assert help_.exit_code == 0 and "--since 7d" in help_.output


def test_store_path_relative_to_monitor_file(tmp_path):
    (tmp_path / "m.yaml").write_text("scenario: s.yaml\nsources: [t/]\nstore:\n"
                                     "  path: data/m.duckdb\n")
    store, windows, name, wait, drift = R.monitor_settings(tmp_path / "m.yaml")
    assert (drift.recent, drift.baseline, drift.q, drift.min_n) == ("1d", "7d", 0.05, 20)
    assert store == tmp_path / "data" / "m.duckdb" and windows == ["hour", "day"]
    assert name == "m" and wait == timedelta(hours=24)
    runner = CliRunner()
    result = runner.invoke(R.report_command, [str(tmp_path / "m.yaml")])
    assert result.exit_code != 0 and "no monitor store" in str(result.exception or result.output)


def test_render_is_pure_over_the_view(written):
    view, out = written
    assert render_html(view) == (out / "report.html").read_text()


# --------------------------------------------------------------------------------------------
# The page in a browser (skipped without Debian's chromium and chromium-driver, failing under
# CI as tests/test_review_browser.py does)
# --------------------------------------------------------------------------------------------


def test_page_in_a_browser(written, store_backend):
    if store_backend.name != "duckdb":
        pytest.skip("the page renders the same view on both backends "
                    "(test_the_postgresql_store_gives_the_same_report)")

    pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    view, out = written
    with headless_chromium("the monitor page's browser test needs it") as drv:
        drv.get((out / "report.html").as_uri())
        # every section is there, the charts drew, nothing failed or was blocked by the CSP
        for section in ("overview", "traffic", "components", "windows", "feedback", "traces"):
            assert drv.find_element(By.ID, section).is_displayed()
        assert drv.execute_script("return document.querySelectorAll('svg.chart').length") > 5
        assert drv.execute_script(
            "return document.querySelectorAll('#root-causes-day rect[data-cause]').length") >= 3
        # a window's link to a failed trace opens that trace's details
        summary = drv.find_element(By.CSS_SELECTOR, "#windows-day td.links summary")
        drv.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center', "
                           "behavior: 'instant'})", summary)
        summary.click()
        link = drv.find_element(By.CSS_SELECTOR, "#windows-day td.links a")
        target = link.get_attribute("href").rsplit("#", 1)[1]
        details = drv.find_element(By.ID, target)
        assert details.get_attribute("open") is None
        drv.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'})", link)
        link.click()
        WebDriverWait(drv, 10).until(lambda d: details.get_attribute("open") is not None)
        assert "generator" in details.text and "faithfulness" in details.text
        # case text stays text
        assert drv.execute_script("return document.querySelectorAll('main script').length") == 0
        assert drv.find_element(By.ID, "console-errors").get_attribute("textContent") == ""


def test_unknown_key_in_the_monitor_file_is_an_input_error(tmp_path):
    (tmp_path / "m.yaml").write_text("scenario: s.yaml\nsources: [t/]\nstorage: {}\n")
    result = CliRunner().invoke(R.report_command, [str(tmp_path / "m.yaml")])
    from evalharness.errors import EvalHarnessError

    assert isinstance(result.exception, EvalHarnessError) and "storage" in str(
        result.exception)
