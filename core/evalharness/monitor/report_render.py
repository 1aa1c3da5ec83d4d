"""The monitor report's view model (:func:`evalharness.monitor.report.build_report`) as
report.md, report.html and the terminal summary; it never reads the store.

report.html is ``templates/monitor.html`` (extends ``base.html``: the CSP, the inline CSS)
with one ``monitor_*.html`` partial per section; its two charts — a component's metric over
the windows with 95% CI whiskers, and the root-cause shares per window as stacked bars — are
SVG drawn here from :mod:`evalharness.charts`' pieces, every text escaped by
:class:`~evalharness.pages.Html`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalharness import pages
from evalharness.charts import INTERACTION, PALETTE, nice_max, svg_open, text_width
from evalharness.formatting import ci_range, fmt_p, number, percent
from evalharness.pages import Html

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
"""The page's Content-Security-Policy, as report.html's: no request of any kind."""

GOOD, BAD, UNDECIDED = "#16a34a", "#dc2626", "#d97706"


def colours_of(view: dict[str, Any]) -> dict[str, str]:
    """Component colours in path order, as report.html assigns them; ``unattributed`` grey.

    >>> colours_of({"components": ["router", "generator"]})["generator"]
    '#0d9488'
    """
    out = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(view["components"])}
    out["unattributed"] = INTERACTION
    return out


def window_label(start: str, size: str, *, short: bool = False) -> str:
    """A window's name: the day, or the day and hour; ``short`` without the year.

    >>> window_label("2026-12-01T00:00:00Z", "day"), window_label("2026-12-01T13:00:00Z", "hour")
    ('2026-12-01', '12-01 13h')
    >>> window_label("2026-12-01T00:00:00Z", "day", short=True)
    '12-01'
    """
    if size == "day":
        return start[5:10] if short else start[:10]
    return f"{start[5:10]} {start[11:13]}h"


def when(value: str | None) -> str | None:
    """An ISO time of report.json as people read it.

    >>> when("2026-12-01T08:30:00Z"), when(None)
    ('2026-12-01 08:30 UTC', None)
    """
    return None if value is None else value[:16].replace("T", " ") + " UTC"


def pct_ci(ci: list[float] | None) -> str:
    """A share's interval as ``lo–hi`` percentages.

    >>> pct_ci([0.1234, 0.5]), pct_ci(None)
    ('12%–50%', '—')
    """
    return "—" if not ci else f"{percent(ci[0])}–{percent(ci[1])}"


# --------------------------------------------------------------------------------------------
# Charts
# --------------------------------------------------------------------------------------------


def window_metric_chart(component: str, metric: str, points: list[tuple[str, dict | None]],
                        colour: str, *, gate: tuple[str, float] | None = None,
                        alarmed: set[int] = frozenset(),
                        lines: Sequence[tuple[str, str, float]] = (), per: str = "window",
                        ring: str = "alarm-ring", ring_titles: dict[int, str] | None = None
                        ) -> Html:
    """One metric of one component over the windows: the mean of each window as a dot joined
    by a line, its 95% CI as a vertical whisker; a 0–1 axis when every value fits in it.
    ``gate``: the component's verdict threshold on this metric (``(">=", 0.5)``), a dashed
    line; ``alarmed``: the indexes of the windows in a drift alarm's recent window, their dots
    ringed in red.

    The run history (:mod:`evalharness.history_render`) draws runs instead of windows with
    the same chart: ``per`` names the points in its label, ``lines`` adds dashed thresholds
    of other kinds (``("gate", ">=", 0.7)``: a scenario's gate), ``ring`` is the class of the
    rings (a significant change, not an alarm) and ``ring_titles`` their tooltips."""
    thresholds = ([("verdict", *gate)] if gate else []) + list(lines)
    values = [v for _, s in points if s and s["mean"] is not None
              for v in (s["mean"], *(s["ci95"] or []))] + [t[2] for t in thresholds]
    unit = all(0 <= v <= 1 for v in values)
    top_value = 1.0 if unit else nice_max(max(values, default=1.0))
    left, top, height = 44.0, 12.0, 110.0
    step = max(8.0, min(56.0, 520.0 / max(len(points), 1)))
    width = left + step * len(points) + 10
    svg = [svg_open("window-metric", width, top + height + 34,
                    f"{component}.{metric} per {per} with 95% CI",
                    data_component=component, data_metric=metric)]
    for f in (0, 0.5, 1):
        y = top + height * (1 - f)
        svg.append(Html('<line class="grid" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}"/>'
                        '<text class="tick" x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>'
                        ).format(left, y, width - 6, y, left - 6, y, number(f * top_value, 2)))

    def y_of(v: float) -> float:
        return top + height * (1 - min(max(v / top_value, 0.0), 1.0))

    for kind, op, threshold in thresholds:
        y = y_of(threshold)
        svg.append(Html('<g class="gate" data-kind="{}"><title>{}: {} {} {}</title><line '
                        'x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}"/><text class="tick" '
                        'x="{:.1f}" y="{:.1f}" text-anchor="end">{} {}</text></g>').format(
            kind, kind, metric, op, number(threshold, 2), left, y, width - 6, y, width - 6,
            y - 3, op, number(threshold, 2)))

    line = []
    label_every = max(1, round(len(points) / 8))
    for i, (label, s) in enumerate(points):
        x = left + step * (i + 0.5)
        if i % label_every == 0 or i == len(points) - 1:
            svg.append(Html('<text class="tick" x="{:.1f}" y="{:.1f}" text-anchor="middle">{}'
                            "</text>").format(x, top + height + 14, label))
        if not s or s["mean"] is None:
            continue
        line.append(f"{x:.1f},{y_of(s['mean']):.1f}")
        tip = (f"{component}.{metric}, {label}: {number(s['mean'])}"
               + (f" (95% CI {ci_range(s['ci95'])})" if s["ci95"] else "")
               + f", n = {s['n']}" + (f", {s['errors']} errors" if s["errors"] else ""))
        svg.append(Html("<g class=\"pt\"><title>{}</title>").format(tip))
        if s["ci95"]:
            lo, hi = y_of(s["ci95"][0]), y_of(s["ci95"][1])
            svg.append(Html('<g class="whisker"><line x1="{x:.1f}" y1="{lo:.1f}" x2="{x:.1f}" '
                            'y2="{hi:.1f}"/><line x1="{a:.1f}" y1="{lo:.1f}" x2="{b:.1f}" '
                            'y2="{lo:.1f}"/><line x1="{a:.1f}" y1="{hi:.1f}" x2="{b:.1f}" '
                            'y2="{hi:.1f}"/></g>').format(x=x, lo=lo, hi=hi, a=x - 3, b=x + 3))
        if i in alarmed:
            svg.append(Html('<circle class="{}" data-index="{}" cx="{:.1f}" cy="{:.1f}" r="7">'
                            "<title>{}</title></circle>").format(
                ring, i, x, y_of(s["mean"]), (ring_titles or {}).get(i, "")))
        svg.append(Html('<circle cx="{:.1f}" cy="{:.1f}" r="3.5" fill="{}"/></g>').format(
            x, y_of(s["mean"]), colour))
    if len(line) > 1:
        svg.insert(1, Html('<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5" '
                           'stroke-opacity="0.6"/>').format(" ".join(line), colour))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def root_cause_chart(windows: list[dict[str, Any]], size: str, colours: dict[str, str], *,
                     labels: list[str] | None = None, what: str = "traces") -> Html:
    """Per window, the failed traces' root causes as a 100% stacked bar, the number of failed
    traces above it, and a legend. The run history draws its runs' bottleneck shares with it:
    ``labels`` name the bars instead of the windows' starts, ``what`` the failed units."""
    causes = list(dict.fromkeys(c for w in windows for c in w["root_causes"]["shares"]))
    causes.sort(key=lambda c: list(colours).index(c) if c in colours else len(colours))
    left, top, height = 40.0, 18.0, 140.0
    step = max(10.0, min(60.0, 560.0 / max(len(windows), 1)))
    bar = step * 0.7
    width = max(left + step * len(windows) + 10,
                left + sum(text_width(c, 11) + 30 for c in causes))
    svg = [svg_open("root-causes", width, top + height + 52,
                    f"root causes of the failed {what} per {size}", id=f"root-causes-{size}")]
    for f in (0, 0.5, 1):
        y = top + height * (1 - f)
        svg.append(Html('<line class="grid" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}"/>'
                        '<text class="tick" x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>'
                        ).format(left, y, width - 6, y, left - 6, y, percent(f)))
    label_every = max(1, round(len(windows) / 8))
    for i, w in enumerate(windows):
        x = left + step * i + (step - bar) / 2
        label = labels[i] if labels else window_label(w["start"], size, short=True)
        rc = w["root_causes"]
        y = top + height
        for cause, s in rc["shares"].items():
            h = (s["share"] or 0) * height
            if h <= 0:
                continue
            y -= h
            tip = (f"{label}: {cause} {percent(s['share'])} of {rc['failed']} failed {what} "
                   f"({s['count']}; 95% CI {pct_ci(s['ci95'])})")
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" '
                            'fill="{}" data-cause="{}"><title>{}</title></rect>').format(
                x, y, bar, max(h - 0.5, 0.5), colours.get(cause, INTERACTION), cause, tip))
        svg.append(Html('<text class="tick" x="{:.1f}" y="{:.1f}" text-anchor="middle">{}'
                        "</text>").format(x + bar / 2, top - 8, rc["failed"]))
        if i % label_every == 0 or i == len(windows) - 1:
            svg.append(Html('<text class="tick" x="{:.1f}" y="{:.1f}" text-anchor="middle">{}'
                            "</text>").format(x + bar / 2, top + height + 14, label))
    x, y = left, top + height + 38
    for cause in causes:
        svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="10" height="10" rx="2" fill="{}"/>'
                        '<text class="tick" x="{:.1f}" y="{:.1f}">{}</text>').format(
            x, y - 5, colours.get(cause, INTERACTION), x + 14, y, cause))
        x += text_width(cause, 11) + 30
    svg.append(Html("</svg>"))
    return Html("").join(svg)


