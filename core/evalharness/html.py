"""``report.html``: the report as one self-contained page a person would rather look at.

The markup lives in templates: ``templates/report.html`` extends the layout every page shares
(``base.html``: the CSP, the inline CSS, the console-error hooks) and includes one
``report_*.html`` per section; :mod:`evalharness.pages` renders them with autoescaping on.
This module decides what they show — the colours, the key figures, which failed cases (at
most :data:`MAX_CASES`), each case's steps and metrics — and draws the charts, as SVG, because
turning numbers into coordinates is code, not markup. What it hands over as markup (the
charts, the plugin sections' markdown) is :class:`~evalharness.pages.Html` built with
``Html.format``/``Html.join``, which escape every text they are given.

The page references no URL at all and says so in its Content-Security-Policy
(``default-src 'none'``), so opening it makes no network request. A few lines of vanilla
JavaScript filter the failed-cases list (rows are ``<details>`` elements, so they expand
without JavaScript); nothing from the run is ever put into a ``<script>``. A hidden
``<pre id="console-errors">`` collects ``window.onerror``, ``console.error``, unhandled
rejections and CSP violations, so a headless browser test can assert the page runs cleanly.

Sections: header (judge, cases, gates), the bottleneck (end-to-end failures attributed along
the pipeline, verdicts per component), the slices by tag (pass rates per tag, weakest first),
scores per component (0–1 metrics as bars with their 95% CI; other metrics in a table),
latency and tokens, routing (the router plugin's confusion matrix and calibration), the other
plugin sections, the failed cases with their traces, and the evaluators' settings.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalharness import pages
from evalharness.formatting import (
    case_count,
    ci_range,
    clamp,
    latency,
    number,
    percent,
    short,
    short_json,
)
from evalharness.models import (
    Bottleneck,
    CaseResult,
    ComponentReport,
    ComponentResult,
    MetricSummary,
    MetricValue,
    Report,
    Slice,
    Step,
    Verdict,
)
from evalharness.pages import Html
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

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
"""The page's Content-Security-Policy: no request of any kind; only its own inline CSS and
scripts run, and ``data:`` images (the empty favicon)."""

def render_html(report: Report, results: Sequence[CaseResult]) -> str:
    """The whole ``report.html`` for ``report`` and the run's case results (in case order: read
    once, and the failed cases shown — at most :data:`MAX_CASES` — again by index)."""
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(report.components)}
    routing = [s for s in report.sections if s.get("view") == "routing"]
    others = [s for s in report.sections if s.get("view") != "routing"]
    nav = [("overview", "Overview"), ("bottleneck", "Bottleneck"),
           *([("slices", "Slices")] if report.slices is not None else []),
           ("scores", "Scores"), ("cost", "Latency & tokens")]
    if routing:
        nav.append(("routing", "Routing"))
    if others:
        nav.append(("sections", "Plugin sections"))
    nav += [("cases", "Failed cases"), ("settings", "Settings")]
    return pages.render(
        "report.html",
        csp=CSP,
        report=report,
        colours=colours,
        interaction=INTERACTION,
        verdict_colours=VERDICT_COLOURS,
        nav=[(f"#{key}", label) for key, label in nav],
        judge=_judge(report),
        kpis=_kpis(report, colours),
        charts=_bottleneck_charts(report, colours) | _cost_charts(report, colours),
        slices=_slice_rows(report),
        synthetic_tag=SYNTHETIC_TAG,
        scores=_score_cards(report, colours),
        max_tokens=max((c.cost.tokens.get("total", 0) for c in report.components.values()),
                       default=0),
        routing=[_routing(s) for s in routing],
        sections=[(s.get("title", ""), s.get("plugin", ""), _markdown(str(s.get("markdown", ""))))
                  for s in others],
        cases=_cases(report, results, colours),
    )


# --------------------------------------------------------------------------------------------
# What the templates show
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kpi:
    """A key figure (``macros.kpi``): a label, the value, a line under it, a colour."""

    label: str
    value: str
    sub: str
    colour: str


def _judge(report: Report) -> dict[str, Any]:
    """The judge banner's facts: which judge, whether an LLM, and what it cost."""
    judge = report.judge
    usage = judge.get("usage")
    use = ""
    if usage:
        use = (f"{usage.get('judgments', 0)} judgments · {usage.get('requests', 0)} requests · "
               f"{usage.get('cache_hits', 0)} cache hits · "
               f"{usage.get('prompt_tokens', 0) + usage.get('completion_tokens', 0):,} tokens"
               + (f" · cost {usage['cost']:.4f}" if "cost" in usage else "")
               + (f" · {usage['refused']} not requested (judge.max_cost reached)"
                  if usage.get("refused") else ""))
    return {
        "configured": judge.get("backend") is not None,
        "label": judge.get("label") or judge.get("backend") or "no judge",
        "heuristic": judge.get("llm") is False,
        "model": judge.get("model"),
        "judged": ", ".join(f"{c}.{m}" for c, comp in report.components.items()
                            for m, s in comp.metrics.items() if s.judge),
        "usage": use,
    }


