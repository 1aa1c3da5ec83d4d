"""The run history (:class:`evalharness.history.History`) as history.html, history.md,
history.json and the terminal table; it reads no run folder.

history.html is ``templates/history.html`` (extends ``base.html``, with the monitor's CSS for
its charts); the charts are the monitor's — a metric over time with CI whiskers and dashed
thresholds, and stacked shares per bar (:mod:`evalharness.monitor.report_render`) — drawn
over runs instead of windows, so one look serves both pages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalharness import pages
from evalharness.charts import INTERACTION, PALETTE
from evalharness.compare import MetricComparison, fmt_delta
from evalharness.errors import InputError
from evalharness.formatting import fmt_p, number, percent
from evalharness.history import Group, History, Step
from evalharness.monitor.report_render import (
    CSP,
    cell,
    pct_ci,
    root_cause_chart,
    when,
    window_metric_chart,
)

MARKS = {"improved": "▲", "regressed": "▼", "changed": "Δ"}
"""How a significant change reads next to a value: better, worse, moved (no better way)."""

TERMINAL_RUNS = 10
"""The terminal table shows the last this many runs of a group; the page shows every run."""


def colours_of(group: Group) -> dict[str, str]:
    """Component colours in pipeline order, as report.html assigns them; ``unattributed``
    grey."""
    out = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(group.components)}
    out["unattributed"] = INTERACTION
    return out


def change_text(row: MetricComparison) -> str:
    """One significant change as a line says it.

    >>> from evalharness.compare import compare_metric
    >>> row = compare_metric("g", "f1", {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0,
    ...                      "f": 1.0}, {k: 0.0 for k in "abcdef"})
    >>> change_text(row)
    'f1 ▼ 1.000 → 0.000 (Δ -1.000, 95% CI -1.000…-1.000, p 0.031, 6 pairs)'
    """
    ci = "" if row.ci95 is None else \
        f", 95% CI {fmt_delta(row.ci95[0])}…{fmt_delta(row.ci95[1])}"
    return (f"{row.metric} {MARKS.get(row.status, '')} {number(row.mean_a)} → "
            f"{number(row.mean_b)} (Δ {fmt_delta(row.delta)}{ci}, p {fmt_p(row.p_value)}, "
            f"{row.n_paired} pairs)")


def step_summary(step: Step, group: Group) -> str:
    """What happened between a run and the one before it, in one sentence."""
    run, before = group.runs[step.after], group.runs[step.before]
    if not step.tested:
        return f"{run.label} vs {before.label}: not tested — {step.note}"
    if not step.changes:
        return (f"{run.label} vs {before.label}: no significant change in {step.tests} "
                f"tested metrics ({step.shared_cases} shared cases)")
    parts = []
    for comp in step.components:
        rows = [r for r in step.changes if r.component == comp]
        kinds = {s: sum(1 for r in rows if r.status == s) for s in MARKS}
        parts.append(f"{comp} " + ", ".join(f"{n} {s}" for s, n in kinds.items() if n))
    return (f"{run.label} vs {before.label}: {step.direction}, starting at {step.first} — "
            + "; ".join(parts) + f" ({step.shared_cases} shared cases)"
            + ("; the bottleneck moved to " + str(run.bottleneck) if step.bottleneck_moved
               else ""))


# --------------------------------------------------------------------------------------------
# history.html
# --------------------------------------------------------------------------------------------


def _charts(group: Group, colours: dict[str, str]) -> dict[str, Any]:
    """The group's share chart and, per component, one chart per metric."""
    labels = [r.label for r in group.runs]
    changes = {(s.after, r.component, r.metric): r for s in group.steps for r in s.changes}
    per_component = []
    for comp in group.components:
        charts = []
        for series in (s for s in group.metrics if s.component == comp):
            points = [(label, p.model_dump() if p else None)
                      for label, p in zip(labels, series.points, strict=True)]
            titles = {i: f"{labels[i]}: " + change_text(changes[(i, comp, series.metric)])
                      for i in series.marked}
            chart = window_metric_chart(
                comp, series.metric, points, colours[comp], alarmed=set(series.marked),
                lines=[(t.kind, t.op, t.threshold) for t in series.thresholds], per="run",
                ring="change-ring", ring_titles=titles)
            charts.append((series, chart))
        if charts:
            per_component.append((comp, charts))
    bars = [{"start": r.started_at, "root_causes": {
        "failed": int((r.end_to_end or {}).get("failed") or 0),
        "shares": {c: {"share": s.share, "count": s.failures, "ci95": s.ci95}
                   for c, s in r.shares.items()}}} for r in group.runs]
    shares = root_cause_chart(bars, "run", colours, labels=labels, what="cases") \
        if any(b["root_causes"]["failed"] for b in bars) else None
    return {"metrics": per_component, "shares": shares}