# --------------------------------------------------------------------------------------------
# report.html
# --------------------------------------------------------------------------------------------


def gates_of(criteria: dict[str, list[str]]) -> dict[tuple[str, str], tuple[str, float]]:
    """Per (component, metric): the threshold a verdict criterion sets on it. The monitor
    writes a component's criterion as its gates joined by ``and``
    (:mod:`evalharness.monitor.evaluate`); each part is read back with the scenario's
    :func:`~evalharness.scenario.parse_criterion`.

    >>> gates_of({"generator": ["faithfulness >= 0.5 and answer_relevancy >= 0.1"],
    ...           "router": ["looks fine"]})
    {('generator', 'faithfulness'): ('>=', 0.5), ('generator', 'answer_relevancy'): ('>=', 0.1)}
    """
    from evalharness.scenario import parse_criterion

    out = {}
    for comp, texts in criteria.items():
        for text in texts:
            for part in (text or "").split(" and "):
                gate = parse_criterion(part, comp)
                if gate is not None:
                    out[(comp, gate.metric)] = (gate.op, gate.threshold)
    return out


def _alarmed(view: dict[str, Any], windows: list[dict[str, Any]]
             ) -> dict[tuple[str, str], set[int]]:
    """Per (component, metric) with a drift alarm over all routes: the indexes of the windows
    that start inside the alarm's recent window."""
    drift = view.get("drift") or {}
    if not drift.get("alarms"):
        return {}
    start, end = drift["recent"]["start"], drift["recent"]["end"]
    inside = {i for i, w in enumerate(windows) if start <= w["start"] < end}
    return {(t["component"], t["metric"]): inside for t in drift["alarms"]
            if t["kind"] == "metric" and t["route"] == "all"}


