"""``evalharness monitor report``: the monitor's store read into one view model, written as
report.json, report.md and report.html (docs/monitor.md, "The report").

:func:`build_report` reads the store (a read-only, short-lived connection, so a running
monitor is never held up for long) and aggregates; :mod:`evalharness.monitor.report_render`
turns the same dictionary into report.md and report.html; :func:`write_report` does both.
Nothing here evaluates: every number is recomputed from the store's rows.

Statistics: a metric's mean has a seeded 95% percentile-bootstrap interval
(:func:`evalharness.stats.bootstrap_ci`); pass rates and root-cause shares are proportions
with a 95% **Wilson score** interval (:func:`wilson`), which stays inside [0, 1] and is
sensible for the small counts of an hour's window; judge–user agreement (Cohen's kappa,
balanced accuracy, computed by :mod:`evalharness.review.stats`) has a percentile bootstrap
interval over the labels, from resampled confusion counts (:func:`agreement_cis`).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
import numpy as np

from evalharness.errors import InputError, OutputError
from evalharness.exitcodes import ALARM
from evalharness.monitor.store import NO_ROUTE, UNATTRIBUTED, finite
from evalharness.monitor.timespans import iso, parse_time
from evalharness.review import stats as S
from evalharness.stats import (
    RESAMPLES,
    bootstrap_ci,
    bootstrap_sums,
    percentile_ci,
    seed_for,
    wilson,
)

REPORT_VERSION = 1
"""The version of report.json's shape (docs/monitor.md, "report.json")."""

WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
"""The window sizes a report may bucket traces by (``date_trunc`` of the trace's start)."""

MIN_AGREEMENT = 20
"""Below this many labelled traces, judge–user agreement is reported but flagged too small."""

MAX_TRACES = 300
"""The drill-down lists at most this many traces (failed or thumbs-down, newest first)."""

MAX_WINDOW_LINKS = 20
"""Failed traces linked from one window's row."""


ROOT_CAUSE_NOTE = ("Without gold labels, a trace's root cause is the first component on its "
                   "taken path whose reference-free verdict fails.")


# --------------------------------------------------------------------------------------------
# Small pure pieces
# --------------------------------------------------------------------------------------------





def mean_summary(values: Sequence[float], errors: int, *names: str) -> dict[str, Any]:
    """A metric's summary: mean, seeded 95% bootstrap CI, n (values) and errors.

    >>> mean_summary([0.0, 1.0, 1.0, 1.0], 1, "x")["mean"], mean_summary([], 2, "x")
    (0.75, {'mean': None, 'ci95': None, 'n': 0, 'errors': 2})
    """
    if not values:
        return {"mean": None, "ci95": None, "n": 0, "errors": errors}
    ci = bootstrap_ci(values, seed=seed_for("monitor", *names))
    return {"mean": float(sum(values) / len(values)), "ci95": None if ci is None else list(ci),
            "n": len(values), "errors": errors}


def rate(passed: int, failed: int, undecided: int = 0) -> dict[str, Any]:
    """A pass rate over decided verdicts with its Wilson interval.

    >>> rate(3, 1, 2)["pass_rate"]
    0.75
    """
    n = passed + failed
    return {"passed": passed, "failed": failed, "undecided": undecided,
            "pass_rate": passed / n if n else None, "ci95": wilson(passed, n)}


