"""Evaluation of a batch of finished cases: each pipeline component, each configured evaluator.

The core knows no metric. For every component it collects the ``(case, step)`` pairs whose
trace has that component's step, and calls the evaluator hook of the component's kind on the
plugin that registered each evaluator. Last, every case gets its per-component and end-to-end
verdicts and its failure attribution (:mod:`evalharness.verdicts`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from evalharness import verdicts
from evalharness.context import EvalContext
from evalharness.errors import PluginError
from evalharness.models import Case, CaseResult, ComponentResult, MetricValue, Trace
from evalharness.scenario import ConfiguredEvaluator, Scenario


def evaluate_batch(
    scenario: Scenario,
    context: EvalContext,
    pairs: Sequence[tuple[Case, Trace]],
    *,
    warned: set[str] | None = None,
    only: set[tuple[str, str]] | None = None,
) -> list[CaseResult]:
    """Evaluate every component of the pipeline on a batch; one :class:`CaseResult` per pair.

    ``only``: (component, metric) pairs; evaluators producing none of them are skipped (the
    oracle reruns need only what the verdicts read)."""
    warned = warned if warned is not None else set()
    results = [CaseResult(case=case, trace=trace) for case, trace in pairs]
    host = scenario.host
    calls: list[_Call] = []
    for component in scenario.pipeline.order:
        kind = host.component_kind(scenario.pipeline.kind(component))
        applicable: list[tuple[int, Case, Any]] = []
        for i, (case, trace) in enumerate(pairs):
            step, problem = _step_of(trace, component, kind.step)
            if problem is not None:
                results[i].components[component] = ComponentResult(status="error", reason=problem)
            elif step is None:
                reason = (f"the system failed for this case: {trace.error}" if trace.error
                          else f"the trace has no {component} step")
                results[i].components[component] = ComponentResult(status="not_run", reason=reason)
            else:
                results[i].components[component] = ComponentResult(status="evaluated")
                applicable.append((i, case, step))
        if not applicable:
            continue
        batch = [(case, step) for _, case, step in applicable]
        ctx = EvalContext(judge=context.judge, database=context.database, corpus=context.corpus,
                          pipeline=context.pipeline, component=component, extras=context.extras,
                          traces={case.id: trace for case, trace in pairs})
        for configured in scenario.evaluators_on(component):
            if only is not None and not any((component, m) in only for m in configured.metrics):
                continue
            calls.append(_Call(component, kind.hook, configured, applicable, batch, ctx))

    # Evaluators that wait on the judge run side by side, so the judge's concurrency limit is
    # filled across metrics (faithfulness's second round overlaps relevancy's embeddings);
    # the others run here, in order. Results are merged in configuration order either way.
    def run(call: _Call):
        return _call(scenario, call.hook, call.configured, call.batch, call.context, warned)

    judged = {n for n, c in enumerate(calls)
              if c.configured.evaluator.needs_judge and context.judge is not None}
    with ThreadPoolExecutor(max_workers=max(1, len(judged))) as pool:
        futures = {n: pool.submit(run, calls[n]) for n in judged}
        outputs = {n: run(c) for n, c in enumerate(calls) if n not in judged}
        outputs.update({n: future.result() for n, future in futures.items()})
    for n, call in enumerate(calls):
        for (i, _, _), row in zip(call.applicable, outputs[n], strict=True):
            target = results[i].components[call.component]
            for metric, value in row.items():
                target.metrics[metric] = value
                target.evaluators[metric] = call.configured.name
    # Verdicts and attribution read only this case's metrics, so they are stored with it.
    return verdicts.apply(scenario, results)


class _Call(NamedTuple):
    """One evaluator to run on one component's batch."""

    component: str
    hook: str
    configured: ConfiguredEvaluator
    applicable: list[tuple[int, Case, Any]]
    batch: list[tuple[Case, Any]]
    context: EvalContext


def _step_of(trace: Trace, component: str, model: type[BaseModel]) -> tuple[Any, str | None]:
    step = trace.step(component)
    if step is None or isinstance(step, model):
        return step, None
    try:
        return model.model_validate(step if isinstance(step, dict) else step.model_dump()), None
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        return None, f"invalid {component} step: field `{where}`: {first['msg']}"


def _call(scenario: Scenario, hook: str, configured: ConfiguredEvaluator,
          batch: list[tuple[Case, Any]], ctx: EvalContext, warned: set[str]
          ) -> list[dict[str, MetricValue]]:
    label = f"evaluator {configured.name!r} of plugin {configured.plugin!r}"
    try:
        rows = scenario.host.call_for_plugin(
            hook, configured.plugin, evaluator=configured.name, batch=batch,
            settings=configured.settings, context=ctx)
    except Exception as exc:  # a broken evaluator must not lose the rest of the run
        reason = f"{label} raised {type(exc).__name__}: {exc}"
        if label not in warned:
            warned.add(label)
            print(f"warning: {reason}; its metrics are recorded as errors", file=sys.stderr)
        return [{m: MetricValue.failed(reason) for m in configured.metrics} for _ in batch]
    if rows is None:
        raise PluginError(f"{label} returned nothing from hook {hook!r} for component "
                          f"{configured.component!r}; it must return one dict of metric values "
                          "per batch item")
    if not isinstance(rows, list) or len(rows) != len(batch):
        got = len(rows) if isinstance(rows, list) else type(rows).__name__
        raise PluginError(f"{label} returned {got} rows for a batch of {len(batch)}; it must "
                          "return one dict of metric values per batch item, in order")
    expected = set(configured.metrics)
    out = []
    for (case, _), row in zip(batch, rows, strict=True):
        if not isinstance(row, dict) or set(row) != expected:
            keys = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise PluginError(f"{label} returned metrics {keys} for case {case.id!r}; it "
                              f"declared {sorted(expected)} and must return exactly those "
                              "(use MetricValue.failed(reason) where one cannot be computed)")
        out.append({m: _coerce(v, label) for m, v in row.items()})
    return out


def _coerce(value: Any, label: str) -> MetricValue:
    if isinstance(value, MetricValue):
        return value
    if isinstance(value, bool | int | float):
        if not math.isfinite(float(value)):
            return MetricValue.failed(f"{label} returned {value!r}, not a finite number")
        return MetricValue.of(value)
    raise PluginError(f"{label} returned {type(value).__name__} as a metric value; return "
                      "MetricValue.of(x), MetricValue.failed(reason), or a number")
