"""Rendering a :class:`~evalharness.models.Report` for people: report.md (Markdown; every
free text made inert), the numbers in tables (``fmt``, ``pct``, ``count`` …) shared with
the terminal summary, and :func:`write_reports` (report.json, report.md and report.html, the
page drawn by :mod:`evalharness.html`). Nothing here aggregates: :mod:`evalharness.report`
builds the report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalharness import slices
from evalharness.formatting import judge_cell
from evalharness.html import render_html
from evalharness.models import (
    Bottleneck,
    CaseResult,
    HeadroomRow,
    Report,
    Slice,
    SliceVerdicts,
)


def trace_line(source: dict[str, Any]) -> str:
    """One line on where recorded traces came from and how they matched the cases."""
    how = source.get("preset") or source.get("mapping")
    return (f"`{md_text(source.get('path'))}` ({source.get('format')}"
            + (f", mapping {md_text(how)}" if how else "") + f"): {source.get('traces', 0)} "
            f"traces, {source.get('matched', 0)} matched a case, "
            f"{source.get('without_case', 0)} without a case, "
            f"{source.get('cases_without_trace', 0)} cases without a trace")


def usage_line(usage: dict) -> str:
    """One line about judge usage.

    >>> usage_line({"judgments": 4, "requests": 3, "cache_hits": 1, "prompt_tokens": 10,
    ...             "completion_tokens": 5, "errors": 0})
    '4 judgments, 3 requests, 1 cache hits, 15 tokens, 0 errors'
    >>> usage_line({"judgments": 4, "requests": 1, "cache_hits": 0, "prompt_tokens": 10,
    ...             "completion_tokens": 5, "errors": 3, "cost": 0.02, "refused": 3}).split(" — ")[1]
    '3 not requested: judge.max_cost was reached'
    """
    text = (f"{usage['judgments']} judgments, {usage['requests']} requests, "
            f"{usage['cache_hits']} cache hits, "
            f"{usage['prompt_tokens'] + usage['completion_tokens']} tokens, "
            f"{usage['errors']} errors")
    text += f", cost {usage['cost']:.4f}" if "cost" in usage else ""
    if usage.get("refused"):
        text += f" — {usage['refused']} not requested: judge.max_cost was reached"
    return text


def fmt_ci(ci: list[float] | None, digits: int = 3) -> str:
    """A confidence interval for a table.

    >>> fmt_ci([0.61234, 0.8]), fmt_ci(None)
    ('0.612–0.800', '—')
    """
    return "—" if ci is None else f"{ci[0]:.{digits}f}–{ci[1]:.{digits}f}"


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a table; ``—`` when there is none.

    >>> fmt(0.12345), fmt(None), fmt(12.0, 1)
    ('0.123', '—', '12.0')
    """
    return "—" if value is None else f"{value:.{digits}f}"


def md_text(text: Any) -> str:
    """Free text (a reason, an id, an answer quoted in one) made inert in Markdown: ``<`` is
    escaped, so no tag (``<script>``) opens in any renderer, and a table cell stays one cell.

    >>> md_text("<script>alert(1)</script> | needs >= 1\\nnext")
    '&lt;script>alert(1)&lt;/script> \\\\| needs >= 1 next'
    """
    return (str(text).replace("<", "&lt;").replace("|", "\\|").replace("\r", " ")
            .replace("\n", " "))


def render_system_errors(report: Report) -> list[str]:
    """report.md's section on the system's errors: each kind, its cases and a traceback."""
    lines = ["## System errors", "",
             f"{report.cases['system_errors']} cases failed in the system under test. The most "
             "frequent errors, each with the traceback of its first case (every case's is "
             "`trace.traceback` in results.jsonl):", ""]
    for group in report.system_errors:
        cases = "1 case" if group.count == 1 else f"{group.count} cases"
        lines.append(f"- **{md_text(group.reason)}** — {cases}, first `{md_text(group.example)}`")
        if group.traceback:
            lines += ["", *fenced(group.traceback, indent="  "), ""]
    return lines


