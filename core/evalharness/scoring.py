"""Evaluation of a batch of finished cases: each pipeline component, each configured evaluator.

The core knows no metric. For every component it collects the ``(case, step)`` pairs whose
trace has that component's step, and calls each configured evaluator's ``evaluate`` with the
arguments it names (a plugin written for evalharness 0.1 gets its ``evaluate_<kind>`` hook
called instead, on that plugin only).

Metrics only: a case's verdicts and attribution are computed from its metrics afterwards, in
one place (:func:`evalharness.executors.results_of`, with :mod:`evalharness.verdicts`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from evalharness.context import EvalContext
from evalharness.declarations import call_with
from evalharness.errors import USER_CODE_ERRORS, describe
from evalharness.execution import start_daemon
from evalharness.judge.base import LEDGER
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
    oracle reruns need only what the verdicts read). A batch with several traces of one case
    (the oracle reruns of a case) is evaluated in layers of distinct cases, so that every
    evaluator's ``context.traces[case.id]`` is the trace of the pair it judges."""
    warned = warned if warned is not None else set()
    seen: dict[str, int] = {}  # case id -> how many traces of it so far
    layers: list[list[int]] = []
    for i, (case, _) in enumerate(pairs):
        n = seen.get(case.id, 0)
        seen[case.id] = n + 1
        if n == len(layers):
            layers.append([])
        layers[n].append(i)
    if len(layers) > 1:
        results: list[CaseResult | None] = [None] * len(pairs)
        for layer in layers:
            done = _evaluate(scenario, context, [pairs[i] for i in layer], warned, only)
            for i, result in zip(layer, done, strict=True):
                results[i] = result
        return results  # type: ignore[return-value]
    return _evaluate(scenario, context, pairs, warned, only)


def _evaluate(scenario: Scenario, context: EvalContext, pairs: Sequence[tuple[Case, Trace]],
              warned: set[str], only: set[tuple[str, str]] | None) -> list[CaseResult]:
    """:func:`evaluate_batch` on pairs of distinct cases."""
    results = [CaseResult(case=case, trace=trace) for case, trace in pairs]
    host = scenario.host
    calls: list[_Call] = []
    for component in scenario.pipeline.order:
        kind = host.component_kind(scenario.pipeline.kind(component))
        applicable: list[tuple[int, Case, Any]] = []
        failed_steps: list[tuple[int, str]] = []
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
                own_error = step_error(step)
                if own_error is None:
                    applicable.append((i, case, step))
                else:
                    failed_steps.append((i, f"the {component} step carries an error: {own_error}"))
        for configured in scenario.evaluators_on(component):
            if only is not None and not any((component, m) in only for m in configured.metrics):
                continue
            for i, reason in failed_steps:  # nothing to measure: never a value made of nothing
                target = results[i].components[component]
                for metric in configured.metrics:
                    target.metrics[metric] = MetricValue.failed(reason)
                    target.evaluators[metric] = configured.name
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
    def run(call: _Call) -> _Outcome:
        return _call(scenario, call, warned)

    judged = {n for n, c in enumerate(calls)
              if c.configured.evaluator.needs_judge and context.judge is not None}
    futures = {n: start_daemon(run, calls[n]) for n in judged} if len(judged) > 1 else {}
    outputs = {n: run(c) for n, c in enumerate(calls) if n not in futures}
    outputs.update({n: future.result() for n, future in futures.items()})
    for n, call in enumerate(calls):
        rows, notes = outputs[n]
        for (i, _, _), row in zip(call.applicable, rows, strict=True):
            target = results[i].components[call.component]
            for metric, value in row.items():
                target.metrics[metric] = value
                target.evaluators[metric] = call.configured.name
        for i, note in notes:
            results[call.applicable[i][0]].warnings.append(note)
    return results


class _Call(NamedTuple):
    """One evaluator to run on one component's batch."""

    component: str
    hook: str | None
    configured: ConfiguredEvaluator
    applicable: list[tuple[int, Case, Any]]
    batch: list[tuple[Case, Any]]
    context: EvalContext


def step_error(step: Any) -> str | None:
    """The first line of the error a step carries (at most 300 characters), or ``None``.

    >>> from evalharness.models import RetrieverStep
    >>> step_error(RetrieverStep(ids=["a"])), step_error(RetrieverStep(error="down\\nmore"))
    (None, 'down')
    """
    error = getattr(step, "error", None)
    if not isinstance(error, str) or not error.strip():
        return None
    return error.strip().splitlines()[0][:300]


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


_Outcome = tuple[list[dict[str, MetricValue]], list[tuple[int, str]]]
"""An evaluator's rows for a batch, and notes ``(batch index, warning)`` for the results."""