def _window_charts(view: dict[str, Any], colours: dict[str, str]) -> dict[str, Any]:
    """Per window size: the root-cause chart, and per component one chart per metric (its
    verdict threshold as a line, the windows of a drift alarm ringed)."""
    out = {}
    gates = gates_of(view.get("criteria") or {})
    for size, windows in view["windows"].items():
        alarmed = _alarmed(view, windows)
        per_component = []
        for comp in view["components"]:
            metrics = list(dict.fromkeys(m for w in windows
                                         for m in w["components"].get(comp, {})
                                         .get("metrics", {})))
            charts = []
            for metric in metrics:
                points = [(window_label(w["start"], size, short=True),
                           w["components"].get(comp, {}).get("metrics", {}).get(metric))
                          for w in windows]
                charts.append((metric, window_metric_chart(
                    comp, metric, points, colours[comp], gate=gates.get((comp, metric)),
                    alarmed=alarmed.get((comp, metric), set()))))
            if charts:
                per_component.append((comp, charts))
        out[size] = {"root_causes": root_cause_chart(windows, size, colours)
                     if any(w["root_causes"]["failed"] for w in windows) else None,
                     "metrics": per_component}
    return out


WHAT = {"verdict": "verdict pass rate", "end_to_end": "end-to-end pass rate",
        "root_cause_share": "share of failed traces it caused"}
