"""Aggregation: per-component metric summaries, cost, gates, the bottleneck, slices, the
plugins' run-level metrics and sections, the agreement with people — the :class:`Report`.
Rendering it (report.md, report.html, the numbers of tables) is :mod:`evalharness.render`."""

from __future__ import annotations

import dataclasses
import math
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalharness import attribution, oracle, slices, verdicts
from evalharness.declarations import call_with
from evalharness.judge.base import Usage
from evalharness.models import (
    CaseResult,
    ComponentReport,
    CostSummary,
    EvaluatorRun,
    FlakyCase,
    GateResult,
    MetricSummary,
    MetricValue,
    RepeatReport,
    RepeatSpread,
    Report,
    Step,
    SystemErrorGroup,
    over_repeats,
)
from evalharness.registry import ReportSection
from evalharness.render import fmt, n_cases, pct
from evalharness.render import (  # re-exported: their home was here
    render_markdown as render_markdown,
)
from evalharness.render import trace_line as trace_line
from evalharness.render import write_reports as write_reports
from evalharness.results import Results
from evalharness.review import labels as review_labels
from evalharness.review.agreement import compute as agreement_of
from evalharness.review.report import attach, gate_results
from evalharness.review.session import Review
from evalharness.runfolder import RunFolder
from evalharness.runner import RunOutcome
from evalharness.scenario import Scenario
from evalharness.stats import REDUCERS, bootstrap_ci, reduce_repeats, seed_for
from evalharness.version import __version__

SYSTEM_ERROR_GROUPS = 5
"""How many of the system's most frequent errors the report shows with a traceback."""