def _kpis(report: Report, colours: dict[str, str]) -> list[Kpi]:
    """The cards under the title: the end-to-end pass rate, the bottleneck, the cases, the
    gates and the slowest component."""
    cards = []
    b = report.bottleneck
    if b is not None:
        e2e = b.end_to_end
        ci = f"95% CI {percent(e2e.ci95[0])}–{percent(e2e.ci95[1])}" if e2e.ci95 else ""
        rate = e2e.pass_rate or 0
        cards.append(Kpi("end-to-end pass rate", percent(e2e.pass_rate),
                         f"{e2e.passed} of {e2e.passed + e2e.failed} cases pass"
                         + (f" · {ci}" if ci else ""),
                         "#16a34a" if rate >= 0.8 else "#dc2626" if rate < 0.5 else "#d97706"))
        top = next((r for r in b.ranking if r.share), None)
        if top is not None:
            ci = f" (95% CI {percent(top.ci95[0])}–{percent(top.ci95[1])})" if top.ci95 else ""
            cards.append(Kpi("bottleneck", top.component,
                             f"root cause of {percent(top.share)} of the end-to-end failures{ci}",
                             colours.get(top.component, PALETTE[0])))
        elif e2e.failed == 0:
            cards.append(Kpi("bottleneck", "none", "no case fails end to end", "#16a34a"))
        else:
            cards.append(Kpi("bottleneck", "interaction",
                             "no single component is the root cause", INTERACTION))
    cases = report.cases
    cards.append(Kpi("cases", str(cases.get("evaluated", 0)),
                     f"evaluated of {cases.get('total', 0)} · "
                     f"{cases.get('system_errors', 0)} system errors", "var(--muted)"))
    if report.gates:
        failed = sum(1 for g in report.gates if not g.passed)
        cards.append(Kpi("gates", f"{len(report.gates) - failed}/{len(report.gates)}",
                         "all pass" if not failed else f"{failed} failed",
                         "#16a34a" if not failed else "#dc2626"))
    slow = [(c.cost.latency_ms.get("p95"), n) for n, c in report.components.items()
            if c.cost.latency_ms.get("p95") is not None]
    if slow:
        p95, name = max(slow)
        cards.append(Kpi("slowest component", name, f"p95 {latency(p95)} per case",
                         colours.get(name, PALETTE[0])))
    return cards


def _bottleneck_charts(report: Report, colours: dict[str, str]) -> dict[str, Html | None]:
    b = report.bottleneck
    if b is None:
        return {"bottleneck": None, "verdicts": None, "headroom": None}
    return {"bottleneck": _bottleneck_chart(b, colours),
            "verdicts": _verdict_chart(b.verdicts, report) if b.verdicts else None,
            "headroom": _headroom_chart(b, colours) if b.headroom is not None else None}


def _slice_rows(report: Report) -> dict[str, Any] | None:
    """The slices table: its components (those with a verdict in some slice) and its rows
    (the synthetic / hand-written pair first, then the tags, weakest end-to-end pass rate
    first), each ``(slice, whether its name is a tag)``."""
    s = report.slices
    if s is None:
        return None
    every: list[Slice] = [*(s.origin or []), *s.tags]
    judged = [c for c in report.components
              if any(c in x.components and x.components[c].verdicts is not None
                     for x in every)]
    rows = [(x, False) for x in s.origin or []] + [(x, True) for x in weakest_first(s.tags)]
    return {"components": judged, "rows": rows,
            "total": len(s.tags) + len(s.small) + len(s.beyond_cap) + s.unlisted}


