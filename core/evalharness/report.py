"""Aggregation and reports: per-component metric summaries, cost, gates, the bottleneck,
report.json and .md."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalharness import __version__, attribution, oracle, verdicts
from evalharness.judge.base import judge_usage
from evalharness.models import (
    Bottleneck,
    CaseResult,
    ComponentReport,
    CostSummary,
    EvaluatorRun,
    GateResult,
    HeadroomRow,
    MetricSummary,
    MetricValue,
    Report,
    Step,
)
from evalharness.registry import ReportSection
from evalharness.runner import RunOutcome
from evalharness.scenario import Scenario
from evalharness.stats import bootstrap_ci, seed_for


def build_report(scenario: Scenario, outcome: RunOutcome) -> Report:
    """Aggregate a run's results (in case order) into a :class:`Report`."""
    results = outcome.results
    host = scenario.host
    prices = scenario.spec.judge.prices
    components: dict[str, ComponentReport] = {}
    for component in scenario.pipeline.order:
        statuses = Counter(r.components[component].status for r in results
                           if component in r.components)
        metrics: dict[str, MetricSummary] = {}
        runs = []
        for configured in scenario.evaluators_on(component):
            runs.append(EvaluatorRun(
                name=configured.name, plugin=configured.plugin,
                version=host.plugins[configured.plugin].version,
                settings=configured.settings.model_dump(mode="json"),
                budget_s=configured.budget_s))
            for metric in configured.metrics:
                metrics[metric] = summarise(
                    [r.components[component].metrics[metric] for r in results
                     if component in r.components and metric in r.components[component].metrics],
                    configured.name, prices, seed=seed_for(component, metric))
            if configured.run_metrics:
                metrics.update(run_level(scenario, outcome, component, configured))
        components[component] = ComponentReport(
            kind=scenario.pipeline.kind(component),
            cases={s: statuses.get(s, 0) for s in ("evaluated", "not_run", "error")},
            metrics=metrics,
            cost=cost_of([r.trace.step(component) for r in results]),
            evaluators=runs,
            judge=_usage_of(results, component, prices),
        )
    _shares([c.cost for c in components.values()])
    gates = [gate_result(gate, components[gate.component].metrics[gate.metric], results)
             for gate in scenario.gates]
    criteria = verdicts.criteria_for(scenario)
    stale = [r for r in results if not r.verdicts and r.end_to_end is None]
    if stale:  # results written before verdicts existed: judge them now, the same way
        verdicts.apply(scenario, stale, criteria)
    judge = outcome.context.judge.identity() if outcome.context.judge else {"backend": None}
    judge["usage"] = _usage_of(results, None, prices)
    report = Report(
        scenario={"name": scenario.name, "path": str(scenario.path),
                  "sha256": scenario.sha256},
        judge=judge,
        versions={"evalharness": __version__} | {
            name: info.version for name, info in sorted(host.plugins.items())
            if info.source != "core"},
        cases={"total": len(scenario.cases), "evaluated": len(results),
               "system_errors": sum(1 for r in results if r.trace.error)},
        components=components,
        gates=gates,
        verdict_criteria=criteria.report(),
        bottleneck=attribution.summarise(results, criteria.judged()),
        warnings=[*getattr(outcome, "warnings", []),
                  *getattr(outcome.context.judge, "warnings", []),
                  *run_warnings(scenario, results)],
        run={"started_at": outcome.started_at, "duration_s": round(outcome.duration_s, 3),
             "resumed_cases": outcome.resumed, "out_dir": str(outcome.out_dir)},
    )
    if report.bottleneck is not None:
        _add_headroom(report, outcome)
    if outcome.context.database is not None:
        report.scenario["database_sha256"] = outcome.context.database.sha256()
    for plugin in sorted(host.plugins):
        report.sections.extend(_sections_of(host, plugin, report, results))
    return report