def _call(scenario: Scenario, call: _Call, warned: set[str]) -> _Outcome:
    """Call one evaluator on one batch. Whatever the plugin does — raise, call ``sys.exit()``,
    overrun its budget, answer in the wrong shape or with evidence that is not JSON — the
    outcome is one row of every declared metric per case: the plugin's values, or errors
    naming the plugin and the problem. The judge requests it made are accounted either way."""
    configured, batch = call.configured, call.batch
    label = f"evaluator {configured.name!r} of plugin {configured.plugin!r}"
    ledger: list[Any] = []
    context = call.context
    if configured.budget_s is not None:
        context = dataclasses.replace(context, budget_s=configured.budget_s)

    work = configured.evaluator.evaluate
    hook_name = call.hook  # set whenever `work` is None: loading checks it (plugins.py)

    def hook() -> Any:
        token = LEDGER.set(ledger)
        try:
            if work is not None:
                return call_with(work, batch=batch, settings=configured.settings,
                                 context=context, component=call.component,
                                 evaluator=configured.name)
            return scenario.host.call_for_plugin(  # deprecated: evalharness 0.1's hooks
                hook_name, configured.plugin, evaluator=configured.name, batch=batch,
                settings=configured.settings, context=context)
        finally:
            LEDGER.reset(token)

    try:
        if configured.budget_s is None:
            rows = hook()
        else:
            limit = configured.budget_s * len(batch) + BUDGET_GRACE_S
            try:
                rows = start_daemon(hook).result(timeout=limit)
            except concurrent.futures.TimeoutError:
                raise _Problem(
                    f"{label} overran its budget: budget_s = {configured.budget_s:g} s per case, "
                    f"{limit:g} s for this batch of {len(batch)}; the call was abandoned") from None
        out, size = _checked(rows, configured, batch, label,
                             "its `evaluate`" if work is not None else f"hook {hook_name!r}")
        notes = _capped(out, scenario.spec.max_details_bytes, label, size)
    except (_Problem, *USER_CODE_ERRORS) as exc:
        reason = str(exc) if isinstance(exc, _Problem) else \
            f"{label} raised {describe(exc)}"
        if label not in warned:
            warned.add(label)
            print(f"warning: {reason}; its metrics are recorded as errors", file=sys.stderr)
        out = [{m: MetricValue.failed(reason) for m in configured.metrics} for _ in batch]
        notes = []
    _account(out, ledger, configured.metrics)
    return out, notes


BUDGET_GRACE_S = 1.0
"""Added to a batch's budget (``budget_s`` × cases) before the core abandons the call: the
plugin's own per-case budget checks get to answer first."""


class _Problem(Exception):  # noqa: N818 - carries the reason recorded for every case
    """An evaluator's answer the core cannot use; the message is the recorded reason."""


def _checked(rows: Any, configured: ConfiguredEvaluator, batch: Sequence[tuple[Case, Any]],
             label: str, hook: str) -> tuple[list[dict[str, MetricValue]], int | None]:
    """The plugin's rows as ``MetricValue``s and the size of all their ``details`` as JSON
    (``None`` when text in them is not valid Unicode: it is scrubbed when written), or
    :class:`_Problem` naming what is wrong."""
    if not isinstance(rows, list) or len(rows) != len(batch):
        got = (f"{len(rows)} rows" if isinstance(rows, list) else
               "nothing" if rows is None else f"a {type(rows).__name__}")
        raise _Problem(f"{label} returned {got} from {hook} for a batch of {len(batch)}; "
                       "it must return one dict of metric values per batch item, in order")
    expected = set(configured.metrics)
    out = []
    for (case, _), row in zip(batch, rows, strict=True):
        if not isinstance(row, dict) or set(row) != expected:
            keys = sorted(map(str, row)) if isinstance(row, dict) else type(row).__name__
            raise _Problem(f"{label} returned metrics {keys} for case {case.id!r}; it declared "
                           f"{sorted(expected)} and must return exactly those (use "
                           "MetricValue.failed(reason) where one cannot be computed)")
        out.append({m: _coerce(v, label) for m, v in row.items()})
    try:
        size = len(to_json([[v.details for v in row.values()] for row in out]))
    except PydanticSerializationError as exc:
        if "surrogates not allowed" not in str(exc):  # unencodable text is scrubbed at write
            raise _Problem(f"{label} returned evidence (MetricValue.details) that is not JSON: "
                           f"{_where_not_json(out, batch)}; use str, int, float, bool, None, "
                           "lists and dicts (e.g. int(x) for a numpy integer)") from None
        size = None
    return out, size


def _where_not_json(out: list[dict[str, MetricValue]], batch: Sequence[tuple[Case, Any]]) -> str:
    for (case, _), row in zip(batch, out, strict=True):
        for metric, value in row.items():
            for key, item in value.details.items():
                try:
                    to_json(item)
                except PydanticSerializationError as exc:
                    if "surrogates not allowed" in str(exc):
                        continue
                    return (f"details[{key!r}] of {metric} for case {case.id!r} holds a "
                            f"{_first_alien(item)}")
    return "a value pydantic cannot encode"