def build_report(scenario: Scenario, outcome: RunOutcome) -> Report:
    """Aggregate a run's results (in case order) into a :class:`Report`.

    One pass over ``outcome.results`` gathers everything the report computes itself
    (:class:`RunTally`: per case, a few numbers); then the plugins' ``evaluate_run`` and
    ``report_sections`` hooks read the results on their own. Results written before verdicts
    existed are judged now, the same way: ``outcome.results`` becomes a view that judges them
    as they are read (a list is judged in place), so the HTML page shows the same verdicts."""
    criteria = verdicts.criteria_for(scenario)
    results = outcome.results = _with_verdicts(outcome.results, criteria)
    host = scenario.host
    tally = RunTally(scenario, criteria.judged())
    for result in results:
        tally.add(result)
    components: dict[str, ComponentReport] = {}
    for component in scenario.pipeline.order:
        statuses = tally.statuses[component]
        metrics: dict[str, MetricSummary] = {}
        runs = []
        for configured in scenario.evaluators_on(component):
            runs.append(EvaluatorRun(
                name=configured.name, plugin=configured.plugin,
                version=host.plugins[configured.plugin].version,
                settings=configured.settings.model_dump(mode="json"),
                budget_s=configured.budget_s))
            for metric in configured.metrics:
                metrics[metric] = tally.metrics[component][metric].summary(
                    configured.name, seed=seed_for(component, metric),
                    reducer=configured.declaration(metric).reducer)
            if configured.run_metrics:
                metrics.update(run_level(scenario, outcome, component, configured,
                                         evaluated=statuses["evaluated"]))
            for metric in [*configured.metrics, *configured.run_metrics]:
                metrics[metric].declaration = configured.declaration(metric)
        usage = tally.component_usage[component]
        components[component] = ComponentReport(
            kind=scenario.pipeline.kind(component),
            cases={s: statuses.get(s, 0) for s in ("evaluated", "not_run", "error", "missing")},
            metrics=metrics,
            cost=tally.costs[component].summary(),
            evaluators=runs,
            judge=usage.summary() if usage.counted else None,
        )
    _shares([c.cost for c in components.values()])
    infrastructure = list(getattr(outcome, "infrastructure", ()))
    incomplete = len(scenario.cases) * scenario.repeats - tally.cases if infrastructure else 0
    gates = [g.result(components[g.gate.component].metrics[g.gate.metric], incomplete)
             for g in tally.gates]
    judge = outcome.context.judge.identity() if outcome.context.judge else {"backend": None}
    judge["usage"] = tally.usage.summary() if tally.usage.counted else None
    infrastructure += unreachable_judge(judge, components)
    if incomplete:
        infrastructure.append(f"{incomplete} of {len(scenario.cases)} cases did not complete "
                              "and have no result: every gate counts them as errors; continue "
                              f"with --resume --out {outcome.out_dir}")
    report = Report(
        scenario={"name": scenario.name, "path": str(scenario.path),
                  "sha256": scenario.sha256},
        judge=judge,
        versions={"evalharness": __version__} | {
            name: info.version for name, info in sorted(host.plugins.items())
            if info.source != "core"},
        cases={"total": len(scenario.cases), "evaluated": tally.repeats.cases or tally.cases,
               "system_errors": tally.system_errors}
        | ({"results": tally.cases} if scenario.repeated else {}),
        infrastructure=infrastructure,
        system_errors=tally.system_error_groups(),
        selection=scenario.selection if scenario.selection.get("everything") is False
        else None,
        trace_source=scenario.trace_source or None,
        components=components,
        gates=gates,
        verdict_criteria=criteria.report(),
        repeats=tally.repeats.summary(scenario),
        bottleneck=tally.bottleneck.summary(),
        slices=tally.slices.summary({(c, m): t.values for c, tallies in tally.metrics.items()
                                     for m, t in tallies.items()}),
        warnings=[*getattr(outcome, "warnings", []),
                  *getattr(outcome.context.judge, "warnings", []),
                  *_trace_warnings(scenario.trace_source),
                  *tally.system_error_warning(), *_missing_warnings(components),
                  *tally.warnings.result()],
        run={"started_at": outcome.started_at, "duration_s": round(outcome.duration_s, 3),
             "resumed_cases": outcome.resumed, "out_dir": str(outcome.out_dir)},
    )
    if report.bottleneck is not None:
        _add_headroom(report, outcome, tally.bottleneck.decided_cases)
    if outcome.context.database is not None:
        report.scenario["database_sha256"] = outcome.context.database.sha256()
    for plugin in sorted(host.plugins):
        report.sections.extend(_sections_of(host, plugin, report, results))
    if scenario.labels or scenario.agreement_gates:
        _add_agreement(scenario, outcome, report, results, criteria)
    return report


def _add_agreement(scenario: Scenario, outcome: RunOutcome, report: Report, results,
                   criteria: verdicts.Criteria) -> None:
    """The scenario's ``labels:`` (and the run folder's own review labels) against this run:
    report.agreement, its section, and the ``agreement.`` gates."""
    run = RunFolder(path=Path(outcome.out_dir), report=report, results=results)
    review = Review.of(run)
    said: list[str] = []
    given = review_labels.read(review.labels_path, said)
    for path in scenario.labels:
        given += review_labels.read(path, said)
    report.warnings.extend(said)
    agreement = agreement_of(review, review_labels.latest(given),
                        criteria=criteria)
    attach(report, agreement)
    report.gates.extend(gate_results(scenario.agreement_gates, agreement))


def _trace_warnings(source: dict[str, Any]) -> list[str]:
    """Recorded traces that match no case: counted and named, never dropped silently."""
    n = source.get("without_case") or 0
    if not n:
        return []
    ids = source.get("without_case_ids") or []
    more = f" and {n - len(ids)} more" if n > len(ids) else ""
    return [f"{n} of the {source['traces']} recorded traces in {source['path']} match no case "
            f"and were not evaluated: {', '.join(map(str, ids[:10]))}"
            + (f" and {n - 10} more" if n > 10 else more)
            + " (report.json, `trace_source.without_case_ids`, lists the first 50)"]


