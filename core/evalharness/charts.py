"""The report page's charts: SVG drawn in Python from numbers.

Each chart is one function returning an ``<svg>`` element as :class:`~evalharness.pages.Html`
(the bottleneck, the oracle headroom, the per-case verdicts, a component's 0–1 metrics with
their 95% CI, latency, the share of latency, the router's confusion matrix and reliability
diagram), built with ``Html.format``/``Html.join``, which escape every text they are given —
turning numbers into coordinates is code, not markup. :mod:`evalharness.html` decides what the
page shows and calls these; nothing here knows the page.
"""

from __future__ import annotations

import math
from typing import Any

from evalharness.formatting import case_count, ci_range, clamp, latency, number, percent
from evalharness.models import Bottleneck, ComponentReport, MetricSummary, Report
from evalharness.pages import Html

PALETTE = ["#4f46e5", "#0d9488", "#d97706", "#db2777", "#0284c7", "#7c3aed", "#65a30d",
           "#dc2626", "#0891b2", "#9333ea"]
"""Component colours, assigned in pipeline order and used by every chart."""

INTERACTION = "#94a3b8"
"""The colour of failures no single component is to blame for."""

VERDICT_COLOURS = {"pass": "#16a34a", "fail": "#dc2626", "error": "#d97706",
                   "not_applicable": "#cbd5e1"}
"""The colour of each per-case verdict status."""


def nice_max(value: float) -> float:
    """The axis end: 1, 2, 2.5, 4, 5 or 10 times a power of ten, at least ``value``.

    >>> nice_max(3.79), nice_max(0.24), nice_max(0)
    (4.0, 0.25, 1.0)
    """
    if value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 4, 5, 10):
        if value <= step * power + 1e-12:
            return float(step * power)
    return float(10 * power)  # pragma: no cover - the loop always returns


def text_width(text: str, size: float = 12) -> float:
    """Rough rendered width of ``text`` in the page's sans-serif font."""
    return len(text) * size * 0.6


def _lower_is_better(summary: MetricSummary) -> bool:
    """Whether the metric's plugin declares that lower is better."""
    return summary.declaration is not None and summary.declaration.direction == "lower"


def svg_open(cls: str, width: float, height: float, label: str, **attrs: str) -> Html:
    """The ``<svg>`` tag of a chart; ``attrs`` are more attributes (``data_x`` → ``data-x``).

    >>> svg_open("c", 10, 5, "a <b>", id="x", data_names="p q")
    Html('<svg class="chart c" viewBox="0 0 10 5" width="10" height="5" role="img" aria-label="a &lt;b&gt;" id="x" data-names="p q">')
    """
    more = Html("").join(Html(' {}="{}"').format(k.replace("_", "-"), v)
                         for k, v in attrs.items())
    return Html('<svg class="chart {}" viewBox="0 0 {:.0f} {:.0f}" width="{:.0f}" '
                'height="{:.0f}" role="img" aria-label="{}"{}>').format(
        cls, width, height, width, height, label, more)


def whisker(x1: float, x2: float, y: float, cap: float = 5) -> Html:
    return Html('<g class="whisker"><line x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}"/>'
                '<line x1="{x1:.1f}" y1="{top:.1f}" x2="{x1:.1f}" y2="{bottom:.1f}"/>'
                '<line x1="{x2:.1f}" y1="{top:.1f}" x2="{x2:.1f}" y2="{bottom:.1f}"/></g>'
                ).format(x1=x1, x2=x2, y=y, top=y - cap, bottom=y + cap)


def gridline(x: float, top: float, bottom: float, label_y: float, label: str) -> Html:
    """A vertical grid line of a bar chart and its tick label above it."""
    return Html('<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom:.1f}"/>'
                '<text class="tick" x="{x:.1f}" y="{label_y}" text-anchor="middle">{label}</text>'
                ).format(x=x, top=top, bottom=bottom, label_y=label_y, label=label)