def fenced(text: str, indent: str = "") -> list[str]:
    """``text`` as a Markdown code block whose fence no run of backticks in it can close.

    >>> fenced("a ``` b")
    ['````text', 'a ``` b', '````']
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{indent}{fence}text", *(indent + line for line in text.rstrip("\n").split("\n")),
            f"{indent}{fence}"]


def render_markdown(report: Report) -> str:
    """``report.md``: the same content as report.json, for people."""
    lines = [f"# evalharness report: {md_text(report.scenario['name'])}", ""]
    lines += [
        f"- Scenario: `{report.scenario['path']}` (sha256 `{report.scenario['sha256'][:12]}`)",
        f"- Judge: **{report.judge.get('label', report.judge.get('backend'))}**"
        + (f" — {usage_line(report.judge['usage'])}" if report.judge.get("usage") else ""),
        f"- Cases: {report.cases['evaluated']} of {report.cases['total']} evaluated, "
        + (f"each {report.repeats.n} times ({report.cases.get('results')} results), "
           if report.repeats is not None else "")
        + f"{report.cases['system_errors']} system errors",
        *([f"- Cases chosen: {md_text(report.selection['how'])}"] if report.selection else []),
        *([f"- Recorded traces: {trace_line(report.trace_source)}"]
          if report.trace_source else []),
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in report.versions.items()),
        "",
        *[f"> **The run could not do its work:** {md_text(problem)}" for problem in
          report.infrastructure],
        *([""] if report.infrastructure else []),
        *([f"> **{report.cases['system_errors']} cases failed in the system under test**: "
           "their components did not run and are in no mean below (see `trace.error` in "
           "results.jsonl, and [System errors](#system-errors) below).", ""]
          if report.cases["system_errors"] else []),
        *[f"> **Warning:** {md_text(w)}" for w in report.warnings],
        *([""] if report.warnings else []),
        "## Metrics per component",
        "",
        "Each component is scored on its own ground truth; scores are never combined. "
        "*(per run)*: one value computed over the whole run (not a mean of per-case values), "
        "with the evaluator's bootstrap interval.",
        "",
        "| component | metric | mean | 95% CI | n | errors | evaluator |",
        "|---|---|---:|---|---:|---:|---|",
    ]
    for name, comp in report.components.items():
        if not comp.metrics:
            lines.append(f"| {name} | *(no evaluator configured)* | | | | | |")
        for metric, s in comp.metrics.items():
            scope = " *(per run)*" if s.scope == "run" else ""
            lines.append(f"| {name} | {metric}{scope} | {fmt(s.mean)} | {fmt_ci(s.ci95)} | "
                         f"{s.n} | {s.errors} | {s.evaluator} |")
    errors = [(n, m, s) for n, c in report.components.items() for m, s in c.metrics.items()
              if s.error_reasons]
    if errors:
        lines += ["", "### Why some metrics could not be computed", ""]
        for name, metric, s in errors:
            for reason, count in s.error_reasons.items():
                lines.append(f"- `{name}.{metric}` × {count}: {md_text(reason)}")
    if report.system_errors:
        lines += ["", *render_system_errors(report)]
    if report.repeats is not None:
        lines += ["", *render_repeats(report)]
    if report.bottleneck is not None:
        lines += ["", *render_bottleneck(report)]
    if report.slices is not None:
        lines += ["", *render_slices(report)]
    lines += ["", "## Latency and tokens per component", "",
              "| component | ran | mean ms | p50 ms | p95 ms | share of latency | tokens "
              "(prompt / completion) | share of tokens | judge requests / cache hits / "
              "tokens |",
              "|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for name, comp in report.components.items():
        c = comp.cost
        lines.append(f"| {name} | {c.steps} | {fmt(c.latency_ms['mean'], 1)} | "
                     f"{fmt(c.latency_ms['p50'], 1)} | {fmt(c.latency_ms['p95'], 1)} | "
                     f"{pct(c.latency_share)} | {c.tokens['prompt']} / "
                     f"{c.tokens['completion']} | {pct(c.token_share)} | "
                     f"{judge_cell(comp.judge)} |")
    judged = [(n, m, s) for n, c in report.components.items() for m, s in c.metrics.items()
              if s.judge]
    if judged:
        lines += ["", "## Judge usage", "",
                  f"Judge: {report.judge.get('label')}. Requests are what this run sent; cache "
                  "hits cost nothing.", "",
                  "| metric | judgments | requests | cache hits | tokens | errors |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name, metric, s in judged:
            u = s.judge
            lines.append(f"| {name}.{metric} | {u['judgments']} | {u['requests']} | "
                         f"{u['cache_hits']} | {u['prompt_tokens'] + u['completion_tokens']} | "
                         f"{u['errors']} |")
        if report.judge.get("headroom_usage"):
            lines += ["", f"The oracle reruns (headroom) asked the judge too: "
                          f"{usage_line(report.judge['headroom_usage'])}."]
    if report.gates:
        lines += ["", "## Gates", "",
                  "A gate fails when its condition does not hold, or when more of its cases "
                  "are errors than its `max_error_rate` allows. A case whose gold route "
                  "needs the gate's component and never reached it is an error too "
                  "(*missing*).", "",
                  "| gate | value | errors | result |", "|---|---:|---:|---|"]
        for g in report.gates:
            result = "pass" if g.passed else f"**FAIL**: {md_text(g.reason or '')}"
            errors = (f"{g.errors} of {g.n}" + (f", {g.missing} missing" if g.missing else "")
                      + (f" (max {pct(g.max_error_rate)})" if g.n else ""))
            lines.append(f"| `{g.name}` | {fmt(g.value)} | {errors} | {result} |")
    for section in report.sections:
        lines += ["", f"## {section['title']}", "", section["markdown"]]
    lines += ["", "## Evaluators and settings", ""]
    for name, comp in report.components.items():
        for ev in comp.evaluators:
            settings = ", ".join(f"{k}={v}" for k, v in ev.settings.items()) or "defaults"
            lines.append(f"- {name}: `{ev.name}` ({ev.plugin} {ev.version}): {settings}")
    return "\n".join(lines) + "\n"


FLAKY_SHOWN = 50
"""Flaky cases report.md lists (report.json lists every one)."""


def repeat_line(report: Report) -> str | None:
    """One sentence on a repeated run's end-to-end outcomes, or ``None`` without repeats.

    >>> from evalharness.models import RepeatReport
    >>> r = RepeatReport(n=5, cases=51, end_to_end={"always_pass": 30, "always_fail": 15,
    ...                  "flaky": 6, "undecided": 0})
    >>> repeat_line(Report(scenario={}, judge={}, versions={}, cases={}, components={},
    ...                    gates=[], repeats=r))
    '5 repeats of 51 cases; end to end 30 always pass, 15 always fail, 6 flaky'
    """
    r = report.repeats
    if r is None:
        return None
    e = r.end_to_end
    parts = [f"{e[k]} {k.replace('_', ' ')}" for k in ("always_pass", "always_fail", "flaky",
                                                       "undecided") if e.get(k)]
    return (f"{r.n} repeats of {r.cases} cases"
            + (f" ({r.incomplete} with fewer results: the run was cut short)"
               if r.incomplete else "")
            + (f"; end to end {', '.join(parts)}" if parts else ""))


def render_repeats(report: Report) -> list[str]:
    """The report.md section on a repeated run: the outcomes over the repeats, each metric's
    spread between repeats, and the flaky cases."""
    r = report.repeats
    assert r is not None
    judge = ("the judge was asked anew in every repeat (`judge: fresh`): the spread includes "
             "the judge's own variance" if r.judge == "fresh" else
             "an answer judged before was not judged again (`judge: cached`): the spread is "
             "the system's, not the judge's")
    lines = ["## Repeats", "", f"{repeat_line(report)}. Each case ran {r.n} times; {judge}. "
             "A metric's mean is over the cases' values reduced over their repeats (the "
             "metric's reducer), and its 95% CI resamples cases with all their repeats (a "
             "cluster bootstrap): the CI the repeats would give if they were independent "
             "cases is shown beside it, too narrow (docs/repeat.md).", "",
             "| component | metric | reducer | mean | 95% CI | CI if independent | "
             "within-case SD | cases that vary |", "|---|---|---|---:|---|---|---:|---:|"]
    for name, comp in report.components.items():
        for metric, s in comp.metrics.items():
            if s.repeats is None:
                continue
            x = s.repeats
            lines.append(f"| {name} | {metric} | {x.reducer} | {fmt(s.mean)} | "
                         f"{fmt_ci(s.ci95)} | {fmt_ci(x.naive_ci95)} | {fmt(x.within_sd)} | "
                         f"{x.varying} of {s.n} |")
    lines += ["", f"### Flaky cases ({len(r.flaky)})", ""]
    if not r.flaky:
        lines.append("No case's verdict flips between repeats.")
        return lines
    lines += ["A case is flaky for a component (or end to end) when its verdict passed in "
              "some repeats and failed or erred in others.", "",
              "| case | verdict | passed | failed | errors |", "|---|---|---:|---:|---:|"]
    for f in r.flaky[:FLAKY_SHOWN]:
        lines.append(f"| {md_text(f.case)} | {f.component.replace('_', ' ')} | {f.passed} | "
                     f"{f.failed} | {f.errors} |")
    if len(r.flaky) > FLAKY_SHOWN:
        lines.append(f"\n… and {len(r.flaky) - FLAKY_SHOWN} more in report.json "
                     "(`repeats.flaky`).")
    return lines


def pct(value: float | None) -> str:
    """A share as a percentage.

    >>> pct(0.6234), pct(None), pct(1.0)
    ('62%', '—', '100%')
    """
    return "—" if value is None else f"{100 * value:.0f}%"


def pct_ci(ci: list[float] | None) -> str:
    """A confidence interval of a share.

    >>> pct_ci([0.481, 0.75]), pct_ci(None)
    ('48–75%', '—')
    """
    return "—" if ci is None else f"{100 * ci[0]:.0f}–{100 * ci[1]:.0f}%"


def count(value: float) -> str:
    """A failure count, fractional when parallel branches shared cases.

    >>> count(3.0), count(2.5)
    ('3', '2.5')
    """
    return f"{value:g}"


def headline(bottleneck: Bottleneck) -> str:
    """The one sentence of the bottleneck section."""
    e2e = bottleneck.end_to_end
    if not e2e.failed:
        return "No case fails end to end."
    top = bottleneck.ranking[0] if bottleneck.ranking else None
    if top is None or not top.failures:
        return (f"None of the {e2e.failed} failed cases starts at a failing component "
                f"({bottleneck.unattributed} unattributed, {bottleneck.unknown} unknown).")
    ci = f" (CI {pct_ci(top.ci95)})" if top.ci95 else ""
    return f"{pct(top.share)} of failed cases start at {top.component}{ci}."


def gain(row: HeadroomRow | None) -> str:
    """An oracle's pass-rate gain with its CI, for the bottleneck tables.

    >>> gain(HeadroomRow(oracle="router", components=["router"], gain=0.18, ci95=[0.1, 0.27]))
    '+18% (10–27%)'
    >>> gain(HeadroomRow(oracle="generator", components=["generator"], gain=None))
    '— (no oracle)'
    """
    if row is None:
        return "—"
    if row.gain is None:
        return "— (reruns failed)" if row.errors else "— (no oracle)"
    return f"+{pct(row.gain)}" + (f" ({pct_ci(row.ci95)})" if row.ci95 else "")


def headroom_of(bottleneck: Bottleneck) -> tuple[dict[str, HeadroomRow], HeadroomRow | None]:
    """The headroom rows by component, and the row of every oracle at once (if any)."""
    rows = bottleneck.headroom or []
    single = {r.oracle: r for r in rows if len(r.components) == 1}
    combined = next((r for r in rows if len(r.components) > 1), None)
    return single, combined


def headroom_sentence(bottleneck: Bottleneck) -> str | None:
    """What the headroom says beyond the table: the largest gain, every oracle at once."""
    if bottleneck.headroom is None:
        return (f"Oracle headroom: {bottleneck.headroom_note}." if bottleneck.headroom_note
                else None)
    single, combined = headroom_of(bottleneck)
    known = [r for r in single.values() if r.gain is not None]
    parts = []
    if known:
        best = max(known, key=lambda r: r.gain)
        parts.append(f"Replacing {best.oracle}'s output by its gold fixes {best.fixed} failed "
                     f"cases (+{pct(best.gain)} pass rate, CI {pct_ci(best.ci95)})")
    if combined is not None and combined.gain is not None:
        rest = [r.oracle for r in single.values() if r.oracle not in combined.components]
        whose = " or ".join([*rest, "interactions"])
        parts.append(f"every oracle at once ({combined.oracle}) fixes {combined.fixed} "
                     f"(pass rate {pct(combined.pass_rate)}), and {combined.still_fails} still "
                     f"fail: {whose}")
    sampled = next((r.sampled for r in bottleneck.headroom if r.sampled), None)
    if sampled:
        parts.append(f"estimated from a sample (stratified by gold route) of {sampled} of the "
                     f"{bottleneck.end_to_end.failed} failed cases (system.headroom)")
    errors = sum(r.errors for r in bottleneck.headroom)
    if errors:
        parts.append(f"{errors} reruns failed (headroom.jsonl says why)")
    return ("; ".join(parts) + ".") if parts else None


def n_cases(n: int) -> str:
    """``n cases``, singular when one.

    >>> n_cases(1), n_cases(3)
    ('1 case', '3 cases')
    """
    return f"{n} case" if n == 1 else f"{n} cases"


def runs_of(report: Report) -> str:
    """What the bottleneck counts: ``cases``, or in a repeated run ``results`` (each repeat of
    a case is one; their intervals resample whole cases)."""
    return "cases" if report.repeats is None else "results (repeats of cases)"


def render_bottleneck(report: Report) -> list[str]:
    """The report.md section on verdicts and attribution."""
    b = report.bottleneck
    e2e = b.end_to_end
    crit = report.verdict_criteria.get("end_to_end")
    rule = ""
    if crit is not None and crit.criteria:
        rule = (" by " + " and ".join(f"`{c}`" for c in crit.criteria) + f" ({crit.source})"
                + (f"; {crit.note}" if crit.note else ""))
    elif crit is not None and crit.note:
        rule = f" by {crit.note}"
    lines = ["## Bottleneck", "",
             f"End to end: **{e2e.passed} of {e2e.passed + e2e.failed}** {runs_of(report)} pass "
             f"({pct(e2e.pass_rate)}, 95% CI {pct_ci(e2e.ci95)}){rule}."
             + (f" {n_cases(e2e.errors)} without an end-to-end verdict (error)."
                if e2e.errors else ""),
             "", f"**{headline(b)}**", "",
             "Each case that fails end to end is blamed on the first failing component on the "
             "path its gold route requires (parallel branches share a case); shares are of the "
             f"end-to-end failures ({e2e.failed}), with seeded bootstrap 95% CIs over those "
             "cases "
             "(docs/bottleneck.md).", "",
             "| component | share of failures | 95% CI | failures | oracle headroom (95% CI) "
             "| verdicts pass / fail / n.a. / error | criteria |",
             "|---|---:|---|---:|---:|---|---|"]
    single, combined = headroom_of(b)
    for row in b.ranking:
        v = b.verdicts.get(row.component, {})
        c = report.verdict_criteria.get(row.component)
        criteria = ", ".join(f"`{x}`" for x in c.criteria) + f" ({c.source})" if c else ""
        lines.append(f"| {row.component} | {pct(row.share)} | {pct_ci(row.ci95)} | "
                     f"{count(row.failures)} | {gain(single.get(row.component))} | "
                     f"{v.get('pass', 0)} / {v.get('fail', 0)} / "
                     f"{v.get('not_applicable', 0)} / {v.get('error', 0)} | {criteria} |")
    lines.append(f"| *unattributed (interaction)* | {pct(b.unattributed_share)} | "
                 f"{pct_ci(b.unattributed_ci95)} | {b.unattributed} | | | |")
    if combined is not None:
        lines.append(f"| *every oracle at once* | | | | {gain(combined)} | | |")
    lines.append("")
    if b.headroom is not None:
        lines.append("Oracle headroom: each failed case is run again with one component's "
                     "output replaced by its gold (gold routes; the gold SQL and its rows; the "
                     "gold relevant chunks); the gain is the end-to-end pass rate it adds, over "
                     f"all {e2e.passed + e2e.failed} decided cases.")
        lines.append("")
    sentence = headroom_sentence(b)
    if sentence:
        lines.append(f"- {sentence}")
    masked = ", ".join(f"{c} × {n}" for c, n in b.masked_by.items())
    lines.append(f"- Masked: {n_cases(b.masked)} passed end to end although a component on "
                 "the path failed" + (f" ({masked})." if masked else "."))
    if b.unknown:
        lines.append(f"- Unknown: {n_cases(b.unknown)} could not be attributed: a verdict on "
                     "the path (or the end-to-end one) is an error.")
    silent = [name for name, c in report.verdict_criteria.items()
              if name != "end_to_end" and not c.criteria]
    if silent:
        lines.append(f"- No verdict (no usable criterion): {', '.join(silent)}.")
    worst = {c: cases for c, cases in b.worst_cases.items() if cases}
    if worst:
        lines += ["", "### Worst cases per component", ""]
        for component, cases in worst.items():
            lines.append(f"**{component}**")
            lines.append("")
            for w in cases:
                lines.append(f"- `{md_text(w.case)}`: {md_text(w.reason)}")
            lines.append("")
        lines.pop()
    return lines


def slice_cell(v: SliceVerdicts | None) -> str:
    """A slice's pass rate with its CI, for a table cell.

    >>> slice_cell(SliceVerdicts(passed=3, failed=1, pass_rate=0.75, ci95=[0.25, 1.0]))
    '75% (25–100%)'
    >>> slice_cell(SliceVerdicts(passed=0, failed=0, not_applicable=4)), slice_cell(None)
    ('n.a.', '—')
    """
    if v is None:
        return "—"
    if v.pass_rate is None:
        return "n.a." if v.not_applicable and not v.errors else "—"
    return pct(v.pass_rate) + (f" ({pct_ci(v.ci95)})" if v.ci95 else "")


def tag_counts(counts: dict[str, int], limit: int = 40) -> str:
    """Tags with their counts, at most ``limit`` of them.

    >>> tag_counts({"a": 3, "<b>": 2, "c": 1}, limit=2)
    'a (3), &lt;b> (2) and 1 more'
    """
    shown = ", ".join(f"{md_text(tag)} ({n})" for tag, n in list(counts.items())[:limit])
    return shown + (f" and {len(counts) - limit} more" if len(counts) > limit else "")


def render_slices(report: Report) -> list[str]:
    """The report.md section on slices: one row per slice, weakest end-to-end pass rate
    first (the synthetic / hand-written pair on top); the per-metric means are in
    report.json."""
    s = report.slices
    judged = [c for c in report.components if any(
        x.components.get(c) is not None and x.components[c].verdicts is not None
        for x in [*s.tags, *(s.origin or [])])]
    total = len(s.tags) + len(s.small) + len(s.beyond_cap) + s.unlisted
    lines = ["## Slices by tag", "",
             "Per-case verdict pass rates (pass / (pass + fail); not-applicable and error "
             "verdicts left out) over the cases that carry each tag, with seeded bootstrap "
             "95% CIs over those cases, weakest end-to-end pass rate first "
             f"(docs/slices.md). {len(s.tags)} of {total} tags have at least {s.min_cases} "
             "cases" + (f" (at most {s.max_tags} are sliced)" if s.beyond_cap else "")
             + "; the mean of every metric per slice is in report.json (`slices`).", "",
             "| slice | cases | end to end | " + " | ".join(judged) + " |",
             "|---|---:|---|" + "---|" * len(judged)]

    def row(x: Slice, label: str) -> str:
        cells = [slice_cell(x.components[c].verdicts if c in x.components else None)
                 for c in judged]
        return (f"| {label} | {x.cases} | {slice_cell(x.end_to_end)} | "
                + " | ".join(cells) + " |")

    for x in s.origin or []:
        lines.append(row(x, f"*{x.name}*"))
    for x in slices.weakest_first(s.tags):
        lines.append(row(x, md_text(x.name)))
    if not s.tags and not s.origin:
        lines.append(f"| *(no tag has {s.min_cases} cases)* | | |" + " |" * len(judged))
    lines.append("")
    if s.origin:
        lines.append(f"- *synthetic*: the cases tagged `{slices.SYNTHETIC_TAG}`; "
                     "*hand-written*: the others.")
    if s.small:
        lines.append(f"- Fewer than {s.min_cases} cases (not sliced): {tag_counts(s.small)}.")
    if s.beyond_cap:
        lines.append(f"- Beyond the {s.max_tags} most frequent tags (not sliced): "
                     f"{tag_counts(s.beyond_cap)}.")
    if s.unlisted:
        lines.append(f"- {s.unlisted} more tags, on fewer cases, are only counted.")
    if s.untagged:
        lines.append(f"- {n_cases(s.untagged)} without a tag.")
    if lines[-1] == "":
        lines.pop()
    return lines


def write_reports(report: Report, out_dir: Path,
                  results: Sequence[CaseResult]) -> dict[str, Path]:
    """report.json, report.md and report.html (which also shows ``results``: the failed cases
    with their traces)."""
    paths = {"json": out_dir / "report.json", "md": out_dir / "report.md",
             "html": out_dir / "report.html"}
    paths["json"].write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    paths["md"].write_text(render_markdown(report), encoding="utf-8")
    paths["html"].write_text(render_html(report, results), encoding="utf-8")
    return paths
