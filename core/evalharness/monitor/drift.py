"""Drift checks over the monitor's store: a recent window against a baseline window, per
component metric, verdict, route, the end-to-end pass rate and the root-cause shares
(docs/monitor.md).

:func:`check_drift` compares the evaluated traces of two windows (a trace is in a window when
its start, or without one when it was stored, is at or after the window's start and before
its end). Each comparison is one two-sided test of "the two windows do not differ":

* a metric (values that are not NULL): a **permutation test** of the difference in means
  (:func:`permutation_test`), whatever the metric's distribution (0/1 scores, bounded
  judge scores, latencies); the effect ``mean(recent) − mean(baseline)`` has a 95%
  percentile bootstrap interval, each window resampled on its own
  (:func:`mean_difference_ci`);
* a proportion — a component's verdict pass rate (undecided verdicts left out), the
  end-to-end pass rate, a component's share of the failed traces as their root cause — a
  **Fisher exact test** (:func:`fisher_exact`), exact at any count; the effect
  ``rate(recent) − rate(baseline)`` has Newcombe's hybrid score interval
  (:func:`newcombe_difference_ci`, from the two Wilson intervals the report shows).

Each is made over all routes and, when the windows hold more than one route, per route,
unless the route's values are all the routes' values (a component on that route only): no
test is counted twice. A comparison with fewer than ``min_n`` values (decided verdicts,
evaluated traces, failed traces) in either window is listed as skipped with the reason, never
silently dropped: so few cannot show a drift, and testing them would only dilute the family.

Multiple comparisons: a check makes many tests at once (metrics × components × routes), so
at the 5% level some would fire by chance in every check. All p-values of one check that were
tested form **one family**, adjusted by **Benjamini–Hochberg** (:func:`benjamini_hochberg`):
an alarm is a test whose adjusted p-value (q-value) is at most ``q``. BH controls the
expected share of false alarms among the alarms (the false discovery rate) at ``q``; when
nothing drifted that is the chance of any alarm at all. It keeps far more power than
Bonferroni's control of any false alarm when a real drift moves several related numbers at
once (a metric, its verdict, the end-to-end rate, the root-cause shares). The price: beside
many true alarms its thresholds loosen, so an unchanged metric may alarm with them (at most
a share ``q`` of the alarms, in expectation). The guarantee is proven for independent and
positively dependent tests (a route's test and the all-routes test share traces); the
root-cause shares, which sum to one, are not positively dependent, and are trusted to BH's
robustness there.

Every random draw is seeded from the test's names (:func:`evalharness.stats.seed_for`), so
the same store and windows give the same report.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import combinations
from typing import Any

import numpy as np

from evalharness.errors import InputError
from evalharness.monitor.store import NO_ROUTE, UNATTRIBUTED, finite
from evalharness.monitor.timespans import iso, parse_time
from evalharness.stats import (
    CHUNK_CELLS,
    PERMUTATIONS,
    RESAMPLES,
    benjamini_hochberg,  # its home was here; drift's alarms are its q-values
    percentile_ci,
    seed_for,
    wilson,
)

FISHER_RELATIVE_TOLERANCE = 1e-7
"""Tables whose probability is within this factor of the observed one count as "no more
likely" (R's ``fisher.test``): equally likely tables computed along different paths differ in
the last bits."""

ALL_ROUTES = "all"

# --------------------------------------------------------------------------------------------
# The statistics
# --------------------------------------------------------------------------------------------


def permutation_test(baseline: Sequence[float], recent: Sequence[float], *, seed: int,
                     resamples: int = PERMUTATIONS) -> float:
    """Two-sided p-value of a permutation test of the difference in means of two samples.

    Under "the windows do not differ" every split of the pooled values into groups of the
    two sizes is as likely as the observed one, so ``|mean(recent) − mean(baseline)|`` is
    compared with its value over such splits. When there are at most ``resamples`` distinct
    splits, every one is enumerated and the p-value is exact (the observed split is one of
    them). Otherwise ``resamples`` seeded random splits are drawn and the p-value is
    ``(1 + count) / (1 + resamples)``, the observed split counted as one, so never 0.

    >>> permutation_test([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], seed=1)  # 2 of the 20 splits
    0.1
    >>> permutation_test([0.5] * 30, [0.5] * 30, seed=1)
    1.0
    >>> permutation_test([0.0] * 30, [1.0] * 30, seed=1, resamples=999)  # Monte Carlo floor
    0.001
    """
    b, r = np.asarray(baseline, dtype=float), np.asarray(recent, dtype=float)
    n1, n2 = b.size, r.size
    if n1 == 0 or n2 == 0:
        raise ValueError("a permutation test needs values in both samples")
    x = np.concatenate([b, r])
    n, total = x.size, float(x.sum())

    def differences(recent_sums: np.ndarray) -> np.ndarray:
        return np.abs(recent_sums / n2 - (total - recent_sums) / n1)

    observed = float(differences(np.array([r.sum()]))[0])
    # sums of the same numbers in another order may differ in the last bits: ties, not less
    reach = observed - 1e-9 * max(float(np.abs(x).max()), 1e-300)
    if math.comb(n, n2) <= resamples:
        splits = np.array(list(combinations(range(n), n2)), dtype=np.int64)
        return float(np.count_nonzero(differences(x[splits].sum(axis=1)) >= reach)
                     ) / len(splits)
    rng = np.random.default_rng(seed)
    count = 0
    step = max(1, CHUNK_CELLS // n)
    for start in range(0, resamples, step):
        size = min(resamples, start + step) - start
        shuffled = rng.permuted(np.broadcast_to(x, (size, n)), axis=1)
        count += int(np.count_nonzero(differences(shuffled[:, :n2].sum(axis=1)) >= reach))
    return (1 + count) / (1 + resamples)


def mean_difference_ci(baseline: Sequence[float], recent: Sequence[float], *, seed: int,
                       resamples: int = RESAMPLES, level: float = 0.95
                       ) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``mean(recent) − mean(baseline)``, each window
    resampled on its own (they are independent samples); ``None`` when either has fewer than
    2 values.

    >>> mean_difference_ci([1.0, 1.0], [3.0, 3.0, 3.0], seed=1)
    (2.0, 2.0)
    >>> lo, hi = mean_difference_ci([0, 1] * 50, [1] * 100, seed=7)
    >>> 0.39 < lo < 0.5 < hi < 0.61
    True
    """
    b, r = np.asarray(baseline, dtype=float), np.asarray(recent, dtype=float)
    if b.size < 2 or r.size < 2:
        return None

    def means(x: np.ndarray, name: str) -> np.ndarray:
        rng = np.random.default_rng(seed_for(name, str(seed)))
        out = np.empty(resamples)
        step = max(1, CHUNK_CELLS // x.size)
        for start in range(0, resamples, step):
            stop = min(resamples, start + step)
            out[start:stop] = x[rng.integers(0, x.size, (stop - start, x.size),
                                             dtype=np.int32)].mean(axis=1)
        return out

    return percentile_ci(means(r, "recent") - means(b, "baseline"), level)


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _check_counts(k1: int, n1: int, k2: int, n2: int) -> None:
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f"counts {k1}/{n1} and {k2}/{n2}: each needs 0 <= k <= n")


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact p-value of "the proportions ``k1 / n1`` and ``k2 / n2`` are the
    same": given the margins, the first count is hypergeometric, and the p-value is the total
    probability of the tables no more likely than the observed one (within a relative
    :data:`FISHER_RELATIVE_TOLERANCE`, as R's ``fisher.test``).

    >>> round(fisher_exact(3, 4, 1, 4), 4)  # Fisher's tea tasting: 34/70
    0.4857
    >>> fisher_exact(0, 0, 3, 9), fisher_exact(2, 5, 2, 5)
    (1.0, 1.0)
    """
    _check_counts(k1, n1, k2, n2)
    k = k1 + k2
    lo, hi = max(0, k - n2), min(n1, k)
    if lo == hi:
        return 1.0
    logs = np.array([_log_comb(n1, x) + _log_comb(n2, k - x) for x in range(lo, hi + 1)])
    d = np.exp(logs - logs.max())
    observed = d[k1 - lo]
    return min(1.0, float(d[d <= observed * (1 + FISHER_RELATIVE_TOLERANCE)].sum() / d.sum()))


def newcombe_difference_ci(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float] | None:
    """95% interval of ``k2 / n2 − k1 / n1`` by Newcombe's hybrid score method (his method
    10, 1998) from the two Wilson score intervals (:func:`evalharness.stats.wilson`);
    ``None`` when either count is 0.

    >>> [round(v, 4) for v in newcombe_difference_ci(48, 80, 56, 70)]  # Newcombe's example
    [0.0524, 0.3339]
    """
    _check_counts(k1, n1, k2, n2)
    w1, w2 = wilson(k1, n1), wilson(k2, n2)
    if w1 is None or w2 is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    d = p2 - p1
    return (d - math.hypot(p2 - w2[0], w1[1] - p1), d + math.hypot(w2[1] - p2, p1 - w1[0]))


# --------------------------------------------------------------------------------------------
# Windows
# --------------------------------------------------------------------------------------------


def _naive_utc(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo is not None else value


def windows_from(now_or_latest: datetime, recent: str = "1d", baseline: str = "7d"
                 ) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime]]:
    """``(baseline, recent)`` windows as naive UTC ``(start, end)`` pairs: the recent window
    ends at ``now_or_latest`` (naive = UTC; the end is excluded), the baseline ends where the
    recent one starts. ``recent`` and ``baseline`` are spans (``90m``, ``24h``, ``1d``,
    ``2w``) or where the window starts (a date or ISO datetime), as
    :func:`evalharness.monitor.timespans.parse_time` reads them.

    >>> base, rec = windows_from(datetime(2026, 12, 6), recent="1d", baseline="4d")
    >>> [iso(t) for t in base + rec]
    ['2026-12-01T00:00:00Z', '2026-12-05T00:00:00Z', '2026-12-05T00:00:00Z', '2026-12-06T00:00:00Z']
    """
    end = _naive_utc(now_or_latest)
    recent_start = parse_time(recent, now=end.replace(tzinfo=UTC))
    baseline_start = parse_time(baseline, now=recent_start.replace(tzinfo=UTC))
    if not baseline_start < recent_start < end:
        raise InputError(f"windows recent={recent!r}, baseline={baseline!r} before "
                         f"{iso(end)}: each window must start before it ends")
    return (baseline_start, recent_start), (recent_start, end)


def window_text(start: datetime, end: datetime) -> str:
    """A window for people: whole days as dates (the end day included), else times.

    >>> (window_text(datetime(2026, 12, 1), datetime(2026, 12, 5)),
    ...  window_text(datetime(2026, 12, 5), datetime(2026, 12, 6)))
    ('2026-12-01 to 2026-12-04', '2026-12-05')
    >>> window_text(datetime(2026, 12, 5, 12), datetime(2026, 12, 6, 6, 30))
    '2026-12-05 12:00 to 2026-12-06 06:30 UTC'
    """
    midnight = datetime.min.time()
    if start.time() == midnight and end.time() == midnight:
        last = (end - timedelta(days=1)).date()
        return start.date().isoformat() if last <= start.date() else f"{start.date()} to {last}"
    return f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"


# --------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------


def _select(con: Any, baseline: tuple[datetime, datetime],
            recent: tuple[datetime, datetime]) -> list[str]:
    """The temp table ``drift_sel``: the evaluated traces of the two windows, each with its
    window ``w``; the routes found there."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE drift_sel AS SELECT trace_id, COALESCE(route, ?) AS route, "
        "root_cause, passed, CASE WHEN t >= ? AND t < ? THEN 'baseline' ELSE 'recent' END AS w "
        "FROM (SELECT *, COALESCE(start_time, stored_at) AS t FROM traces "
        "WHERE status = 'evaluated') AS evaluated WHERE (t >= ? AND t < ?) OR (t >= ? AND t < ?)",
        [NO_ROUTE, *baseline, *baseline, *recent])
    return [r[0] for r in con.execute(
        "SELECT DISTINCT route FROM drift_sel ORDER BY route").fetchall()]