"""How a drift test's kind reads in a table (a metric test reads as the metric's name)."""


def drift_rows(check: dict[str, Any] | None) -> dict[str, Any] | None:
    """The drift check (``view["drift"]``) with what the page and report.md show of each
    test: ``what``, each window's value, the change, its CI, p and q as text."""
    if not check:
        return None
    from evalharness.monitor.drift import alarm_key, window_text

    def value(side: dict[str, Any], kind: str) -> str:
        if kind == "metric":
            return f"{number(side.get('mean'))} (n {side.get('n', 0)})"
        return f"{percent(side.get('rate'))} ({side.get('count', 0)}/{side.get('n', 0)})"

    def shown(t: dict[str, Any]) -> dict[str, Any]:
        rate = t["kind"] != "metric"
        effect, ci = t.get("effect"), t.get("ci95")
        fmt = (lambda x: f"{x * 100:+.1f} pt") if rate else (lambda x: f"{x:+.3g}")
        return {**t, "key": alarm_key(t), "what": t.get("metric") or WHAT[t["kind"]],
                "baseline_text": value(t["baseline"], t["kind"]),
                "recent_text": value(t["recent"], t["kind"]),
                "effect_text": "—" if effect is None else fmt(effect),
                "ci_text": "—" if not ci else f"{fmt(ci[0])} to {fmt(ci[1])}",
                "p_text": fmt_p(t.get("p")), "q_text": fmt_p(t.get("p_adjusted"))}

    tests = [shown(t) for t in check["tests"]]
    e2e = next((t for t in check["tests"] if t["kind"] == "end_to_end"
                and t["route"] == "all"), None)
    at = {w: _parse_iso(check[w]) for w in ("baseline", "recent")}
    return {**check, "tests": tests, "alarms": [t for t in tests if t["alarm"]],
            "tested": sum(1 for t in tests if t["skipped"] is None),
            "skipped": sum(1 for t in tests if t["skipped"] is not None),
            "baseline_span": window_text(*at["baseline"]),
            "recent_span": window_text(*at["recent"]),
            "baseline_n": e2e["baseline"]["n"] if e2e else 0,
            "recent_n": e2e["recent"]["n"] if e2e else 0}