def bar_label(x: float, y: float, label: str) -> Html:
    return Html('<text class="lbl" x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>').format(
        x, y, label)


def track(x: float, y: float, width: float, height: float, rx: float) -> Html:
    return Html('<rect class="track" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" '
                'rx="{:g}"/>').format(x, y, width, height, rx)


def bottleneck_chart(b: Bottleneck, colours: dict[str, str]) -> Html:
    rows: list[tuple[str, str, float | None, list[float] | None, float, str]] = []
    for r in b.ranking:
        rows.append((r.component, r.component, r.share, r.ci95, r.failures,
                     colours.get(r.component, PALETTE[0])))
    rows.append(("interaction", "interaction (unattributed)", b.unattributed_share,
                 b.unattributed_ci95, float(b.unattributed), INTERACTION))
    label_w = max(text_width(label, 13) for _, label, *_ in rows) + 16
    track_w, value_w, row_h, top = 330.0, 120.0, 34.0, 24.0
    width = label_w + track_w + value_w
    height = top + row_h * len(rows) + 8
    names = " ".join(name for name, *_ in rows[:-1])
    svg = [svg_open("bottleneck", width, height, "share of end-to-end failures by root cause",
                    id="bottleneck-chart", data_components=names), defs()]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        svg.append(gridline(label_w + tick * track_w, top - 6, height - 4, top - 10,
                            f"{tick * 100:.0f}%"))
    for i, (name, label, share, ci, failures, colour) in enumerate(rows):
        y = top + i * row_h
        mid = y + row_h / 2
        w = (share or 0) * track_w
        tip = (f"{label}: {percent(share)} of the end-to-end failures ({case_count(failures)} "
               "cases)" + (f", 95% CI {percent(ci[0])}–{percent(ci[1])}" if ci else ""))
        svg.append(Html('<g class="bar" data-component="{}"><title>{}</title>').format(name, tip))
        svg.append(bar_label(label_w - 10, mid, label))
        svg.append(track(label_w, y + 7, track_w, row_h - 14, 4))
        if w > 0:
            interaction = name == "interaction"
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="4" '
                            'fill="{}"{}/>').format(
                label_w, y + 7, w, row_h - 14, "url(#hatch)" if interaction else colour,
                Html(' stroke="{}"').format(INTERACTION) if interaction else ""))
        if ci:
            svg.append(whisker(label_w + ci[0] * track_w, label_w + ci[1] * track_w, mid, 6))
        svg.append(Html('<text class="val" x="{:.1f}" y="{:.1f}"><tspan class="strong">{}</tspan>'
                        '<tspan class="muted" dx="6">{} cases</tspan></text></g>').format(
            label_w + track_w + 10, mid, percent(share), case_count(failures)))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def headroom_chart(b: Bottleneck, colours: dict[str, str]) -> Html:
    """Per oracle: the run's pass rate (grey) and the gain (colour) with the gain's CI."""
    base = b.end_to_end.pass_rate or 0.0
    rows = b.headroom or []
    labels = [r.oracle if len(r.components) == 1 else "every oracle at once" for r in rows]
    label_w = max((text_width(t, 13) for t in labels), default=60) + 16
    track_w, value_w, row_h, top = 330.0, 150.0, 34.0, 24.0
    width = label_w + track_w + value_w
    height = top + row_h * max(len(rows), 1) + 8
    svg = [svg_open("headroom", width, height,
                    "end-to-end pass rate with each component's oracle", id="headroom-chart")]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        svg.append(gridline(label_w + tick * track_w, top - 6, height - 4, top - 10,
                            f"{tick * 100:.0f}%"))
    for i, (row, label) in enumerate(zip(rows, labels, strict=True)):
        y = top + i * row_h
        mid = y + row_h / 2
        colour = colours.get(row.oracle, INTERACTION if len(row.components) > 1 else PALETTE[0])
        if row.gain is None:
            value = "reruns failed" if row.errors else "no oracle"
            tip = f"{row.oracle}: {value} ({row.reason or 'no gold'})"
        else:
            tip = (f"{row.oracle}: fixes {row.fixed} of the failed cases, +{percent(row.gain)} "
                   f"pass rate" + (f" (95% CI {percent(row.ci95[0])}–{percent(row.ci95[1])})"
                                   if row.ci95 else "")
                   + f"; {row.still_fails} still fail, {row.no_oracle} have no gold"
                   + (f", {row.errors} reruns failed" if row.errors else ""))
            value = f"+{percent(row.gain)}"
        svg.append(Html('<g class="bar" data-oracle="{}"><title>{}</title>').format(
            row.oracle, tip))
        svg.append(bar_label(label_w - 10, mid, label))
        svg.append(track(label_w, y + 7, track_w, row_h - 14, 4))
        if base > 0:
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="4" '
                            'fill="#cbd5e1"/>').format(label_w, y + 7, base * track_w, row_h - 14))
        if row.gain:
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" '
                            'fill="{}"/>').format(label_w + base * track_w, y + 7,
                                                  row.gain * track_w, row_h - 14, colour))
        if row.ci95 and row.gain is not None:
            svg.append(whisker(label_w + (base + row.ci95[0]) * track_w,
                               label_w + (base + row.ci95[1]) * track_w, mid, 6))
        fixed = (Html('<tspan class="muted" dx="6">{} fixed</tspan>').format(row.fixed)
                 if row.gain is not None else "")
        svg.append(Html('<text class="val" x="{:.1f}" y="{:.1f}"><tspan class="strong">{}'
                        "</tspan>{}</text></g>").format(label_w + track_w + 10, mid, value, fixed))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def defs() -> Html:
    return Html('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
                'patternTransform="rotate(45)"><rect width="6" height="6" fill="{c}" '
                'fill-opacity="0.35"/><line x1="0" y1="0" x2="0" y2="6" stroke="{c}" '
                'stroke-width="3"/></pattern></defs>').format(c=INTERACTION)