def shares(counts: dict[str, int], total: int) -> dict[str, dict[str, Any]]:
    """Each key's count as a share of ``total`` with its Wilson interval, largest first.

    >>> shares({"a": 1, "b": 3}, 4)["b"]["share"], list(shares({"a": 1, "b": 3}, 4))
    (0.75, ['b', 'a'])
    """
    return {k: {"count": n, "share": n / total if total else None, "ci95": wilson(n, total)}
            for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


# --------------------------------------------------------------------------------------------
# Reading the store
# --------------------------------------------------------------------------------------------


def _when(value: datetime | str | None, now: datetime) -> datetime | None:
    if value is None or isinstance(value, datetime):
        if isinstance(value, datetime) and value.tzinfo is not None:
            return value.astimezone(UTC).replace(tzinfo=None)
        return value
    return parse_time(value, now=now)


def _select(con: Any, since: datetime | None, until: datetime | None,
            windows: Sequence[str]) -> None:
    """The temp table ``sel``: the traces of the period, each with its time and buckets."""
    buckets = "".join(f", date_trunc('{w}', t) AS w_{w}" for w in windows)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE sel AS SELECT *" + buckets + " FROM ("
        "SELECT trace_id, COALESCE(start_time, stored_at) AS t, COALESCE(route, ?) AS route, "
        "question, answer, user_id, sampled, sample_reason, status, error, root_cause, passed, "
        "latency_ms, total_tokens FROM traces) AS traced WHERE (? IS NULL OR t >= ?) "
        "AND (? IS NULL OR t < ?)",
        [NO_ROUTE, since, since, until, until])


def _components(con: Any) -> list[str]:
    """The components in the order the monitor wrote their metrics (its path order), then
    any with verdicts only."""
    rows = con.execute(
        "SELECT component FROM (SELECT component, min(rowid) AS first FROM metrics "
        "WHERE trace_id IN (SELECT trace_id FROM sel) GROUP BY component "
        "UNION ALL SELECT component, 1e18 + min(rowid) FROM verdicts "
        "WHERE trace_id IN (SELECT trace_id FROM sel) GROUP BY component) AS firsts "
        "GROUP BY component ORDER BY min(first), component").fetchall()
    return [r[0] for r in rows]


def _traffic(con: Any) -> dict[str, Any]:
    def counts(where: str = "", params: Sequence[Any] = ()) -> dict[str, int]:
        row = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE sampled), "
            "count(*) FILTER (WHERE status = 'evaluated'), count(*) FILTER (WHERE status = 'not sampled'), "
            "count(*) FILTER (WHERE status = 'unmappable'), "
            "count(*) FILTER (WHERE status = 'evaluated' AND passed), "
            "count(*) FILTER (WHERE status = 'evaluated' AND NOT passed), "
            "count(*) FILTER (WHERE status = 'evaluated' AND passed IS NULL), "
            "count(*) FILTER (WHERE status = 'queued'), "
            "count(*) FILTER (WHERE sample_reason = 'budget') FROM sel " + where,
            list(params)).fetchone()
        keys = ("traces", "sampled", "evaluated", "not_sampled", "unmappable", "passed",
                "failed", "undecided", "queued", "left_by_budget")
        return dict(zip(keys, (int(v) for v in row), strict=True))

    total = counts()
    period = con.execute("SELECT min(t), max(t) FROM sel").fetchone()
    routes = [r[0] for r in con.execute(
        "SELECT route FROM sel GROUP BY route ORDER BY count(*) DESC, route").fetchall()]
    return {**total, "first": iso(period[0]), "last": iso(period[1]),
            "end_to_end": rate(total["passed"], total["failed"], total["undecided"]),
            "routes": {r: counts("WHERE route = ?", [r]) for r in routes}}


def _metric_rows(con: Any, group: str) -> dict[Any, dict[str, dict[str, tuple]]]:
    """group key → component → metric → (values, errors), over evaluated traces."""
    out: dict[Any, dict[str, dict[str, tuple]]] = defaultdict(lambda: defaultdict(dict))
    rows = con.execute(
        f"SELECT {group}, m.component, m.metric, "
        f"array_agg(m.value ORDER BY m.trace_id) FILTER (WHERE {finite('m.value')}), "
        f"count(*) FILTER (WHERE NOT coalesce({finite('m.value')}, FALSE)) "
        "FROM metrics m JOIN sel s USING (trace_id) WHERE s.status = 'evaluated' "
        "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3").fetchall()
    for key, comp, metric, values, errors in rows:
        out[key][comp][metric] = (list(values or []), int(errors))
    return out


def _verdict_rows(con: Any, group: str) -> dict[Any, dict[str, tuple[int, int, int]]]:
    """group key → component → (passed, failed, undecided), over evaluated traces."""
    out: dict[Any, dict[str, tuple[int, int, int]]] = defaultdict(dict)
    for key, comp, p, f, u in con.execute(
            f"SELECT {group}, v.component, count(*) FILTER (WHERE v.passed), "
            "count(*) FILTER (WHERE NOT v.passed), count(*) FILTER (WHERE v.passed IS NULL) "
            "FROM verdicts v JOIN sel s USING (trace_id) WHERE s.status = 'evaluated' "
            "GROUP BY 1, 2").fetchall():
        out[key][comp] = (int(p), int(f), int(u))
    return out


def _component_blocks(metrics: dict[Any, dict[str, dict[str, tuple]]],
                      verdicts: dict[Any, dict[str, tuple[int, int, int]]], key: Any,
                      components: list[str], seed: str) -> dict[str, dict[str, Any]]:
    """Per component, for the group ``key``: each metric's summary and the verdict rate."""
    out: dict[str, dict[str, Any]] = {}
    ms_of, vs_of = metrics.get(key, {}), verdicts.get(key, {})
    for comp in components:
        ms = {m: mean_summary(v, e, seed, str(key), comp, m)
              for m, (v, e) in sorted(ms_of.get(comp, {}).items())}
        counts = vs_of.get(comp)
        if not ms and counts is None:
            continue
        out[comp] = {"metrics": ms, "verdicts": rate(*counts) if counts else None}
    return out


