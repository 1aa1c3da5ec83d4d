"""``report.html``: the report as one self-contained page a person would rather look at.

Everything is inline: the CSS, the charts (SVG drawn here, in Python), and a few lines of
vanilla JavaScript that only filter the failed-cases list (rows are ``<details>`` elements,
so they expand without JavaScript). The page references no URL at all and says so in its
Content-Security-Policy (``default-src 'none'``), so opening it makes no network request.

Case text, traces, metric details and plugin sections are untrusted: every piece of text goes
through :func:`html.escape` (nothing is ever put into a ``<script>``). A hidden
``<pre id="console-errors">`` collects ``window.onerror``, ``console.error``, unhandled
rejections and CSP violations, so a headless browser test can assert the page runs cleanly.

Sections: header (judge, cases, gates), the bottleneck (end-to-end failures attributed along
the pipeline, verdicts per component), the slices by tag (pass rates per tag, weakest first),
scores per component (0–1 metrics as bars with their
95% CI; other metrics in a table), latency and tokens, routing (the router plugin's
confusion matrix and calibration), the other plugin sections, and the failed cases with their
traces.
"""

from __future__ import annotations

import bisect
import html
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from evalharness.models import (
    Bottleneck,
    CaseResult,
    ComponentReport,
    MetricSummary,
    MetricValue,
    Report,
    Slice,
    SliceVerdicts,
    Step,
)
from evalharness.report import judge_cell
from evalharness.slices import SYNTHETIC_TAG, weakest_first

MAX_CASES = 300
"""The failed-cases list shows at most this many cases (the rest are in results.jsonl)."""

MAX_ROWS = 10
"""SQL result rows shown per case."""

PALETTE = ["#4f46e5", "#0d9488", "#d97706", "#db2777", "#0284c7", "#7c3aed", "#65a30d",
           "#dc2626", "#0891b2", "#9333ea"]
"""Component colours, assigned in pipeline order and used by every chart."""

INTERACTION = "#94a3b8"
"""The colour of failures no single component is to blame for."""

VERDICT_COLOURS = {"pass": "#16a34a", "fail": "#dc2626", "error": "#d97706",
                   "not_applicable": "#cbd5e1"}

_UNBOUNDED = re.compile(r"(^dcg|latency|_ms$|tokens|words|ratio|cost|count|_s$)")
"""Metric names that are never on a 0–1 scale, whatever this run's values are."""

_LOWER_IS_BETTER = re.compile(r"^(brier|abstention|ece)")


def e(value: Any) -> str:
    """Escape anything for HTML text and attribute values.

    >>> e('<script>alert("x")</script>')
    '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
    """
    return html.escape(str(value), quote=True)


def render_html(report: Report, results: Sequence[CaseResult]) -> str:
    """The whole ``report.html`` for ``report`` and the run's case results (in case order: read
    once, and the failed cases shown — at most :data:`MAX_CASES` — again by index)."""
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(report.components)}
    bottleneck = report.bottleneck
    routing = [s for s in report.sections if s.get("plugin") == "evalharness_router"]
    others = [s for s in report.sections if s.get("plugin") != "evalharness_router"]
    nav = [("overview", "Overview"), ("bottleneck", "Bottleneck"),
           *([("slices", "Slices")] if report.slices is not None else []),
           ("scores", "Scores"), ("cost", "Latency & tokens")]
    if routing:
        nav.append(("routing", "Routing"))
    if others:
        nav.append(("sections", "Plugin sections"))
    nav += [("cases", "Failed cases"), ("settings", "Settings")]
    body = [
        _header(report, colours),
        _bottleneck_section(bottleneck, report, colours),
        _slices_section(report),
        _scores_section(report, colours),
        _cost_section(report, colours),
        _routing_section(routing),
        _other_sections(others),
        _cases_section(report, results, colours),
        _settings_section(report),
    ]
    title = f"evalharness · {report.scenario.get('name', 'report')}"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        '<link rel="icon" href="data:,">',
        f"<title>{e(title)}</title>",
        f"<script>{_ERROR_HOOKS}</script>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        '<pre id="console-errors" hidden></pre>',
        _nav(report, nav),
        '<main>',
        *body,
        "</main>",
        f"<footer>{_footer(report)}</footer>",
        f"<script>{_FILTER_JS}</script>",
        "</body>",
        "</html>",
        "",
    ])


# --------------------------------------------------------------------------------------------
# Small formatting helpers
# --------------------------------------------------------------------------------------------


def _num(value: float | None, digits: int = 3) -> str:
    """A metric value.

    >>> _num(0.12345), _num(None), _num(313.529), _num(12345.6)
    ('0.123', '—', '313.5', '12,346')
    """
    if value is None:
        return "—"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    """A share as a percentage.

    >>> _pct(0.5531), _pct(0.078), _pct(None), _pct(0.0)
    ('55%', '7.8%', '—', '0%')
    """
    if value is None:
        return "—"
    p = value * 100
    return f"{p:.1f}%" if 0 < p < 10 else f"{p:.0f}%"


def _ms(value: float | None) -> str:
    """A latency.

    >>> _ms(0.4374), _ms(38.16), _ms(1234.5), _ms(None)
    ('0.44 ms', '38.2 ms', '1,234 ms', '—')
    """
    if value is None:
        return "—"
    if value < 10:
        return f"{value:.2f} ms"
    if value < 1000:
        return f"{value:.1f} ms"
    return f"{value:,.0f} ms"