def _parse_iso(window: dict[str, str]) -> tuple[Any, Any]:
    from datetime import datetime

    return tuple(datetime.fromisoformat(window[k].replace("Z", "")) for k in ("start", "end"))


def render_html(view: dict[str, Any]) -> str:
    """The whole monitor report.html for the view model."""
    colours = colours_of(view)
    nav = [("#overview", "Overview"), ("#drift", "Drift"), ("#traffic", "Traffic"),
           ("#components", "Components"), ("#windows", "Windows"),
           ("#feedback", "Feedback & agreement"), ("#traces", "Traces")]
    return pages.render(
        "monitor.html", csp=CSP, view=view, nav=nav, colours=colours,
        interaction=INTERACTION, good=GOOD, bad=BAD, undecided=UNDECIDED,
        charts=_window_charts(view, colours), window_label=window_label, pct_ci=pct_ci,
        when=when, drift=drift_rows(view.get("drift")),
        shown={t["trace_id"] for t in view["drilldown"]["traces"]})


# --------------------------------------------------------------------------------------------
# report.md
# --------------------------------------------------------------------------------------------


def cell(value: Any) -> str:
    """Any value as one Markdown table cell: pipes, newlines and markup made inert.

    >>> cell("a|b\\n<i>")
    'a\\\\|b &lt;i&gt;'
    """
    text = "—" if value is None else str(value)
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("\r", " "),
                 ("\n", " "), ("`", "'")):
        text = text.replace(a, b)
    return text


def _rate_md(r: dict[str, Any] | None) -> str:
    if not r or r["pass_rate"] is None:
        return "—"
    return f"{percent(r['pass_rate'])} ({pct_ci(r['ci95'])})"


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out + [""]


def _agreement_md(name: str, a: dict[str, Any]) -> list[Any]:
    k, b = a["kappa"], a["balanced_accuracy"]
    c = a["confusion"]
    return [name, a["n"],
            "—" if not k or k["value"] is None else f"{number(k['value'], 2)} "
            f"({ci_range(k['ci95'])})",
            "—" if not b or b["value"] is None else f"{number(b['value'], 2)} "
            f"({ci_range(b['ci95'])})",
            f"{c['judge_pass_user_up']} / {c['judge_pass_user_down']} / "
            f"{c['judge_fail_user_up']} / {c['judge_fail_user_down']}",
            a["note"] or ("" if a["enough"] else "n too small")]


def _drift_md(d: dict[str, Any] | None, note: str | None) -> list[str]:
    lines = ["## Drift", ""]
    if not d:
        return [*lines, f"No drift check: {note or 'the store holds no evaluated trace'}.", ""]
    lines += [f"The recent window, {d['recent_span']} ({d['recent_n']} evaluated traces), "
              f"against the baseline before it, {d['baseline_span']} ({d['baseline_n']}): "
              f"{d['tested']} tests, {d['skipped']} skipped (fewer than {d['min_n']} values in "
              f"a window), one Benjamini–Hochberg family at q = {d['q']}.", ""]
    if not d["alarms"]:
        return [*lines, f"No alarm: no test's q-value is at most {d['q']}.", ""]
    lines += [f"**{len(d['alarms'])} alarm{'s' if len(d['alarms']) != 1 else ''}**:", ""]
    lines += [f"- {cell(t['message'])}" for t in d["alarms"]]
    return [*lines, ""]


