"""`evalharness monitor export`: the store's evaluated traces as a run folder the review tools
read — the review session opens them (the trace, its metrics with details, its verdicts), the
users' thumbs are review labels on the answer's targets, and `evalharness agreement` compares
the judge with the users over them."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from test_monitor import monitor_file

from conftest import MonitorStore, run_cli
from evalharness.monitor import store
from evalharness.monitor.config import load_monitor
from evalharness.monitor.export import export
from evalharness.review import labels as L
from evalharness.review.server import App, new_token
from evalharness.review.session import Review, case_view
from evalharness.runfolder import load_run

duckdb = pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def monitored(tmp_path_factory, store_backend) -> Path:
    """A store after one `monitor --once` over the recorded shop traffic and its feedback."""
    folder = tmp_path_factory.mktemp("monitor")
    path = monitor_file(folder, store=store_backend.new(folder))
    result = run_cli("monitor", path, "--once")
    assert result.code == 0, result
    return path


def thumbs(path) -> dict[str, set[int]]:
    """Evaluated trace id -> the users' thumbs of it, from the store."""
    out: dict[str, set[int]] = {}
    with store.connect(path, read_only=True) as con:
        for tid, th in con.execute(
                "SELECT f.trace_id, f.thumbs FROM feedback f JOIN traces t USING (trace_id) "
                "WHERE t.status = 'evaluated' AND f.thumbs IS NOT NULL").fetchall():
            out.setdefault(tid, set()).add(int(th))
    return out


def test_export_opens_in_the_review_session_with_metrics_verdicts_and_labels(monitored,
                                                                              tmp_path):
    monitor = load_monitor(monitored)
    given = thumbs(monitor.store_path)
    down = {t for t, th in given.items() if -1 in th}
    assert down, "the recorded feedback has thumbs-down traces"
    out = tmp_path / "run"
    done = export(monitor, out)
    assert done.traces == done.with_feedback == len(given)

    review = Review.open(out)
    ids = {r.case.id for r in review.sampled()}
    assert ids == set(given)
    marks = ", ".join("?" * len(down))
    with store.connect(monitor.store_path, read_only=True) as con:
        stored = con.execute("SELECT trace_id, component, metric, value FROM metrics "
                             f"WHERE trace_id IN ({marks})", sorted(down)).fetchall()
        verdicts = con.execute("SELECT trace_id, component, passed FROM verdicts "
                               f"WHERE trace_id IN ({marks})", sorted(down)).fetchall()
    assert stored and verdicts
    for tid, component, metric, value in stored:
        mv = review.result(tid).components[component].metrics[metric]
        assert mv.value == value
    for tid, component, passed in verdicts:
        status = review.result(tid).verdicts[component].status
        assert status == {True: "pass", False: "fail", None: "error"}[passed]
    some = sorted(down)[0]
    result = review.result(some)
    assert result.case.question and "thumbs-down" in result.case.tags
    assert result.trace.generator is not None and result.trace.case_id == some
    judged = result.components["generator"].metrics["faithfulness"]
    assert "judge" in judged.details  # a judged value keeps its details (the page's reasons)
    view = case_view(review, result)  # what the review page shows
    assert view["id"] == some and {s["component"] for s in view["steps"]} >= {"router",
                                                                              "generator"}
    assert any(t["component"] == "generator" and t["metric"] == "faithfulness"
               for t in view["targets"])

    app = App(review, new_token(), set(), "ana", None)  # `review serve OUT`'s page
    position = [r.case.id for r in review.sampled()].index(some)
    assert html.escape(result.case.question, quote=False) in app.page(position, "ana", "n")

    labels = review.labels()
    assert {lab.case for lab in labels} == set(given)
    assert {lab.component for lab in labels} == {"generator"}
    for lab in labels:
        assert lab.label == ("no" if given[lab.case] == {-1} else "yes") or \
            len(given[lab.case]) > 1
        assert lab.reviewer.startswith("u-")  # the hashed user id, as stored
        review.target(lab)  # every label names a valid target of its case
    assert (out / L.LABELS).is_file() and load_run(out).manifest["selection"]["only"] == \
        "feedback"


def test_agreement_over_the_export_counts_the_traces_with_feedback(monitored, tmp_path):
    out = tmp_path / "run"
    result = run_cli("monitor", "export", monitored, "--out", out)
    assert result.code == 0, result
    assert "evalharness review serve" in result.out
    given = thumbs(load_monitor(monitored).store_path)
    agreed = run_cli("agreement", out, "--json", "--resamples", "100")
    assert agreed.code == 0, agreed
    rows = {(r["component"], r["metric"]): r for r in json.loads(agreed.out)["rows"]}
    faith = rows["generator", "faithfulness"]
    assert faith["kind"] == "binary" and faith["n"] == len(given)
    assert faith["positives"] == sum(1 for th in given.values() if th == {1})
    assert sum(sum(row) for row in faith["confusion"]["matrix"]) == len(given)
    assert json.loads((out / "report.json").read_text())["agreement"] is not None


def test_only_thumbs_down_and_failed_and_a_used_folder(monitored, tmp_path):
    monitor = load_monitor(monitored)
    given = thumbs(monitor.store_path)
    down = export(monitor, tmp_path / "down", only="thumbs-down")
    assert {r.case.id for r in load_run(tmp_path / "down").results} == \
        {t for t, th in given.items() if -1 in th}
    assert down.traces == down.with_feedback
    failed = export(monitor, tmp_path / "failed", only="failed")
    run = load_run(tmp_path / "failed")
    assert failed.traces == len(run.results) > 0
    assert all(r.end_to_end.status == "fail" and r.attribution.root_causes == ["generator"]
               for r in run.results if r.attribution.kind == "attributed")
    again = run_cli("monitor", "export", monitored, "--out", tmp_path / "down")
    assert again.code == 2 and "already holds results" in again.err
    future = run_cli("monitor", "export", monitored, "--out", tmp_path / "none",
                     "--since", "2999-01-01")
    assert future.code == 0 and future.out.startswith("0 traces")


def test_a_score_without_thumbs_is_a_label_too(monitored, tmp_path, store_backend):
    """A user who only scored a trace: 1-2 is a `no` label, 4-5 a `yes`, 3 none (the report's
    rule for what a user says of a trace)."""
    import dataclasses

    from evalharness.monitor.feedback import ingest_records

    monitor = load_monitor(monitored)
    copy = store_backend.copy(MonitorStore(monitor.store_path, "", tmp_path), tmp_path).target
    monitor = dataclasses.replace(monitor, store_path=copy)
    with store.connect(copy) as con:
        ids = [t for (t,) in con.execute(
            "SELECT trace_id FROM traces WHERE status = 'evaluated' AND trace_id NOT IN "
            "(SELECT trace_id FROM feedback WHERE trace_id IS NOT NULL) ORDER BY 1 LIMIT 3"
        ).fetchall()]
        ingest_records(con, [{"trace_id": ids[0], "score": 1, "user_id": "scorer"},
                             {"trace_id": ids[1], "score": 5, "user_id": "scorer"},
                             {"trace_id": ids[2], "score": 3, "user_id": "scorer"}],
                       redact_user_ids="keep")
    export(monitor, tmp_path / "run", only="all")
    scorer = {}
    for label in L.read(tmp_path / "run" / L.LABELS):
        if label.reviewer == "scorer":
            scorer.setdefault(label.case, set()).add(label.label)
    assert scorer == {ids[0]: {"no"}, ids[1]: {"yes"}}