@dataclass(frozen=True)
class ScoreCard:
    """One component's card under "Scores per component"."""

    name: str
    report: ComponentReport
    colour: str
    criteria: list[str]
    chart: Html | None
    """The 0–1 metrics as bars with their CI, or ``None`` when it has none."""
    uniform_errors: int
    """When more than two 0–1 metrics share the same number of errors, that number (said once
    above the chart, not on every bar); else 0."""
    other: list[tuple[str, MetricSummary]]
    """The metrics that are not on a 0–1 scale, for the table."""
    reasons: list[tuple[str, str, int]]
    """Why metrics could not be computed: ``(metric, reason, cases)``."""


def _score_cards(report: Report, colours: dict[str, str]) -> list[ScoreCard]:
    gates: dict[tuple[str, str], list] = {}
    for g in report.gates:
        gates.setdefault((g.component, g.metric), []).append(g)
    cards = []
    for name, comp in report.components.items():
        unit = [(m, s) for m, s in comp.metrics.items() if _unit_scale(s)]
        errors = {s.errors for _, s in unit}
        uniform = len(errors) == 1 and len(unit) > 2
        crit = report.verdict_criteria.get(name)
        cards.append(ScoreCard(
            name=name, report=comp, colour=colours[name],
            criteria=list(crit.criteria) if crit else [],
            chart=(_metric_chart(name, unit, colours[name], gates, show_errors=not uniform)
                   if unit else None),
            uniform_errors=next(iter(errors)) if uniform else 0,
            other=[(m, s) for m, s in comp.metrics.items() if not _unit_scale(s)],
            reasons=[(m, r, n) for m, s in comp.metrics.items()
                     for r, n in s.error_reasons.items()]))
    return cards


def _cost_charts(report: Report, colours: dict[str, str]) -> dict[str, Html | None]:
    timed = [(n, c) for n, c in report.components.items()
             if c.cost.latency_ms.get("p50") is not None]
    if not timed:
        return {"latency": None, "share": None}
    totals = [(n, c.cost.latency_ms.get("total") or 0.0) for n, c in timed]
    return {"latency": _latency_chart(timed, colours), "share": _share_bar(totals, colours)}


@dataclass(frozen=True)
class Routing:
    """One router plugin section: its figures and charts, or only its markdown when its data
    cannot be read (a plugin's data is not trusted to have the expected shape)."""

    title: str
    markdown: Html
    facts: list[Kpi] | None = None
    """``None``: the data could not be read, and the section is its markdown alone."""
    confusion: Html | None = None
    per_route: list[tuple[str, list[float | None], Any]] | None = None
    """``(route, [precision, recall, F1], gold support)``; a value that is no number is None."""
    reliability: Html | None = None


def _routing(section: dict[str, Any]) -> Routing:
    title = section.get("title", "")
    markdown = _markdown(str(section.get("markdown", "")))
    try:
        return _routing_data(title, markdown, section.get("data") or {})
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return Routing(title, markdown)


def _routing_data(title: str, markdown: Html, data: dict[str, Any]) -> Routing:
    if "error" in data and "confusion_matrix" not in data:
        raise KeyError("error")
    facts = []
    for key, label in (("accuracy", "route-set accuracy"), ("jaccard", "mean Jaccard"),
                       ("macro_f1", "macro-F1"), ("micro_f1", "micro-F1")):
        if isinstance(data.get(key), int | float):
            facts.append(Kpi(label, number(data[key]), "", "#4f46e5"))
    cal = data.get("calibration") or {}
    metric = cal.get("metric")
    if metric and isinstance(cal.get(metric), int | float):
        facts.append(Kpi(metric.replace("@", " @ "), number(cal[metric]),
                         "calibration error ↓", "#d97706"))
    abst = data.get("abstention") or {}
    if isinstance(abst.get("rate"), int | float):
        facts.append(Kpi("abstention", percent(abst["rate"]),
                         f"{abst.get('cases', 0)} of {abst.get('of', 0)} cases", "var(--muted)"))
    cm = data.get("confusion_matrix")
    per_route = [(str(route), [v.get(k) if isinstance(v.get(k), int | float) else None
                               for k in ("precision", "recall", "f1")], v.get("support", ""))
                 for route, v in (data.get("per_route") or {}).items()]
    bins = [b for b in cal.get("reliability") or [] if isinstance(b, dict)]
    return Routing(title, markdown, facts=facts,
                   confusion=_confusion_svg(cm) if cm else None, per_route=per_route,
                   reliability=_reliability_svg(bins) if bins else None)


# --------------------------------------------------------------------------------------------
# Failed cases
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowsTable:
    """The first :data:`MAX_ROWS` rows a text-to-SQL step returned."""

    columns: list[str]
    rows: list[list[Any]]
    note: str