def _root_causes(con: Any, where: str = "", params: Sequence[Any] = ()) -> dict[str, Any]:
    rows = con.execute(
        "SELECT COALESCE(root_cause, ?), count(*) FROM sel "
        "WHERE status = 'evaluated' AND NOT passed " + where + " GROUP BY 1",
        [UNATTRIBUTED, *params]).fetchall()
    counts = {r[0]: int(r[1]) for r in rows}
    failed = sum(counts.values())
    return {"failed": failed, "shares": shares(counts, failed)}


def _windows(con: Any, size: str, components: list[str], labels: list[dict[str, Any]]
             ) -> list[dict[str, Any]]:
    col = f"w_{size}"
    metrics = _metric_rows(con, f"s.{col}")
    verdicts = _verdict_rows(con, f"s.{col}")
    feedback = dict(_thumbs_by(con, col, labels))
    out = []
    for (start,) in con.execute(f"SELECT DISTINCT {col} FROM sel ORDER BY 1").fetchall():
        row = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'evaluated'), "
            "count(*) FILTER (WHERE status = 'evaluated' AND passed), "
            "count(*) FILTER (WHERE status = 'evaluated' AND NOT passed), "
            "count(*) FILTER (WHERE status = 'evaluated' AND passed IS NULL) "
            f"FROM sel WHERE {col} = ?", [start]).fetchone()
        failed_ids = [r[0] for r in con.execute(
            f"SELECT trace_id FROM sel WHERE {col} = ? AND status = 'evaluated' AND NOT passed "
            "ORDER BY t DESC, trace_id LIMIT ?", [start, MAX_WINDOW_LINKS]).fetchall()]
        up, down = feedback.get(start, (0, 0))
        out.append({
            "start": iso(start), "end": iso(start + WINDOWS[size]),
            "traces": int(row[0]), "evaluated": int(row[1]),
            "end_to_end": rate(int(row[2]), int(row[3]), int(row[4])),
            "components": _component_blocks(metrics, verdicts, start, components,
                                            f"window-{size}"),
            "root_causes": _root_causes(con, f"AND {col} = ?", [start]),
            "feedback": {"thumbs_up": up, "thumbs_down": down,
                         "down_share": down / (up + down) if up + down else None},
            "failed_traces": failed_ids,
        })
    return out


def _labels(con: Any) -> list[dict[str, Any]]:
    """The users' labels of the period's traces: per trace and user, the latest thumbs and
    the latest score (each the last non-NULL one by ``received_at``), and what the user
    says of the trace (:func:`user_says`)."""
    rows = con.execute(
        "SELECT f.trace_id, COALESCE(f.user_id, ''), f.thumbs, f.score, s.passed, s.status, "
        "s.route, "
        f"{', '.join('s.' + c for c in _window_cols(con))} "
        "FROM feedback f JOIN sel s USING (trace_id) "
        "ORDER BY f.received_at, f.feedback_id").fetchall()
    labels: dict[tuple[str, str], dict[str, Any]] = {}
    for trace_id, user, thumbs, score, passed, status, route, *buckets in rows:
        label = labels.setdefault((trace_id, user), {
            "trace_id": trace_id, "user": user, "thumbs": None, "score": None,
            "passed": passed, "status": status, "route": route, "buckets": buckets})
        if thumbs is not None:
            label["thumbs"] = int(thumbs)
        if score is not None:
            label["score"] = float(score)
    for label in labels.values():
        label["says"] = user_says(label["thumbs"], label["score"])
    return list(labels.values())


def user_says(thumbs: int | None, score: float | None) -> bool | None:
    """Whether a user's label passes the trace: their thumbs (up: pass), else their 1–5 score
    (4 or 5: pass, 1 or 2: fail, 3: no label), else nothing.

    >>> user_says(-1, 5), user_says(None, 4), user_says(None, 2.5), user_says(None, 3)
    (False, True, False, None)
    """
    if thumbs is not None:
        return thumbs > 0
    if score is None or score == 3:
        return None
    return score > 3


def _window_cols(con: Any) -> list[str]:
    """The bucket columns of ``sel`` (``w_day``…), in their order (from the result's
    description: both backends give one)."""
    return [d[0] for d in con.execute("SELECT * FROM sel LIMIT 0").description
            if d[0].startswith("w_")]