def render_html(history: History) -> str:
    """The whole history.html."""
    groups = []
    for i, group in enumerate(history.groups):
        colours = colours_of(group)
        groups.append({"id": f"group-{i + 1}", "group": group, "colours": colours,
                       "charts": _charts(group, colours),
                       "summaries": {s.after: step_summary(s, group) for s in group.steps}})
    nav = [(f"#{g['id']}", g["group"].name) for g in groups]
    return pages.render("history.html", csp=CSP, history=history, groups=groups, nav=nav,
                        marks=MARKS, change_text=change_text, when=when, pct_ci=pct_ci, fmt_p=fmt_p,
                        interaction=INTERACTION)


# --------------------------------------------------------------------------------------------
# history.md
# --------------------------------------------------------------------------------------------


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out + [""]


def _value(group: Group, series_index: int, run: int) -> str:
    series = group.metrics[series_index]
    point = series.points[run]
    if point is None:
        return "—"
    mark = next((MARKS[r.status] for s in group.steps if s.after == run for r in s.changes
                 if (r.component, r.metric) == (series.component, series.metric)), "")
    return f"{number(point.mean)}{' ' + mark if mark else ''}"


def render_markdown(history: History) -> str:
    """history.md: the runs, every metric per run (▲ ▼ Δ where it changed significantly), and
    the changes."""
    lines = ["# Run history", ""]
    grouped = "Runs grouped by scenario name" if history.grouped_by == "scenario" else \
        "Every run in one group"
    lines += [f"{grouped}, in start order; each run compared with the one before it over their "
              f"shared cases (paired permutation test, {significance(history)}; ▲ better, "
              "▼ worse, Δ changed).", ""]
    lines += [f"> {cell(w)}" for w in history.warnings]
    for group in history.groups:
        lines += [f"## {cell(group.name)}", ""]
        moved = {st.after: st.direction for st in group.steps}
        lines += _table(["run", "started", "folder", "scenario", "cases", "end to end",
                         "bottleneck", "gates failed", "change"],
                        [[r.label, when(r.started_at), r.path, r.scenario, r.cases,
                          percent((r.end_to_end or {}).get("pass_rate")),
                          f"{r.bottleneck} {percent(r.shares[r.bottleneck].share)}"
                          if r.bottleneck in r.shares else "—",
                          ", ".join(r.gates_failed) or "—",
                          moved.get(r.index) or ""]
                         for r in group.runs])
        lines += ["### Changes", ""]
        lines += [f"- {cell(step_summary(s, group))}" for s in group.steps] or \
            ["One run: nothing to compare."]
        lines.append("")
        for step in group.steps:
            if step.changes:
                lines += [f"<details><summary>{group.runs[step.after].label}: "
                          f"{len(step.changes)} changes</summary>", ""]
                lines += _table(["component", "metric", "before", "after", "Δ", "95% CI of Δ",
                                 "p", "pairs"],
                                [[r.component, f"{r.metric} {MARKS[r.status]}",
                                  number(r.mean_a), number(r.mean_b), fmt_delta(r.delta),
                                  "—" if r.ci95 is None else
                                  f"{fmt_delta(r.ci95[0])} to {fmt_delta(r.ci95[1])}",
                                  fmt_p(r.p_value), r.n_paired] for r in step.changes])
                lines += ["</details>", ""]
        lines += ["### Metrics", ""]
        lines += _table(["component", "metric", *(r.label for r in group.runs)],
                        [[s.component, s.metric + (" (per run)" if s.scope == "run" else
                                                   "" if s.tested else " (not tested)"),
                          *(_value(group, i, j) for j in range(len(group.runs)))]
                         for i, s in enumerate(group.metrics)])
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# The terminal
# --------------------------------------------------------------------------------------------