def gate_result(gate: Any, summary: MetricSummary, results: Sequence[CaseResult]
                ) -> GateResult:
    """A gate's outcome. Its value is the metric's mean, and its errors are every case the
    mean could not count: an error value, an invalid step, or a system that failed for the
    case — a mean over the survivors must not pass a gate.

    >>> from evalharness.scenario import parse_gate
    >>> from evalharness.models import Case, ComponentResult, Trace
    >>> def result(i, value):
    ...     metric = MetricValue.of(value) if value is not None else MetricValue.failed("x")
    ...     return CaseResult(case=Case(id=f"c{i}", question="q"), trace=Trace(case_id=f"c{i}"),
    ...         components={"generator": ComponentResult(status="evaluated",
    ...                                                   metrics={"faithfulness": metric})})
    >>> results = [result(i, 1.0) for i in range(8)] + [result(8, None), result(9, None)]
    >>> g = gate_result(parse_gate("generator.faithfulness >= 0.9"),
    ...                 summarise([r.components["generator"].metrics["faithfulness"]
    ...                            for r in results], "f"), results)
    >>> g.value, g.errors, g.error_rate, g.passed
    (1.0, 2, 0.2, False)
    >>> g.reason
    '2 of 10 cases (20%) are errors, above max_error_rate 5%: the mean covers only the rest'
    """
    if summary.scope == "run":
        errors, n = summary.errors, summary.n + summary.errors
        failed_systems = sum(1 for r in results if r.trace.error)
        errors += failed_systems
        n += failed_systems
    else:
        errors = n = 0
        for r in results:
            comp = r.components.get(gate.component)
            value = comp.metrics.get(gate.metric) if comp is not None else None
            if value is not None:
                n += 1
                errors += value.error is not None
            elif r.trace.error or (comp is not None and comp.status == "error"):
                n += 1
                errors += 1
    rate = errors / n if n else None
    holds = gate.check(summary.mean)
    too_many = rate is not None and rate > gate.max_error_rate
    reason = None
    if summary.mean is None:
        reason = "the metric could not be computed for any case"
    elif too_many:
        reason = (f"{errors} of {n} cases ({pct(rate)}) are errors, above max_error_rate "
                  f"{pct(gate.max_error_rate)}: the mean covers only the rest")
    elif not holds:
        reason = f"{fmt(summary.mean)} is not {gate.op} {gate.threshold:g}"
    return GateResult(name=gate.name, component=gate.component, metric=gate.metric,
                      op=gate.op, threshold=gate.threshold, value=summary.mean,
                      passed=holds and not too_many, n=n, errors=errors, error_rate=rate,
                      max_error_rate=gate.max_error_rate, reason=reason)


def _usage_of(results: Sequence[CaseResult], component: str | None, prices: dict | None
              ) -> dict | None:
    """Judge usage of one component (or of the whole run): the judgment records stored with
    its metric values, each counted once however many metrics share it."""
    records = [r for result in results
               for name, comp in result.components.items()
               if component is None or name == component
               for value in comp.metrics.values()
               for r in value.details.get("judgments") or () if isinstance(r, dict)]
    return judge_usage(records, prices) if records else None


def run_warnings(scenario: Scenario, results: Sequence[CaseResult]) -> list[str]:
    """What the results show that a reader must not miss: steps of components the pipeline
    does not have (never evaluated), and cases recorded with warnings."""
    out = []
    unknown: Counter[str] = Counter()
    components = set(scenario.pipeline.components)
    for r in results:
        for name in ("router", "text2sql", "retriever", "generator"):
            if name not in components and getattr(r.trace, name) is not None:
                unknown[name] += 1
        for name in r.trace.steps:
            if name not in components:
                unknown[name] += 1
    for name, n in sorted(unknown.items()):
        out.append(f"{n_cases(n)} have a {name!r} step, but the pipeline has no component "
                   f"{name!r}: it is not evaluated (add it under `pipeline:`, or check its "
                   "name)")
    warned = [r for r in results if r.warnings]
    if warned:
        first = warned[0]
        out.append(f"{n_cases(len(warned))} were recorded with warnings (see `warnings` in "
                   f"results.jsonl), e.g. {first.case.id!r}: {first.warnings[0]}")
    return out


def _add_headroom(report: Report, outcome: RunOutcome) -> None:
    """The oracle headroom rows (and the judge usage of the reruns), or why there are none."""
    b = report.bottleneck
    records = getattr(outcome, "headroom", None)
    if records is None:
        b.headroom_note = getattr(outcome, "headroom_note", None)
        return
    b.headroom = oracle.summarise(records, outcome.oracles, b)
    usage = _sum_usage([r.judge for r in records if r.judge])
    if usage:
        report.judge["headroom_usage"] = usage