def _thumbs_by(con: Any, col: str, labels: list[dict[str, Any]]
               ) -> Iterable[tuple[datetime, tuple[int, int]]]:
    """Per bucket of ``col``: thumbs up and down among the users' labels."""
    at = _window_cols(con).index(col)
    tally: dict[datetime, list[int]] = defaultdict(lambda: [0, 0])
    for label in labels:
        if label["thumbs"] is not None:
            tally[label["buckets"][at]][0 if label["thumbs"] > 0 else 1] += 1
    return ((k, (v[0], v[1])) for k, v in tally.items())


def _feedback(con: Any, labels: list[dict[str, Any]], evaluated: int,
              since: datetime | None, until: datetime | None,
              wait: timedelta) -> dict[str, Any]:
    from evalharness.monitor.feedback import unknown_where

    records = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE comment IS NOT NULL AND comment <> '') "
        "FROM feedback WHERE trace_id IN (SELECT trace_id FROM sel)").fetchone()
    unresolved, unknown = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE {unknown_where(wait)}) FROM feedback "
        "WHERE trace_id IS NULL AND (? IS NULL OR received_at >= ?) "
        "AND (? IS NULL OR received_at < ?)", [since, since, until, until]).fetchone()
    thumbs = [lb["thumbs"] for lb in labels if lb["thumbs"] is not None]
    up = sum(1 for t in thumbs if t > 0)
    scores = [lb["score"] for lb in labels if lb["score"] is not None]
    labelled = {lb["trace_id"] for lb in labels
                if lb["status"] == "evaluated" and (lb["thumbs"] is not None
                                                     or lb["score"] is not None)}
    return {
        "records": int(records[0]), "comments": int(records[1]),
        "unknown_trace": int(unknown), "waiting": int(unresolved - unknown),
        "labels": len(labels),
        "thumbs": {"up": up, "down": len(thumbs) - up,
                   "up_share": up / len(thumbs) if thumbs else None,
                   "down_share": (len(thumbs) - up) / len(thumbs) if thumbs else None,
                   "ci95_down": wilson(len(thumbs) - up, len(thumbs))},
        "score": mean_summary(scores, 0, "feedback-score"),
        "labelled_traces": len(labelled),
        "labelled_share": len(labelled) / evaluated if evaluated else None,
    }


def agreement_block(judge_pass: Sequence[bool], user_up: Sequence[bool], *names: str
                    ) -> dict[str, Any]:
    """The judge's pass/fail against the users' thumbs (down = fail): Cohen's kappa and
    balanced accuracy with bootstrap CIs, the confusion counts, and whether ``n`` is enough.

    >>> b = agreement_block([True, True, False, False], [True, False, False, False], "x")
    >>> b["confusion"], b["enough"], round(b["balanced_accuracy"]["value"], 4)
    ({'judge_pass_user_up': 1, 'judge_pass_user_down': 1, 'judge_fail_user_up': 0, 'judge_fail_user_down': 2}, False, 0.8333)
    """
    n = len(judge_pass)
    pairs = list(zip(judge_pass, user_up, strict=True))
    confusion = {
        "judge_pass_user_up": sum(1 for j, u in pairs if j and u),
        "judge_pass_user_down": sum(1 for j, u in pairs if j and not u),
        "judge_fail_user_up": sum(1 for j, u in pairs if not j and u),
        "judge_fail_user_down": sum(1 for j, u in pairs if not j and not u),
    }
    block: dict[str, Any] = {"n": n, "enough": n >= MIN_AGREEMENT, "confusion": confusion,
                             "kappa": None, "balanced_accuracy": None, "note": None}
    if n == 0:
        block["note"] = "no trace has both a verdict and a user's thumbs"
        return block
    j, u = [bool(x) for x in judge_pass], [bool(x) for x in user_up]
    kappa_ci, ba_ci = agreement_cis(j, u, seed=seed_for("monitor-agreement", *names))
    kappa, ba = S.cohen_kappa(j, u), S.balanced_accuracy(j, u)
    block["kappa"] = {"value": None if math.isnan(kappa) else kappa, "ci95": kappa_ci, "n": n}
    block["balanced_accuracy"] = {"value": None if math.isnan(ba) else ba, "ci95": ba_ci,
                                  "n": n}
    notes = []
    if n < MIN_AGREEMENT:
        notes.append(f"n = {n} is too small (fewer than {MIN_AGREEMENT} labelled traces): "
                     "read these numbers as anecdotes, not estimates")
    if len(set(u)) < 2:
        notes.append("the users gave one thumb only, so balanced accuracy is undefined")
    if len(set(j)) < 2:
        notes.append(f"the judge {'passed' if j[0] else 'failed'} every one of these traces, "
                     "so it cannot agree beyond chance (kappa 0 or undefined)")
    if block["kappa"]["value"] is None:
        notes.append("kappa is undefined: judge and users each gave one and the same label")
    block["note"] = "; ".join(notes) or None
    return block


