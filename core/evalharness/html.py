"""``report.html``: the report as one self-contained page a person would rather look at.

The markup lives in templates: ``templates/report.html`` extends the layout every page shares
(``base.html``: the CSP, the inline CSS, the console-error hooks) and includes one
``report_*.html`` per section; :mod:`evalharness.pages` renders them with autoescaping on.
This module is the page's view model: it decides what they show — the colours, the key
figures, the score cards, which failed cases (at most :data:`MAX_CASES`), each case's steps and
metrics. The charts are drawn by :mod:`evalharness.charts` (SVG, because turning numbers into
coordinates is code, not markup) and the plugin sections' markdown converted by
:mod:`evalharness.markdown`; what they hand over as markup is :class:`~evalharness.pages.Html`
built with ``Html.format``/``Html.join``, which escape every text they are given.

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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalharness import pages
from evalharness.charts import (
    INTERACTION,
    PALETTE,
    VERDICT_COLOURS,
    bottleneck_chart,
    confusion_svg,
    headroom_chart,
    latency_chart,
    metric_chart,
    reliability_svg,
    share_bar,
    verdict_chart,
)
from evalharness.formatting import latency, number, percent, short, short_json
from evalharness.markdown import markdown
from evalharness.models import (
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

MAX_CLAIMS = 30
"""Claims listed per claim check of a metric of a case (the rest are counted)."""

MAX_EVIDENCE = 12
"""Evidence lines shown per claim (the rest are counted)."""

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
           *([("repeats", "Repeats")] if report.repeats is not None else []),
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
        sections=[(s.get("title", ""), s.get("plugin", ""), markdown(str(s.get("markdown", ""))))
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
                         f"{e2e.passed} of {e2e.passed + e2e.failed} "
                         f"{'results' if report.repeats is not None else 'cases'} pass"
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
                     f"evaluated of {cases.get('total', 0)}"
                     + (f" × {report.repeats.n} repeats" if report.repeats is not None else "")
                     + f" · {cases.get('system_errors', 0)} system errors", "var(--muted)"))
    if report.repeats is not None:
        flaky = report.repeats.end_to_end.get("flaky", 0)
        cards.append(Kpi("flaky cases", str(flaky),
                         f"of {report.repeats.cases} flip their end-to-end verdict between "
                         f"{report.repeats.n} repeats", "#d97706" if flaky else "#16a34a"))
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
    return {"bottleneck": bottleneck_chart(b, colours),
            "verdicts": verdict_chart(b.verdicts, report) if b.verdicts else None,
            "headroom": headroom_chart(b, colours) if b.headroom is not None else None}


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


def _unit_scale(summary: MetricSummary) -> bool:
    """Whether a metric belongs on a 0–1 bar chart: its plugin declares its range 0–1 (a
    metric without a declaration goes in the table of other metrics)."""
    declared = summary.declaration
    return summary.mean is not None and declared is not None and declared.unit_scale


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
            chart=(metric_chart(name, unit, colours[name], gates, show_errors=not uniform)
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
    return {"latency": latency_chart(timed, colours), "share": share_bar(totals, colours)}


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
    body = markdown(str(section.get("markdown", "")))
    try:
        return _routing_data(title, body, section.get("data") or {})
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return Routing(title, body)


def _routing_data(title: str, body: Html, data: dict[str, Any]) -> Routing:
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
    return Routing(title, body, facts=facts,
                   confusion=confusion_svg(cm) if cm else None, per_route=per_route,
                   reliability=reliability_svg(bins) if bins else None)


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
class ClaimView:
    """One claim the judge checked for a metric (a verdict of a ``claim_support`` judgment),
    as the case's metrics list it: a mark, the claim, and why on hover (``title``) and in a
    ``<details>`` toggle."""

    text: str
    supported: bool
    confidence: float | None
    reason: str
    evidence: list[str]
    """The verdict's evidence lines (a row, column and value; a computation; a passage), at
    most :data:`MAX_EVIDENCE`, with a last line counting the rest; empty in runs recorded
    before the judge gave evidence."""

    @property
    def title(self) -> str:
        """The hover text: the reason, then the evidence lines, one a line (the mark and the
        confidence are shown beside the claim); the verdict in words when there is neither."""
        lines = [self.reason] if self.reason else []
        if self.evidence:
            lines += ["evidence:", *(f"· {line}" for line in self.evidence)]
        return "\n".join(lines) or ("supported" if self.supported else "not supported")


@dataclass(frozen=True)
class ClaimGroup:
    """The claims of one ``claim_support`` judgment of a metric value."""

    label: str
    """``check N of M`` when the value holds several such judgments (answer correctness
    checks the answer's claims against the reference, then the reference's against the
    answer); else empty."""
    claims: list[ClaimView]
    more: int
    """Claims of the judgment not listed (beyond :data:`MAX_CLAIMS`)."""


@dataclass(frozen=True)
class MetricRow:
    """One metric of a case, with the evidence worth reading: its reason, else its details;
    and the claims the judge checked for it, when its details hold a ``claim_support``
    judgment."""

    name: str
    failed: bool
    value: MetricValue
    reason: str
    details: str
    claims: tuple[ClaimGroup, ...] = ()


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
    """Whether the list shows the case among the failures: it failed
    (:attr:`CaseResult.failed`), or a component's verdict fails or errs though the case
    passes, or a metric is an error (``metric_failed``: :func:`_metric_failed` of it)."""
    return (result.failed or metric_failed
            or any(v.status in ("fail", "error") for v in result.verdicts.values()))


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
        rows = [MetricRow(name, name in failed, m, *_metric_detail(m),
                          claims=_claim_groups(m.details))
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



def _claim_groups(details: dict[str, Any]) -> tuple[ClaimGroup, ...]:
    """The claims of every ``claim_support`` judgment record in a metric value's details
    (``details["judgments"]``, see ``Judgment.record``), in order. Records are plugin data read
    back from results.jsonl: anything not of the expected shape is left out, never an error.

    >>> rec = {"task": "claim_support", "output": {"verdicts": [
    ...     {"claim": "It costs 49.90 €.", "supported": True, "reason": "row 1",
    ...      "confidence": 0.9, "evidence": ["row 1 price = 49.9"]}]}}
    >>> [g] = _claim_groups({"judgments": [{"task": "claims"}, rec]})
    >>> g.label, g.claims[0].text, g.claims[0].supported, g.claims[0].evidence
    ('', 'It costs 49.90 €.', True, ['row 1 price = 49.9'])
    >>> print(g.claims[0].title)
    row 1
    evidence:
    · row 1 price = 49.9
    >>> _claim_groups({"judgments": "nonsense"}), _claim_groups({})
    ((), ())
    """
    records = details.get("judgments")
    if not isinstance(records, list):
        return ()
    found: list[list[ClaimView]] = []
    for record in records:
        if not isinstance(record, dict) or record.get("task") != "claim_support":
            continue
        output = record.get("output")
        verdicts = output.get("verdicts") if isinstance(output, dict) else None
        if not isinstance(verdicts, list):
            continue
        claims = [c for c in map(_claim_view, verdicts) if c is not None]
        if claims:
            found.append(claims)
    return tuple(ClaimGroup(f"check {n} of {len(found)}" if len(found) > 1 else "",
                            claims[:MAX_CLAIMS], max(0, len(claims) - MAX_CLAIMS))
                 for n, claims in enumerate(found, 1))


def _claim_view(verdict: Any) -> ClaimView | None:
    """One claim verdict of a ``claim_support`` record, or ``None`` when it is no verdict (no
    claim text, or no yes/no ``supported``)."""
    if not isinstance(verdict, dict):
        return None
    claim, supported = verdict.get("claim"), verdict.get("supported")
    if not isinstance(claim, str) or not isinstance(supported, bool):
        return None
    confidence = verdict.get("confidence")
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        confidence = None
    reason = verdict.get("reason")
    raw = verdict.get("evidence")
    lines = [short(str(x), 300) for x in raw if x is not None and str(x).strip()] \
        if isinstance(raw, list) else []
    if len(lines) > MAX_EVIDENCE:
        lines = [*lines[:MAX_EVIDENCE], f"(and {len(lines) - MAX_EVIDENCE} more)"]
    return ClaimView(short(claim, 400), supported,
                     float(confidence) if confidence is not None else None,
                     short(reason, 600) if isinstance(reason, str) else "", lines)