def _with_verdicts(results: Sequence[CaseResult], criteria: verdicts.Criteria
                   ) -> Sequence[CaseResult]:
    """``results`` with those written before verdicts existed judged now, the same way: a
    :class:`Results` view judges them as they are read; a list is judged in place."""

    def judged(result: CaseResult) -> CaseResult:
        if not result.verdicts and result.end_to_end is None:
            verdicts.apply(None, [result], criteria)
        return result

    if isinstance(results, Results):
        return results.prepared(judged)
    for result in results:
        judged(result)
    return results


class RunTally:
    """Everything the report computes from the results itself, gathered in one pass in case
    order (:meth:`add`) and kept small: per metric its values as floats, its error reasons and
    judge usage (:class:`MetricTally`); per component its statuses, latencies and tokens
    (:class:`CostTally`) and judge usage; per gate its errors (:class:`GateTally`); the
    bottleneck (:class:`attribution.BottleneckTally`); the warnings (:class:`WarningTally`).
    Nothing of a case is kept but those numbers (and a few worst cases)."""

    def __init__(self, scenario: Scenario, judged: Sequence[str]) -> None:
        prices = scenario.spec.judge.prices
        order = scenario.pipeline.order
        self.cases = 0
        self.system_errors = 0
        self.system_error_reasons: Counter[str] = Counter()
        self.system_error_examples: dict[str, tuple[str, str | None]] = {}
        self.statuses: dict[str, Counter[str]] = {c: Counter() for c in order}
        self.metrics: dict[str, dict[str, MetricTally]] = {c: {} for c in order}
        for component in order:
            for configured in scenario.evaluators_on(component):
                for metric in configured.metrics:
                    self.metrics[component].setdefault(metric, MetricTally(prices))
        self.costs = {c: CostTally() for c in order}
        self.component_usage = {c: Usage(prices) for c in order}
        self.usage = Usage(prices)
        self.gates = [GateTally(gate) for gate in scenario.gates]
        self.bottleneck = attribution.BottleneckTally(judged)
        self.slices = slices.SliceTally(
            order, judged, [(c, m) for c in order for m in self.metrics[c]])
        self.warnings = WarningTally(scenario)
        self.pipeline = scenario.pipeline
        self.repeats = RepeatTally(scenario.repeated)

    def system_error_warning(self) -> list[str]:
        """The system's most frequent errors, so the terminal shows why cases failed."""
        if not self.system_errors:
            return []
        common = self.system_error_reasons.most_common(2)
        said = "; then ".join(f"({n}) {reason}" for reason, n in common)
        return [f"the system failed on {self.system_errors} of {self.cases} cases; most "
                f"often {said}"]

    def system_error_groups(self) -> list[SystemErrorGroup]:
        """The most frequent system errors, each with its first case and traceback."""
        return [SystemErrorGroup(reason=reason, count=n,
                                 example=self.system_error_examples[reason][0],
                                 traceback=self.system_error_examples[reason][1])
                for reason, n in self.system_error_reasons.most_common(SYSTEM_ERROR_GROUPS)]

    def add(self, r: CaseResult) -> None:
        """Count one case (cases come in case order; a case's repeats one after the other)."""
        self.cases += 1
        group = self.repeats.add(r)
        if r.trace.error:
            self.system_errors += 1
            reason = r.trace.error.strip().splitlines()[0][:300] if r.trace.error.strip() else "?"
            if reason in self.system_error_reasons or len(self.system_error_reasons) < 100:
                self.system_error_reasons[reason] += 1
                self.system_error_examples.setdefault(reason, (r.case.id, r.trace.traceback))
        path = () if r.trace.error else attribution.gold_path(self.pipeline, r)
        for name in path:  # needed by the gold route, yet the router sent the case elsewhere
            comp = r.components.get(name)
            if (comp is None or comp.status == "not_run") and name in self.statuses:
                self.statuses[name]["missing"] += 1
        everything: list[dict] = []
        for name, comp in r.components.items():
            tallies = self.metrics.get(name)
            if tallies is not None:
                self.statuses[name][comp.status] += 1
            records: list[dict] = []
            for metric, value in comp.metrics.items():
                found = value.details.get("judgments")
                mine = [x for x in found if isinstance(x, dict)] if found else []
                tally = tallies.get(metric) if tallies is not None else None
                if tally is not None:
                    tally.add(value, mine, group)
                records += mine
            if records:
                if tallies is not None:
                    self.component_usage[name].add(records)
                everything += records
        if everything:
            self.usage.add(everything)
        for component, cost in self.costs.items():
            cost.add(r.trace.step(component))
        for gate in self.gates:
            gate.add(r, path)
        self.bottleneck.add(r, group)
        self.slices.add(r, group)
        self.warnings.add(r)