@dataclass(frozen=True)
class StepView:
    """What one component did for a case, as the case's "What the system did" shows it.

    ``form`` says how: ``raw`` (a plugin step that is no :class:`Step`: its JSON), ``routes``,
    ``sql`` (with ``table``), ``ids`` (ranked chunk ids with their gold grade), ``answer``, or
    ``json`` (any other step)."""

    component: str
    form: str
    text: str = ""
    meta: str = ""
    """Latency and tokens of the step."""
    error: str | None = None
    confidence: float | None = None
    ids: list[tuple[int, str, Any]] | None = None
    table: RowsTable | None = None


@dataclass(frozen=True)
class MetricRow:
    """One metric of a case, with the evidence worth reading: its reason, else its details."""

    name: str
    failed: bool
    value: MetricValue
    reason: str
    details: str


@dataclass(frozen=True)
class MetricBlock:
    """One component's verdict and metric values for a case."""

    component: str
    verdict: Verdict | None
    result: ComponentResult | None
    rows: list[MetricRow]


@dataclass(frozen=True)
class CaseView:
    """One row of the failed-cases list and what it expands to."""

    result: CaseResult
    causes: list[str]
    reason: str
    text: str
    """What the filter box searches (lower case)."""
    gold: list[tuple[str, str, bool]]
    """``(label, value, preformatted)``."""
    steps: list[StepView]
    metrics: list[MetricBlock]


def _cases(report: Report, results: Sequence[CaseResult],
           colours: dict[str, str]) -> dict[str, Any]:
    picked, total, how = _pick_cases(report, results)
    shown = [_case_view(results[i], report) for i in picked]
    tally = Counter(c for v in shown for c in v.causes)
    comp_order = list(report.components)
    keys = sorted(tally, key=lambda k: (comp_order.index(k) if k in comp_order
                                        else len(comp_order), k))
    return {"total": total, "of": len(results), "how": how, "shown": shown,
            "chips": [(key, tally[key], colours.get(key, INTERACTION)) for key in keys]}


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
            if _unit_scale(s)}
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


def _case_view(r: CaseResult, report: Report) -> CaseView:
    causes = _causes(r)
    reason = _case_reason(r)
    gold = r.case.gold
    shown: list[tuple[str, str, bool]] = []
    if gold.routes is not None:
        shown.append(("routes", " + ".join(gold.routes) or "none (abstain)", False))
    if gold.sql:
        shown.append(("SQL", gold.sql, True))
    if gold.relevant is not None:
        shown.append(("relevant chunks (grade)",
                      ", ".join(f"{k} ({v})" for k, v in gold.relevant.items())
                      or "judged: none relevant", False))
    if gold.answer:
        shown.append(("answer", gold.answer, False))
    return CaseView(result=r, causes=causes, reason=reason,
                    text=" ".join([r.case.id, r.case.question, reason, *causes]).lower(),
                    gold=shown, steps=_steps(r, report), metrics=_case_metrics(r, report))


def _steps(r: CaseResult, report: Report) -> list[StepView]:
    relevant = r.case.gold.relevant or {}
    out = []
    for comp in report.components:
        step = r.trace.step(comp)
        if step is None:
            continue
        if not isinstance(step, Step):
            out.append(StepView(comp, "raw", short_json(step, 1500)))
            continue
        bits = []
        if step.latency_ms is not None:
            bits.append(latency(step.latency_ms))
        if step.usage is not None and step.usage.total_tokens:
            bits.append(f"{step.usage.total_tokens:,} tokens")
        common = {"component": comp, "meta": " · ".join(bits), "error": step.error}
        kind = report.components[comp].kind
        if kind == "router" and hasattr(step, "routes"):
            out.append(StepView(form="routes", text=" + ".join(step.routes) or "abstained",
                                confidence=getattr(step, "confidence", None), **common))
        elif kind == "text2sql" and hasattr(step, "sql"):
            out.append(StepView(form="sql", text=step.sql or "(no SQL)",
                                table=_rows_table(step), **common))
        elif kind == "retriever" and hasattr(step, "ids"):
            out.append(StepView(form="ids", ids=[(rank, cid, relevant.get(cid))
                                                 for rank, cid in enumerate(step.ids, 1)],
                                **common))
        elif kind == "generator" and hasattr(step, "answer"):
            out.append(StepView(form="answer", text=step.answer or "(no answer)", **common))
        else:
            out.append(StepView(form="json",
                                text=short_json(step.model_dump(mode="json"), 1500), **common))
    return out