def render_markdown(view: dict[str, Any]) -> str:
    """report.md: the same numbers as report.html, as tables."""
    t = view["traffic"]
    p = view["period"]
    lines = [f"# Monitor report: {cell(view['name'])}" if view.get("name") else
             "# Monitor report", ""]
    lines.append(f"Store `{cell(view.get('store'))}`"
                 + (f", monitor `{cell(view['monitor'])}`" if view.get("monitor") else "")
                 + f"; {t['traces']} traces from "
                 f"{cell(when(p['since'] or t['first']) or 'the start')} to "
                 f"{cell(when(p['until'] or t['last']) or 'now')}; generated "
                 f"{when(view['generated_at'])}.")
    lines += ["", *(f"> {cell(n)}" for n in view["notes"]), ""]
    lines += _drift_md(drift_rows(view.get("drift")), view.get("drift_note"))
    lines += ["## Traffic", ""]
    head = ["route", "traces", "sampled", "evaluated", "queued", "not sampled", "unmappable",
            "passed", "failed", "undecided"]
    keys = ["traces", "sampled", "evaluated", "queued", "not_sampled", "unmappable", "passed",
            "failed", "undecided"]
    rows = [[r, *(c[k] for k in keys)] for r, c in t["routes"].items()]
    rows.append(["**all**", *(t[k] for k in keys)])
    lines += _table(head, rows)
    lines.append(f"End-to-end pass rate: {_rate_md(t['end_to_end'])} (Wilson 95% CI).")
    lines += ["", "## Components", ""]
    for comp in view["components"]:
        c = view["per_component"][comp]
        lines += [f"### {cell(comp)}", "",
                  f"Verdict pass rate: {_rate_md(c['verdicts'])}", ""]
        rows = []
        for scope, block in [("all", c), *c["routes"].items()]:
            for m, s in block["metrics"].items():
                rows.append([scope, m, number(s["mean"]), ci_range(s["ci95"]), s["n"],
                             s["errors"]])
            rows.append([scope, "*verdict pass rate*", _rate_md(block["verdicts"]), "", "", ""])
        lines += _table(["route", "metric", "mean", "95% CI", "n", "errors"], rows)
    rc = view["root_causes"]
    lines += ["## Root causes", "", f"{rc['failed']} failed evaluated traces.", ""]
    lines += _table(["root cause", "traces", "share", "95% CI"],
                    [[k, s["count"], percent(s["share"]), pct_ci(s["ci95"])]
                     for k, s in rc["shares"].items()])
    for size, windows in view["windows"].items():
        lines += [f"## Per {size}", ""]
        comps = view["components"]
        rows = []
        for w in windows:
            rcs = ", ".join(f"{k} {percent(s['share'])}" for k, s in
                            w["root_causes"]["shares"].items())
            rows.append([window_label(w["start"], size), w["traces"], w["evaluated"],
                         _rate_md(w["end_to_end"]),
                         *(_rate_md(w["components"].get(c, {}).get("verdicts")) for c in comps),
                         rcs or "—", percent(w["feedback"]["down_share"])])
        lines += _table([size, "traces", "evaluated", "end to end", *comps, "root causes",
                         "thumbs down"], rows)
        rows = []
        for w in windows:
            for comp in comps:
                for m, s in w["components"].get(comp, {}).get("metrics", {}).items():
                    rows.append([window_label(w["start"], size), comp, m, number(s["mean"]),
                                 ci_range(s["ci95"]), s["n"], s["errors"]])
        if rows:
            lines += ["<details><summary>metrics per " + size + "</summary>", ""]
            lines += _table([size, "component", "metric", "mean", "95% CI", "n", "errors"],
                            rows)
            lines += ["</details>", ""]
    f = view["feedback"]
    lines += ["## Feedback", ""]
    lines += _table(["records", "labels (trace × user)", "thumbs up", "thumbs down",
                     "mean score", "labelled evaluated traces", "waiting for their trace",
                     "for unknown traces"],
                    [[f["records"], f["labels"], f["thumbs"]["up"], f["thumbs"]["down"],
                      f"{number(f['score']['mean'], 2)} (n = {f['score']['n']})",
                      f"{f['labelled_traces']} ({percent(f['labelled_share'])})",
                      f["waiting"], f["unknown_trace"]]])
    a = view["agreement"]
    lines += ["## Judge–user agreement", "", f"{a['unit'][:1].upper()}{a['unit'][1:]}; fewer than {a['min_n']} rows is too "
              "small to read as an estimate.", ""]
    rows = [_agreement_md("end to end", a["end_to_end"])]
    rows += [_agreement_md(c, b) for c, b in a["components"].items()]
    if len(a.get("routes") or {}) > 1:
        rows += [_agreement_md(f"end to end · route {r}", b) for r, b in a["routes"].items()]
    lines += _table(["verdict", "n", "Cohen's κ (95% CI)", "balanced accuracy (95% CI)",
                     "pass·up / pass·down / fail·up / fail·down", "note"], rows)
    d = view["drilldown"]
    lines += ["## Failed and thumbs-down traces", "",
              f"{d['shown']} of {d['total']} (newest first; report.html has each one's "
              "metrics, verdicts and feedback). To label them in the review page: "
              f"`evalharness monitor export {view.get('monitor') or 'MONITOR.yaml'} --only "
              "thumbs-down --out DIR`, then `evalharness review serve DIR`.", ""]
    lines += _table(["trace", "time", "route", "why", "root cause", "question"],
                    [[x["trace_id"], x["time"], x["route"], ", ".join(x["why"]),
                      x["root_cause"], (x["question"] or "")[:120]] for x in d["traces"]])
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# The terminal
# --------------------------------------------------------------------------------------------