def run_level(scenario: Scenario, outcome: RunOutcome, component: str,
              configured: Any) -> dict[str, MetricSummary]:
    """The evaluator's run-level metrics (its ``evaluate_run`` hook), as summaries with
    ``scope="run"``; a metric that could not be computed is an error with its reason, and an
    evaluator that raises or answers wrongly costs its run metrics, never the report."""
    results = outcome.results
    evaluated = sum(1 for r in results if component in r.components
                    and r.components[component].status == "evaluated")
    label = f"evaluator {configured.name!r} of plugin {configured.plugin!r}"
    problem = None
    try:
        context = dataclasses.replace(outcome.context, component=component)
        answer = scenario.host.call_for_plugin(
            "evaluate_run", configured.plugin, evaluator=configured.name, component=component,
            results=results, settings=configured.settings, context=context)
    except Exception as exc:
        answer, problem = None, f"{label}: evaluate_run raised {type(exc).__name__}: {exc}"
    if problem is None and not isinstance(answer, dict):
        problem = (f"{label} declares run metrics but its evaluate_run hook returned "
                   f"{type(answer).__name__}, not {{metric: MetricValue}}")
    if problem is not None:
        print(f"warning: {problem}", file=sys.stderr)
    out = {}
    for name in configured.run_metrics:
        value = None if problem else answer.get(name)
        if value is not None and not isinstance(value, MetricValue):
            try:
                value = MetricValue.of(value)
            except (TypeError, ValueError) as exc:
                value = MetricValue.failed(f"{label}: {name} is not a number ({exc})")
        if value is None:
            value = MetricValue.failed(problem or f"{label}: evaluate_run gave no value for "
                                                  f"{name}")
        details = dict(value.details)
        ci = details.pop("ci95", None)
        n = details.pop("n", evaluated)
        out[name] = MetricSummary(
            mean=value.value if value.error is None else None,
            ci95=list(ci) if value.error is None and ci is not None else None,
            n=int(n) if value.error is None else 0, errors=0 if value.error is None else 1,
            evaluator=configured.name,
            error_reasons={value.error: 1} if value.error is not None else {},
            scope="run", details=details)
    return out


def _sections_of(host, plugin: str, report: Report, results) -> list[dict[str, Any]]:
    """A plugin's report sections; a failure becomes a visible section, never a lost report."""
    problem = None
    out = []
    try:
        answers = host.call_for_plugin("report_sections", plugin, report=report,
                                       results=results)
    except Exception as exc:
        answers, problem = [], f"raised {type(exc).__name__}: {exc}"
    for found in answers:
        for section in found or []:
            if isinstance(section, ReportSection):
                out.append({"plugin": plugin, "title": section.title,
                            "markdown": section.markdown, "data": section.data})
            else:
                problem = f"returned {type(section).__name__} instead of a ReportSection"
    if problem:
        message = f"plugin {plugin!r}: hook report_sections {problem}"
        print(f"warning: {message}", file=sys.stderr)
        out.append({"plugin": plugin, "title": f"{plugin}: section failed",
                    "markdown": message, "data": {"error": message}})
    return out


def summarise(values: Sequence, evaluator: str, prices: dict | None = None, *,
              seed: int = 0) -> MetricSummary:
    """Mean over computed values; errors counted with their most frequent reasons; judge usage
    summed from the judgment records the values carry (``details["judgments"]``)."""
    numbers = [v.value for v in values if v.error is None]
    reasons = Counter(v.error for v in values if v.error is not None)
    records = [r for v in values for r in v.details.get("judgments", [])
               if isinstance(r, dict)]
    ci = bootstrap_ci(numbers, seed=seed)
    return MetricSummary(
        mean=math.fsum(numbers) / len(numbers) if numbers else None,
        ci95=list(ci) if ci is not None else None,
        n=len(numbers), errors=sum(reasons.values()), evaluator=evaluator,
        error_reasons=dict(reasons.most_common(5)),
        judge=judge_usage(records, prices) if records else None)


def _sum_usage(usages: list[dict]) -> dict | None:
    """Add up judge usage summaries.

    >>> _sum_usage([{"requests": 2, "cache_hits": 1}, {"requests": 3, "cache_hits": 0}])
    {'requests': 5, 'cache_hits': 1}
    >>> _sum_usage([]) is None
    True
    """
    if not usages:
        return None
    out: dict = {}
    for usage in usages:
        for key, value in usage.items():
            out[key] = out.get(key, 0) + value
    return out


def cost_of(steps: Sequence[Any]) -> CostSummary:
    """Latency percentiles and token sums over the steps that ran."""
    ran = [s if isinstance(s, Step) else _as_step(s) for s in steps if s is not None]
    lat = [float(s.latency_ms) for s in ran if s.latency_ms is not None]
    prompt = completion = 0
    for s in ran:
        if s.usage is not None:
            prompt += s.usage.prompt_tokens
            completion += s.usage.completion_tokens
    if lat:
        arr = np.asarray(lat)
        latency = {"mean": float(arr.mean()), "p50": float(np.percentile(arr, 50)),
                   "p95": float(np.percentile(arr, 95)), "total": float(arr.sum())}
    else:
        latency = {"mean": None, "p50": None, "p95": None, "total": None}
    return CostSummary(steps=len(ran), latency_ms=latency,
                       tokens={"prompt": prompt, "completion": completion,
                               "total": prompt + completion})