def _rows_table(step: Any) -> RowsTable | None:
    rows = step.rows
    if rows is None:
        return None
    cols = step.columns or [f"col{i + 1}" for i in range(max((len(r) for r in rows), default=0))]
    note = (f"first {MAX_ROWS} of {len(rows)} rows" if len(rows) > MAX_ROWS
            else f"{len(rows)} row{'s' if len(rows) != 1 else ''}")
    return RowsTable(list(cols), [list(row) for row in rows[:MAX_ROWS]], note)


def _case_metrics(r: CaseResult, report: Report) -> list[MetricBlock]:
    blocks = []
    names = list(report.components) + [c for c in r.components if c not in report.components]
    for comp in names:
        c = r.components.get(comp)
        v = r.verdicts.get(comp)
        if c is None and v is None:
            continue
        failed = set(v.failed) if v is not None else set()
        rows = [MetricRow(name, name in failed, m, *_metric_detail(m))
                for name, m in (c.metrics.items() if c is not None else ())]
        blocks.append(MetricBlock(comp, v, c, rows))
    return blocks


def _metric_detail(m: MetricValue) -> tuple[str, str]:
    """The evidence of a metric value worth a line: its reason (cut to 600 characters) and the
    rest of its details as JSON (cut), or the details alone when there is no reason."""
    details = {k: v for k, v in m.details.items()
               if k not in ("judgments", "judge", "counterexample")}
    if m.error or not details:
        return "", ""
    reason = details.get("reason")
    if isinstance(reason, str) and reason:
        rest = {k: v for k, v in details.items() if k != "reason"}
        return short(reason, 600), short_json(rest, 200) if rest else ""
    return "", short_json(details, 400)


# --------------------------------------------------------------------------------------------
# Charts: SVG drawn from numbers
# --------------------------------------------------------------------------------------------


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


def _unit_scale(summary: MetricSummary) -> bool:
    """Whether a metric belongs on a 0–1 bar chart: its plugin declares its range 0–1 (a
    metric without a declaration goes in the table of other metrics)."""
    declared = summary.declaration
    return summary.mean is not None and declared is not None and declared.unit_scale


def _lower_is_better(summary: MetricSummary) -> bool:
    """Whether the metric's plugin declares that lower is better."""
    return summary.declaration is not None and summary.declaration.direction == "lower"


def _svg_open(cls: str, width: float, height: float, label: str, **attrs: str) -> Html:
    """The ``<svg>`` tag of a chart; ``attrs`` are more attributes (``data_x`` → ``data-x``).

    >>> _svg_open("c", 10, 5, "a <b>", id="x", data_names="p q")
    Html('<svg class="chart c" viewBox="0 0 10 5" width="10" height="5" role="img" aria-label="a &lt;b&gt;" id="x" data-names="p q">')
    """
    more = Html("").join(Html(' {}="{}"').format(k.replace("_", "-"), v)
                         for k, v in attrs.items())
    return Html('<svg class="chart {}" viewBox="0 0 {:.0f} {:.0f}" width="{:.0f}" '
                'height="{:.0f}" role="img" aria-label="{}"{}>').format(
        cls, width, height, width, height, label, more)


def _whisker(x1: float, x2: float, y: float, cap: float = 5) -> Html:
    return Html('<g class="whisker"><line x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}"/>'
                '<line x1="{x1:.1f}" y1="{top:.1f}" x2="{x1:.1f}" y2="{bottom:.1f}"/>'
                '<line x1="{x2:.1f}" y1="{top:.1f}" x2="{x2:.1f}" y2="{bottom:.1f}"/></g>'
                ).format(x1=x1, x2=x2, y=y, top=y - cap, bottom=y + cap)


def _gridline(x: float, top: float, bottom: float, label_y: float, label: str) -> Html:
    """A vertical grid line of a bar chart and its tick label above it."""
    return Html('<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom:.1f}"/>'
                '<text class="tick" x="{x:.1f}" y="{label_y}" text-anchor="middle">{label}</text>'
                ).format(x=x, top=top, bottom=bottom, label_y=label_y, label=label)


def _bar_label(x: float, y: float, label: str) -> Html:
    return Html('<text class="lbl" x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>').format(
        x, y, label)


def _track(x: float, y: float, width: float, height: float, rx: float) -> Html:
    return Html('<rect class="track" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" '
                'rx="{:g}"/>').format(x, y, width, height, rx)