def print_summary(view: dict[str, Any], console: Any) -> None:
    """The short summary table: per component its pass rate and metrics, then traffic,
    feedback and agreement in a few lines."""
    from rich.markup import escape
    from rich.table import Table

    t = view["traffic"]
    table = Table(title=f"monitor — {t['traces']} traces, {t['evaluated']} evaluated, "
                        f"{t['failed']} failed", title_justify="left")
    table.add_column("component")
    table.add_column("metric", no_wrap=True)
    for col in ("mean", "95% CI", "n", "errors"):
        table.add_column(col, justify="right", no_wrap=True)
    for comp in view["components"]:
        c = view["per_component"][comp]
        table.add_row(escape(comp), "[b]pass rate[/b]", _rate_md(c["verdicts"]).split(" ")[0],
                      pct_ci((c["verdicts"] or {}).get("ci95")),
                      str(sum(((c["verdicts"] or {}).get(k) or 0) for k in ("passed", "failed"))),
                      "")
        for m, s in c["metrics"].items():
            table.add_row("", escape(m), number(s["mean"]), ci_range(s["ci95"]), str(s["n"]),
                          f"[red]{s['errors']}[/red]" if s["errors"] else "0")
        table.add_section()
    console.print(table)
    e2e = t["end_to_end"]
    console.print(f"end to end: {_rate_md(e2e)} pass; root causes: " + (", ".join(
        f"{escape(k)} {percent(s['share'])}" for k, s in view["root_causes"]["shares"].items())
        or "none"))
    f, a = view["feedback"], view["agreement"]["end_to_end"]
    console.print(f"feedback: {f['thumbs']['up']} up, {f['thumbs']['down']} down, "
                  f"{f['waiting']} waiting for their trace, {f['unknown_trace']} for unknown "
                  "traces; judge–user κ "
                  + ("—" if not a["kappa"] or a["kappa"]["value"] is None
                     else number(a["kappa"]["value"], 2)) + f" (n = {a['n']})"
                  + ("" if a["enough"] else " [yellow]n too small[/yellow]"))
    d = drift_rows(view.get("drift"))
    if d is None:
        console.print(f"drift: not checked ({escape(view.get('drift_note') or 'no data')})")
        return
    console.print(f"drift: {d['recent_span']} against {d['baseline_span']}: "
                  + (f"[red]{len(d['alarms'])} alarm(s)[/red]" if d["alarms"] else "no alarm")
                  + f" in {d['tested']} tests ({d['skipped']} skipped)")
    for t in d["alarms"]:
        console.print(f"  [red]alarm[/red]: {escape(t['message'])}")