def _by_route(rows: list[tuple], slices: list[str]) -> dict[Any, dict[str, dict[str, Any]]]:
    """``(w, route, key, value)`` rows → key → route slice (``all`` too) → window → value.
    Values (lists or counts) of the routes add up into ``all``, routes in name order."""
    out: dict[Any, dict[str, dict[str, Any]]] = defaultdict(lambda: defaultdict(dict))
    for w, route, key, value in sorted(rows, key=lambda r: (r[1], r[0])):
        for name in (ALL_ROUTES, route) if route in slices else (ALL_ROUTES,):
            cell = out[key][name]
            cell[w] = cell[w] + value if w in cell else value
    return out


def _too_few(nb: int, nr: int, min_n: int) -> str | None:
    short = [name for name, n in (("baseline", nb), ("recent", nr)) if n < min_n]
    if not short:
        return None
    where = "both windows" if len(short) == 2 else f"the {short[0]} window"
    return f"n < {min_n} in {where}"


def alarm_key(test: dict[str, Any]) -> str:
    """What a test (an alarm) is about: its kind, component, metric and route.

    >>> alarm_key({"kind": "metric", "component": "generator", "metric": "faithfulness",
    ...            "route": "all"})
    'metric/generator/faithfulness/all'
    """
    return "/".join(str(test.get(k) or "-") for k in ("kind", "component", "metric", "route"))