def agreement_cis(judge_pass: Sequence[bool], user_up: Sequence[bool], *, seed: int
                  ) -> tuple[list[float] | None, list[float] | None]:
    """95% bootstrap intervals of Cohen's kappa and balanced accuracy of two yes/no raters,
    from the resampled 2×2 confusion counts (:func:`evalharness.stats.bootstrap_sums`: one
    matrix product, not a statistic per resample). ``None`` with fewer than 2 rows or when the
    statistic is undefined in more than half the resamples (as
    :func:`evalharness.review.stats.bootstrap` does).

    >>> k, b = agreement_cis([True] * 5 + [False] * 5, [True] * 5 + [False] * 5, seed=1)
    >>> k, b
    ([1.0, 1.0], [1.0, 1.0])
    """
    if len(judge_pass) < 2:
        return None, None
    j, u = np.asarray(judge_pass, dtype=bool), np.asarray(user_up, dtype=bool)
    rows = np.stack([j & u, j & ~u, ~j & u, ~j & ~u], axis=1).astype(float)
    a, b, c, d = bootstrap_sums(rows, seed=seed, resamples=RESAMPLES).T
    n = a + b + c + d
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = (a + d) / n
        chance = ((a + b) * (a + c) + (c + d) * (b + d)) / (n * n)
        kappa = np.where(np.isclose(chance, 1.0), np.nan, (observed - chance) / (1 - chance))
        balanced = (a / (a + c) + d / (b + d)) / 2  # NaN when the users gave one thumb only

    def ci(x: np.ndarray) -> list[float] | None:
        if 2 * np.count_nonzero(np.isnan(x)) > x.size:
            return None
        found = percentile_ci(x)
        return None if found is None else [found[0], found[1]]

    return ci(kappa), ci(balanced)


def _agreement(con: Any, labels: list[dict[str, Any]], components: list[str],
               routes: Sequence[str]) -> dict[str, Any]:
    said = [lb for lb in labels if lb["says"] is not None and lb["status"] == "evaluated"]
    e2e = [lb for lb in said if lb["passed"] is not None]
    verdicts: dict[tuple[str, str], bool] = {
        (t, c): bool(p) for t, c, p in con.execute(
            "SELECT trace_id, component, passed FROM verdicts WHERE passed IS NOT NULL "
            "AND trace_id IN (SELECT trace_id FROM sel)").fetchall()}
    per_component = {}
    for comp in components:
        rows = [(verdicts[(lb["trace_id"], comp)], lb["says"]) for lb in said
                if (lb["trace_id"], comp) in verdicts]
        per_component[comp] = agreement_block([r[0] for r in rows], [r[1] for r in rows],
                                              comp)
    per_route = {}
    for route in routes:
        rows = [lb for lb in e2e if lb["route"] == route]
        per_route[route] = agreement_block([bool(lb["passed"]) for lb in rows],
                                           [lb["says"] for lb in rows], "end_to_end", route)
    return {
        "unit": "one row per trace and user: what the user says of the trace — their latest "
                "thumbs (down = fail), else their latest score (1–2 fail, 4–5 pass, 3 no "
                "label) — against the judge's verdict of that trace",
        "min_n": MIN_AGREEMENT,
        "end_to_end": agreement_block([bool(lb["passed"]) for lb in e2e],
                                      [lb["says"] for lb in e2e], "end_to_end"),
        "components": per_component,
        "routes": per_route,
    }


