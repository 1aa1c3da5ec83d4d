"""``evalharness monitor export``: the store's evaluated traces as a run folder, so the review
page (``review serve``) opens them and ``agreement`` compares the judge with the users
(docs/monitor.md, "Opening traces in the review page").

Each exported trace is a case: a question-only :class:`~evalharness.models.Case` whose id is
the trace id, its stored :class:`~evalharness.models.Trace`, its reference-free metric values
(with their details) per component, the monitor's verdicts, its end-to-end verdict and root
cause. The folder holds what a scenario run's does — ``run.json``, ``results.jsonl`` (one
:meth:`~evalharness.models.CaseResult.to_line` a case, as the runner writes it) and
report.json/.md/.html (a :class:`~evalharness.models.Report` over those results, written by
:func:`evalharness.render.write_reports`) — and ``review/labels.jsonl``: what each user says
of a trace as a label — their latest thumbs, else their latest score (4–5 up, 1–2 down) —
(up = ``yes``, down = ``no``; reviewer: the user id as stored,
hashed by default) on every case-level target of the answer (the components of kind
``generator``), so ``evalharness agreement RUN`` says per generator metric how far its
verdict agrees with the users.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import click

from evalharness.errors import RunError
from evalharness.models import (
    Attribution,
    Case,
    CaseResult,
    ComponentReport,
    ComponentResult,
    CriteriaReport,
    MetricValue,
    Report,
    Trace,
    Verdict,
)
from evalharness.monitor.config import Monitor
from evalharness.monitor.evaluate import criteria as reference_free_criteria
from evalharness.monitor.evaluate import reference_free_metrics
from evalharness.monitor.feedback import feedback_view
from evalharness.monitor.store import connect
from evalharness.review import labels as L
from evalharness.runner import MANIFEST, RESULTS
from evalharness.version import __version__

Only = Literal["feedback", "thumbs-down", "failed", "all"]

ONLY: dict[str, str] = {
    "feedback": "t.trace_id IN (SELECT trace_id FROM feedback_by_trace)",
    "thumbs-down": "t.trace_id IN (SELECT trace_id FROM feedback_by_trace "
                   "WHERE thumbs_down > 0)",
    "failed": "t.passed = FALSE",
    "all": "TRUE",
}
"""``--only``: which evaluated traces are exported (SQL over the store's ``traces t``)."""

ANSWER_KIND = "generator"
"""The component kind whose case-level targets a user's thumbs labels: the answer."""

THUMBS_TAGS = {1: "thumbs-up", -1: "thumbs-down"}

SAYS = ("coalesce(f.thumbs, CASE WHEN f.score > 3 THEN 1 WHEN f.score < 3 THEN -1 END)")
"""What a user says of a trace (``feedback_by_user f``): their latest thumbs, else their
latest 1–5 score (4–5 up, 1–2 down, 3 nothing) — the report's rule
(:func:`evalharness.monitor.report.user_says`)."""


@dataclass
class Exported:
    """What :func:`export` wrote."""

    out: Path
    traces: int = 0
    with_feedback: int = 0
    """Exported traces with at least one user's thumbs."""
    labels: int = 0
    reviewers: set[str] = field(default_factory=set)

    def line(self) -> str:
        return (f"{self.traces} traces written to {self.out} ({self.with_feedback} with users' "
                f"thumbs, {self.labels} labels by {len(self.reviewers)} users)")


def export(monitor: Monitor, out: Path | str, *, since: datetime | None = None,
           only: Only = "feedback", now: datetime | None = None) -> Exported:
    """Write the store's evaluated traces chosen by ``only`` (started at or after ``since``)
    as the run folder ``out`` (see the module text). A folder that already holds results is
    left alone (:class:`RunError`): its labels may be people's work."""
    out = Path(out)
    if (out / RESULTS).is_file() and (out / RESULTS).stat().st_size:
        raise RunError(f"{out} already holds results ({RESULTS}); choose another --out "
                       "(an earlier export's review labels are kept there)")
    scenario = monitor.scenario
    where = ONLY[only] + (" AND coalesce(t.start_time, t.stored_at) >= ?" if since else "")
    params = [since.astimezone(UTC).replace(tzinfo=None) if since and since.tzinfo else since
              ] if since else []
    with connect(monitor.store_path, read_only=True) as con:
        feedback_view(con)
        rows = con.execute(
            "SELECT t.trace_id, t.question, t.route, t.user_id, t.source, t.start_time, "
            "t.root_cause, t.passed, t.sample_reason, t.trace FROM traces t "
            f"WHERE t.status = 'evaluated' AND {where} "
            "ORDER BY coalesce(t.start_time, t.stored_at), t.trace_id", params).fetchall()
        ids = [r[0] for r in rows]
        con.execute("CREATE TEMP TABLE chosen (trace_id TEXT)")
        if ids:
            con.executemany("INSERT INTO chosen VALUES (?)", [[i] for i in ids])
        metrics: dict[str, dict[str, dict[str, MetricValue]]] = defaultdict(
            lambda: defaultdict(dict))
        for tid, comp, metric, value, error, judge, details in con.execute(
                "SELECT m.trace_id, component, metric, value, error, judge, details "
                "FROM metrics m JOIN chosen USING (trace_id)").fetchall():
            found = json.loads(details) if details else {}
            if judge is not None and "judge" not in found:
                found["judge"] = _json_or_text(judge)
            metrics[tid][comp][metric] = MetricValue(value=value, error=error, details=found)
        verdicts: dict[str, dict[str, Verdict]] = defaultdict(dict)
        for tid, comp, passed, criterion, reason in con.execute(
                "SELECT v.trace_id, component, passed, criterion, reason "
                "FROM verdicts v JOIN chosen USING (trace_id)").fetchall():
            status = {True: "pass", False: "fail"}.get(passed, "error")
            verdicts[tid][comp] = Verdict(status=status, reason=reason or criterion)
        thumbs = con.execute(
            f"SELECT f.trace_id, coalesce(f.user_id, 'anonymous'), {SAYS}, "
            "coalesce(f.thumbs_at, f.last_at), f.comment FROM feedback_by_user f "
            f"JOIN chosen USING (trace_id) WHERE {SAYS} IS NOT NULL "
            "ORDER BY coalesce(f.thumbs_at, f.last_at), f.trace_id").fetchall()
    by_trace: dict[str, list[int]] = defaultdict(list)
    for tid, _, th, _, _ in thumbs:
        by_trace[tid].append(int(th))

    out.mkdir(parents=True, exist_ok=True)
    started = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    pipeline = scenario.pipeline
    results: list[CaseResult] = []
    for tid, question, route, user, source, start, root, passed, reason, raw in rows:
        trace = Trace.model_validate_json(raw).model_copy(update={"case_id": tid})
        tags = [f"route:{route}"] if route else []
        tags += sorted({THUMBS_TAGS[t] for t in by_trace.get(tid, [])})
        if passed is False:
            tags.append("failed")
        case = Case(id=tid, question=question or "", tags=tags, metadata={
            "monitor": {"route": route, "user_id": user, "source": source,
                        "start_time": start.isoformat() if start else None,
                        "sample_reason": reason, "root_cause": root}})
        components = {}
        for name in pipeline.order:
            found = metrics[tid].get(name)
            if found:
                components[name] = ComponentResult(status="evaluated", metrics=found)
            elif trace.step(name) is None:
                components[name] = ComponentResult(status="not_run")
        path = [c for c in pipeline.order if c in verdicts[tid]]
        results.append(CaseResult(
            case=case, trace=trace, components=components, verdicts=verdicts[tid],
            end_to_end=_end_to_end(passed, root),
            attribution=_attribution(passed, root, path)))
    (out / MANIFEST).write_text(json.dumps({
        "scenario": str(scenario.path), "scenario_sha256": scenario.sha256,
        "monitor": str(monitor.path), "store": str(monitor.store_path),
        "selection": {"only": only, "since": since.isoformat() if since else None},
        "started_at": started}, indent=2) + "\n", encoding="utf-8")
    with open(out / RESULTS, "w", encoding="utf-8") as sink:
        for result in results:
            sink.write(result.to_line() + "\n")
    _write_report(monitor, out, results, started, only, since)

    done = Exported(out=out, traces=len(results), with_feedback=len(by_trace))
    done.labels, done.reviewers = _write_labels(out, results, thumbs)
    return done


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _end_to_end(passed: bool | None, root: str | None) -> Verdict:
    """A stored trace's ``passed`` and root cause as its end-to-end verdict.

    >>> _end_to_end(False, "generator").reason, _end_to_end(None, None).status
    ('root cause: generator', 'error')
    """
    if passed is None:
        return Verdict(status="error", reason="undecided: a metric a verdict reads is an "
                                              "error")
    if passed:
        return Verdict(status="pass")
    return Verdict(status="fail", reason=f"root cause: {root}" if root else
                   "the trace recorded an error")


def _attribution(passed: bool | None, root: str | None, path: list[str]) -> Attribution:
    """The monitor's root cause as the case's attribution (what ``--stratify component``
    reads).

    >>> _attribution(False, "generator", ["router", "generator"]).root_causes
    ['generator']
    """
    if passed:
        return Attribution(kind="passed", path=path)
    if root:
        return Attribution(kind="attributed", root_causes=[root], shares={root: 1.0},
                           failing=[root], path=path, reason="the first component on the "
                           "taken path whose reference-free verdict fails")
    return Attribution(kind="unattributed" if passed is False else "unknown", path=path)


def _write_report(monitor: Monitor, out: Path, results: list[CaseResult], started: str,
                  only: str, since: datetime | None) -> None:
    """report.json, .md and .html over the exported results: per component its reference-free
    metrics (mean, bootstrap CI), cost, and the monitor's verdict criteria."""
    from evalharness.render import write_reports
    from evalharness.report import CostTally, summarise
    from evalharness.stats import seed_for

    scenario = monitor.scenario
    pipeline = scenario.pipeline
    only_metrics = reference_free_metrics(scenario)
    gates = reference_free_criteria(scenario, only_metrics)
    components = {}
    for name in pipeline.order:
        by = {m: e.name for e in scenario.evaluators_on(name) for m in e.metrics}
        names = sorted({m for r in results for m in (r.components.get(name).metrics
                        if r.components.get(name) else {})})
        cost = CostTally()
        statuses = dict.fromkeys(("evaluated", "not_run", "error", "missing"), 0)
        for r in results:
            cost.add(r.trace.step(name))
            comp = r.components.get(name)
            statuses[comp.status if comp else "missing"] += 1
        components[name] = ComponentReport(
            kind=pipeline.kind(name), cases=statuses, cost=cost.summary(), evaluators=[],
            metrics={m: summarise([r.components[name].metrics[m] for r in results
                                   if name in r.components
                                   and m in r.components[name].metrics],
                                  by.get(m, m), seed=seed_for(name, m)) for m in names})
    criteria = {name: CriteriaReport(
        criteria=[f"{g.metric} {g.op} {g.threshold:g}" for g in gates.get(name, [])],
        source="scenario" if scenario.verdicts.get(name) else "default",
        note="the monitor's reference-free verdict") for name in pipeline.order}
    report = Report(
        scenario={"name": scenario.name, "path": str(scenario.path),
                  "sha256": scenario.sha256},
        judge={"backend": getattr(scenario.spec.judge, "backend", None),
               "model": getattr(scenario.spec.judge, "model", None)},
        versions={"evalharness": __version__},
        cases={"total": len(results), "evaluated": len(results), "system_errors": 0},
        components=components, gates=[], verdict_criteria=criteria,
        warnings=[f"production traces exported from the monitor's store {monitor.store_path} "
                  f"(--only {only}" + (f", since {since.isoformat()}" if since else "")
                  + "): no gold, reference-free metrics only"],
        run={"started_at": started, "duration_s": 0.0, "resumed_cases": 0,
             "out_dir": str(out), "monitor": str(monitor.path)})
    write_reports(report, out, results)


def _write_labels(out: Path, results: list[CaseResult], thumbs: list[tuple[Any, ...]]
                  ) -> tuple[int, set[str]]:
    """What each user says of a trace (:data:`SAYS`) as a yes/no label on every case-level
    target of the trace's answer (components of kind :data:`ANSWER_KIND`)."""
    from evalharness.review.session import Review
    from evalharness.runfolder import load_run

    if not thumbs:
        return 0, set()
    review = Review.of(load_run(out))
    labels = []
    for tid, user, th, at, comment in thumbs:
        for target in review.targets(tid):
            if target.kind != ANSWER_KIND or target.item:
                continue
            labels.append(L.Label(
                case=tid, component=target.component, metric=target.metric,
                label="yes" if th > 0 else "no", reviewer=str(user)[:80],
                note=(comment or "")[:4000],
                at=at.replace(microsecond=0).isoformat() + "Z" if at else ""))
    L.append(out / L.LABELS, labels)
    return len(labels), {lab.reviewer for lab in labels}


@click.command("export")
@click.argument("monitor_file", metavar="MONITOR.yaml",
                type=click.Path(path_type=Path, dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="The run folder to write (must not hold results yet).")
@click.option("--since", default=None, metavar="WHEN",
              help="Only traces started since: a duration back from now (7d, 12h) or an ISO "
                   "time.")
@click.option("--only", type=click.Choice(list(ONLY)), default="feedback", show_default=True,
              help="Which evaluated traces: those with users' feedback, with a thumbs-down, "
                   "that failed (a component's verdict), or all.")
def export_command(monitor_file: Path, out: Path, since: str | None, only: str) -> None:
    """Write the monitor's evaluated traces as a run folder the review tools read.

    Each trace becomes a case (id = trace id) with its trace, metrics and verdicts; the users'
    thumbs become review labels (up = yes, down = no) on the answer's targets, so

    \b
      evalharness review serve OUT      opens them in the review page
      evalharness agreement OUT         says how far the judge agrees with the users

    \b
    Examples:
      evalharness monitor export scenarios/shop-monitor.yaml --out runs/fb
      evalharness monitor export monitor.yaml --only thumbs-down --since 7d --out runs/down
    """
    from evalharness.monitor.config import load_monitor
    from evalharness.monitor.report import parse_time

    config = load_monitor(monitor_file)
    when = parse_time(since, now=datetime.now(UTC)) if since else None
    done = export(config, out, since=when, only=only)  # type: ignore[arg-type]
    click.echo(done.line())
    click.echo(f"open them: evalharness review serve {out}\n"
               f"judge vs users: evalharness agreement {out}")