def _signed(x: float, digits: int = 2) -> str:
    """A change with its sign; three significant digits where ``digits`` decimals would show
    a change that is not 0 as 0 (a cost per request).

    >>> _signed(-0.4912), _signed(3.2e-05), _signed(12.0, 0)
    ('−0.49', '+3.2e-05', '+12')
    """
    text = f"{x:+.2g}" if x and abs(x) < 0.5 * 10 ** -digits else f"{x:+.{digits}f}"
    return "−" + text[1:] if text.startswith("-") else text


def _number(x: float) -> str:
    """A mean: two decimals, fewer as it grows, significant digits when tiny.

    >>> _number(0.912), _number(8.6e-05), _number(313.52), _number(12345.6)
    ('0.91', '8.6e-05', '313.5', '12346')
    """
    if x and abs(x) < 0.005:
        return f"{x:.2g}"
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}" if abs(x) < 1000 else f"{x:.0f}"


def _message(t: dict[str, Any], spans: tuple[str, str]) -> str:
    where = "all routes" if t["route"] == ALL_ROUTES else f"route {t['route']}"
    name = {"metric": f"{t['component']} {t['metric']}",
            "verdict": f"{t['component']} verdict", "end_to_end": "end to end",
            "root_cause_share": f"root cause {t['component']}"}[t["kind"]]
    b, r = t["baseline"], t["recent"]
    windows = f"baseline {spans[0]} (n={b['n']}), recent {spans[1]} (n={r['n']})"
    if t["skipped"]:
        return f"{name} ({where}): not tested, {t['skipped']}; {windows}"
    lo, hi = t["ci95"] if t["ci95"] is not None else (math.nan, math.nan)
    if t["kind"] == "metric":
        change = (f"mean {_number(b['mean'])} → {_number(r['mean'])} ({_signed(t['effect'])}, "
                  f"95% CI {_signed(lo)} to {_signed(hi)})")
    else:
        share = t["kind"] == "root_cause_share"
        change = (f"{'' if share else 'pass rate '}{b['rate']:.0%} → {r['rate']:.0%}"
                  f"{' of failed traces' if share else ''} ({_signed(100 * t['effect'], 0)} "
                  f"points, 95% CI {_signed(100 * lo, 0)} to {_signed(100 * hi, 0)})")
    return (f"{name} ({where}): {change}, p = {t['p']:.2g}, q = {t['p_adjusted']:.2g}; "
            f"{windows}")