def _first_alien(value: Any) -> str:
    if isinstance(value, dict):
        value = next((v for v in value.values() if _alien(v)), value)
    elif isinstance(value, list | tuple):
        value = next((v for v in value if _alien(v)), value)
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else \
        kind.__qualname__


def _alien(value: Any) -> bool:
    try:
        to_json(value)
        return False
    except PydanticSerializationError:
        return True


def _coerce(value: Any, label: str) -> MetricValue:
    if isinstance(value, MetricValue):
        return value
    if isinstance(value, bool | int | float):
        if not math.isfinite(float(value)):
            return MetricValue.failed(f"{label} returned {value!r}, not a finite number")
        return MetricValue.of(value)
    raise _Problem(f"{label} returned {type(value).__name__} as a metric value; return "
                   "MetricValue.of(x), MetricValue.failed(reason), or a number")


def _account(rows: list[dict[str, MetricValue]], ledger: list[Any], metrics: list[str]) -> None:
    """Make every judge request the evaluator made count once: judgments it made but did not
    store with a value (it raised, or keeps no records) are stored with the first case's first
    metric, so the report's judge usage equals what the judge endpoint received."""
    if not ledger or not rows:
        return
    stored = {r.get("id") for row in rows for v in row.values()
              for r in v.details.get("judgments") or () if isinstance(r, dict)}
    missing = [item.record() for item in ledger if getattr(item, "id", None) not in stored]
    if missing:
        first = rows[0][metrics[0]]
        first.details = {**first.details,
                         "judgments": [*(first.details.get("judgments") or []), *missing]}


def _capped(rows: list[dict[str, MetricValue]], cap: int, label: str, total: int | None
            ) -> list[tuple[int, str]]:
    """Cut the evidence of values whose ``details`` exceed ``cap`` bytes of JSON (texts and
    lists shortened, judgment accounting kept); notes for the cases that were cut. ``total``:
    the size of all of them (from :func:`_checked`), so that a batch within the cap costs no
    second serialisation."""
    if total is not None and total <= cap:
        return []
    notes = []
    for i, row in enumerate(rows):
        for metric, value in row.items():
            size = _size(value.details)
            if size > cap:
                value.details = cut_details(value.details, cap)
                notes.append((i, f"{label}: the evidence of {metric} was {size:,} bytes, cut to "
                                 f"at most {cap:,} (max_details_bytes)"))
    return notes


def _size(details: dict[str, Any]) -> int:
    """Bytes of ``details`` as JSON (text that is not valid Unicode counted as escaped)."""
    try:
        return len(to_json(details))
    except PydanticSerializationError:
        return len(json.dumps(details, default=str))


def cut_details(details: dict[str, Any], cap: int) -> dict[str, Any]:
    """``details`` shortened to at most ``cap`` bytes of JSON: long texts cut, long lists
    shortened (never the ``judgments`` records, which carry the judge's accounting: only their
    texts are cut), with ``truncated`` saying from what size.

    >>> cut = cut_details({"claims": ["x" * 5000] * 400, "n": 3}, 10_000)
    >>> len(to_json(cut)) <= 10_000, cut["n"], cut["truncated"]["bytes"] > 2_000_000
    (True, 3, True)
    """
    size = _size(details)
    for chars, items in ((2000, 200), (500, 50), (120, 10), (40, 3)):
        cut = {k: _cut(v, chars, items, keep=(k == "judgments")) for k, v in details.items()}
        cut["truncated"] = {"bytes": size, "cap": cap, "texts_cut_to_chars": chars,
                            "lists_cut_to_items": items}
        if _size(cut) <= cap:
            return cut
    return {"truncated": {"bytes": size, "cap": cap, "note": "the evidence was too large to keep"},
            "judgments": [{k: r.get(k) for k in ("id", "kind", "requests", "cached", "shared",
                                                 "prompt_tokens", "completion_tokens", "model",
                                                 "backend", "error")}
                          for r in details.get("judgments") or [] if isinstance(r, dict)]}


def _cut(value: Any, chars: int, items: int, keep: bool = False) -> Any:
    if isinstance(value, str):
        return value if len(value) <= chars else \
            f"{value[:chars]}… [cut: {len(value):,} characters]"
    if isinstance(value, dict):
        return {k: _cut(v, chars, items) for k, v in value.items()}
    if isinstance(value, list | tuple):
        kept = [_cut(v, chars, items) for v in (value if keep else value[:items])]
        if not keep and len(value) > items:
            kept.append(f"… [cut: {len(value):,} items]")
        return kept
    return value
