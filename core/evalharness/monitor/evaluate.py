"""Reference-free evaluation of sampled traces, per component, and the root cause on the taken
path (docs/monitor.md, "Reference-free metrics").

Each trace becomes a question-only :class:`~evalharness.models.Case` (no gold) and is
evaluated by the scenario's evaluators (or the monitor's) through the same
:func:`evalharness.scoring.evaluate_batch` a scenario run uses, asking only for the metrics
whose declaration says ``reference_free``. A component's verdict reads those metrics only:
the scenario's ``verdicts:`` entry when every metric it reads is reference-free, else the
default the reference-free metrics declare; a step that carries an error (the component failed
in production) fails its verdict. The root cause is the first component on the trace's taken
path (pipeline order, components the router did not route to left out) whose verdict fails.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evalharness.attribution import gold_path
from evalharness.context import EvalContext
from evalharness.models import BUILTIN_STEPS, Case, CaseResult, MetricValue, Trace
from evalharness.scenario import Gate, Scenario, parse_criterion
from evalharness.scoring import evaluate_batch, step_error
from evalharness.verdicts import check, declared_on, default_criteria

DETAILS_CHARS = 20_000
"""The most JSON one metric value's details keep in the store."""


@dataclass
class ComponentVerdict:
    """One component's reference-free verdict on one trace."""

    passed: bool | None
    """``None``: undecided (a metric it reads is an error)."""
    criterion: str
    reason: str | None = None


@dataclass
class Evaluated:
    """One trace, evaluated."""

    trace_id: str
    metrics: dict[str, dict[str, MetricValue]]
    """Component -> reference-free metric -> value (or error)."""
    verdicts: dict[str, ComponentVerdict]
    """Component on the taken path that has criteria -> its verdict."""
    path: list[str]
    root_cause: str | None
    passed: bool | None
    latency_ms: float | None
    total_tokens: int | None
    warnings: list[str] = field(default_factory=list)
    evaluators: dict[str, dict[str, str]] = field(default_factory=dict)
    """Component -> metric -> the evaluator that computed it."""
    judge_down: str | None = None
    """The error of a judgment the judge could not answer because it was down (a judgment
    record marked ``unavailable``): the trace is evaluated again later, not stored so."""


def results_for(scenario: Scenario, context: EvalContext,
                items: Sequence[tuple[str, Trace, str | None]], *, warned: set[str],
                only: set[tuple[str, str]] | None = None) -> list[CaseResult]:
    """``(trace id, trace, question)`` items evaluated for question-only cases, with the
    reference-free metrics only (``only``: those, when already known) — in the monitor's
    process, or on a Ray worker for a backlog (:func:`evalharness.executors.run_group`)."""
    if not items:
        return []
    pairs = [(Case(id=tid, question=question or ""), trace.model_copy(update={"case_id": tid}))
             for tid, trace, question in items]
    only = reference_free_metrics(scenario) if only is None else only
    return evaluate_batch(scenario, context, pairs, warned=warned, only=only or {("", "")})


def reference_free_metrics(scenario: Scenario) -> set[tuple[str, str]]:
    """(component, metric) of every configured per-case metric declared ``reference_free``."""
    return {(e.component, m) for e in scenario.evaluators for m in e.metrics
            if e.declaration(m).reference_free}


def needing_gold(scenario: Scenario) -> list[str]:
    """``component.metric`` of the configured metrics the monitor leaves out (they need gold)."""
    return [f"{e.component}.{m}" for e in scenario.evaluators for m in e.metrics
            if not e.declaration(m).reference_free]


def criteria(scenario: Scenario, only: set[tuple[str, str]]) -> dict[str, list[Gate]]:
    """Per component, the criteria of its reference-free verdict: the scenario's ``verdicts:``
    entry when it reads reference-free metrics only, else the default the component's
    reference-free metrics declare (possibly none)."""
    out: dict[str, list[Gate]] = {}
    for name in scenario.pipeline.order:
        written = scenario.verdicts.get(name)
        if written and all((g.component, g.metric) in only for g in written):
            out[name] = list(written)
            continue
        declared = [d for d in declared_on(scenario, name)
                    if d.reference_free and (name, d.name) in only]
        gates = [parse_criterion(t, name) for t in default_criteria(declared)]
        out[name] = [g for g in gates if g is not None]
    return out