def check_drift(con: Any, *, baseline: tuple[datetime, datetime],
                recent: tuple[datetime, datetime], q: float = 0.05, min_n: int = 20,
                seed: int = 0, resamples: int = PERMUTATIONS,
                exclude: Sequence[str] = ()) -> dict[str, Any]:
    """Compare the ``recent`` window with the ``baseline`` window (each ``(start, end)``, the
    end excluded; naive datetimes are UTC) over an open connection to the store: every test
    the module's docstring describes, adjusted as one Benjamini–Hochberg family at ``q``.

    Returns a JSON-able dict: the windows, ``q``, ``min_n``, ``test`` (each test stated),
    ``tests`` (every comparison, skipped ones with their reason) and ``alarms`` (the tests
    with an alarm, most significant first), each with a one-line ``message``. ``resamples``
    is the permutation test's; ``seed`` varies every seeded draw. ``exclude``: metrics not
    tested (a name, or ``component.metric``) — e.g. ``latency_ms``, whose values are the
    machine's load as much as the system's; they never enter the family.
    """
    baseline = (_naive_utc(baseline[0]), _naive_utc(baseline[1]))
    recent = (_naive_utc(recent[0]), _naive_utc(recent[1]))
    if not (baseline[0] < baseline[1] and recent[0] < recent[1]):
        raise InputError("a drift window must start before it ends")
    if baseline[0] < recent[1] and recent[0] < baseline[1]:
        raise InputError(f"the baseline window ({iso(baseline[0])} to {iso(baseline[1])}) "
                         f"overlaps the recent one ({iso(recent[0])} to {iso(recent[1])})")
    if not 0 < q < 1:
        raise InputError(f"q = {q}: the false discovery rate must be between 0 and 1")
    routes = _select(con, baseline, recent)
    slices = [ALL_ROUTES] + (routes if len(routes) > 1 else [])
    tests: list[dict[str, Any]] = []

    def add(kind: str, component: str | None, metric: str | None,
            by_slice: dict[str, dict[str, Any]]) -> None:
        """One test per route slice; a route's is left out when it is the all-routes test
        again (the component runs on that route only)."""
        whole = by_slice.get(ALL_ROUTES, {})
        for route in slices:
            if route not in by_slice or (route != ALL_ROUTES and all(
                    np.array_equal(by_slice[route].get(w, []), whole.get(w, []))
                    for w in ("baseline", "recent"))):
                continue
            tests.append({"kind": kind, "component": component, "metric": metric,
                          "route": route, "windows": by_slice[route]})

    metric_rows = con.execute(
        "SELECT s.w, s.route, m.component, m.metric, array_agg(m.value ORDER BY m.trace_id) "
        "FROM metrics m JOIN drift_sel s USING (trace_id) "
        f"WHERE {finite('m.value')} GROUP BY 1, 2, 3, 4").fetchall()
    left_out = set(exclude)
    for key, by_slice in sorted(_by_route([(w, r, (c, m), v) for w, r, c, m, v
                                           in metric_rows], slices).items()):
        if key[1] in left_out or f"{key[0]}.{key[1]}" in left_out:
            continue
        add("metric", key[0], key[1], by_slice)
    verdict_rows = con.execute(
        "SELECT s.w, s.route, v.component, count(*) FILTER (WHERE v.passed), "
        "count(*) FILTER (WHERE NOT v.passed) FROM verdicts v JOIN drift_sel s USING (trace_id) "
        "GROUP BY 1, 2, 3").fetchall()
    for comp, by_slice in sorted(_by_route([(w, r, c, np.array([k, k + f])) for w, r, c, k, f
                                            in verdict_rows], slices).items()):
        add("verdict", comp, None, by_slice)
    e2e_rows = con.execute(
        "SELECT w, route, count(*) FILTER (WHERE passed), count(*) FILTER (WHERE NOT passed) "
        "FROM drift_sel GROUP BY 1, 2").fetchall()
    add("end_to_end", None, None,
        _by_route([(w, r, None, np.array([k, k + f])) for w, r, k, f in e2e_rows], slices)[None])
    cause_rows = con.execute(
        "SELECT w, route, COALESCE(root_cause, ?), count(*) FROM drift_sel WHERE NOT passed "
        "GROUP BY 1, 2, 3", [UNATTRIBUTED]).fetchall()
    failed = _by_route([(w, r, None, np.array(n)) for w, r, _, n in cause_rows], slices)[None]
    causes = _by_route([(w, r, c, np.array(n)) for w, r, c, n in cause_rows], slices)
    for comp, by_slice in sorted(causes.items()):
        add("root_cause_share", comp, None, {
            route: {w: np.array([counts.get(w, 0), failed[route].get(w, 0)])
                    for w in ("baseline", "recent")} for route, counts in by_slice.items()})

    for t in tests:
        _run(t, min_n=min_n, seed=seed, resamples=resamples)
    family = [t for t in tests if t["skipped"] is None]
    adjusted, rejected = benjamini_hochberg([t["p"] for t in family], q)
    for t, a, r in zip(family, adjusted, rejected, strict=True):
        t["p_adjusted"], t["alarm"] = a, r
    spans = (window_text(*baseline), window_text(*recent))
    for t in tests:
        t["message"] = _message(t, spans)
    return {
        "baseline": {"start": iso(baseline[0]), "end": iso(baseline[1])},
        "recent": {"start": iso(recent[0]), "end": iso(recent[1])},
        "q": q,
        "min_n": min_n,
        "excluded": sorted(left_out),
        "test": {
            "metric": "two-sided permutation test of the difference in means (exact over "
                      f"every split when there are at most {resamples}, else {resamples} "
                      "seeded random splits, p = (1 + count) / (1 + splits)); effect: "
                      "mean(recent) − mean(baseline) with a 95% percentile bootstrap CI "
                      f"(each window resampled on its own, {RESAMPLES} resamples)",
            "verdict": "two-sided Fisher exact test of the verdict pass rates (undecided "
                       "verdicts left out); effect: rate(recent) − rate(baseline) with "
                       "Newcombe's hybrid score 95% CI",
            "end_to_end": "two-sided Fisher exact test of the traces' pass rates; effect "
                          "and CI as for verdicts",
            "root_cause_share": "two-sided Fisher exact test of the component's share of "
                                "the failed traces as their root cause; effect and CI as "
                                "for verdicts",
            "routes": "each test over all routes and, with more than one route, per route "
                      "(not repeated for a route whose values are all the routes' values)",
            "skipped": f"fewer than {min_n} values, verdicts or traces in either window",
            "multiple_comparisons": "Benjamini–Hochberg over every test of this check "
                                    f"(one family): an alarm is a q-value at most {q}",
        },
        "tests": tests,
        "alarms": sorted((t for t in tests if t["alarm"]),
                         key=lambda t: (t["p_adjusted"], t["p"])),
    }