def _count(value: float) -> str:
    """A case count that may be fractional (shared root causes).

    >>> _count(26.0), _count(2.5)
    ('26', '2.5')
    """
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def _nice_max(value: float) -> float:
    """The axis end: 1, 2, 2.5, 4, 5 or 10 times a power of ten, at least ``value``.

    >>> _nice_max(3.79), _nice_max(0.24), _nice_max(0)
    (4.0, 0.25, 1.0)
    """
    if value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 4, 5, 10):
        if value <= step * power + 1e-12:
            return float(step * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


def _text_width(text: str, size: float = 12) -> float:
    """Rough rendered width of ``text`` in the page's sans-serif font."""
    return len(text) * size * 0.6


def _unit_scale(name: str, summary: MetricSummary) -> bool:
    """Whether a metric belongs on a 0–1 bar chart."""
    if _UNBOUNDED.search(name) or summary.mean is None:
        return False
    values = [summary.mean, *(summary.ci95 or [])]
    return all(-1e-9 <= v <= 1 + 1e-9 for v in values)


def _pill(text: str, colour: str, *, title: str | None = None, cls: str = "pill") -> str:
    tip = f' title="{e(title)}"' if title else ""
    return f'<span class="{cls}" style="--c:{colour}"{tip}>{e(text)}</span>'


def _svg_open(cls: str, width: float, height: float, label: str, extra: str = "") -> str:
    return (f'<svg class="chart {cls}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{e(label)}"'
            f"{extra}>")


def _whisker(x1: float, x2: float, y: float, cap: float = 5) -> str:
    return (f'<g class="whisker"><line x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}"/>'
            f'<line x1="{x1:.1f}" y1="{y - cap:.1f}" x2="{x1:.1f}" y2="{y + cap:.1f}"/>'
            f'<line x1="{x2:.1f}" y1="{y - cap:.1f}" x2="{x2:.1f}" y2="{y + cap:.1f}"/></g>')


# --------------------------------------------------------------------------------------------
# Header and navigation
# --------------------------------------------------------------------------------------------


def _nav(report: Report, items: list[tuple[str, str]]) -> str:
    links = "".join(f'<a href="#{key}">{e(label)}</a>' for key, label in items)
    return (f'<nav><span class="brand">evalharness<b>{e(report.scenario.get("name", ""))}</b>'
            f"</span><span class=\"links\">{links}</span></nav>")


def _judge_banner(report: Report) -> str:
    judge = report.judge
    label = judge.get("label") or judge.get("backend") or "no judge"
    judged = [f"{c}.{m}" for c, comp in report.components.items()
              for m, s in comp.metrics.items() if s.judge]
    usage = judge.get("usage")
    use = ""
    if usage:
        use = (f"{usage.get('judgments', 0)} judgments · {usage.get('requests', 0)} requests · "
               f"{usage.get('cache_hits', 0)} cache hits · "
               f"{usage.get('prompt_tokens', 0) + usage.get('completion_tokens', 0):,} tokens"
               + (f" · cost {usage['cost']:.4f}" if "cost" in usage else ""))
    if judge.get("backend") is None:
        return '<div class="banner info"><b>Judge:</b> none configured</div>'
    heuristic = judge.get("llm") is False
    what = ""
    if heuristic:
        what = ("Judged scores are lexical estimates from an offline heuristic, <b>not an "
                "LLM's judgment</b>" + (f": {e(', '.join(judged))}." if judged else "."))
    else:
        model = judge.get("model")
        what = f"Model {e(model)}." if model else ""
    cls = "warn" if heuristic else "info"
    icon = "⚠" if heuristic else "⚖"
    return (f'<div class="banner {cls}" id="judge"><span class="icon">{icon}</span><div>'
            f'<div><b>Judge: {e(label)}</b></div><div class="muted">{what}'
            f"{' ' + e(use) if use else ''}</div></div></div>")


def _header(report: Report, colours: dict[str, str]) -> str:
    run = report.run
    cases = report.cases
    started = str(run.get("started_at", "")).replace("T", " ").replace("+00:00", " UTC")
    bits = [f"{cases.get('evaluated', 0)} of {cases.get('total', 0)} cases"]
    if started:
        bits.append(started)
    if run.get("duration_s") is not None:
        bits.append(f"{run['duration_s']:.1f} s")
    sha = str(report.scenario.get("sha256", ""))[:12]
    head = [
        '<section id="overview" class="hero">',
        f"<h1>{e(report.scenario.get('name', 'report'))}</h1>",
        f'<p class="sub">{e(" · ".join(bits))} · <code>{e(report.scenario.get("path", ""))}'
        f"</code>{f' <span class=muted>sha256 {e(sha)}</span>' if sha else ''}</p>",
        _judge_banner(report),
    ]
    if cases.get("system_errors"):
        head.append(f'<div class="banner bad"><span class="icon">✖</span><div><b>'
                    f'{cases["system_errors"]} cases failed in the system under test</b>: their '
                    "components did not run and are in no mean below (see "
                    "<code>trace.error</code> in results.jsonl).</div></div>")
    if report.trace_source:
        src = report.trace_source
        head.append(f'<div class="banner info" id="trace-source"><span class="icon">⇢</span>'
                    f'<div><b>Recorded traces</b> from <code>{e(src.get("path", ""))}</code> '
                    f'({e(src.get("format", ""))}): {src.get("traces", 0)} traces, '
                    f'{src.get("matched", 0)} matched a case, {src.get("without_case", 0)} '
                    f'without a case, {src.get("cases_without_trace", 0)} cases without a '
                    "trace.</div></div>")
    if report.selection:
        head.append(f'<div class="banner info" id="selection"><span class="icon">◐</span><div>'
                    f'<b>Not every case ran</b>: {e(report.selection.get("how", ""))}. Means '
                    "and intervals are over these cases only.</div></div>")
    for warning in report.warnings:
        head.append(f'<div class="banner warn"><span class="icon">!</span><div>{e(warning)}'
                    "</div></div>")
    head.append(f'<div class="kpis">{_kpis(report, colours)}</div>')
    if report.gates:
        gates = []
        for g in report.gates:
            mark, cls = ("✓", "ok") if g.passed else ("✗", "bad")
            errors = f", {g.errors} of {g.n} errors" if g.errors else ""
            why = f" — {e(g.reason)}" if not g.passed and g.reason else ""
            gates.append(f'<li class="{cls}" title="{e(g.reason or "passes")}"><span '
                         f'class="mark">{mark}</span> <code>{e(g.name)}</code> <span '
                         f'class="muted">value {e(_num(g.value))}{e(errors)}{why}</span></li>')
        head.append(f'<ul class="gates">{"".join(gates)}</ul>')
    head.append("</section>")
    return "\n".join(head)


def _kpis(report: Report, colours: dict[str, str]) -> str:
    cards = []
    b = report.bottleneck
    if b is not None:
        e2e = b.end_to_end
        ci = f"95% CI {_pct(e2e.ci95[0])}–{_pct(e2e.ci95[1])}" if e2e.ci95 else ""
        cards.append(_kpi("end-to-end pass rate", _pct(e2e.pass_rate),
                          f"{e2e.passed} of {e2e.passed + e2e.failed} cases pass"
                          + (f" · {ci}" if ci else ""), "#16a34a" if (e2e.pass_rate or 0) >= 0.8
                          else "#dc2626" if (e2e.pass_rate or 0) < 0.5 else "#d97706"))
        top = next((r for r in b.ranking if r.share), None)
        if top is not None:
            ci = f" (95% CI {_pct(top.ci95[0])}–{_pct(top.ci95[1])})" if top.ci95 else ""
            cards.append(_kpi("bottleneck", top.component,
                              f"root cause of {_pct(top.share)} of the end-to-end failures{ci}",
                              colours.get(top.component, PALETTE[0])))
        elif e2e.failed == 0:
            cards.append(_kpi("bottleneck", "none", "no case fails end to end", "#16a34a"))
        else:
            cards.append(_kpi("bottleneck", "interaction",
                              "no single component is the root cause", INTERACTION))
    cases = report.cases
    cards.append(_kpi("cases", str(cases.get("evaluated", 0)),
                      f"evaluated of {cases.get('total', 0)} · "
                      f"{cases.get('system_errors', 0)} system errors", "var(--muted)"))
    if report.gates:
        failed = sum(1 for g in report.gates if not g.passed)
        cards.append(_kpi("gates", f"{len(report.gates) - failed}/{len(report.gates)}",
                          "all pass" if not failed else f"{failed} failed",
                          "#16a34a" if not failed else "#dc2626"))
    slow = [(c.cost.latency_ms.get("p95"), n) for n, c in report.components.items()
            if c.cost.latency_ms.get("p95") is not None]
    if slow:
        p95, name = max(slow)
        cards.append(_kpi("slowest component", name, f"p95 {_ms(p95)} per case",
                          colours.get(name, PALETTE[0])))
    return "".join(cards)


def _kpi(label: str, value: str, sub: str, colour: str) -> str:
    return (f'<div class="kpi" style="--c:{colour}"><div class="k-label">{e(label)}</div>'
            f'<div class="k-value">{e(value)}</div><div class="k-sub">{e(sub)}</div></div>')


# --------------------------------------------------------------------------------------------
# Bottleneck
# --------------------------------------------------------------------------------------------


def _bottleneck_section(b: Bottleneck | None, report: Report, colours: dict[str, str]) -> str:
    out = ['<section id="bottleneck" class="card">', "<h2>Where it breaks</h2>"]
    if b is None:
        out.append('<div class="placeholder" id="bottleneck-placeholder">No end-to-end verdicts '
                   "in this run, so no failure can be attributed to a component. Per-case "
                   "verdicts come from <code>verdicts:</code> criteria in the scenario (or the "
                   "defaults of each component's kind).</div></section>")
        return "\n".join(out)
    e2e = b.end_to_end
    lead = (f"<b>{e2e.failed}</b> of {e2e.cases} cases fail end to end"
            f"{f' ({e2e.errors} more could not be judged)' if e2e.errors else ''}. "
            "Each failure is blamed on the first component of the case's gold path that fails "
            "its verdict; cases where every component passes yet the answer fails are "
            "<i>interactions</i>.")
    out.append(f'<p class="lead">{lead}</p>')
    out.append('<div class="split">')
    out.append(f'<div class="chart-box"><h3>Share of end-to-end failures, by root cause</h3>'
               f"{_bottleneck_chart(b, colours)}</div>")
    if b.verdicts:
        out.append(f'<div class="chart-box"><h3>Per-case verdicts of each component</h3>'
                   f"{_verdict_chart(b.verdicts, report)}</div>")
    out.append("</div>")
    if b.headroom is not None:
        out.append('<div class="chart-box" id="headroom"><h3>Oracle headroom: end-to-end pass '
                   "rate with one component made perfect</h3>"
                   f"{_headroom_chart(b, colours)}"
                   '<p class="muted">Each failed case is run again with one component\'s output '
                   "replaced by its gold (gold routes; the gold SQL and its rows; the gold "
                   "relevant chunks). Grey: the run's pass rate; colour: the cases the oracle "
                   "fixes, with the 95% CI of the gain.</p></div>")
    elif b.headroom_note:
        out.append(f'<p class="muted" id="headroom-note">Oracle headroom: '
                   f"{e(b.headroom_note)}.</p>")
    notes = []
    if b.masked:
        by = ", ".join(f"{c} {n}" for c, n in b.masked_by.items())
        notes.append(f"<b>{b.masked}</b> cases pass end to end although a component on their path "
                     f"fails (masked{f': {e(by)}' if by else ''}).")
    if b.unknown:
        notes.append(f"<b>{b.unknown}</b> failing cases could not be attributed: a verdict on "
                     "their path is an error.")
    crit = report.verdict_criteria
    if crit:
        items = "".join(
            f"<li><b>{e(name)}</b>: <code>{e(' and '.join(c.criteria) or '—')}</code>"
            f" <span class=\"muted\">({e(c.source)}{'; ' + e(c.note) if c.note else ''})</span>"
            "</li>" for name, c in crit.items())
        notes.append(f'<details class="criteria"><summary>Verdict criteria</summary>'
                     f"<ul>{items}</ul></details>")
    if notes:
        out.append('<div class="notes">' + "".join(f"<p>{n}</p>" if not n.startswith("<details")
                                                   else n for n in notes) + "</div>")
    worst = {c: w for c, w in b.worst_cases.items() if w}
    if worst:
        rows = []
        for comp, cases in worst.items():
            for w in cases:
                vals = ", ".join(f"{k} = {_num(v)}" for k, v in w.values.items())
                rows.append(f'<tr><td>{_pill(comp, colours.get(comp, INTERACTION))}</td>'
                            f'<td><a href="#case-{e(w.case)}">{e(w.case)}</a></td>'
                            f"<td><code>{e(vals)}</code></td><td>{e(w.reason)}</td></tr>")
        out.append('<details class="worst"><summary>Worst cases per component</summary>'
                   '<table class="tbl"><thead><tr><th>root cause</th><th>case</th>'
                   "<th>values</th><th>why</th></tr></thead><tbody>"
                   + "".join(rows) + "</tbody></table></details>")
    out.append("</section>")
    return "\n".join(out)


def _bottleneck_chart(b: Bottleneck, colours: dict[str, str]) -> str:
    rows: list[tuple[str, str, float | None, list[float] | None, float, str]] = []
    for r in b.ranking:
        rows.append((r.component, r.component, r.share, r.ci95, r.failures,
                     colours.get(r.component, PALETTE[0])))
    rows.append(("interaction", "interaction (unattributed)", b.unattributed_share,
                 b.unattributed_ci95, float(b.unattributed), INTERACTION))
    label_w = max(_text_width(label, 13) for _, label, *_ in rows) + 16
    track, value_w, row_h, top = 330.0, 120.0, 34.0, 24.0
    width = label_w + track + value_w
    height = top + row_h * len(rows) + 8
    names = " ".join(name for name, *_ in rows[:-1])
    svg = [_svg_open("bottleneck", width, height, "share of end-to-end failures by root cause",
                     f' id="bottleneck-chart" data-components="{e(names)}"')]
    svg.append(_defs())
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = label_w + tick * track
        svg.append(f'<line class="grid" x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" '
                   f'y2="{height - 4:.1f}"/><text class="tick" x="{x:.1f}" y="{top - 10}" '
                   f'text-anchor="middle">{tick * 100:.0f}%</text>')
    for i, (name, label, share, ci, failures, colour) in enumerate(rows):
        y = top + i * row_h
        mid = y + row_h / 2
        w = (share or 0) * track
        fill = "url(#hatch)" if name == "interaction" else colour
        tip = (f"{label}: {_pct(share)} of the end-to-end failures ({_count(failures)} cases)"
               + (f", 95% CI {_pct(ci[0])}–{_pct(ci[1])}" if ci else ""))
        svg.append(f'<g class="bar" data-component="{e(name)}"><title>{e(tip)}</title>')
        svg.append(f'<text class="lbl" x="{label_w - 10:.1f}" y="{mid:.1f}" '
                   f'text-anchor="end">{e(label)}</text>')
        svg.append(f'<rect class="track" x="{label_w:.1f}" y="{y + 7:.1f}" width="{track:.1f}" '
                   f'height="{row_h - 14:.1f}" rx="4"/>')
        if w > 0:
            svg.append(f'<rect x="{label_w:.1f}" y="{y + 7:.1f}" width="{w:.1f}" '
                       f'height="{row_h - 14:.1f}" rx="4" fill="{fill}"'
                       f'{f" stroke={chr(34)}{INTERACTION}{chr(34)}" if name == "interaction" else ""}/>')
        if ci:
            svg.append(_whisker(label_w + ci[0] * track, label_w + ci[1] * track, mid, 6))
        svg.append(f'<text class="val" x="{label_w + track + 10:.1f}" y="{mid:.1f}">'
                   f"<tspan class=\"strong\">{e(_pct(share))}</tspan>"
                   f'<tspan class="muted" dx="6">{e(_count(failures))} cases</tspan></text>')
        svg.append("</g>")
    svg.append("</svg>")
    return "".join(svg)


def _headroom_chart(b: Bottleneck, colours: dict[str, str]) -> str:
    """Per oracle: the run's pass rate (grey) and the gain (colour) with the gain's CI."""
    base = b.end_to_end.pass_rate or 0.0
    rows = b.headroom or []
    labels = [r.oracle if len(r.components) == 1 else "every oracle at once" for r in rows]
    label_w = max((_text_width(t, 13) for t in labels), default=60) + 16
    track, value_w, row_h, top = 330.0, 150.0, 34.0, 24.0
    width = label_w + track + value_w
    height = top + row_h * max(len(rows), 1) + 8
    svg = [_svg_open("headroom", width, height,
                     "end-to-end pass rate with each component's oracle",
                     ' id="headroom-chart"')]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = label_w + tick * track
        svg.append(f'<line class="grid" x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" '
                   f'y2="{height - 4:.1f}"/><text class="tick" x="{x:.1f}" y="{top - 10}" '
                   f'text-anchor="middle">{tick * 100:.0f}%</text>')
    for i, (row, label) in enumerate(zip(rows, labels, strict=True)):
        y = top + i * row_h
        mid = y + row_h / 2
        colour = colours.get(row.oracle, INTERACTION if len(row.components) > 1 else PALETTE[0])
        if row.gain is None:
            value = "reruns failed" if row.errors else "no oracle"
            tip = f"{row.oracle}: {value} ({row.reason or 'no gold'})"
        else:
            tip = (f"{row.oracle}: fixes {row.fixed} of the failed cases, +{_pct(row.gain)} "
                   f"pass rate" + (f" (95% CI {_pct(row.ci95[0])}–{_pct(row.ci95[1])})"
                                   if row.ci95 else "")
                   + f"; {row.still_fails} still fail, {row.no_oracle} have no gold"
                   + (f", {row.errors} reruns failed" if row.errors else ""))
            value = f"+{_pct(row.gain)}"
        svg.append(f'<g class="bar" data-oracle="{e(row.oracle)}"><title>{e(tip)}</title>')
        svg.append(f'<text class="lbl" x="{label_w - 10:.1f}" y="{mid:.1f}" '
                   f'text-anchor="end">{e(label)}</text>')
        svg.append(f'<rect class="track" x="{label_w:.1f}" y="{y + 7:.1f}" width="{track:.1f}" '
                   f'height="{row_h - 14:.1f}" rx="4"/>')
        if base > 0:
            svg.append(f'<rect x="{label_w:.1f}" y="{y + 7:.1f}" width="{base * track:.1f}" '
                       f'height="{row_h - 14:.1f}" rx="4" fill="#cbd5e1"/>')
        if row.gain:
            svg.append(f'<rect x="{label_w + base * track:.1f}" y="{y + 7:.1f}" '
                       f'width="{row.gain * track:.1f}" height="{row_h - 14:.1f}" '
                       f'fill="{colour}"/>')
        if row.ci95 and row.gain is not None:
            svg.append(_whisker(label_w + (base + row.ci95[0]) * track,
                                label_w + (base + row.ci95[1]) * track, mid, 6))
        svg.append(f'<text class="val" x="{label_w + track + 10:.1f}" y="{mid:.1f}">'
                   f'<tspan class="strong">{e(value)}</tspan>'
                   + (f'<tspan class="muted" dx="6">{row.fixed} fixed</tspan>'
                      if row.gain is not None else "") + "</text>")
        svg.append("</g>")
    svg.append("</svg>")
    return "".join(svg)


def _defs() -> str:
    return ('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{INTERACTION}" '
            'fill-opacity="0.35"/><line x1="0" y1="0" x2="0" y2="6" '
            f'stroke="{INTERACTION}" stroke-width="3"/></pattern></defs>')


def _verdict_chart(verdicts: dict[str, dict[str, int]], report: Report) -> str:
    order = [c for c in report.components if c in verdicts] + [
        c for c in verdicts if c not in report.components]
    statuses = ("pass", "fail", "error", "not_applicable")
    label_w = max(_text_width(c, 13) for c in order) + 16
    track, row_h, top = 300.0, 30.0, 24.0
    width = label_w + track + 10
    height = top + row_h * len(order) + 30
    svg = [_svg_open("verdicts", width, height, "per-case verdicts of each component")]
    for i, comp in enumerate(order):
        counts = verdicts[comp]
        total = sum(counts.get(s, 0) for s in statuses)
        y = top + i * row_h
        mid = y + row_h / 2
        svg.append(f'<text class="lbl" x="{label_w - 10:.1f}" y="{mid:.1f}" '
                   f'text-anchor="end">{e(comp)}</text>')
        x = label_w
        for s in statuses:
            n = counts.get(s, 0)
            if not n or not total:
                continue
            w = n / total * track
            tip = f"{comp}: {n} {s.replace('_', ' ')} of {total} cases"
            svg.append(f'<rect x="{x:.1f}" y="{y + 5:.1f}" width="{max(w - 1, 0.5):.1f}" '
                       f'height="{row_h - 10:.1f}" fill="{VERDICT_COLOURS[s]}"><title>{e(tip)}'
                       "</title></rect>")
            if w >= 24:
                cls = "seg dark" if s == "not_applicable" else "seg"
                svg.append(f'<text class="{cls}" x="{x + w / 2:.1f}" y="{mid:.1f}" '
                           f'text-anchor="middle">{n}</text>')
            x += w
    y = top + row_h * len(order) + 14
    x = label_w
    for s in statuses:
        svg.append(f'<rect x="{x:.1f}" y="{y - 5:.1f}" width="10" height="10" rx="2" '
                   f'fill="{VERDICT_COLOURS[s]}"/><text class="tick" x="{x + 14:.1f}" '
                   f'y="{y:.1f}">{e(s.replace("_", " "))}</text>')
        x += _text_width(s, 11) + 34
    svg.append("</svg>")
    return "".join(svg)


# --------------------------------------------------------------------------------------------
# Slices by tag
# --------------------------------------------------------------------------------------------


def _slices_section(report: Report) -> str:
    """One row per slice (the synthetic / hand-written pair first, then the tags, weakest
    end-to-end pass rate first): cases and each verdict's pass rate with its 95% CI."""
    s = report.slices
    if s is None:
        return ""
    every = [*(s.origin or []), *s.tags]
    judged = [c for c in report.components
              if any(c in x.components and x.components[c].verdicts is not None
                     for x in every)]
    total = len(s.tags) + len(s.small) + len(s.beyond_cap) + s.unlisted
    out = ['<section id="slices" class="card">',
           f'<h2>Slices by tag <span class="muted">{len(s.tags)} of {total} tags</span></h2>',
           '<p class="lead">Per-case verdict pass rates (pass / (pass + fail); not applicable '
           "and errors left out) over the cases that carry each tag, with their 95% bootstrap "
           f"CI; weakest end-to-end pass rate first. Tags on fewer than {s.min_cases} cases are "
           "not sliced. Every metric's mean per slice is in report.json "
           "(<code>slices</code>).</p>"]
    head = "".join(f"<th>{e(c)}</th>" for c in judged)
    rows = []

    def row(x: Slice, label: str) -> str:
        cells = "".join(_slice_cell(x.components[c].verdicts if c in x.components else None)
                        for c in judged)
        return (f"<tr><td>{label}</td><td class=\"r\">{x.cases}</td>"
                f"{_slice_cell(x.end_to_end)}{cells}</tr>")

    for x in s.origin or []:
        rows.append(row(x, f"<i>{e(x.name)}</i>"))
    for x in weakest_first(s.tags):
        rows.append(row(x, e(x.name)))
    if rows:
        out.append('<div class="scroll"><table class="tbl compact slices"><thead><tr>'
                   '<th>slice</th><th class="r">cases</th><th>end to end</th>'
                   f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")
    else:
        out.append(f'<p class="muted">No tag is on {s.min_cases} cases or more.</p>')
    notes = []
    if s.origin:
        notes.append(f"<i>synthetic</i>: the cases tagged <code>{e(SYNTHETIC_TAG)}</code>; "
                     "<i>hand-written</i>: the others.")
    if s.untagged:
        notes.append(f"{s.untagged} cases carry no tag.")
    if notes:
        out.append('<p class="muted small">' + " ".join(notes) + "</p>")
    for title, counts in ((f"Tags on fewer than {s.min_cases} cases", s.small),
                          (f"Tags beyond the {s.max_tags} most frequent", s.beyond_cap)):
        if counts:
            items = ", ".join(f"{e(tag)} <span class=\"muted\">({n})</span>"
                              for tag, n in counts.items())
            out.append(f"<details><summary>{e(title)} ({len(counts)}, not sliced)</summary>"
                       f'<p class="small">{items}</p></details>')
    if s.unlisted:
        out.append(f'<p class="muted small">{s.unlisted} more tags, on fewer cases, are only '
                   "counted.</p>")
    out.append("</section>")
    return "\n".join(out)


def _slice_cell(v: SliceVerdicts | None) -> str:
    """A pass rate as a meter, the rate and its CI; the counts in the tooltip.

    >>> _slice_cell(SliceVerdicts(passed=1, failed=3, pass_rate=0.25, ci95=[0.0, 0.75]))
    '<td title="1 pass, 3 fail, 0 n.a., 0 error"><span class="meter"><span style="width:25%"></span></span>25% <span class="muted">0%–75%</span></td>'
    """
    if v is None:
        return '<td class="muted">—</td>'
    tip = f"{v.passed} pass, {v.failed} fail, {v.not_applicable} n.a., {v.errors} error"
    if v.pass_rate is None:
        text = "n.a." if v.not_applicable and not v.errors else "—"
        return f'<td class="muted" title="{e(tip)}">{text}</td>'
    ci = (f' <span class="muted">{e(_pct(v.ci95[0]))}–{e(_pct(v.ci95[1]))}</span>'
          if v.ci95 else "")
    width = min(max(v.pass_rate, 0.0), 1.0) * 100
    return (f'<td title="{e(tip)}"><span class="meter"><span style="width:{width:.0f}%">'
            f"</span></span>{e(_pct(v.pass_rate))}{ci}</td>")


# --------------------------------------------------------------------------------------------
# Scores per component
# --------------------------------------------------------------------------------------------


def _scores_section(report: Report, colours: dict[str, str]) -> str:
    gates: dict[tuple[str, str], list] = {}
    for g in report.gates:
        gates.setdefault((g.component, g.metric), []).append(g)
    cards = []
    for name, comp in report.components.items():
        cards.append(_component_card(name, comp, colours[name], gates, report))
    return ('<section id="scores"><h2 class="out">Scores per component</h2>'
            '<p class="lead out">Each component is scored on its own ground truth; scores are '
            "never combined. Bars are means with their 95% bootstrap confidence interval "
            "(metrics marked ᴿ are one value per run, like a macro-F1, with the evaluator's "
            "interval); dashed lines are gates.</p>"
            f'<div class="grid">{"".join(cards)}</div></section>')


def _component_card(name: str, comp: ComponentReport, colour: str, gates: dict,
                    report: Report) -> str:
    unit = [(m, s) for m, s in comp.metrics.items() if _unit_scale(m, s)]
    other = [(m, s) for m, s in comp.metrics.items() if not _unit_scale(m, s)]
    cases = comp.cases
    head = (f'<div class="card-head"><h3><span class="dot" style="--c:{colour}"></span>'
            f"{e(name)}</h3><span class=\"muted\">{e(comp.kind)} · "
            f"{cases.get('evaluated', 0)} evaluated"
            + (f" · {cases['not_run']} not run" if cases.get("not_run") else "")
            + (f" · {cases['error']} invalid steps" if cases.get("error") else "")
            + "</span></div>")
    crit = report.verdict_criteria.get(name)
    if crit and crit.criteria:
        head += (f'<div class="muted small">verdict: <code>{e(" and ".join(crit.criteria))}'
                 "</code></div>")
    parts = [f'<div class="card comp" style="--c:{colour}">', head]
    if not comp.metrics:
        parts.append('<p class="muted">No evaluator configured.</p>')
    if unit:
        errors = {s.errors for _, s in unit}
        uniform = len(errors) == 1 and len(unit) > 2
        if uniform and errors != {0}:
            parts.append(f'<div class="small bad-text">{errors.pop()} case(s) could not be '
                         "scored on each metric below (see why at the bottom)</div>")
        parts.append(_metric_chart(name, unit, colour, gates, show_errors=not uniform))
    if other:
        rows = "".join(
            f"<tr><td>{e(m)}</td><td class=\"r\">{e(_num(s.mean))}</td>"
            f"<td class=\"r muted\">{e(_ci_text(s.ci95))}</td><td class=\"r\">{s.n}</td>"
            f"<td class=\"r\">{_err_cell(s.errors)}</td></tr>" for m, s in other)
        parts.append('<table class="tbl compact"><thead><tr><th>other metrics</th>'
                     '<th class="r">mean</th><th class="r">95% CI</th><th class="r">n</th>'
                     f'<th class="r">errors</th></tr></thead><tbody>{rows}</tbody></table>')
    reasons = [(m, r, n) for m, s in comp.metrics.items() for r, n in s.error_reasons.items()]
    if reasons:
        items = "".join(f"<li><code>{e(m)}</code> × {n}: {e(r)}</li>" for m, r, n in reasons)
        parts.append(f'<details class="reasons"><summary>Why some metrics could not be '
                     f"computed ({sum(n for *_, n in reasons)})</summary><ul>{items}</ul>"
                     "</details>")
    parts.append("</div>")
    return "".join(parts)


def _err_cell(n: int) -> str:
    return f'<span class="bad-text">{n}</span>' if n else "0"


def _ci_text(ci: list[float] | None) -> str:
    return "—" if not ci else f"{_num(ci[0])}–{_num(ci[1])}"


def _metric_chart(component: str, metrics: list[tuple[str, MetricSummary]], colour: str,
                  gates: dict, *, show_errors: bool = True) -> str:
    label_w = max(_text_width(m + " ᴿ ↓", 12) for m, _ in metrics) + 14
    track, value_w, row_h, top = 300.0, 92.0, 24.0, 20.0
    width = label_w + track + value_w
    height = top + row_h * len(metrics) + 4
    svg = [_svg_open("metrics", width, height, f"{component} metrics with 95% CI",
                     f' data-component="{e(component)}"')]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        x = label_w + tick * track
        svg.append(f'<line class="grid" x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" '
                   f'y2="{height - 2:.1f}"/><text class="tick" x="{x:.1f}" y="{top - 8}" '
                   f'text-anchor="middle">{tick:g}</text>')
    for i, (metric, s) in enumerate(metrics):
        y = top + i * row_h
        mid = y + row_h / 2
        lower = bool(_LOWER_IS_BETTER.match(metric))
        mean = min(max(s.mean or 0.0, 0.0), 1.0)
        run = s.scope == "run"
        tip = (f"{component}.{metric}{' (one value per run)' if run else ''}: {_num(s.mean)}"
               + (f" (95% CI {_ci_text(s.ci95)})" if s.ci95 else "")
               + f", n = {s.n}" + (f", {s.errors} errors" if s.errors else "")
               + (" — lower is better" if lower else "") + f" · evaluator {s.evaluator}")
        svg.append(f"<g><title>{e(tip)}</title>")
        svg.append(f'<text class="lbl" x="{label_w - 8:.1f}" y="{mid:.1f}" text-anchor="end">'
                   f"{e(metric)}{'<tspan class=muted> ᴿ</tspan>' if run else ''}"
                   f"{'<tspan class=muted> ↓</tspan>' if lower else ''}</text>")
        svg.append(f'<rect class="track" x="{label_w:.1f}" y="{y + 5:.1f}" width="{track:.1f}" '
                   f'height="{row_h - 10:.1f}" rx="3"/>')
        if mean > 0:
            svg.append(f'<rect x="{label_w:.1f}" y="{y + 5:.1f}" width="{mean * track:.1f}" '
                       f'height="{row_h - 10:.1f}" rx="3" fill="{colour}" '
                       f'fill-opacity="{0.55 if lower else 0.9}"/>')
        if s.ci95:
            lo, hi = (min(max(v, 0.0), 1.0) for v in s.ci95)
            svg.append(_whisker(label_w + lo * track, label_w + hi * track, mid, 4))
        for g in gates.get((component, metric), []):
            if 0 <= g.threshold <= 1:
                gx = label_w + g.threshold * track
                svg.append(f'<line class="gate{"" if g.passed else " failed"}" x1="{gx:.1f}" '
                           f'y1="{y + 2:.1f}" x2="{gx:.1f}" y2="{y + row_h - 2:.1f}">'
                           f"<title>{e(f'gate {g.name}: ' + ('pass' if g.passed else 'FAIL'))}"
                           "</title></line>")
        err = (f'<tspan class="bad-text" dx="5">{s.errors} err</tspan>'
               if s.errors and show_errors else "")
        svg.append(f'<text class="val" x="{label_w + track + 8:.1f}" y="{mid:.1f}">'
                   f"{e(_num(s.mean))}{err}</text></g>")
    svg.append("</svg>")
    return "".join(svg)


# --------------------------------------------------------------------------------------------
# Latency and tokens
# --------------------------------------------------------------------------------------------


def _cost_section(report: Report, colours: dict[str, str]) -> str:
    comps = list(report.components.items())
    out = ['<section id="cost" class="card">', "<h2>Latency &amp; tokens</h2>"]
    timed = [(n, c) for n, c in comps if c.cost.latency_ms.get("p50") is not None]
    out.append('<div class="split">')
    if timed:
        out.append('<div class="chart-box"><h3>Latency per case: p50 (solid) to p95</h3>'
                   f"{_latency_chart(timed, colours)}</div>")
        totals = [(n, c.cost.latency_ms.get("total") or 0.0) for n, c in timed]
        out.append('<div class="chart-box"><h3>Share of the total time spent in components'
                   f"</h3>{_share_bar(totals, colours)}</div>")
    else:
        out.append('<p class="muted">No component reported its latency.</p>')
    out.append("</div>")
    max_tok = max((c.cost.tokens.get("total", 0) for _, c in comps), default=0)
    rows = []
    for name, comp in comps:
        c = comp.cost
        lat = c.latency_ms
        tok = c.tokens
        prompt, completion = tok.get("prompt", 0), tok.get("completion", 0)
        bar = ""
        if max_tok:
            bar = (f'<span class="tokbar"><span style="width:{prompt / max_tok * 100:.1f}%;'
                   f'background:{colours[name]}"></span><span style="width:'
                   f"{completion / max_tok * 100:.1f}%;background:{colours[name]};"
                   'opacity:.45"></span></span>')
        rows.append(
            f'<tr><td><span class="dot" style="--c:{colours[name]}"></span>{e(name)}</td>'
            f'<td class="r">{c.steps}</td><td class="r">{e(_ms(lat.get("mean")))}</td>'
            f'<td class="r">{e(_ms(lat.get("p50")))}</td>'
            f'<td class="r">{e(_ms(lat.get("p95")))}</td>'
            f'<td class="r">{e(_ms(lat.get("total")))}</td>'
            f'<td class="r">{prompt:,} / {completion:,}</td><td class="r">'
            f"{tok.get('total', 0):,}</td><td class=\"bar-cell\">{bar}</td>"
            f'<td class="r">{e(judge_cell(comp.judge))}</td></tr>')
    out.append('<table class="tbl"><thead><tr><th>component</th><th class="r">ran</th>'
               '<th class="r">mean</th><th class="r">p50</th><th class="r">p95</th>'
               '<th class="r">total</th><th class="r">tokens prompt / completion</th>'
               '<th class="r">tokens</th><th></th>'
               '<th class="r" title="judge requests / cache hits / tokens">judge req / hits'
               ' / tok</th></tr></thead><tbody>'
               + "".join(rows) + "</tbody></table>")
    usage = report.judge.get("usage")
    if usage:
        out.append(f'<p class="muted small">Judge ({e(report.judge.get("label", ""))}): '
                   f"{usage.get('judgments', 0)} judgments, {usage.get('requests', 0)} "
                   f"requests, {usage.get('cache_hits', 0)} cache hits, "
                   f"{usage.get('prompt_tokens', 0) + usage.get('completion_tokens', 0):,} "
                   f"tokens, {usage.get('errors', 0)} errors — not counted above.</p>")
    out.append("</section>")
    return "\n".join(out)


def _latency_chart(timed: list[tuple[str, ComponentReport]], colours: dict[str, str]) -> str:
    top_value = max((c.cost.latency_ms.get("p95") or c.cost.latency_ms.get("p50") or 0.0)
                    for _, c in timed)
    axis = _nice_max(top_value)
    label_w = max(_text_width(n, 13) for n, _ in timed) + 16
    track, value_w, row_h, top = 320.0, 160.0, 30.0, 22.0
    width = label_w + track + value_w
    height = top + row_h * len(timed) + 6
    svg = [_svg_open("latency", width, height, "latency per component, p50 and p95",
                     ' id="latency-chart"')]
    for i in range(5):
        v = axis * i / 4
        x = label_w + track * i / 4
        svg.append(f'<line class="grid" x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" '
                   f'y2="{height - 2:.1f}"/><text class="tick" x="{x:.1f}" y="{top - 8}" '
                   f'text-anchor="middle">{v:g}{" ms" if i == 4 else ""}</text>')
    for i, (name, comp) in enumerate(timed):
        lat = comp.cost.latency_ms
        p50, p95 = lat.get("p50") or 0.0, lat.get("p95")
        y = top + i * row_h
        mid = y + row_h / 2
        colour = colours[name]
        svg.append(f"<g><title>{e(f'{name}: p50 {_ms(p50)}, p95 {_ms(p95)}, mean ' + _ms(lat.get('mean')))}</title>")
        svg.append(f'<text class="lbl" x="{label_w - 10:.1f}" y="{mid:.1f}" '
                   f'text-anchor="end">{e(name)}</text>')
        if p95 is not None and p95 > p50:
            svg.append(f'<rect x="{label_w:.1f}" y="{y + 7:.1f}" '
                       f'width="{p95 / axis * track:.1f}" height="{row_h - 14:.1f}" rx="3" '
                       f'fill="{colour}" fill-opacity="0.25"/>')
            svg.append(f'<line class="p95" x1="{label_w + p95 / axis * track:.1f}" '
                       f'y1="{y + 4:.1f}" x2="{label_w + p95 / axis * track:.1f}" '
                       f'y2="{y + row_h - 4:.1f}" stroke="{colour}"/>')
        svg.append(f'<rect x="{label_w:.1f}" y="{y + 7:.1f}" width="{max(p50 / axis * track, 1):.1f}" '
                   f'height="{row_h - 14:.1f}" rx="3" fill="{colour}"/>')
        svg.append(f'<text class="val" x="{label_w + track + 10:.1f}" y="{mid:.1f}">'
                   f'<tspan class="strong">{e(_ms(p50))}</tspan><tspan class="muted" dx="6">'
                   f"p95 {e(_ms(p95))}</tspan></text></g>")
    svg.append("</svg>")
    return "".join(svg)


def _share_bar(totals: list[tuple[str, float]], colours: dict[str, str]) -> str:
    total = sum(v for _, v in totals)
    width, bar_h = 520.0, 28.0
    legend_rows = math.ceil(len(totals) / 2)
    height = bar_h + 16 + legend_rows * 22
    svg = [_svg_open("share", width, height, "share of total latency per component")]
    x = 0.0
    for name, value in totals:
        w = value / total * width if total else 0
        if w > 0:
            svg.append(f'<rect x="{x:.1f}" y="0" width="{max(w - 1.5, 0.5):.1f}" '
                       f'height="{bar_h}" fill="{colours[name]}"><title>'
                       f"{e(f'{name}: {_pct(value / total)} of {_ms(total)}')}</title></rect>")
            if w > 40:
                svg.append(f'<text class="seg" x="{x + w / 2:.1f}" y="{bar_h / 2}" '
                           f'text-anchor="middle">{e(_pct(value / total))}</text>')
        x += w
    for i, (name, value) in enumerate(totals):
        lx = (i % 2) * width / 2
        ly = bar_h + 22 + (i // 2) * 22
        svg.append(f'<rect x="{lx:.1f}" y="{ly - 6:.1f}" width="11" height="11" rx="2" '
                   f'fill="{colours[name]}"/><text class="lbl" x="{lx + 17:.1f}" y="{ly:.1f}">'
                   f'{e(name)}<tspan class="muted" dx="6">{e(_pct(value / total if total else 0))}'
                   f" · {e(_ms(value))}</tspan></text>")
    svg.append("</svg>")
    return "".join(svg)


# --------------------------------------------------------------------------------------------
# Routing (the router plugin's section) and the other plugin sections
# --------------------------------------------------------------------------------------------


def _routing_section(sections: list[dict[str, Any]]) -> str:
    if not sections:
        return ""
    out = ['<section id="routing" class="card">', "<h2>Routing</h2>"]
    for section in sections:
        data = section.get("data") or {}
        if len(sections) > 1:
            out.append(f"<h3>{e(section.get('title', ''))}</h3>")
        try:
            out.append(_routing_body(data))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            out.append(_markdown(str(section.get("markdown", ""))))
            continue
        out.append(f'<details class="md"><summary>The full section</summary>'
                   f"{_markdown(str(section.get('markdown', '')))}</details>")
    out.append("</section>")
    return "\n".join(out)


def _routing_body(data: dict[str, Any]) -> str:
    if "error" in data and "confusion_matrix" not in data:
        raise KeyError("error")
    facts = []
    for key, label in (("accuracy", "route-set accuracy"), ("jaccard", "mean Jaccard"),
                       ("macro_f1", "macro-F1"), ("micro_f1", "micro-F1")):
        if isinstance(data.get(key), int | float):
            facts.append(_kpi(label, _num(data[key]), "", "#4f46e5"))
    cal = data.get("calibration") or {}
    metric = cal.get("metric")
    if metric and isinstance(cal.get(metric), int | float):
        facts.append(_kpi(metric.replace("@", " @ "), _num(cal[metric]),
                          "calibration error ↓", "#d97706"))
    abst = data.get("abstention") or {}
    if isinstance(abst.get("rate"), int | float):
        facts.append(_kpi("abstention", _pct(abst["rate"]),
                          f"{abst.get('cases', 0)} of {abst.get('of', 0)} cases", "var(--muted)"))
    out = [f'<div class="kpis small">{"".join(facts)}</div>', '<div class="split">']
    cm = data.get("confusion_matrix")
    if cm:
        out.append('<div class="chart-box"><h3>Confusion matrix of route sets</h3>'
                   f"{_confusion_svg(cm)}</div>")
    per_route = data.get("per_route") or {}
    side = []
    if per_route:
        rows = "".join(
            f"<tr><td><code>{e(route)}</code></td>"
            + "".join(f'<td class="r">{_meter(v.get(k))}</td>'
                      for k in ("precision", "recall", "f1"))
            + f'<td class="r">{e(v.get("support", ""))}</td></tr>'
            for route, v in per_route.items())
        side.append('<h3>Per route</h3><table class="tbl compact"><thead><tr><th>route</th>'
                    '<th class="r">precision</th><th class="r">recall</th><th class="r">F1</th>'
                    f'<th class="r">gold</th></tr></thead><tbody>{rows}</tbody></table>')
    bins = [b for b in cal.get("reliability") or [] if isinstance(b, dict)]
    if bins:
        side.append("<h3>Reliability of the router's confidence</h3>" + _reliability_svg(bins))
    if side:
        out.append(f'<div class="chart-box">{"".join(side)}</div>')
    out.append("</div>")
    return "".join(out)


def _meter(value: Any) -> str:
    if not isinstance(value, int | float):
        return "—"
    v = min(max(float(value), 0.0), 1.0)
    return (f'<span class="meter"><span style="width:{v * 100:.0f}%"></span></span>'
            f"{e(_num(value))}")


def _confusion_svg(cm: dict[str, Any]) -> str:
    labels = [str(x) for x in cm["labels"]]
    counts = [[int(v) for v in row] for row in cm["counts"]]
    if len(counts) != len(labels) or any(len(r) != len(labels) for r in counts):
        raise ValueError("confusion matrix is not square")
    longest = max((_text_width(x, 12) for x in labels), default=30)
    cell = max(54.0, longest + 14)
    left = longest + 44
    top = 56.0
    n = len(labels)
    width = left + cell * n + 10
    height = top + cell * n + 10
    svg = [_svg_open("confusion", width, height,
                     f"confusion matrix ({cm.get('rows', 'gold')} × "
                     f"{cm.get('columns', 'predicted')})", ' id="confusion-matrix"')]
    svg.append(f'<text class="axis-title" x="{left + cell * n / 2:.1f}" y="14" '
               f'text-anchor="middle">{e(cm.get("columns", "predicted"))} →</text>')
    svg.append(f'<text class="axis-title" x="14" y="{top + cell * n / 2:.1f}" '
               f'text-anchor="middle" transform="rotate(-90 14 {top + cell * n / 2:.1f})">'
               f'← {e(cm.get("rows", "gold"))}</text>')
    for j, label in enumerate(labels):
        svg.append(f'<text class="lbl" x="{left + cell * j + cell / 2:.1f}" y="{top - 12}" '
                   f'text-anchor="middle">{e(label)}</text>')
    for i, row in enumerate(counts):
        total = sum(row)
        y = top + cell * i
        svg.append(f'<text class="lbl" x="{left - 8:.1f}" y="{y + cell / 2:.1f}" '
                   f'text-anchor="end">{e(labels[i])}</text>')
        for j, value in enumerate(row):
            x = left + cell * j
            frac = value / total if total else 0.0
            if value == 0:
                fill, opacity, dark = "var(--track)", 1.0, False
            else:
                fill = "#16a34a" if i == j else "#dc2626"
                opacity = 0.15 + 0.85 * frac
                dark = opacity > 0.55
            tip = (f"{cm.get('rows', 'gold')} {labels[i]} → {cm.get('columns', 'predicted')} "
                   f"{labels[j]}: {value} cases ({_pct(frac)} of the row)")
            svg.append(f'<g><title>{e(tip)}</title><rect x="{x + 1:.1f}" y="{y + 1:.1f}" '
                       f'width="{cell - 2:.1f}" height="{cell - 2:.1f}" rx="4" fill="{fill}" '
                       f'fill-opacity="{opacity:.2f}"/><text class="cell{" on-dark" if dark else ""}" '
                       f'x="{x + cell / 2:.1f}" y="{y + cell / 2:.1f}" text-anchor="middle">'
                       f"{value}</text></g>")
    svg.append("</svg>")
    return "".join(svg)


def _reliability_svg(bins: list[dict[str, Any]]) -> str:
    size, pad = 200.0, 40.0
    width, height = size + pad + 20, size + pad + 10
    svg = [_svg_open("reliability", width, height, "reliability diagram")]
    x0, y0 = pad, 10.0
    svg.append(f'<rect class="track" x="{x0}" y="{y0}" width="{size}" height="{size}"/>')
    for t in (0, 0.5, 1):
        svg.append(f'<text class="tick" x="{x0 + t * size:.1f}" y="{y0 + size + 14:.1f}" '
                   f'text-anchor="middle">{t:g}</text><text class="tick" x="{x0 - 6:.1f}" '
                   f'y="{y0 + size - t * size:.1f}" text-anchor="end">{t:g}</text>')
    svg.append(f'<text class="tick" x="{x0 + size / 2:.1f}" y="{y0 + size + 28:.1f}" '
               'text-anchor="middle">confidence</text>')
    most = max((int(b.get("cases", 0)) for b in bins), default=1) or 1
    for b in bins:
        lo, hi = float(b["lower"]), float(b["upper"])
        acc = float(b["accuracy"])
        tip = (f"confidence [{lo:.2f}, {hi:.2f}): {b.get('cases', 0)} cases, mean confidence "
               f"{_num(b.get('confidence'))}, accuracy {_num(acc)}")
        svg.append(f'<rect x="{x0 + lo * size + 1:.1f}" y="{y0 + size - acc * size:.1f}" '
                   f'width="{(hi - lo) * size - 2:.1f}" height="{acc * size:.1f}" '
                   f'fill="#4f46e5" fill-opacity="{0.3 + 0.6 * int(b.get("cases", 0)) / most:.2f}">'
                   f"<title>{e(tip)}</title></rect>")
    svg.append(f'<line class="diag" x1="{x0}" y1="{y0 + size}" x2="{x0 + size}" y2="{y0}"/>')
    svg.append(f'<text class="tick" x="10" y="{y0 + size / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 10 {y0 + size / 2:.1f})">accuracy</text>')
    svg.append("</svg>")
    return "".join(svg)


def _other_sections(sections: list[dict[str, Any]]) -> str:
    if not sections:
        return ""
    cards = [f'<div class="card"><h3>{e(s.get("title", ""))} <span class="muted small">'
             f'{e(s.get("plugin", ""))}</span></h3>{_markdown(str(s.get("markdown", "")))}</div>'
             for s in sections]
    return (f'<section id="sections"><h2 class="out">Plugin sections</h2>'
            f'<div class="grid">{"".join(cards)}</div></section>')


# --------------------------------------------------------------------------------------------
# A little markdown: paragraphs, headings, lists, tables, code; everything escaped first
# --------------------------------------------------------------------------------------------


def _inline(text: str) -> str:
    """Escape, then ``code``, **bold** and *emphasis*.

    >>> _inline("a `x<y` **b** *c* <i>")
    'a <code>x&lt;y</code> <strong>b</strong> <em>c</em> &lt;i&gt;'
    """
    out = []
    for i, part in enumerate(re.split(r"`([^`]+)`", text)):
        if i % 2:
            out.append(f"<code>{e(part)}</code>")
            continue
        part = e(part)
        part = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", part)
        part = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", part)
        out.append(part)
    return "".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def _markdown(text: str) -> str:
    """Markdown of a plugin section as HTML (tables become tables).

    >>> _markdown("| a | b |\\n|---|--:|\\n| <x> | 2 |")
    '<table class="tbl compact"><thead><tr><th>a</th><th class="r">b</th></tr></thead><tbody><tr><td>&lt;x&gt;</td><td class="r">2</td></tr></tbody></table>'
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
        elif stripped.startswith("```"):
            code = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                code.append(lines[i])
                i += 1
            i += 1
            out.append(f"<pre>{e(chr(10).join(code))}</pre>")
        elif stripped.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            out.append(_md_table(block))
        elif m := re.match(r"(#{1,6})\s+(.*)", stripped):
            out.append(f"<h4>{_inline(m.group(2))}</h4>")
            i += 1
        elif re.match(r"[-*]\s+", stripped):
            items = []
            while i < len(lines) and re.match(r"\s*[-*]\s+", lines[i]):
                item = re.sub(r"^\s*[-*]\s+", "", lines[i])
                items.append(f"<li>{_inline(item)}</li>")
                i += 1
            out.append(f"<ul>{''.join(items)}</ul>")
        else:
            para = []
            while (i < len(lines) and lines[i].strip()
                   and not re.match(r"\s*(\||```|#{1,6}\s|[-*]\s)", lines[i])):
                para.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(' '.join(para))}</p>")
    return "".join(out)


def _md_table(block: list[str]) -> str:
    rows = [_cells(line) for line in block]
    align: list[str] = []
    if len(rows) > 1 and all(re.fullmatch(r":?-{2,}:?", c) for c in rows[1] if c):
        align = ["r" if c.endswith(":") and not c.startswith(":") else "" for c in rows[1]]
        head, body = rows[0], rows[2:]
    else:
        head, body = [], rows

    def cell(tag: str, j: int, text: str) -> str:
        cls = f' class="{align[j]}"' if j < len(align) and align[j] else ""
        return f"<{tag}{cls}>{_inline(text)}</{tag}>"

    thead = ("<thead><tr>" + "".join(cell("th", j, c) for j, c in enumerate(head))
             + "</tr></thead>") if head else ""
    tbody = "".join("<tr>" + "".join(cell("td", j, c) for j, c in enumerate(r)) + "</tr>"
                    for r in body)
    return f'<table class="tbl compact">{thead}<tbody>{tbody}</tbody></table>'


# --------------------------------------------------------------------------------------------
# Failed cases
# --------------------------------------------------------------------------------------------


def _metric_failed(result: CaseResult) -> bool:
    return any(c.status == "error" or any(m.error for m in c.metrics.values())
               for c in result.components.values())


def _is_failure(result: CaseResult, metric_failed: bool) -> bool:
    """Whether the case fails (``metric_failed``: :func:`_metric_failed` of it)."""
    if result.trace.error:
        return True
    if result.end_to_end is not None and result.end_to_end.status in ("fail", "error"):
        return True
    if any(v.status in ("fail", "error") for v in result.verdicts.values()):
        return True
    return metric_failed


def _causes(result: CaseResult) -> list[str]:
    """Filter keys of a failing case: its root causes, or what kind of failure it is."""
    a = result.attribution
    if result.trace.error:
        return ["system error"]
    if a is not None:
        if a.kind == "attributed" and a.root_causes:
            return list(a.root_causes)
        if a.kind == "unattributed":
            return ["interaction"]
        if a.kind in ("masked", "unknown"):
            return [a.kind]
    failing = [c for c, v in result.verdicts.items() if v.status == "fail"]
    if failing:
        return failing
    return ["metric errors"] if _metric_failed(result) else ["—"]


def _case_score(result: CaseResult, unit: set[tuple[str, str]]) -> float:
    values = [m.value for c, comp in result.components.items()
              for name, m in comp.metrics.items()
              if (c, name) in unit and m.value is not None]
    return sum(values) / len(values) if values else 1.0


FEWEST = 25
"""Without per-case verdicts, the list shows the cases with errors and at least
``max(FEWEST - errors, 10)`` of the lowest-scoring others."""


def _pick_cases(report: Report, results: Sequence[CaseResult]) -> tuple[list[int], int, str]:
    """Which cases the list shows: their indexes (at most :data:`MAX_CASES`, in case order),
    how many it would show in all, and how they are picked. One pass over ``results``, keeping
    indexes only (the cases shown are read again by index)."""
    unit = {(c, m) for c, comp in report.components.items() for m, s in comp.metrics.items()
            if _unit_scale(m, s)}
    with_verdicts = False
    failures: list[int] = []  # with verdicts: every failure
    n_failures = 0
    broken: list[int] = []  # without: the cases with errors, and the lowest scores of the rest
    n_broken = 0
    lowest: list[tuple[float, int]] = []
    for i, r in enumerate(results):
        with_verdicts = with_verdicts or r.end_to_end is not None or bool(r.verdicts)
        failed_metric = _metric_failed(r)
        if _is_failure(r, failed_metric):
            n_failures += 1
            if len(failures) < MAX_CASES:
                failures.append(i)
        if r.trace.error or failed_metric:
            n_broken += 1
            if len(broken) < MAX_CASES:
                broken.append(i)
        elif not with_verdicts and (score := _case_score(r, unit)) < 1.0:
            bisect.insort(lowest, (score, i))
            del lowest[FEWEST:]
    if with_verdicts:
        return failures, n_failures, ("Every case that fails end to end, fails a component "
                                      "verdict or has a metric that could not be computed.")
    rest = [i for _, i in lowest[:max(FEWEST - n_broken, 10)]]
    return (sorted(broken + rest)[:MAX_CASES], n_broken + len(rest),
            "This run has no per-case verdicts: shown are the cases with errors and the lowest "
            "mean scores on 0–1 metrics.")


def _cases_section(report: Report, results: Sequence[CaseResult],
                   colours: dict[str, str]) -> str:
    picked, total, how = _pick_cases(report, results)
    shown = [results[i] for i in picked]
    out = ['<section id="cases" class="card">',
           f'<h2>Failed cases <span class="muted">{total} of {len(results)}</span></h2>',
           f'<p class="lead">{e(how)} Click a case for its trace, gold labels and every '
           "metric.</p>"]
    if not total:
        out.append('<p class="placeholder">No failing case.</p></section>')
        return "\n".join(out)
    tally = Counter(c for r in shown for c in _causes(r))
    comp_order = list(report.components)
    keys = sorted(tally, key=lambda k: (comp_order.index(k) if k in comp_order
                                        else len(comp_order), k))
    chips = [f'<button type="button" class="chip active" data-filter="" aria-pressed="true">'
             f"all <b>{len(shown)}</b></button>"]
    for key in keys:
        colour = colours.get(key, INTERACTION)
        chips.append(f'<button type="button" class="chip" data-filter="{e(key)}" '
                     f'aria-pressed="false" style="--c:{colour}"><span class="dot"></span>'
                     f"{e(key)} <b>{tally[key]}</b></button>")
    out.append('<div class="filters"><input type="search" id="case-search" '
               'placeholder="Filter by id, question, reason…" aria-label="filter cases">'
               f'<div class="chips">{"".join(chips)}</div>'
               '<span class="muted small" id="case-count"></span>'
               '<button type="button" class="chip" id="expand-all">expand all</button></div>')
    legend = " · ".join(f'<span class="vdot" style="--c:{VERDICT_COLOURS[s]}"></span>'
                        f"{e(s.replace('_', ' '))}" for s in ("pass", "fail", "error",
                                                              "not_applicable"))
    out.append(f'<div class="legend muted small">root cause · verdict dots in pipeline order '
               f"({e(', '.join(comp_order))}): {legend}</div>")
    out.append('<div class="case-head"><span>case</span><span>question</span>'
               "<span>verdicts</span><span>root cause</span><span>why</span></div>")
    out.append('<div id="cases-list">')
    for r in shown:
        out.append(_case_row(r, report, colours))
    out.append("</div>")
    if total > len(shown):
        out.append(f'<p class="muted">Showing the first {len(shown)} of {total}; the rest are '
                   "in results.jsonl.</p>")
    out.append("</section>")
    return "\n".join(out)


def _case_reason(r: CaseResult) -> str:
    if r.trace.error:
        return f"system error: {r.trace.error}"
    if r.attribution is not None and r.attribution.reason:
        return r.attribution.reason
    if r.end_to_end is not None and r.end_to_end.reason:
        return r.end_to_end.reason
    for comp, v in r.verdicts.items():
        if v.status in ("fail", "error") and v.reason:
            return f"{comp}: {v.reason}"
    for comp, c in r.components.items():
        if c.status == "error" and c.reason:
            return f"{comp}: {c.reason}"
        for name, m in c.metrics.items():
            if m.error:
                return f"{comp}.{name}: {m.error}"
    return ""


def _case_row(r: CaseResult, report: Report, colours: dict[str, str]) -> str:
    causes = _causes(r)
    reason = _case_reason(r)
    dots = []
    for comp in report.components:
        v = r.verdicts.get(comp)
        if v is None:
            dots.append(f'<span class="vdot none" title="{e(comp)}: no verdict"></span>')
        else:
            tip = f"{comp}: {v.status.replace('_', ' ')}" + (f" — {v.reason}" if v.reason else "")
            dots.append(f'<span class="vdot" style="--c:{VERDICT_COLOURS[v.status]}" '
                        f'title="{e(tip)}"></span>')
    pills = "".join(_pill(c, colours.get(c, INTERACTION)) for c in causes)
    text = " ".join([r.case.id, r.case.question, reason, *causes]).lower()
    summary = (f'<summary><span class="cid">{e(r.case.id)}</span>'
               f'<span class="q">{e(r.case.question)}</span>'
               f'<span class="dots">{"".join(dots)}</span><span class="causes">{pills}</span>'
               f'<span class="why">{e(reason)}</span></summary>')
    return (f'<details class="case" id="case-{e(r.case.id)}" data-causes="{e("|".join(causes))}" '
            f'data-text="{e(text)}">{summary}<div class="case-body">{_case_body(r, report)}'
            "</div></details>")


def _case_body(r: CaseResult, report: Report) -> str:
    case, trace = r.case, r.trace
    out = []
    callouts = []
    if trace.error:
        callouts.append(f'<div class="banner bad"><b>System error:</b> {e(trace.error)}</div>')
    if r.end_to_end is not None:
        v = r.end_to_end
        callouts.append(f'<div class="verdict-line">{_status(v.status)} <b>end to end</b>'
                        f"{': ' + e(v.reason) if v.reason else ''}</div>")
    if r.attribution is not None and r.attribution.reason:
        a = r.attribution
        path = " → ".join(a.path)
        callouts.append(f'<div class="verdict-line"><span class="tag">{e(a.kind)}</span> '
                        f"{e(a.reason)}{f' <span class=muted>(gold path: {e(path)})</span>' if path else ''}"
                        "</div>")
    out.extend(callouts)
    out.append(f'<p class="question">{e(case.question)}</p>')
    if case.tags:
        out.append('<div class="tags">' + "".join(f'<span class="tag">{e(t)}</span>'
                                                  for t in case.tags) + "</div>")
    gold = case.gold
    g = []
    if gold.routes is not None:
        g.append(_kv("routes", " + ".join(gold.routes) or "none (abstain)"))
    if gold.sql:
        g.append(_kv("SQL", f"<pre>{e(gold.sql)}</pre>", raw=True))
    if gold.relevant is not None:
        rel = ", ".join(f"{k} ({v})" for k, v in gold.relevant.items()) or "judged: none relevant"
        g.append(_kv("relevant chunks (grade)", rel))
    if gold.answer:
        g.append(_kv("answer", gold.answer))
    t = _trace_parts(r, report)
    out.append('<div class="two">'
               f'<div><h4>Gold</h4>{"".join(g) or "<p class=muted>no gold labels</p>"}</div>'
               f'<div><h4>What the system did</h4>{"".join(t) or "<p class=muted>no steps</p>"}'
               "</div></div>")
    out.append("<h4>Verdicts and metrics</h4>" + _case_metrics(r, report))
    return "".join(out)


def _kv(key: str, value: str, *, raw: bool = False) -> str:
    return f'<div class="kv"><span class="k">{e(key)}</span>{value if raw else e(value)}</div>'


def _step_extra(step: Step | None) -> str:
    if step is None:
        return ""
    bits = []
    if step.latency_ms is not None:
        bits.append(_ms(step.latency_ms))
    if step.usage is not None and step.usage.total_tokens:
        bits.append(f"{step.usage.total_tokens:,} tokens")
    out = f' <span class="muted small">{e(" · ".join(bits))}</span>' if bits else ""
    if step.error:
        out += f' <span class="bad-text">error: {e(step.error)}</span>'
    return out


def _trace_parts(r: CaseResult, report: Report) -> list[str]:
    trace = r.trace
    relevant = r.case.gold.relevant or {}
    out = []
    for comp in report.components:
        step = trace.step(comp)
        if step is None:
            continue
        kind = report.components[comp].kind
        head = f'<div class="step"><div class="step-head"><b>{e(comp)}</b>'
        if not isinstance(step, Step):
            body = f"<pre>{e(_short_json(step, 1500))}</pre>"
            out.append(f"{head}</div>{body}</div>")
            continue
        head += _step_extra(step) + "</div>"
        body = ""
        if kind == "router" and hasattr(step, "routes"):
            conf = getattr(step, "confidence", None)
            body = e(" + ".join(step.routes) or "abstained")
            if conf is not None:
                body += f' <span class="muted">confidence {e(_num(conf))}</span>'
            body = f"<div>{body}</div>"
        elif kind == "text2sql" and hasattr(step, "sql"):
            body = f"<pre>{e(step.sql or '(no SQL)')}</pre>" + _rows_table(step)
        elif kind == "retriever" and hasattr(step, "ids"):
            items = []
            for rank, cid in enumerate(step.ids, 1):
                grade = relevant.get(cid)
                cls = "rel" if grade else "irrel"
                mark = f" <b>{grade}</b>" if grade else ""
                items.append(f'<li class="{cls}" title="rank {rank}">{e(cid)}{mark}</li>')
            body = f'<ol class="ids">{"".join(items)}</ol>' if items else "<div>(nothing)</div>"
        elif kind == "generator" and hasattr(step, "answer"):
            body = f'<blockquote>{e(step.answer or "(no answer)")}</blockquote>'
        else:
            body = f"<pre>{e(_short_json(step.model_dump(mode='json'), 1500))}</pre>"
        out.append(f"{head}{body}</div>")
    return out


def _rows_table(step: Any) -> str:
    rows = step.rows
    if rows is None:
        return ""
    cols = step.columns or [f"col{i + 1}" for i in range(max((len(r) for r in rows), default=0))]
    head = "".join(f"<th>{e(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>"
                   for row in rows[:MAX_ROWS])
    more = (f'<p class="muted small">first {MAX_ROWS} of {len(rows)} rows</p>'
            if len(rows) > MAX_ROWS else
            f'<p class="muted small">{len(rows)} row{"s" if len(rows) != 1 else ""}</p>')
    return (f'<div class="scroll"><table class="tbl compact rows"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>{more}")


def _status(status: str) -> str:
    return _pill(status.replace("_", " "), VERDICT_COLOURS.get(status, INTERACTION),
                 cls="pill status")


def _case_metrics(r: CaseResult, report: Report) -> str:
    blocks = []
    names = list(report.components) + [c for c in r.components if c not in report.components]
    for comp in names:
        c = r.components.get(comp)
        v = r.verdicts.get(comp)
        if c is None and v is None:
            continue
        head = f'<div class="m-head"><b>{e(comp)}</b>'
        if v is not None:
            head += " " + _status(v.status)
            if v.reason:
                head += f' <span class="muted">{e(v.reason)}</span>'
        elif c is not None and c.status != "evaluated":
            head += f' <span class="muted">{e(c.status.replace("_", " "))}'
            head += f": {e(c.reason)}</span>" if c.reason else "</span>"
        head += "</div>"
        rows = []
        failed = set(v.failed) if v is not None else set()
        for name, m in (c.metrics.items() if c is not None else ()):
            cls = ' class="failed"' if name in failed else ""
            rows.append(f"<tr{cls}><td>{e(name)}</td><td class=\"r\">{_metric_value(m)}</td>"
                        f"<td class=\"detail\">{_metric_detail(m)}</td></tr>")
        table = (f'<table class="tbl compact metrics"><tbody>{"".join(rows)}</tbody></table>'
                 if rows else "")
        blocks.append(f'<div class="m-block">{head}{table}</div>')
    return "".join(blocks)


def _metric_value(m: MetricValue) -> str:
    return '<span class="bad-text">error</span>' if m.error else e(_num(m.value))


def _metric_detail(m: MetricValue) -> str:
    if m.error:
        return f'<span class="bad-text">{e(m.error)}</span>'
    details = {k: v for k, v in m.details.items()
               if k not in ("judgments", "judge", "counterexample")}
    if not details:
        return ""
    reason = details.get("reason")
    if isinstance(reason, str) and reason:
        rest = {k: v for k, v in details.items() if k != "reason"}
        extra = f' <span class="muted">{e(_short_json(rest, 200))}</span>' if rest else ""
        return f"{e(_short(reason, 600))}{extra}"
    return f'<span class="muted">{e(_short_json(details, 400))}</span>'


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short_json(value: Any, limit: int) -> str:
    return _short(json.dumps(value, ensure_ascii=False, default=str), limit)


# --------------------------------------------------------------------------------------------
# Settings and footer
# --------------------------------------------------------------------------------------------


def _settings_section(report: Report) -> str:
    rows = []
    for name, comp in report.components.items():
        for ev in comp.evaluators:
            settings = ", ".join(f"{k}={v}" for k, v in ev.settings.items()) or "defaults"
            rows.append(f"<tr><td>{e(name)}</td><td><code>{e(ev.name)}</code></td>"
                        f"<td>{e(ev.plugin)} {e(ev.version)}</td><td class=\"muted\">"
                        f"{e(settings)}</td></tr>")
    table = ('<table class="tbl compact"><thead><tr><th>component</th><th>evaluator</th>'
             "<th>plugin</th><th>settings</th></tr></thead><tbody>" + "".join(rows)
             + "</tbody></table>") if rows else '<p class="muted">No evaluator.</p>'
    return (f'<section id="settings" class="card"><details><summary><h2>Evaluators and '
            f"settings</h2></summary>{table}</details></section>")


def _footer(report: Report) -> str:
    versions = " · ".join(f"{k} {v}" for k, v in report.versions.items())
    sha = report.scenario.get("sha256", "")
    db = report.scenario.get("database_sha256")
    return (f"{e(versions)}<br>scenario sha256 <code>{e(sha)}</code>"
            + (f" · database sha256 <code>{e(db)}</code>" if db else "")
            + "<br>Self-contained: this page loads nothing from the network.")


# --------------------------------------------------------------------------------------------
# Inline CSS and JavaScript
# --------------------------------------------------------------------------------------------

_ERROR_HOOKS = """
(function () {
  var pending = [];
  function put(message) {
    var box = document.getElementById('console-errors');
    if (box) { box.textContent += message + '\\n'; } else { pending.push(message); }
  }
  window.onerror = function (message, source, line) {
    put('error: ' + message + ' (line ' + line + ')');
  };
  window.addEventListener('unhandledrejection', function (event) {
    put('unhandled rejection: ' + event.reason);
  });
  document.addEventListener('securitypolicyviolation', function (event) {
    put('blocked by the content security policy: ' + event.blockedURI);
  });
  var original = console.error;
  console.error = function () {
    put('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return original.apply(console, arguments);
  };
  document.addEventListener('DOMContentLoaded', function () {
    var box = document.getElementById('console-errors');
    if (box && pending.length) { box.textContent += pending.join('\\n') + '\\n'; }
    pending = [];
  });
  document.documentElement.className += ' js';
})();
"""

_FILTER_JS = """
(function () {
  var list = document.getElementById('cases-list');
  if (!list) { return; }
  var rows = Array.prototype.slice.call(list.querySelectorAll('details.case'));
  var search = document.getElementById('case-search');
  var count = document.getElementById('case-count');
  var chips = Array.prototype.slice.call(document.querySelectorAll('.chips .chip'));
  var active = '';
  function apply() {
    var text = (search.value || '').toLowerCase().trim();
    var shown = 0;
    rows.forEach(function (row) {
      var causes = (row.getAttribute('data-causes') || '').split('|');
      var ok = (!active || causes.indexOf(active) >= 0) &&
               (!text || (row.getAttribute('data-text') || '').indexOf(text) >= 0);
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown + ' of ' + rows.length + ' shown';
  }
  chips.forEach(function (chip) {
    chip.addEventListener('click', function () {
      active = chip.getAttribute('data-filter') || '';
      chips.forEach(function (c) {
        var on = c === chip;
        c.classList.toggle('active', on);
        c.setAttribute('aria-pressed', on ? 'true' : 'false');
      });
      apply();
    });
  });
  search.addEventListener('input', apply);
  var expand = document.getElementById('expand-all');
  expand.addEventListener('click', function () {
    var open = expand.textContent === 'expand all';
    rows.forEach(function (row) { if (!row.hidden) { row.open = open; } });
    expand.textContent = open ? 'collapse all' : 'expand all';
  });
  if (location.hash && location.hash.indexOf('#case-') === 0) {
    var target = document.getElementById(location.hash.slice(1));
    if (target) { target.open = true; }
  }
  window.addEventListener('hashchange', function () {
    var target = document.getElementById(location.hash.slice(1));
    if (target && target.tagName === 'DETAILS') { target.open = true; }
  });
  apply();
})();
"""

_CSS = """
:root {
  --bg: #f4f6fb; --card: #ffffff; --ink: #0f172a; --muted: #64748b; --line: #e2e8f0;
  --track: #eef2f7; --grid: #e5e9f0; --accent: #4f46e5; --good: #16a34a; --bad: #dc2626;
  --warn-bg: #fff7e6; --warn-line: #f59e0b; --info-bg: #eef2ff; --bad-bg: #fef2f2;
  --shadow: 0 1px 2px rgba(15, 23, 42, .06), 0 4px 16px rgba(15, 23, 42, .05);
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0b1020; --card: #141a2e; --ink: #e2e8f0; --muted: #94a3b8; --line: #26304a;
    --track: #1e2740; --grid: #26304a; --warn-bg: #2a2110; --info-bg: #1b2142;
    --bad-bg: #2a1216; --shadow: none;
  }
}
* { box-sizing: border-box; }
html { scroll-behavior: smooth; scroll-padding-top: 64px; }
body {
  margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
    "DejaVu Sans", sans-serif;
}
[hidden] { display: none !important; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono",
  monospace; font-size: 12.5px; }
pre { background: var(--track); padding: 8px 10px; border-radius: 8px; white-space: pre-wrap;
  word-break: break-word; margin: 4px 0; }
a { color: var(--accent); }
nav { position: sticky; top: 0; z-index: 5; display: flex; gap: 18px; align-items: center;
  padding: 10px 28px; background: color-mix(in srgb, var(--card) 88%, transparent);
  backdrop-filter: blur(8px); border-bottom: 1px solid var(--line); }
nav .brand { font-weight: 600; color: var(--muted); white-space: nowrap; }
nav .brand b { color: var(--ink); margin-left: 8px; }
nav .links { display: flex; gap: 14px; flex-wrap: wrap; }
nav a { color: var(--muted); text-decoration: none; font-size: 13px; }
nav a:hover { color: var(--accent); }
main { max-width: 1240px; margin: 0 auto; padding: 20px 28px 40px; }
section { margin: 0 0 22px; }
.card { background: var(--card); border-radius: 14px; box-shadow: var(--shadow);
  border: 1px solid var(--line); padding: 18px 22px; }
h1 { font-size: 30px; margin: 6px 0 2px; letter-spacing: -.02em; }
h2 { font-size: 19px; margin: 0 0 8px; letter-spacing: -.01em; }
h2 .muted { font-weight: 400; font-size: 15px; }
h2.out { margin-left: 2px; }
h3 { font-size: 14px; margin: 0 0 8px; color: var(--ink); }
h4 { font-size: 13px; margin: 12px 0 6px; color: var(--muted); text-transform: uppercase;
  letter-spacing: .04em; }
.sub { color: var(--muted); margin: 0 0 14px; }
.muted { color: var(--muted); }
.small { font-size: 12px; }
.lead { color: var(--muted); margin: 0 0 14px; max-width: 900px; }
.lead.out { margin-left: 2px; }
.bad-text { color: var(--bad); }
.banner { display: flex; gap: 12px; align-items: flex-start; border-radius: 12px;
  padding: 12px 16px; margin: 10px 0; border: 1px solid var(--line); }
.banner .icon { font-size: 20px; line-height: 1.2; }
.banner.warn { background: var(--warn-bg); border-color: var(--warn-line);
  border-left-width: 5px; }
.banner.info { background: var(--info-bg); }
.banner.bad { background: var(--bad-bg); border-color: var(--bad); }
.kpis { display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 12px;
  margin: 14px 0; }
.kpi { background: var(--card); border: 1px solid var(--line); border-radius: 12px;
  padding: 12px 16px; box-shadow: var(--shadow); border-top: 4px solid var(--c); }
.kpi .k-label { color: var(--muted); font-size: 12px; text-transform: uppercase;
  letter-spacing: .05em; }
.kpi .k-value { font-size: 26px; font-weight: 700; color: var(--c); line-height: 1.25;
  overflow-wrap: anywhere; }
.kpi .k-sub { color: var(--muted); font-size: 12px; }
.kpis.small { grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); }
.kpis.small .k-value { font-size: 20px; }
.kpis.small .kpi { box-shadow: none; }
.gates { list-style: none; padding: 0; margin: 6px 0 0; display: flex; flex-wrap: wrap;
  gap: 8px; }
.gates li { background: var(--card); border: 1px solid var(--line); border-radius: 999px;
  padding: 3px 12px; font-size: 12.5px; }
.gates .mark { font-weight: 700; }
.gates .ok .mark { color: var(--good); }
.gates .bad { border-color: var(--bad); background: var(--bad-bg); }
.gates .bad .mark { color: var(--bad); }
.split { display: flex; flex-wrap: wrap; gap: 18px 40px; align-items: flex-start; }
.chart-box { min-width: 0; max-width: 100%; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr));
  gap: 16px; align-items: start; }
.card-head { display: flex; justify-content: space-between; align-items: baseline; gap: 10px;
  flex-wrap: wrap; }
.card-head h3 { font-size: 16px; margin: 0; }
.comp { border-top: 4px solid var(--c); }
.dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%;
  background: var(--c, var(--muted)); margin-right: 7px; vertical-align: 0; }
svg.chart { display: block; max-width: 100%; height: auto; margin: 6px 0 10px;
  overflow: visible; }
svg.chart text { font-size: 12px; fill: var(--ink); dominant-baseline: middle; }
svg.bottleneck text.lbl, svg.latency text.lbl, svg.verdicts text.lbl { font-size: 13px; }
svg.chart text.tick { font-size: 11px; fill: var(--muted); }
svg.chart .muted { fill: var(--muted); }
svg.chart .strong { font-weight: 700; }
svg.chart text.val { font-variant-numeric: tabular-nums; }
svg.chart .bad-text { fill: var(--bad); font-size: 11px; }
svg.chart .grid { stroke: var(--grid); stroke-width: 1; }
svg.chart .track { fill: var(--track); }
svg.chart .whisker line { stroke: var(--ink); stroke-width: 1.5; stroke-opacity: .75; }
svg.chart .gate { stroke: var(--ink); stroke-width: 2; stroke-dasharray: 3 2; }
svg.chart .gate.failed { stroke: var(--bad); }
svg.chart .p95 { stroke-width: 2.5; }
svg.chart text.seg { fill: #fff; font-size: 11px; font-weight: 600; }
svg.chart text.seg.dark { fill: #334155; }
svg.chart text.cell { font-size: 14px; font-weight: 600; }
svg.chart text.cell.on-dark { fill: #fff; }
svg.chart text.axis-title { fill: var(--muted); font-size: 12px; font-style: italic; }
svg.chart .diag { stroke: var(--muted); stroke-dasharray: 4 3; }
svg.chart g.bar:hover rect, svg.chart g:hover > rect { filter: brightness(1.08); }
.placeholder { border: 2px dashed var(--line); border-radius: 12px; padding: 22px;
  color: var(--muted); text-align: center; }
.notes p { margin: 4px 0; color: var(--muted); }
details > summary { cursor: pointer; }
details.criteria, details.worst, details.reasons, details.md { margin-top: 10px; }
details.criteria summary, details.worst summary, details.reasons summary, details.md summary {
  color: var(--accent); font-size: 13px; }
#settings summary h2 { display: inline; }
.tbl { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 13px; }
.tbl th { text-align: left; color: var(--muted); font-weight: 600; font-size: 12px;
  border-bottom: 1px solid var(--line); padding: 5px 8px; }
.tbl td { border-bottom: 1px solid var(--line); padding: 5px 8px; vertical-align: top; }
.tbl .r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.tbl.compact td, .tbl.compact th { padding: 3px 8px; }
.tbl.rows { width: auto; font-size: 12px; }
.scroll { overflow-x: auto; }
.bar-cell { width: 22%; }
.tokbar { display: flex; height: 10px; background: var(--track); border-radius: 5px;
  overflow: hidden; margin-top: 5px; }
.meter { display: inline-block; width: 60px; height: 6px; background: var(--track);
  border-radius: 3px; margin-right: 8px; vertical-align: middle; overflow: hidden; }
.meter span { display: block; height: 100%; background: var(--accent); }
.tbl.slices td { white-space: nowrap; }
.pill { display: inline-block; padding: 1px 9px; border-radius: 999px; font-size: 12px;
  background: color-mix(in srgb, var(--c) 16%, transparent); color: var(--c);
  border: 1px solid color-mix(in srgb, var(--c) 45%, transparent); margin: 1px 3px 1px 0;
  white-space: nowrap; font-weight: 600; }
.tag { display: inline-block; padding: 0 7px; border-radius: 6px; background: var(--track);
  color: var(--muted); font-size: 12px; margin-right: 4px; }
.filters { display: none; gap: 10px; align-items: center; flex-wrap: wrap; margin: 4px 0 10px; }
.js .filters { display: flex; }
#case-search { flex: 0 1 300px; padding: 7px 12px; border-radius: 8px; font: inherit;
  border: 1px solid var(--line); background: var(--bg); color: var(--ink); }
.chips { display: flex; gap: 6px; flex-wrap: wrap; }
.chip { font: inherit; font-size: 12.5px; cursor: pointer; border-radius: 999px;
  border: 1px solid var(--line); background: var(--card); color: var(--ink);
  padding: 3px 11px; }
.chip .dot { width: 8px; height: 8px; margin-right: 5px; }
.chip.active { background: var(--ink); color: var(--card); border-color: var(--ink); }
.legend { margin-bottom: 6px; }
.vdot { display: inline-block; width: 11px; height: 11px; border-radius: 3px;
  background: var(--c); margin: 0 2px; vertical-align: -1px; }
.vdot.none { background: transparent; border: 1px dashed var(--muted); }
.case-head, details.case > summary { display: grid;
  grid-template-columns: 64px minmax(180px, 2.2fr) 84px 150px minmax(160px, 2.4fr);
  gap: 12px; align-items: center; }
.case-head { color: var(--muted); font-size: 12px; font-weight: 600; padding: 4px 12px;
  border-bottom: 1px solid var(--line); }
details.case { border-bottom: 1px solid var(--line); }
details.case > summary { list-style: none; padding: 8px 12px; border-radius: 8px; }
details.case > summary::-webkit-details-marker { display: none; }
details.case > summary:hover { background: var(--track); }
details.case[open] > summary { background: var(--info-bg); }
details.case .cid { font-family: ui-monospace, Menlo, Consolas, "DejaVu Sans Mono", monospace;
  font-size: 12.5px; color: var(--accent); }
details.case .q, details.case .why { overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; }
details.case .why { color: var(--muted); font-size: 12.5px; }
.case-body { padding: 6px 14px 16px 14px; }
.question { font-size: 16px; font-weight: 600; margin: 8px 0 4px; }
.verdict-line { margin: 6px 0; }
.two { display: grid; grid-template-columns: 1fr 1fr; gap: 22px; }
.kv { margin: 4px 0 8px; }
.kv .k { display: block; color: var(--muted); font-size: 12px; }
.step { margin: 4px 0 10px; }
.step-head { margin-bottom: 2px; }
blockquote { margin: 2px 0; padding: 6px 12px; border-left: 3px solid var(--accent);
  background: var(--track); border-radius: 0 8px 8px 0; }
ol.ids { margin: 2px 0; padding-left: 26px; }
ol.ids li.rel { color: var(--good); }
ol.ids li.irrel { color: var(--muted); }
.m-block { margin: 6px 0 10px; }
.m-head { margin-bottom: 2px; }
.tbl.metrics td:first-child { width: 190px; }
.tbl.metrics td.r { width: 70px; }
.tbl.metrics td.detail { font-size: 12px; word-break: break-word; }
.tbl.metrics tr.failed td:first-child, .tbl.metrics tr.failed td.r { color: var(--bad);
  font-weight: 700; }
footer { max-width: 1240px; margin: 0 auto; padding: 10px 28px 40px; color: var(--muted);
  font-size: 12px; }
@media (max-width: 820px) {
  .grid { grid-template-columns: 1fr; }
  .two { grid-template-columns: 1fr; }
  .case-head { display: none; }
  details.case > summary { grid-template-columns: 60px 1fr; }
  details.case .dots, details.case .why { display: none; }
}
@media print {
  nav, .filters { display: none !important; }
  .card { box-shadow: none; }
}
"""