def _usage(trace: Trace) -> tuple[float | None, int | None]:
    """Summed step latency (ms) and tokens, ``None`` when no step reports them."""
    steps = [getattr(trace, n, None) for n in BUILTIN_STEPS] + list(trace.steps.values())
    latency = [s.latency_ms for s in steps if getattr(s, "latency_ms", None) is not None]
    tokens = [s.usage.total_tokens for s in steps if getattr(s, "usage", None) is not None]
    return (sum(latency) if latency else None), (sum(tokens) if tokens else None)


class ReferenceFree:
    """The monitor's evaluation: the scenario's evaluators, reference-free metrics only."""

    def __init__(self, scenario: Scenario, context: EvalContext) -> None:
        self.scenario = scenario
        self.context = context
        self.only = reference_free_metrics(scenario)
        self.criteria = criteria(scenario, self.only)
        self.warned: set[str] = set()

    def evaluate(self, items: Sequence[tuple[str, Trace, str | None]]) -> list[Evaluated]:
        """Evaluate ``(trace id, trace, question)`` items (one batch)."""
        return [self.read(r) for r in results_for(self.scenario, self.context, items,
                                                  warned=self.warned, only=self.only)]

    def read(self, result: CaseResult) -> Evaluated:
        """A trace's result (:func:`results_for`, here or on a cluster's worker) as the
        monitor stores it: its reference-free metrics, verdicts and root cause."""
        pipeline = self.scenario.pipeline
        metrics = {name: {m: v for m, v in comp.metrics.items() if (name, m) in self.only}
                   for name, comp in result.components.items()}
        path = gold_path(pipeline, result)  # without gold routes: the components that ran
        verdicts: dict[str, ComponentVerdict] = {}
        for name in path:
            verdict = self._verdict(result, name)
            if verdict is not None:
                verdicts[name] = verdict
        root = next((c for c in path if c in verdicts and verdicts[c].passed is False), None)
        decided = [v.passed for v in verdicts.values()]
        if result.trace.error or False in decided:
            passed: bool | None = False
        elif decided and all(p is True for p in decided):
            passed = True
        else:
            passed = None
        latency, tokens = _usage(result.trace)
        return Evaluated(trace_id=result.case.id, metrics=metrics, verdicts=verdicts, path=path,
                         root_cause=root, passed=passed, latency_ms=latency,
                         total_tokens=tokens, warnings=list(result.warnings),
                         evaluators={name: dict(comp.evaluators)
                                     for name, comp in result.components.items()},
                         judge_down=_judge_down(result))

    def _verdict(self, result: CaseResult, name: str) -> ComponentVerdict | None:
        comp = result.components.get(name)
        gates = self.criteria.get(name, [])
        text = " and ".join(f"{g.metric} {g.op} {g.threshold:g}" for g in gates)
        if comp is None or comp.status == "not_run":
            return None
        if comp.status == "error":
            return ComponentVerdict(None, text or "the step maps", comp.reason)
        failure = step_error(result.trace.step(name))
        if failure is not None:
            return ComponentVerdict(False, "the step ran without error",
                                    f"the {name} step failed: {failure}")
        if not gates:
            return None
        verdict = check(gates, comp.metrics)
        passed = {"pass": True, "fail": False}.get(verdict.status)
        return ComponentVerdict(passed, text, verdict.reason)


def _judge_down(result: CaseResult) -> str | None:
    """The error of the first judgment of ``result`` the judge could not answer because it
    was down (its record says ``unavailable``), else ``None``."""
    for comp in result.components.values():
        for value in comp.metrics.values():
            for record in (value.details or {}).get("judgments") or ():
                if isinstance(record, dict) and record.get("unavailable"):
                    return str(record.get("error") or "the judge did not answer")
    return None


def details_json(value: MetricValue) -> str | None:
    """A metric value's details as JSON for the store (cut at :data:`DETAILS_CHARS`)."""
    if not value.details:
        return None
    text = json.dumps(value.details, ensure_ascii=False, default=str)
    if len(text) > DETAILS_CHARS:
        text = json.dumps({"truncated": True, "chars": len(text),
                           "reason": value.details.get("reason")}, default=str)
    return text


def judge_of(value: MetricValue) -> str | None:
    """The judge identity a judged value records, as text (``None`` for a computed value)."""
    details: dict[str, Any] = value.details or {}
    judge = details.get("judge")
    if judge is None:
        records = details.get("judgments") or []
        if records and isinstance(records[0], dict):
            judge = {k: records[0].get(k) for k in ("backend", "model", "task", "version")
                     if records[0].get(k) is not None} or None
    if judge is None:
        return None
    return judge if isinstance(judge, str) else json.dumps(judge, sort_keys=True, default=str)