def print_history(history: History, console: Any) -> None:
    """Per group: a table of every metric over the last :data:`TERMINAL_RUNS` runs, the end
    to end pass rate and the bottleneck, then one line per run on what changed."""
    from rich.markup import escape
    from rich.table import Table

    style = {"improved": "green", "regressed": "bold red", "changed": "yellow"}
    for group in history.groups:
        shown = group.runs[-TERMINAL_RUNS:]
        table = Table(title=f"{group.name} — {len(group.runs)} runs"
                      + (f" (the last {len(shown)} shown)" if len(shown) < len(group.runs)
                         else ""), title_justify="left")
        table.add_column("component")
        table.add_column("metric", no_wrap=True)
        for r in shown:
            table.add_column(("[bold]" + r.label + "[/bold]") if r.marked else r.label,
                             justify="right", no_wrap=True)
        status = {(s.after, r.component, r.metric): r.status for s in group.steps
                  for r in s.changes}
        last = None
        for series in group.metrics:
            if last is not None and series.component != last:
                table.add_section()
            cells = []
            for r in shown:
                point = series.points[r.index]
                st = status.get((r.index, series.component, series.metric))
                text = "—" if point is None else number(point.mean)
                cells.append(f"[{style[st]}]{text} {MARKS[st]}[/{style[st]}]" if st else text)
            table.add_row(escape(series.component) if series.component != last else "",
                          escape(series.metric) + (" (per run)" if series.scope == "run"
                                                   else "" if series.tested
                                                   else " [dim](not tested)[/dim]"), *cells)
            last = series.component
        table.add_section()
        table.add_row("end to end", "pass rate", *(
            percent((r.end_to_end or {}).get("pass_rate")) for r in shown))
        table.add_row("bottleneck", "top (share)", *(
            f"{escape(r.bottleneck)} {percent(r.shares[r.bottleneck].share)}"
            if r.bottleneck in r.shares else "—" for r in shown))
        console.print(table)
        for r in shown:
            console.print(f"[dim]{r.label}[/dim] {when(r.started_at)}  {escape(r.path)}"
                          + ("" if r.scenario == group.name else f" ({escape(str(r.scenario))})"),
                          highlight=False)
        if not group.steps:
            console.print("[dim]one run: nothing to compare[/dim]")
        for step in group.steps:
            text = escape(step_summary(step, group))
            console.print(("[bold]" + text + "[/bold]") if step.changes else f"[dim]{text}[/dim]",
                          highlight=False)
    for warning in history.warnings:
        console.print(f"[yellow]warning: {escape(warning)}[/yellow]", highlight=False)
    console.print(f"[dim]▲ better, ▼ worse, Δ changed (no better direction): "
                  f"{significance(history)} in the paired permutation test against the run "
                  "before, over the cases both share (as `evalharness compare`).[/dim]")


def significance(history: History) -> str:
    """What makes a change significant, in words.

    >>> from evalharness.history import History
    >>> print(significance(History(grouped_by="all", alpha=0.05, correction="bh",
    ...                            resamples=2000, permutations=10000, groups=[])))
    q ≤ 0.05 (Benjamini–Hochberg over each step's metrics)
    """
    if history.correction == "bh":
        return f"q ≤ {history.alpha:g} (Benjamini–Hochberg over each step's metrics)"
    return f"p < {history.alpha:g}, each metric on its own"


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def write_history(history: History, out: Path) -> list[Path]:
    """history.json, history.md and history.html in ``out`` (made if missing)."""
    files = {"history.json": history.model_dump_json(indent=2) + "\n",
             "history.md": render_markdown(history), "history.html": render_html(history)}
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{out}: cannot write the history there ({exc}); give --out a folder "
                         "you can write to") from None
    return [out / name for name in files]