class MetricTally:
    """One metric over the run, value by value: the computed values (floats, in case order,
    for the mean and its bootstrap interval), the error reasons, and the judge usage of the
    records its values carry. In a run with repeats, each value's case (``group``, counted
    from 0 in case order) too: a case's values are reduced to one before the mean.

    >>> tally = MetricTally()
    >>> for value in (MetricValue.of(1.0), MetricValue.of(0.0), MetricValue.failed("empty")):
    ...     tally.add(value)
    >>> s = tally.summary("answer_present")
    >>> s.mean, s.n, s.errors, s.error_reasons, s.judge
    (0.5, 2, 1, {'empty': 1}, None)
    """

    def __init__(self, prices: dict | None = None) -> None:
        self.values = array("d")
        self.groups: array | None = None
        self.reasons: Counter[str] = Counter()
        self.usage = Usage(prices)

    def add(self, value: MetricValue, records: Sequence[dict] | None = None,
            group: int | None = None) -> None:
        """Count one case's value; ``records``: its judgment records (read from its
        ``details`` when not given); ``group``: its case, in a run with repeats."""
        if value.error is None:
            self.values.append(value.value)
            if group is not None:
                if self.groups is None:
                    self.groups = array("q")
                self.groups.append(group)
        else:
            self.reasons[value.error] += 1
        if records is None:
            records = [x for x in value.details.get("judgments") or () if isinstance(x, dict)]
        if records:
            self.usage.add(records)

    def summary(self, evaluator: str, *, seed: int = 0, reducer: str = "mean"
                ) -> MetricSummary:
        """Mean over computed values with its seeded bootstrap CI; errors counted with their
        most frequent reasons (ties: the first met); judge usage. With repeats: the mean of
        the cases' reduced values, its CI a bootstrap over cases (each case taken with all
        its repeats: the cluster bootstrap), and the spread (:func:`repeat_spread`)."""
        numbers, reasons = self.values, self.reasons
        spread = None
        if self.groups is not None:
            numbers, spread = repeat_spread(self.values, self.groups, reducer, seed=seed)
        ci = bootstrap_ci(numbers, seed=seed)
        return MetricSummary(
            mean=math.fsum(numbers) / len(numbers) if len(numbers) else None,
            ci95=list(ci) if ci is not None else None,
            n=len(numbers), errors=sum(reasons.values()), evaluator=evaluator,
            error_reasons=dict(reasons.most_common(5)),
            judge=self.usage.summary() if self.usage.counted else None, repeats=spread)