def _drilldown(con: Any, labels: list[dict[str, Any]], components: list[str]
               ) -> dict[str, Any]:
    down = sorted({lb["trace_id"] for lb in labels if lb["thumbs"] is not None
                   and lb["thumbs"] < 0})
    con.execute("CREATE OR REPLACE TEMP TABLE down (trace_id TEXT)")
    if down:
        con.executemany("INSERT INTO down VALUES (?)", [[t] for t in down])
    where = ("(status = 'evaluated' AND NOT passed) OR trace_id IN (SELECT trace_id FROM down)")
    total = con.execute(f"SELECT count(*) FROM sel WHERE {where}").fetchone()[0]
    rows = con.execute(
        "SELECT trace_id, t, route, question, answer, status, error, root_cause, passed, "
        f"latency_ms, total_tokens, user_id FROM sel WHERE {where} ORDER BY t DESC, trace_id "
        "LIMIT ?", [MAX_TRACES]).fetchall()
    con.execute("CREATE OR REPLACE TEMP TABLE shown (trace_id TEXT)")
    if rows:
        con.executemany("INSERT INTO shown VALUES (?)", [[r[0]] for r in rows])
    comp_data: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for t, c, p, crit, reason in con.execute(
            "SELECT trace_id, component, passed, criterion, reason FROM verdicts "
            "WHERE trace_id IN (SELECT trace_id FROM shown)").fetchall():
        comp_data[t].setdefault(c, {"verdict": None, "metrics": {}})["verdict"] = {
            "passed": p, "criterion": crit, "reason": reason}
    for t, c, m, v, e in con.execute(
            "SELECT trace_id, component, metric, value, error FROM metrics "
            "WHERE trace_id IN (SELECT trace_id FROM shown) ORDER BY metric").fetchall():
        comp_data[t].setdefault(c, {"verdict": None, "metrics": {}})["metrics"][m] = {
            "value": v, "error": e}
    feedback: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t, th, sc, lab, com, uid, at, src in con.execute(
            "SELECT trace_id, thumbs, score, labels, comment, user_id, received_at, source "
            "FROM feedback WHERE trace_id IN (SELECT trace_id FROM shown) "
            "ORDER BY received_at, feedback_id").fetchall():
        feedback[t].append({"thumbs": th, "score": sc,
                            "labels": json.loads(lab) if isinstance(lab, str) else lab,
                            "comment": com, "user_id": uid, "received_at": iso(at),
                            "source": src})
    order = {c: i for i, c in enumerate(components)}
    traces = []
    for (tid, t, route, q, a, status, error, cause, passed, lat, tokens, uid) in rows:
        comps = comp_data.get(tid, {})
        why = []
        if status == "evaluated" and passed is False:
            why.append("failed")
        if tid in down:
            why.append("thumbs down")
        traces.append({
            "trace_id": tid, "time": iso(t), "route": route, "question": q, "answer": a,
            "status": status, "error": error, "root_cause": cause, "passed": passed,
            "latency_ms": lat, "total_tokens": tokens, "user_id": uid, "why": why,
            "components": dict(sorted(comps.items(), key=lambda kv: order.get(kv[0], 1 << 30))),
            "feedback": feedback.get(tid, []),
        })
    return {"total": int(total), "shown": len(traces), "max": MAX_TRACES, "traces": traces}


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


def build_report(con: Any, *, since: datetime | str | None = None,
                 until: datetime | str | None = None, windows: Sequence[str] = ("day",),
                 now: datetime | None = None, wait: timedelta | None = None,
                 drift: Any = None) -> dict[str, Any]:
    """The report's view model from an open connection to the store (see
    docs/monitor.md, "report.json" for its keys). ``wait``: how long feedback waits for its
    trace (``feedback.wait``; default 24 hours) before it counts as for an unknown trace.
    ``drift``: MONITOR.yaml's ``drift:`` (:class:`~evalharness.monitor.config.DriftSpec`),
    default its defaults; the check covers the whole store up to ``until`` (its baseline may
    lie before ``since``)."""
    from evalharness.monitor.feedback import WAIT

    now = now or datetime.now(UTC)
    start, end = _when(since, now), _when(until, now)
    unknown = [w for w in windows if w not in WINDOWS]
    if unknown or not windows:
        raise InputError(f"window {', '.join(unknown) or '(none)'} is unknown: give one of "
                         f"{', '.join(WINDOWS)}")
    windows = list(dict.fromkeys(windows))
    _select(con, start, end, windows)
    components = _components(con)
    traffic = _traffic(con)
    metrics = _metric_rows(con, "'all'")
    verdicts = _verdict_rows(con, "'all'")
    route_metrics = _metric_rows(con, "s.route")
    route_verdicts = _verdict_rows(con, "s.route")
    blocks = _component_blocks(metrics, verdicts, "all", components, "all")
    labels = _labels(con)
    per_component: dict[str, dict[str, Any]] = {}
    for comp in components:
        routes = {}
        for route in traffic["routes"]:
            b = _component_blocks(route_metrics, route_verdicts, route, [comp], "route")
            if comp in b:
                routes[route] = b[comp]
        per_component[comp] = {**blocks.get(comp, {"metrics": {}, "verdicts": None}),
                               "routes": routes}
    queue = _queue(con)
    return {
        "version": REPORT_VERSION,
        "generated_at": iso(now.astimezone(UTC).replace(tzinfo=None, microsecond=0)),
        "period": {"since": iso(start), "until": iso(end)},
        "notes": [ROOT_CAUSE_NOTE, *_service_notes(queue, traffic)],
        "queue": queue,
        "statistics": {
            "metric_ci": f"95% percentile bootstrap of the mean, seeded ({RESAMPLES} "
                         "resamples)",
            "rate_ci": "95% Wilson score interval",
            "agreement_ci": f"95% percentile bootstrap over the labels ({RESAMPLES} "
                            "resamples of the 2×2 confusion counts)",
        },
        "components": components,
        "traffic": traffic,
        "per_component": per_component,
        "root_causes": _root_causes(con),
        "windows": {w: _windows(con, w, components, labels) for w in windows},
        "feedback": _feedback(con, labels, traffic["evaluated"], start, end, wait or WAIT),
        "agreement": _agreement(con, labels, components, list(traffic["routes"])),
        "drilldown": _drilldown(con, labels, components),
        "criteria": _criteria(con),
        **_drift(con, drift, end),
    }