def _bottleneck_chart(b: Bottleneck, colours: dict[str, str]) -> Html:
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
                     id="bottleneck-chart", data_components=names), _defs()]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        svg.append(_gridline(label_w + tick * track, top - 6, height - 4, top - 10,
                             f"{tick * 100:.0f}%"))
    for i, (name, label, share, ci, failures, colour) in enumerate(rows):
        y = top + i * row_h
        mid = y + row_h / 2
        w = (share or 0) * track
        tip = (f"{label}: {percent(share)} of the end-to-end failures ({case_count(failures)} "
               "cases)" + (f", 95% CI {percent(ci[0])}–{percent(ci[1])}" if ci else ""))
        svg.append(Html('<g class="bar" data-component="{}"><title>{}</title>').format(name, tip))
        svg.append(_bar_label(label_w - 10, mid, label))
        svg.append(_track(label_w, y + 7, track, row_h - 14, 4))
        if w > 0:
            interaction = name == "interaction"
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="4" '
                            'fill="{}"{}/>').format(
                label_w, y + 7, w, row_h - 14, "url(#hatch)" if interaction else colour,
                Html(' stroke="{}"').format(INTERACTION) if interaction else ""))
        if ci:
            svg.append(_whisker(label_w + ci[0] * track, label_w + ci[1] * track, mid, 6))
        svg.append(Html('<text class="val" x="{:.1f}" y="{:.1f}"><tspan class="strong">{}</tspan>'
                        '<tspan class="muted" dx="6">{} cases</tspan></text></g>').format(
            label_w + track + 10, mid, percent(share), case_count(failures)))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def _headroom_chart(b: Bottleneck, colours: dict[str, str]) -> Html:
    """Per oracle: the run's pass rate (grey) and the gain (colour) with the gain's CI."""
    base = b.end_to_end.pass_rate or 0.0
    rows = b.headroom or []
    labels = [r.oracle if len(r.components) == 1 else "every oracle at once" for r in rows]
    label_w = max((_text_width(t, 13) for t in labels), default=60) + 16
    track, value_w, row_h, top = 330.0, 150.0, 34.0, 24.0
    width = label_w + track + value_w
    height = top + row_h * max(len(rows), 1) + 8
    svg = [_svg_open("headroom", width, height,
                     "end-to-end pass rate with each component's oracle", id="headroom-chart")]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        svg.append(_gridline(label_w + tick * track, top - 6, height - 4, top - 10,
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
        svg.append(_bar_label(label_w - 10, mid, label))
        svg.append(_track(label_w, y + 7, track, row_h - 14, 4))
        if base > 0:
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="4" '
                            'fill="#cbd5e1"/>').format(label_w, y + 7, base * track, row_h - 14))
        if row.gain:
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" '
                            'fill="{}"/>').format(label_w + base * track, y + 7,
                                                  row.gain * track, row_h - 14, colour))
        if row.ci95 and row.gain is not None:
            svg.append(_whisker(label_w + (base + row.ci95[0]) * track,
                                label_w + (base + row.ci95[1]) * track, mid, 6))
        fixed = (Html('<tspan class="muted" dx="6">{} fixed</tspan>').format(row.fixed)
                 if row.gain is not None else "")
        svg.append(Html('<text class="val" x="{:.1f}" y="{:.1f}"><tspan class="strong">{}'
                        "</tspan>{}</text></g>").format(label_w + track + 10, mid, value, fixed))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def _defs() -> Html:
    return Html('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
                'patternTransform="rotate(45)"><rect width="6" height="6" fill="{c}" '
                'fill-opacity="0.35"/><line x1="0" y1="0" x2="0" y2="6" stroke="{c}" '
                'stroke-width="3"/></pattern></defs>').format(c=INTERACTION)