def _shares(costs: Sequence[CostSummary]) -> None:
    """Fill in each component's share of the total latency and tokens (of all components)."""
    latency = math.fsum(c.latency_ms.get("total") or 0.0 for c in costs)
    tokens = sum(c.tokens["total"] for c in costs)
    for c in costs:
        if latency > 0 and c.latency_ms.get("total") is not None:
            c.latency_share = (c.latency_ms["total"] or 0.0) / latency
        if tokens > 0:
            c.token_share = c.tokens["total"] / tokens


def _as_step(raw: dict) -> Step:
    """The common fields of a plugin kind's step; unreadable figures count as unreported."""
    try:
        return Step.model_validate({k: raw.get(k) for k in ("latency_ms", "usage")})
    except ValueError:
        return Step()


def judge_cell(usage: dict | None) -> str:
    """A component's judge usage in one table cell: requests / cache hits / tokens.

    >>> judge_cell({"requests": 3, "cache_hits": 1, "prompt_tokens": 1200, "completion_tokens": 34})
    '3 / 1 / 1234'
    >>> judge_cell(None)
    '—'
    """
    if not usage:
        return "—"
    return (f"{usage.get('requests', 0)} / {usage.get('cache_hits', 0)} / "
            f"{usage.get('prompt_tokens', 0) + usage.get('completion_tokens', 0)}")


def usage_line(usage: dict) -> str:
    """One line about judge usage.

    >>> usage_line({"judgments": 4, "requests": 3, "cache_hits": 1, "prompt_tokens": 10,
    ...             "completion_tokens": 5, "errors": 0})
    '4 judgments, 3 requests, 1 cache hits, 15 tokens, 0 errors'
    """
    text = (f"{usage['judgments']} judgments, {usage['requests']} requests, "
            f"{usage['cache_hits']} cache hits, "
            f"{usage['prompt_tokens'] + usage['completion_tokens']} tokens, "
            f"{usage['errors']} errors")
    return text + (f", cost {usage['cost']:.4f}" if "cost" in usage else "")


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


def render_markdown(report: Report) -> str:
    """``report.md``: the same content as report.json, for people."""
    lines = [f"# evalharness report: {md_text(report.scenario['name'])}", ""]
    lines += [
        f"- Scenario: `{report.scenario['path']}` (sha256 `{report.scenario['sha256'][:12]}`)",
        f"- Judge: **{report.judge.get('label', report.judge.get('backend'))}**"
        + (f" — {usage_line(report.judge['usage'])}" if report.judge.get("usage") else ""),
        f"- Cases: {report.cases['evaluated']} of {report.cases['total']} evaluated, "
        f"{report.cases['system_errors']} system errors",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in report.versions.items()),
        "",
        *([f"> **{report.cases['system_errors']} cases failed in the system under test**: "
           "their components did not run and are in no mean below (see `trace.error` in "
           "results.jsonl).", ""] if report.cases["system_errors"] else []),
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
    if report.bottleneck is not None:
        lines += ["", *render_bottleneck(report)]
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
                  "are errors than its `max_error_rate` allows.", "",
                  "| gate | value | errors | result |", "|---|---:|---:|---|"]
        for g in report.gates:
            result = "pass" if g.passed else f"**FAIL**: {md_text(g.reason or '')}"
            errors = f"{g.errors} of {g.n}" + (f" (max {pct(g.max_error_rate)})" if g.n else "")
            lines.append(f"| `{g.name}` | {fmt(g.value)} | {errors} | {result} |")
    for section in report.sections:
        lines += ["", f"## {section['title']}", "", section["markdown"]]
    lines += ["", "## Evaluators and settings", ""]
    for name, comp in report.components.items():
        for ev in comp.evaluators:
            settings = ", ".join(f"{k}={v}" for k, v in ev.settings.items()) or "defaults"
            lines.append(f"- {name}: `{ev.name}` ({ev.plugin} {ev.version}): {settings}")
    return "\n".join(lines) + "\n"


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
        parts.append(f"estimated from a random sample of {sampled} of the "
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
             f"End to end: **{e2e.passed} of {e2e.passed + e2e.failed}** cases pass "
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


def write_reports(report: Report, out_dir: Path,
                  results: Sequence[CaseResult]) -> dict[str, Path]:
    """report.json, report.md and report.html (which also shows ``results``: the failed cases
    with their traces)."""
    from evalharness.html import render_html

    paths = {"json": out_dir / "report.json", "md": out_dir / "report.md",
             "html": out_dir / "report.html"}
    paths["json"].write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    paths["md"].write_text(render_markdown(report), encoding="utf-8")
    paths["html"].write_text(render_html(report, results), encoding="utf-8")
    return paths