def _queue(con: Any) -> dict[str, Any]:
    """The store's queue now (whatever the period): traces waiting for evaluation, since
    when, and why the last try of the most tried one was put back (the judge down)."""
    size, oldest, attempts = con.execute(
        "SELECT count(*), min(queued_at), max(attempts) FROM queue").fetchone()
    error = con.execute("SELECT last_error FROM queue WHERE last_error IS NOT NULL "
                        "ORDER BY attempts DESC, trace_id LIMIT 1").fetchone()
    return {"waiting": int(size), "oldest": iso(oldest), "attempts": int(attempts or 0),
            "last_error": error[0] if error else None}


def _service_notes(queue: dict[str, Any], traffic: dict[str, Any]) -> list[str]:
    """What the reader should know about evaluation keeping up (docs/monitor.md, "Running it
    as a service"): traces still queued, the judge down, the budget's left-outs."""
    notes = []
    if queue["waiting"]:
        notes.append(f"{queue['waiting']} traces wait for evaluation (queued since "
                     f"{queue['oldest']}); the period's figures do not count them yet"
                     + (f"; the judge could not answer the last try ({queue['attempts']} "
                        f"tries): {queue['last_error']}" if queue["last_error"] else ""))
    if traffic.get("left_by_budget"):
        notes.append(f"{traffic['left_by_budget']} traces the sampling rate would have taken "
                     "were left out by the judge's daily budget (`budget:`)")
    return notes


def _criteria(con: Any) -> dict[str, list[str]]:
    """Per component: the verdict criteria of the period's traces (the charts draw a
    one-threshold criterion as a line)."""
    rows = con.execute("SELECT component, criterion FROM verdicts WHERE criterion IS NOT NULL "
                       "AND trace_id IN (SELECT trace_id FROM sel) GROUP BY 1, 2 "
                       "ORDER BY component, criterion").fetchall()
    out: dict[str, list[str]] = {}
    for comp, criterion in rows:
        out.setdefault(comp, []).append(criterion)
    return out


def _drift(con: Any, drift: Any, until: datetime | None) -> dict[str, Any]:
    from evalharness.monitor.alerts import run_check
    from evalharness.monitor.config import DriftSpec

    spec = drift or DriftSpec()
    if not spec.enabled:
        return {"drift": None, "drift_note": "`drift: {enabled: false}` in MONITOR.yaml"}
    check = run_check(con, recent=spec.recent, baseline=spec.baseline, q=spec.q,
                      min_n=spec.min_n, until=until, exclude=spec.exclude)
    return {"drift": check,
            "drift_note": None if check else "the store holds no evaluated trace"}


def write_report(store_path: Any, out_dir: Path | str, *,
                 since: datetime | str | None = None, until: datetime | str | None = None,
                 monitor: Path | str | None = None, windows: Sequence[str] = ("day",),
                 name: str | None = None, now: datetime | None = None,
                 wait: timedelta | None = None, drift: Any = None) -> dict[str, Any]:
    """Read the store at ``store_path`` (a DuckDB file, a ``postgresql://`` URL or a
    :class:`~evalharness.monitor.store.PostgresTarget`) and write ``out_dir``/report.json, report.md and
    report.html from one view model, which is returned.

    ``since``/``until``: datetimes (naive = UTC) or the command line's texts
    (:func:`parse_time`); a trace is in the period when its start (or, without one, when it
    was stored) is at or after ``since`` and before ``until``. ``windows``: ``hour`` and/or
    ``day``. ``monitor`` is the MONITOR.yaml the report is for and ``name`` its name (both
shown, never read here).
    """
    from evalharness.monitor.report_render import render_html, render_markdown
    from evalharness.monitor.store import PostgresTarget, as_target, connect

    store_path = as_target(store_path)
    if not isinstance(store_path, PostgresTarget) and not store_path.is_file():
        raise InputError(f"{store_path}: no monitor store there; run `evalharness monitor "
                         "MONITOR.yaml --once` first, or check `store.path` in MONITOR.yaml")
    with connect(store_path, read_only=True) as con:  # PostgreSQL: no store, InputError
        view = build_report(con, since=since, until=until, windows=windows, now=now,
                            wait=wait, drift=drift)
    view["store"] = str(store_path)
    view["monitor"] = None if monitor is None else str(monitor)
    view["name"] = name
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(view, indent=2, ensure_ascii=False) + "\n",
                                         encoding="utf-8")
        (out / "report.md").write_text(render_markdown(view), encoding="utf-8")
        (out / "report.html").write_text(render_html(view), encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"{out}: the monitor report cannot be written there: {exc}") from exc
    return view


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------