def _verdict_chart(verdicts: dict[str, dict[str, int]], report: Report) -> Html:
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
        svg.append(_bar_label(label_w - 10, mid, comp))
        x = label_w
        for s in statuses:
            n = counts.get(s, 0)
            if not n or not total:
                continue
            w = n / total * track
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
        x += _text_width(s, 11) + 34
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def _metric_chart(component: str, metrics: list[tuple[str, MetricSummary]], colour: str,
                  gates: dict, *, show_errors: bool = True) -> Html:
    label_w = max(_text_width(m + " ᴿ ↓", 12) for m, _ in metrics) + 14
    track, value_w, row_h, top = 300.0, 92.0, 24.0, 20.0
    width = label_w + track + value_w
    height = top + row_h * len(metrics) + 4
    svg = [_svg_open("metrics", width, height, f"{component} metrics with 95% CI",
                     data_component=component)]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        svg.append(_gridline(label_w + tick * track, top - 4, height - 2, top - 8, f"{tick:g}"))
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
        svg.append(_track(label_w, y + 5, track, row_h - 10, 3))
        if mean > 0:
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="3" '
                            'fill="{}" fill-opacity="{}"/>').format(
                label_w, y + 5, mean * track, row_h - 10, colour, 0.55 if lower else 0.9))
        if s.ci95:
            lo, hi = (clamp(v) for v in s.ci95)
            svg.append(_whisker(label_w + lo * track, label_w + hi * track, mid, 4))
        for g in gates.get((component, metric), []):
            if 0 <= g.threshold <= 1:
                gx = label_w + g.threshold * track
                svg.append(Html('<line class="{}" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" '
                                'y2="{:.1f}"><title>{}</title></line>').format(
                    "gate" if g.passed else "gate failed", gx, y + 2, gx, y + row_h - 2,
                    f"gate {g.name}: " + ("pass" if g.passed else "FAIL")))
        err = (Html('<tspan class="bad-text" dx="5">{} err</tspan>').format(s.errors)
               if s.errors and show_errors else "")
        svg.append(Html('<text class="val" x="{:.1f}" y="{:.1f}">{}{}</text></g>').format(
            label_w + track + 8, mid, number(s.mean), err))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def _latency_chart(timed: list[tuple[str, ComponentReport]], colours: dict[str, str]) -> Html:
    top_value = max((c.cost.latency_ms.get("p95") or c.cost.latency_ms.get("p50") or 0.0)
                    for _, c in timed)
    axis = _nice_max(top_value)
    label_w = max(_text_width(n, 13) for n, _ in timed) + 16
    track, value_w, row_h, top = 320.0, 160.0, 30.0, 22.0
    width = label_w + track + value_w
    height = top + row_h * len(timed) + 6
    svg = [_svg_open("latency", width, height, "latency per component, p50 and p95",
                     id="latency-chart")]
    for i in range(5):
        svg.append(_gridline(label_w + track * i / 4, top - 4, height - 2, top - 8,
                             f"{axis * i / 4:g}{' ms' if i == 4 else ''}"))
    for i, (name, comp) in enumerate(timed):
        lat = comp.cost.latency_ms
        p50, p95 = lat.get("p50") or 0.0, lat.get("p95")
        y = top + i * row_h
        mid = y + row_h / 2
        colour = colours[name]
        svg.append(Html("<g><title>{}</title>").format(
            f"{name}: p50 {latency(p50)}, p95 {latency(p95)}, mean {latency(lat.get('mean'))}"))
        svg.append(_bar_label(label_w - 10, mid, name))
        if p95 is not None and p95 > p50:
            x95 = label_w + p95 / axis * track
            svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="3" '
                            'fill="{}" fill-opacity="0.25"/>').format(
                label_w, y + 7, p95 / axis * track, row_h - 14, colour))
            svg.append(Html('<line class="p95" x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" '
                            'stroke="{}"/>').format(x95, y + 4, x95, y + row_h - 4, colour))
        svg.append(Html('<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" rx="3" '
                        'fill="{}"/>').format(label_w, y + 7, max(p50 / axis * track, 1),
                                              row_h - 14, colour))
        svg.append(Html('<text class="val" x="{:.1f}" y="{:.1f}"><tspan class="strong">{}</tspan>'
                        '<tspan class="muted" dx="6">p95 {}</tspan></text></g>').format(
            label_w + track + 10, mid, latency(p50), latency(p95)))
    svg.append(Html("</svg>"))
    return Html("").join(svg)


def _share_bar(totals: list[tuple[str, float]], colours: dict[str, str]) -> Html:
    total = sum(v for _, v in totals)
    width, bar_h = 520.0, 28.0
    legend_rows = math.ceil(len(totals) / 2)
    height = bar_h + 16 + legend_rows * 22
    svg = [_svg_open("share", width, height, "share of total latency per component")]
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