def verdict_chart(verdicts: dict[str, dict[str, int]], report: Report) -> Html:
    order = [c for c in report.components if c in verdicts] + [
        c for c in verdicts if c not in report.components]
    statuses = ("pass", "fail", "error", "not_applicable")
    label_w = max(text_width(c, 13) for c in order) + 16
    track_w, row_h, top = 300.0, 30.0, 24.0
    width = label_w + track_w + 10
    height = top + row_h * len(order) + 30
    svg = [svg_open("verdicts", width, height, "per-case verdicts of each component")]
    for i, comp in enumerate(order):
        counts = verdicts[comp]
        total = sum(counts.get(s, 0) for s in statuses)
        y = top + i * row_h
        mid = y + row_h / 2
        svg.append(bar_label(label_w - 10, mid, comp))
        x = label_w
        for s in statuses:
            n = counts.get(s, 0)
            if not n or not total:
                continue
            w = n / total * track_w
            tip = f"{comp}: {n} {s.replace('_', ' ')} of {total} cases"
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" '
                            'fill="{}"><title>{}</title></rect>').format(
                x, y + 5, max(w - 1, 0.5), row_h - 10, VERDICT_COLOURS[s], tip))
            if w >= 24:
                svg.append(Html('<text class="{}" x="{:.1f}" y="{:.1f}" text-anchor="middle">{}'
                                "</text>").format("seg dark" if s == "not_applicable" else "seg",
                                                  x + w / 2, mid, n))
            x += w
    y = top + row_h * len(order) + 14
    x = label_w
    for s in statuses:
        svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="10" height="10" rx="2" fill="{}"/>'
                        '<text class="tick" x="{:.1f}" y="{:.1f}">{}</text>').format(
            x, y - 5, VERDICT_COLOURS[s], x + 14, y, s.replace("_", " ")))
        x += text_width(s, 11) + 34
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def metric_chart(component: str, metrics: list[tuple[str, MetricSummary]], colour: str,
                 gates: dict, *, show_errors: bool = True) -> Html:
    label_w = max(text_width(m + " ᴿ ↓", 12) for m, _ in metrics) + 14
    track_w, value_w, row_h, top = 300.0, 92.0, 24.0, 20.0
    width = label_w + track_w + value_w
    height = top + row_h * len(metrics) + 4
    svg = [svg_open("metrics", width, height, f"{component} metrics with 95% CI",
                    data_component=component)]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        svg.append(gridline(label_w + tick * track_w, top - 4, height - 2, top - 8, f"{tick:g}"))
    for i, (metric, s) in enumerate(metrics):
        y = top + i * row_h
        mid = y + row_h / 2
        lower = _lower_is_better(s)
        about = s.declaration.description if s.declaration is not None else ""
        mean = clamp(s.mean or 0.0)
        run = s.scope == "run"
        tip = (f"{component}.{metric}{' (one value per run)' if run else ''}: {number(s.mean)}"
               + (f" (95% CI {ci_range(s.ci95)})" if s.ci95 else "")
               + f", n = {s.n}" + (f", {s.errors} errors" if s.errors else "")
               + (" — lower is better" if lower else "") + f" · evaluator {s.evaluator}"
               + (f" — {about}" if about else ""))
        svg.append(Html("<g><title>{}</title>").format(tip))
        svg.append(Html('<text class="lbl" x="{:.1f}" y="{:.1f}" text-anchor="end">{}{}{}'
                        "</text>").format(
            label_w - 8, mid, metric,
            Html('<tspan class="muted"> ᴿ</tspan>') if run else "",
            Html('<tspan class="muted"> ↓</tspan>') if lower else ""))
        svg.append(track(label_w, y + 5, track_w, row_h - 10, 3))
        if mean > 0:
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="3" '
                            'fill="{}" fill-opacity="{}"/>').format(
                label_w, y + 5, mean * track_w, row_h - 10, colour, 0.55 if lower else 0.9))
        if s.ci95:
            lo, hi = (clamp(v) for v in s.ci95)
            svg.append(whisker(label_w + lo * track_w, label_w + hi * track_w, mid, 4))
        for g in gates.get((component, metric), []):
            if 0 <= g.threshold <= 1:
                gx = label_w + g.threshold * track_w
                svg.append(Html('<line class="{}" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" '
                                'y2="{:.1f}"><title>{}</title></line>').format(
                    "gate" if g.passed else "gate failed", gx, y + 2, gx, y + row_h - 2,
                    f"gate {g.name}: " + ("pass" if g.passed else "FAIL")))
        err = (Html('<tspan class="bad-text" dx="5">{} err</tspan>').format(s.errors)
               if s.errors and show_errors else "")
        svg.append(Html('<text class="val" x="{:.1f}" y="{:.1f}">{}{}</text></g>').format(
            label_w + track_w + 8, mid, number(s.mean), err))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def latency_chart(timed: list[tuple[str, ComponentReport]], colours: dict[str, str]) -> Html:
    top_value = max((c.cost.latency_ms.get("p95") or c.cost.latency_ms.get("p50") or 0.0)
                    for _, c in timed)
    axis = nice_max(top_value)
    label_w = max(text_width(n, 13) for n, _ in timed) + 16
    track_w, value_w, row_h, top = 320.0, 160.0, 30.0, 22.0
    width = label_w + track_w + value_w
    height = top + row_h * len(timed) + 6
    svg = [svg_open("latency", width, height, "latency per component, p50 and p95",
                    id="latency-chart")]
    for i in range(5):
        svg.append(gridline(label_w + track_w * i / 4, top - 4, height - 2, top - 8,
                            f"{axis * i / 4:g}{' ms' if i == 4 else ''}"))
    for i, (name, comp) in enumerate(timed):
        lat = comp.cost.latency_ms
        p50, p95 = lat.get("p50") or 0.0, lat.get("p95")
        y = top + i * row_h
        mid = y + row_h / 2
        colour = colours[name]
        svg.append(Html("<g><title>{}</title>").format(
            f"{name}: p50 {latency(p50)}, p95 {latency(p95)}, mean {latency(lat.get('mean'))}"))
        svg.append(bar_label(label_w - 10, mid, name))
        if p95 is not None and p95 > p50:
            x95 = label_w + p95 / axis * track_w
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="3" '
                            'fill="{}" fill-opacity="0.25"/>').format(
                label_w, y + 7, p95 / axis * track_w, row_h - 14, colour))
            svg.append(Html('<line class="p95" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" '
                            'stroke="{}"/>').format(x95, y + 4, x95, y + row_h - 4, colour))
        svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="3" '
                        'fill="{}"/>').format(label_w, y + 7, max(p50 / axis * track_w, 1),
                                              row_h - 14, colour))
        svg.append(Html('<text class="val" x="{:.1f}" y="{:.1f}"><tspan class="strong">{}</tspan>'
                        '<tspan class="muted" dx="6">p95 {}</tspan></text></g>').format(
            label_w + track_w + 10, mid, latency(p50), latency(p95)))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def share_bar(totals: list[tuple[str, float]], colours: dict[str, str]) -> Html:
    total = sum(v for _, v in totals)
    width, bar_h = 520.0, 28.0
    legend_rows = math.ceil(len(totals) / 2)
    height = bar_h + 16 + legend_rows * 22
    svg = [svg_open("share", width, height, "share of total latency per component")]
    x = 0.0
    for name, value in totals:
        w = value / total * width if total else 0
        if w > 0:
            svg.append(Html('<rect x="{:.1f}" y="0" width="{:.1f}" height="{}" fill="{}"><title>'
                            "{}</title></rect>").format(
                x, max(w - 1.5, 0.5), bar_h, colours[name],
                f"{name}: {percent(value / total)} of {latency(total)}"))
            if w > 40:
                svg.append(Html('<text class="seg" x="{:.1f}" y="{}" text-anchor="middle">{}'
                                "</text>").format(x + w / 2, bar_h / 2, percent(value / total)))
        x += w
    for i, (name, value) in enumerate(totals):
        lx = (i % 2) * width / 2
        ly = bar_h + 22 + (i // 2) * 22
        svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="11" height="11" rx="2" fill="{}"/>'
                        '<text class="lbl" x="{:.1f}" y="{:.1f}">{}<tspan class="muted" dx="6">'
                        "{} · {}</tspan></text>").format(
            lx, ly - 6, colours[name], lx + 17, ly, name,
            percent(value / total if total else 0), latency(value)))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def confusion_svg(cm: dict[str, Any]) -> Html:
    labels = [str(x) for x in cm["labels"]]
    counts = [[int(v) for v in row] for row in cm["counts"]]
    if len(counts) != len(labels) or any(len(r) != len(labels) for r in counts):
        raise ValueError("confusion matrix is not square")
    rows_name, cols_name = cm.get("rows", "gold"), cm.get("columns", "predicted")
    longest = max((text_width(x, 12) for x in labels), default=30)
    cell = max(54.0, longest + 14)
    left = longest + 44
    top = 56.0
    n = len(labels)
    width = left + cell * n + 10
    height = top + cell * n + 10
    middle = top + cell * n / 2
    svg = [svg_open("confusion", width, height,
                    f"confusion matrix ({rows_name} × {cols_name})", id="confusion-matrix")]
    svg.append(Html('<text class="axis-title" x="{:.1f}" y="14" text-anchor="middle">{} →'
                    "</text>").format(left + cell * n / 2, cols_name))
    svg.append(Html('<text class="axis-title" x="14" y="{m:.1f}" text-anchor="middle" '
                    'transform="rotate(-90 14 {m:.1f})">← {name}</text>').format(
        m=middle, name=rows_name))
    for j, label in enumerate(labels):
        svg.append(Html('<text class="lbl" x="{:.1f}" y="{}" text-anchor="middle">{}</text>'
                        ).format(left + cell * j + cell / 2, top - 12, label))
    for i, row in enumerate(counts):
        total = sum(row)
        y = top + cell * i
        svg.append(bar_label(left - 8, y + cell / 2, labels[i]))
        for j, value in enumerate(row):
            x = left + cell * j
            frac = value / total if total else 0.0
            if value == 0:
                fill, opacity, dark = "var(--track)", 1.0, False
            else:
                fill = "#16a34a" if i == j else "#dc2626"
                opacity = 0.15 + 0.85 * frac
                dark = opacity > 0.55
            tip = (f"{rows_name} {labels[i]} → {cols_name} {labels[j]}: {value} cases "
                   f"({percent(frac)} of the row)")
            svg.append(Html('<g><title>{}</title><rect x="{:.1f}" y="{:.1f}" width="{:.1f}" '
                            'height="{:.1f}" rx="4" fill="{}" fill-opacity="{:.2f}"/>'
                            '<text class="{}" x="{:.1f}" y="{:.1f}" text-anchor="middle">{}'
                            "</text></g>").format(
                tip, x + 1, y + 1, cell - 2, cell - 2, fill, opacity,
                "cell on-dark" if dark else "cell", x + cell / 2, y + cell / 2, value))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def reliability_svg(bins: list[dict[str, Any]]) -> Html:
    size, pad = 200.0, 40.0
    width, height = size + pad + 20, size + pad + 10
    svg = [svg_open("reliability", width, height, "reliability diagram")]
    x0, y0 = pad, 10.0
    svg.append(Html('<rect class="track" x="{}" y="{}" width="{}" height="{}"/>').format(
        x0, y0, size, size))
    for t in (0, 0.5, 1):
        svg.append(Html('<text class="tick" x="{:.1f}" y="{:.1f}" text-anchor="middle">{:g}'
                        '</text><text class="tick" x="{:.1f}" y="{:.1f}" text-anchor="end">{:g}'
                        "</text>").format(x0 + t * size, y0 + size + 14, t, x0 - 6,
                                          y0 + size - t * size, t))
    svg.append(Html('<text class="tick" x="{:.1f}" y="{:.1f}" text-anchor="middle">confidence'
                    "</text>").format(x0 + size / 2, y0 + size + 28))
    most = max((int(b.get("cases", 0)) for b in bins), default=1) or 1
    for b in bins:
        lo, hi = float(b["lower"]), float(b["upper"])
        acc = float(b["accuracy"])
        tip = (f"confidence [{lo:.2f}, {hi:.2f}): {b.get('cases', 0)} cases, mean confidence "
               f"{number(b.get('confidence'))}, accuracy {number(acc)}")
        svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" '
                        'fill="#4f46e5" fill-opacity="{:.2f}"><title>{}</title></rect>').format(
            x0 + lo * size + 1, y0 + size - acc * size, (hi - lo) * size - 2, acc * size,
            0.3 + 0.6 * int(b.get("cases", 0)) / most, tip))
    svg.append(Html('<line class="diag" x1="{}" y1="{}" x2="{}" y2="{}"/>').format(
        x0, y0 + size, x0 + size, y0))
    svg.append(Html('<text class="tick" x="10" y="{m:.1f}" text-anchor="middle" '
                    'transform="rotate(-90 10 {m:.1f})">accuracy</text>').format(m=y0 + size / 2))
    svg.append(Html("</svg>"))
    return Html("").join(svg)