def _run(t: dict[str, Any], *, min_n: int, seed: int, resamples: int) -> None:
    """Fill one test's summaries, effect, CI and p-value in place (its ``windows`` become
    ``baseline`` and ``recent``)."""
    windows = t.pop("windows")
    t.update(effect=None, ci95=None, p=None, p_adjusted=None, alarm=False, skipped=None)
    if t["kind"] == "metric":
        b, r = (np.asarray(windows.get(w, []), dtype=float) for w in ("baseline", "recent"))
        for name, x in (("baseline", b), ("recent", r)):
            t[name] = {"n": int(x.size), "mean": float(x.mean()) if x.size else None}
        if b.size and r.size:
            t["effect"] = t["recent"]["mean"] - t["baseline"]["mean"]
        t["skipped"] = _too_few(b.size, r.size, min_n)
        if t["skipped"] is None:
            s = seed_for("drift", t["component"], t["metric"], t["route"], str(seed))
            t["p"] = permutation_test(b, r, seed=s, resamples=resamples)
            ci = mean_difference_ci(b, r, seed=s)
            t["ci95"] = None if ci is None else list(ci)
        return
    (kb, nb), (kr, nr) = (tuple(int(v) for v in windows.get(w, (0, 0)))
                          for w in ("baseline", "recent"))
    for name, k, n in (("baseline", kb, nb), ("recent", kr, nr)):
        t[name] = {"n": n, "count": k, "rate": k / n if n else None}
    if nb and nr:
        t["effect"] = kr / nr - kb / nb
    t["skipped"] = _too_few(nb, nr, min_n)
    if t["skipped"] is None:
        t["p"] = fisher_exact(kb, nb, kr, nr)
        t["ci95"] = list(newcombe_difference_ci(kb, nb, kr, nr))