def _confusion_svg(cm: dict[str, Any]) -> Html:
    labels = [str(x) for x in cm["labels"]]
    counts = [[int(v) for v in row] for row in cm["counts"]]
    if len(counts) != len(labels) or any(len(r) != len(labels) for r in counts):
        raise ValueError("confusion matrix is not square")
    rows_name, cols_name = cm.get("rows", "gold"), cm.get("columns", "predicted")
    longest = max((_text_width(x, 12) for x in labels), default=30)
    cell = max(54.0, longest + 14)
    left = longest + 44
    top = 56.0
    n = len(labels)
    width = left + cell * n + 10
    height = top + cell * n + 10
    middle = top + cell * n / 2
    svg = [_svg_open("confusion", width, height,
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
        svg.append(_bar_label(left - 8, y + cell / 2, labels[i]))
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


def _reliability_svg(bins: list[dict[str, Any]]) -> Html:
    size, pad = 200.0, 40.0
    width, height = size + pad + 20, size + pad + 10
    svg = [_svg_open("reliability", width, height, "reliability diagram")]
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


# --------------------------------------------------------------------------------------------
# A little markdown: paragraphs, headings, lists, tables, code; everything escaped first
# --------------------------------------------------------------------------------------------


def _inline(text: str) -> Html:
    """Escape, then ``code``, **bold** and *emphasis*.

    >>> _inline("a `x<y` **b** *c* <i>")
    Html('a <code>x&lt;y</code> <strong>b</strong> <em>c</em> &lt;i&gt;')
    """
    out = []
    for i, part in enumerate(re.split(r"`([^`]+)`", text)):
        if i % 2:
            out.append(Html("<code>{}</code>").format(part))
            continue
        # the patterns only wrap escaped text in tags: nothing of ``part`` becomes markup
        escaped = str(Html.escape(part))
        escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
        escaped = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", escaped)
        out.append(Html(escaped))
    return Html("").join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def _markdown(text: str) -> Html:
    """Markdown of a plugin section as HTML (tables become tables); its text is escaped.

    >>> _markdown("| a | b |\\n|---|--:|\\n| <x> | 2 |")
    Html('<table class="tbl compact"><thead><tr><th>a</th><th class="r">b</th></tr></thead><tbody><tr><td>&lt;x&gt;</td><td class="r">2</td></tr></tbody></table>')
    >>> _markdown("# Title\\n\\n- <b>one</b>\\n- *two*\\n\\n```\\n<pre>\\n```")
    Html('<h4>Title</h4><ul><li>&lt;b&gt;one&lt;/b&gt;</li><li><em>two</em></li></ul><pre>&lt;pre&gt;</pre>')
    """
    lines = text.splitlines()
    out: list[Html] = []
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
            out.append(Html("<pre>{}</pre>").format("\n".join(code)))
        elif stripped.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            out.append(_md_table(block))
        elif m := re.match(r"(#{1,6})\s+(.*)", stripped):
            out.append(Html("<h4>{}</h4>").format(_inline(m.group(2))))
            i += 1
        elif re.match(r"[-*]\s+", stripped):
            items = []
            while i < len(lines) and re.match(r"\s*[-*]\s+", lines[i]):
                item = re.sub(r"^\s*[-*]\s+", "", lines[i])
                items.append(Html("<li>{}</li>").format(_inline(item)))
                i += 1
            out.append(Html("<ul>{}</ul>").format(Html("").join(items)))
        else:
            para = []
            while (i < len(lines) and lines[i].strip()
                   and not re.match(r"\s*(\||```|#{1,6}\s|[-*]\s)", lines[i])):
                para.append(lines[i].strip())
                i += 1
            out.append(Html("<p>{}</p>").format(_inline(" ".join(para))))
    return Html("").join(out)


def _md_table(block: list[str]) -> Html:
    rows = [_cells(line) for line in block]
    align: list[str] = []
    if len(rows) > 1 and all(re.fullmatch(r":?-{2,}:?", c) for c in rows[1] if c):
        align = ["r" if c.endswith(":") and not c.startswith(":") else "" for c in rows[1]]
        head, body = rows[0], rows[2:]
    else:
        head, body = [], rows

    def cells(tag: str, row: list[str]) -> Html:
        return Html("").join(
            Html('<{tag} class="{cls}">{text}</{tag}>' if j < len(align) and align[j]
                 else "<{tag}>{text}</{tag}>").format(
                tag=tag, cls=align[j] if j < len(align) else "", text=_inline(text))
            for j, text in enumerate(row))

    thead = Html("<thead><tr>{}</tr></thead>").format(cells("th", head)) if head else ""
    tbody = Html("").join(Html("<tr>{}</tr>").format(cells("td", r)) for r in body)
    return Html('<table class="tbl compact">{}<tbody>{}</tbody></table>').format(thead, tbody)