def repeat_spread(values: Sequence[float], groups: Sequence[int], reducer: str = "mean", *,
                  seed: int = 0) -> tuple[np.ndarray, RepeatSpread]:
    """Each case's values (``groups``: the case of each value, cases one after the other)
    reduced to one, in case order; and their spread: how many values, the pooled
    within-case standard deviation, how many cases vary, and the interval a bootstrap would
    give if every value were a case of its own.

    >>> reduced, spread = repeat_spread([1, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1])
    >>> [round(float(x), 3) for x in reduced], spread.values, spread.varying
    ([0.667, 1.0], 6, 1)
    >>> round(spread.within_sd, 3)  # sqrt(mean(var([1, 0, 1]), var([1, 1, 1])))
    0.408
    """
    x = np.asarray(values, dtype=float)
    g = np.asarray(groups, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.array([], int)
    parts = np.split(x, starts[1:]) if len(g) else []
    both = [reduce_repeats(p.tolist(), reducer) for p in parts]
    reduced = np.array([value for value, _ in both])
    variances = [var for _, var in both if var is not None]
    within = math.sqrt(math.fsum(variances) / len(variances)) if variances else None
    naive = bootstrap_ci(x, seed=seed) if len(x) else None
    return reduced, RepeatSpread(
        reducer=reducer if reducer in REDUCERS else "mean", values=len(x), within_sd=within,
        varying=sum(1 for _, var in both if var), naive_ci95=list(naive) if naive is not None
        else None)


class RepeatTally:
    """The repeats of a run, case by case (a case's repeats come one after the other): which
    case each result belongs to, and each case's verdicts over its repeats — the flaky
    cases. Inactive (``add`` returns ``None``) in a run without repeats.

    >>> from evalharness.models import Case, Trace, Verdict
    >>> def r(i, rep, status):
    ...     return CaseResult(case=Case(id=f"c{i}", question="q"), trace=Trace(case_id=f"c{i}"),
    ...                       repeat=rep, end_to_end=Verdict(status=status))
    >>> tally = RepeatTally(True)
    >>> [tally.add(x) for x in (r(1, 1, "pass"), r(1, 2, "fail"), r(2, 1, "pass"))]
    [0, 0, 1]
    >>> tally.finish(); [(f.case, f.component, f.passed, f.failed) for f in tally.flaky]
    [('c1', 'end_to_end', 1, 1)]
    >>> tally.outcomes
    Counter({'flaky': 1, 'always_pass': 1})
    """

    def __init__(self, active: bool) -> None:
        self.active = active
        self.cases = 0
        self.counts: Counter[int] = Counter()  # results per case: how many cases have k
        self.flaky: list[FlakyCase] = []
        self.outcomes: Counter[str] = Counter()
        self._case: str | None = None
        self._seen = 0
        self._statuses: dict[str, Counter[str]] = {}

    def add(self, r: CaseResult) -> int | None:
        """Count one result; the index of its case (from 0), or ``None`` without repeats."""
        if not self.active:
            return None
        if r.case.id != self._case:
            self.finish()
            self._case, self.cases = r.case.id, self.cases + 1
        self._seen += 1
        for name, verdict in [*r.verdicts.items(), ("end_to_end", r.end_to_end)]:
            if verdict is not None:
                self._statuses.setdefault(name, Counter())[verdict.status] += 1
        return self.cases - 1

    def finish(self) -> None:
        """Close the current case (call once after the last result)."""
        if self._case is None:
            return
        self.counts[self._seen] += 1
        flaky = [FlakyCase(case=self._case, component=name, passed=statuses["pass"],
                           failed=statuses["fail"], errors=statuses["error"])
                 for name, statuses in self._statuses.items()
                 if over_repeats(statuses) == "flaky"]
        self.flaky += sorted(flaky, key=lambda f: f.component != "end_to_end")
        e2e = over_repeats(self._statuses.get("end_to_end", {}))
        self.outcomes[{"flaky": "flaky", "pass": "always_pass", "fail": "always_fail",
                       "error": "always_fail"}.get(e2e or "", "undecided")] += 1
        self._case, self._seen, self._statuses = None, 0, {}

    def summary(self, scenario: Scenario) -> RepeatReport | None:
        """The report's ``repeats``, or ``None`` without repeats."""
        if not self.active:
            return None
        self.finish()
        spec = scenario.spec.repeat
        n = scenario.repeats
        flaky = sorted(self.flaky, key=lambda f: f.component != "end_to_end")
        return RepeatReport(
            n=n, judge=spec.judge if spec is not None else "cached", cases=self.cases,
            incomplete=sum(c for k, c in self.counts.items() if k < n),
            end_to_end={k: self.outcomes[k] for k in ("always_pass", "always_fail", "flaky",
                                                       "undecided")},
            flaky=flaky)


def summarise(values: Iterable[MetricValue], evaluator: str, prices: dict | None = None, *,
              seed: int = 0) -> MetricSummary:
    """Mean over computed values; errors counted with their most frequent reasons; judge usage
    summed from the judgment records the values carry (``details["judgments"]``), one value
    per case (:class:`MetricTally`)."""
    tally = MetricTally(prices)
    for value in values:
        tally.add(value)
    return tally.summary(evaluator, seed=seed)


class GateTally:
    """A gate's error count, case by case (see :func:`gate_result`)."""

    def __init__(self, gate: Any) -> None:
        self.gate = gate
        self.n = self.errors = self.failed_systems = self.missing = 0

    def add(self, r: CaseResult, path: Sequence[str] = ()) -> None:
        """Count one case; ``path``: the components its gold route needs
        (:func:`attribution.gold_path`)."""
        self.failed_systems += bool(r.trace.error)
        comp = r.components.get(self.gate.component)
        value = comp.metrics.get(self.gate.metric) if comp is not None else None
        if value is not None:
            self.n += 1
            self.errors += value.error is not None
        elif r.trace.error or (comp is not None and comp.status == "error"):
            self.n += 1
            self.errors += 1
        elif self.gate.component in path and (comp is None or comp.status == "not_run"):
            self.n += 1  # the gold route needs the component; the case never reached it
            self.errors += 1
            self.missing += 1

    def result(self, summary: MetricSummary, incomplete: int = 0) -> GateResult:
        """The gate's outcome, given its metric's summary; ``incomplete``: cases of the run
        that have no result (an infrastructure failure), each an error of every gate."""
        gate = self.gate
        missing = self.missing + incomplete
        if summary.scope == "run":
            errors = summary.errors + self.failed_systems + missing
            n = summary.n + summary.errors + self.failed_systems + missing
        else:
            errors, n = self.errors + incomplete, self.n + incomplete
        rate = errors / n if n else None
        holds = gate.check(summary.mean)
        too_many = rate is not None and rate > gate.max_error_rate
        reason = None
        if summary.mean is None:
            reason = "the metric could not be computed for any case"
        elif too_many:
            reason = (f"{errors} of {n} cases ({pct(rate)}) are errors, above max_error_rate "
                      f"{pct(gate.max_error_rate)}" + _missing_clause(gate.component,
                                                                       self.missing, incomplete)
                      + ": the mean covers only the rest")
        elif not holds:
            reason = f"{fmt(summary.mean)} is not {gate.op} {gate.threshold:g}"
        if reason is not None and missing and not too_many:
            reason += _missing_clause(gate.component, self.missing, incomplete)
        return GateResult(name=gate.name, component=gate.component, metric=gate.metric,
                          op=gate.op, threshold=gate.threshold, value=summary.mean,
                          passed=holds and not too_many, n=n, errors=errors, error_rate=rate,
                          max_error_rate=gate.max_error_rate, reason=reason, missing=missing)


def _missing_clause(component: str, missing: int, incomplete: int) -> str:
    """What a gate's errors include besides values that could not be computed.

    >>> _missing_clause("text2sql", 5, 0)
    ' (5 never reached text2sql although their gold route needs it)'
    >>> _missing_clause("text2sql", 0, 3)
    ' (3 did not complete: the run could not do its work)'
    """
    parts = []
    if missing:
        parts.append(f"{missing} never reached {component} although their gold route needs it")
    if incomplete:
        parts.append(f"{incomplete} did not complete: the run could not do its work")
    return f" ({'; '.join(parts)})" if parts else ""


def _missing_warnings(components: dict[str, ComponentReport]) -> list[str]:
    """A sentence per component that cases needed and did not reach."""
    out = []
    for name, comp in components.items():
        missing = comp.cases.get("missing", 0)
        if missing:
            reached = comp.cases.get("evaluated", 0) + comp.cases.get("error", 0)
            out.append(f"{name} did not run on {n_cases(missing)} whose gold route needs it "
                       f"(the router sent {'it' if missing == 1 else 'them'} elsewhere): its "
                       "metrics cover only the "
                       f"{reached} that reached it, and each of its gates counts the "
                       f"{missing} as errors")
    return out


def unreachable_judge(judge: dict[str, Any], components: dict[str, ComponentReport]
                      ) -> list[str]:
    """The infrastructure problem of an LLM judge that gave no usable answer to any judgment asked
    of it (none from the cache, none refused by ``max_cost``), with its most frequent error;
    empty otherwise.

    >>> unreachable_judge({"llm": True, "label": "openai:m", "usage": {"judgments": 4,
    ...     "cache_hits": 0, "errors": 4}}, {})[0][:74]
    'the judge (openai:m) gave no usable answer to any of the 4 judgments asked'
    >>> unreachable_judge({"llm": True, "usage": {"judgments": 4, "cache_hits": 0,
    ...     "errors": 3}}, {})
    []
    """
    usage = judge.get("usage") or {}
    refused = usage.get("refused", 0)
    asked = usage.get("judgments", 0) - usage.get("cache_hits", 0) - refused
    if not judge.get("llm") or asked <= 0 or usage.get("errors", 0) - refused < asked:
        return []
    reasons: Counter[str] = Counter()
    for comp in components.values():
        for summary in comp.metrics.values():
            if summary.judge:
                reasons.update(summary.error_reasons)
    common = reasons.most_common(1)
    return [f"the judge ({judge.get('label') or judge.get('backend')}) gave no usable answer "
            f"to any of the {asked} judgment{'s' if asked != 1 else ''} asked of it"
            + (f"; most often: {common[0][0]}" if common else "")
            + ". Every judged metric is an error: check the endpoint and run again into a "
            "new --out (the judge cache keeps every judgment made)"]


def gate_result(gate: Any, summary: MetricSummary, results: Iterable[CaseResult]
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
    tally = GateTally(gate)
    for r in results:
        tally.add(r)
    return tally.result(summary)


class WarningTally:
    """What the results show that a reader must not miss: steps of components the pipeline
    does not have (never evaluated), and cases recorded with warnings; case by case."""

    def __init__(self, scenario: Scenario) -> None:
        self.components = set(scenario.pipeline.components)
        self.unknown: Counter[str] = Counter()
        self.warned = 0
        self.first: tuple[str, str] | None = None

    def add(self, r: CaseResult) -> None:
        """Count one case."""
        for name in ("router", "text2sql", "retriever", "generator"):
            if name not in self.components and getattr(r.trace, name) is not None:
                self.unknown[name] += 1
        for name in r.trace.steps:
            if name not in self.components:
                self.unknown[name] += 1
        if r.warnings:
            self.warned += 1
            if self.first is None:
                self.first = (r.case.id, r.warnings[0])

    def result(self) -> list[str]:
        """The warnings, for ``Report.warnings``."""
        out = []
        for name, n in sorted(self.unknown.items()):
            out.append(f"{n_cases(n)} have a {name!r} step, but the pipeline has no component "
                       f"{name!r}: it is not evaluated (add it under `pipeline:`, or check its "
                       "name)")
        if self.first is not None:
            case_id, warning = self.first
            out.append(f"{n_cases(self.warned)} were recorded with warnings (see `warnings` in "
                       f"results.jsonl), e.g. {case_id!r}: {warning}")
        return out


def _add_headroom(report: Report, outcome: RunOutcome,
                  decided_cases: dict[str, int] | None = None) -> None:
    """The oracle headroom rows (and the judge usage of the reruns), or why there are none."""
    b = report.bottleneck
    records = getattr(outcome, "headroom", None)
    if records is None:
        b.headroom_note = getattr(outcome, "headroom_note", None)
        return
    b.headroom = oracle.summarise(records, outcome.oracles, b, decided_cases or None)
    usage = _sum_usage([r.judge for r in records if r.judge])
    if usage:
        report.judge["headroom_usage"] = usage


def run_level(scenario: Scenario, outcome: RunOutcome, component: str,
              configured: Any, evaluated: int | None = None) -> dict[str, MetricSummary]:
    """The evaluator's run-level metrics (its ``evaluate_run`` hook), as summaries with
    ``scope="run"``; a metric that could not be computed is an error with its reason, and an
    evaluator that raises or answers wrongly costs its run metrics, never the report.
    ``evaluated``: how many cases the component was evaluated for (counted when not given)."""
    results = outcome.results
    if evaluated is None:
        evaluated = sum(1 for r in results if component in r.components
                        and r.components[component].status == "evaluated")
    label = f"evaluator {configured.name!r} of plugin {configured.plugin!r}"
    problem = None
    work = getattr(configured.evaluator, "evaluate_run", None)
    try:
        context = dataclasses.replace(outcome.context, component=component)
        if work is not None:
            answer = call_with(work, results=results, settings=configured.settings,
                               context=context, component=component,
                               evaluator=configured.name)
        else:  # deprecated: evalharness 0.1's hook
            answer = scenario.host.call_for_plugin(
                "evaluate_run", configured.plugin, evaluator=configured.name,
                component=component, results=results, settings=configured.settings,
                context=context)
    except Exception as exc:
        answer, problem = None, f"{label}: evaluate_run raised {type(exc).__name__}: {exc}"
    if problem is None and not isinstance(answer, dict):
        problem = (f"{label} declares run metrics but its evaluate_run returned "
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
                            "markdown": section.markdown, "data": section.data,
                            **({"view": section.view} if section.view else {})})
            else:
                problem = f"returned {type(section).__name__} instead of a ReportSection"
    if problem:
        message = f"plugin {plugin!r}: hook report_sections {problem}"
        print(f"warning: {message}", file=sys.stderr)
        out.append({"plugin": plugin, "title": f"{plugin}: section failed",
                    "markdown": message, "data": {"error": message}})
    return out


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


class CostTally:
    """A component's steps over the run, step by step: how many ran, their latencies (floats)
    and token sums.

    >>> tally = CostTally()
    >>> for step in (Step(latency_ms=10.0), None, {"latency_ms": 30, "usage": {
    ...         "prompt_tokens": 5, "completion_tokens": 1}}):
    ...     tally.add(step)
    >>> cost = tally.summary()
    >>> cost.steps, cost.latency_ms["mean"], cost.tokens
    (2, 20.0, {'prompt': 5, 'completion': 1, 'total': 6})
    """

    def __init__(self) -> None:
        self.steps = 0
        self.latency = array("d")
        self.prompt = self.completion = 0

    def add(self, step: Any) -> None:
        """Count one case's step (``None``: it did not run)."""
        if step is None:
            return
        s = step if isinstance(step, Step) else _as_step(step)
        self.steps += 1
        if s.latency_ms is not None:
            self.latency.append(float(s.latency_ms))
        if s.usage is not None:
            self.prompt += s.usage.prompt_tokens
            self.completion += s.usage.completion_tokens

    def summary(self) -> CostSummary:
        """Latency percentiles and token sums."""
        if self.latency:
            arr = np.asarray(self.latency)
            latency = {"mean": float(arr.mean()), "p50": float(np.percentile(arr, 50)),
                       "p95": float(np.percentile(arr, 95)), "total": float(arr.sum())}
        else:
            latency = {"mean": None, "p50": None, "p95": None, "total": None}
        prompt, completion = self.prompt, self.completion
        return CostSummary(steps=self.steps, latency_ms=latency,
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