def monitor_settings(monitor: Path) -> tuple[Any, list[str], str, timedelta, Any]:
    """What the report needs of MONITOR.yaml: the store (``store.path``, relative to the
    file, or ``store.url`` and ``store.schema``), the windows, a name, how long feedback waits for its trace and the drift check. Reads and validates the file alone
    (:func:`evalharness.monitor.config.read_monitor_file`): the scenario is not loaded, so a
    report can be written where the scenario's files are not."""
    from evalharness.monitor.config import read_monitor_file

    spec, _ = read_monitor_file(monitor)
    return (spec.store.target(monitor.parent), list(spec.windows), spec.name or monitor.stem,
            spec.feedback.wait_span,
            spec.drift)


class TimeParam(click.ParamType):
    """``--since``/``--until``: a bad value is click's usage error (exit 2)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_time(str(value), now=datetime.now(UTC))
        except InputError as exc:
            self.fail(str(exc), param, ctx)


@click.command("report")
@click.argument("monitor_file", metavar="MONITOR.yaml",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--since", type=TimeParam(), default=None,
              help="Only traces that started at or after this: 7d, 24h, 90m, 2w back from "
                   "now, a date (2026-12-01, UTC) or an ISO datetime. Default: all.")
@click.option("--until", type=TimeParam(), default=None,
              help="Only traces that started before this (same forms as --since).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Folder for report.json, report.md and report.html "
                                 "(default: monitor-report/ beside MONITOR.yaml).")
@click.option("--window", "windows", type=click.Choice(list(WINDOWS)), multiple=True,
              help="Window size of the per-window tables and charts; may be repeated "
                   "(default: MONITOR.yaml's `windows`, hour and day).")
@click.option("--json", "as_json", is_flag=True,
              help="Print report.json on stdout instead of the summary table.")
def report_command(monitor_file: Path, since: datetime | None, until: datetime | None,
                   out_dir: Path | None, windows: tuple[str, ...], as_json: bool) -> None:
    """Report on the monitor's store: per component and route, metrics with 95% CIs per
    window, root-cause shares, users' feedback and how far the judge agrees with them.

    Writes report.json, report.md and report.html (with every failed or thumbs-down trace)
    and prints a summary. Reads the store only, so it may run while the monitor does. With
    the drift check's recent window against its baseline (MONITOR.yaml `drift:`); exits 5
    when an alarm fires (after writing the report).

    \b
    Examples:
      evalharness monitor report scenarios/shop-monitor.yaml --since 7d
      evalharness monitor report monitor.yaml --since 24h --window hour --out today/
      evalharness monitor report monitor.yaml --since 2026-12-01 --until 2026-12-08
      evalharness monitor report monitor.yaml --json | jq .agreement.end_to_end
    """
    if since is not None and until is not None and since >= until:
        raise click.BadParameter(f"--since ({iso(since)}) is not before --until "
                                 f"({iso(until)})", param_hint="--since")
    out = out_dir if out_dir is not None else monitor_file.parent / "monitor-report"
    store, configured, name, wait, drift = monitor_settings(monitor_file)
    view = write_report(store, out, since=since, until=until, monitor=monitor_file,
                        windows=windows or configured, name=name, wait=wait, drift=drift)
    alarms = len((view.get("drift") or {}).get("alarms") or [])
    if as_json:
        click.echo(json.dumps(view, indent=2, ensure_ascii=False))
        if alarms:
            raise SystemExit(ALARM)
        return
    from rich.console import Console

    from evalharness.monitor.report_render import print_summary

    print_summary(view, Console())
    click.echo(f"wrote {out / 'report.json'}, report.md and report.html")
    if alarms:  # after the report: a CI job or cron branches on it (docs/ci.md)
        raise SystemExit(ALARM)
